"""Merges structurally identical control-flow subgraphs of an exported TFLite flatbuffer.

The TF converter emits a separate pair of ``IF`` branch subgraphs for every signature that traces a
candidate layer's copy-on-write forward (``converters.copy_on_write``), so the same branch is stored
once per signature. Two subgraphs are identical when they compute the same thing on the same data:

* the same input and output tensor index lists;
* tensor by tensor: shape, shape_signature, type, quantization, sparsity, is_variable, variant tensors,
  has_rank, external buffer and the bytes of its buffer (empty for a non-constant);
* operator by operator: opcode, builtin options (with every subgraph index mapped to its class),
  custom options, inputs, outputs and intermediates.

Names are ignored. The classes are found by refinement to a fixed point: after a round merges some
subgraphs, the callers that differed only by which copy they called become identical. Only subgraphs
reached solely through control flow are merged; a signature's entry subgraph (and subgraph 0) is never
removed. Every subgraph reference (IF then/else, WHILE cond/body, CALL_ONCE init, CALL, StableHLO
bodies) and every signature's subgraph index is renumbered after the removal.

By default two subgraphs are merged only if the same set of signatures reaches them
(``signatures_reaching``). Then no subgraph gains a caller in a signature that did not already reach
it, so no branch is shared by signatures that run at different batch sizes unless the converter
already shared it. Sharing a branch between, e.g., ``fisher`` (batch N) and ``train_step`` (batch 1)
works on ai-edge-litert and on tflite-runtime 2.14's builtin kernels (bit-identical outputs), but on
tflite-runtime 2.14 with the explicit XNNPACK delegate the IF kernel invokes the shared branch with
the shapes another signature last prepared: measured on Lite0@128, a wrong ``fisher`` at batch 5
after ``infer`` at batch 1, then failed invocations ("unexpected null data pointer in external
tensor"). ``across_signatures=True`` merges across signatures anyway (for a file only run on
ai-edge-litert); measured on Lite0@128: 398 -> 93 subgraphs, peak RSS of ``infer`` 234 -> 160 MiB on
ai-edge-litert, against 398 -> 302 subgraphs and 234 -> 231 MiB (2.14 + XNNPACK: 556 -> 426 MiB)
with the default.
"""

from __future__ import annotations

import hashlib

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema

__all__ = ["SUBGRAPH_FIELDS", "dedupe_subgraphs_in", "signatures_reaching"]

SUBGRAPH_FIELDS = frozenset({
    "thenSubgraphIndex", "elseSubgraphIndex", "condSubgraphIndex", "bodySubgraphIndex", "initSubgraphIndex",
    "subgraph", "decompositionSubgraphIndex", "branchSubgraphIndices", "updateComputationSubgraphIndex",
    "comparatorSubgraphIndex"})
"""Fields of the schema's builtin options that hold subgraph indices (scalar or list)."""


def _plain(value, subgraph_class=None):
    """A hashable, comparable form of a schema object field; subgraph indices go through ``subgraph_class``."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, np.ndarray):
        return (str(value.dtype), value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v, subgraph_class) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    fields = []
    for name, v in sorted(vars(value).items()):
        if name in SUBGRAPH_FIELDS and subgraph_class is not None:
            v = (tuple(subgraph_class[int(i)] for i in v) if isinstance(v, (list, np.ndarray))
                 else subgraph_class[int(v)])
        fields.append((name, _plain(v, subgraph_class)))
    return (type(value).__name__, tuple(fields))


def _subgraph_refs(op: schema.OperatorT) -> list[tuple[str, object]]:
    """(field, value) of every subgraph reference held by the operator's builtin options."""
    if op.builtinOptions is None:
        return []
    return [(name, v) for name, v in vars(op.builtinOptions).items() if name in SUBGRAPH_FIELDS]


def _buffer_digest(model: schema.ModelT, index: int) -> bytes:
    buffer = model.buffers[index]
    data = b"" if buffer.data is None else np.asarray(buffer.data, np.uint8).tobytes()
    return hashlib.sha256(data).digest() + (buffer.offset or 0).to_bytes(8, "little") + (
        buffer.size or 0).to_bytes(8, "little")


def _tensor_key(model: schema.ModelT, tensor: schema.TensorT) -> tuple:
    return (_plain(tensor.shape), _plain(tensor.shapeSignature), tensor.type, _buffer_digest(model, tensor.buffer),
            _plain(tensor.quantization), _plain(tensor.sparsity), bool(tensor.isVariable),
            _plain(getattr(tensor, "variantTensors", None)), bool(getattr(tensor, "hasRank", False)),
            getattr(tensor, "externalBuffer", 0))


def _structure(model: schema.ModelT, subgraph: schema.SubGraphT) -> tuple:
    """Everything of a subgraph but its operators' subgraph references and the names."""
    return (_plain(subgraph.inputs), _plain(subgraph.outputs),
            tuple(_tensor_key(model, t) for t in subgraph.tensors))


def _operators_key(subgraph: schema.SubGraphT, subgraph_class: list[int]) -> tuple:
    return tuple((op.opcodeIndex, op.builtinOptionsType, _plain(op.builtinOptions, subgraph_class),
                  _plain(op.builtinOptions2, subgraph_class) if hasattr(op, "builtinOptions2") else None,
                  _plain(op.customOptions), op.customOptionsFormat, _plain(op.inputs), _plain(op.outputs),
                  _plain(op.intermediates), _plain(getattr(op, "mutatingVariableInputs", None)))
                 for op in subgraph.operators)


def signatures_reaching(model: schema.ModelT) -> list[frozenset[int]]:
    """For each subgraph, the entry subgraphs (signatures' and subgraph 0) from which control flow reaches it."""
    reach: list[set[int]] = [set() for _ in model.subgraphs]
    entries = {0} | {int(s.subgraphIndex) for s in (model.signatureDefs or [])}
    for entry in entries:
        stack = [entry]
        while stack:
            i = stack.pop()
            if entry in reach[i]:
                continue
            reach[i].add(entry)
            for _, v in (ref for op in model.subgraphs[i].operators for ref in _subgraph_refs(op)):
                stack.extend(int(j) for j in (v if isinstance(v, (list, np.ndarray)) else [v]))
    return [frozenset(r) for r in reach]


def _classes(model: schema.ModelT, entries: set[int], across_signatures: bool) -> list[int]:
    """For each subgraph, the index of the first subgraph identical to it (itself for an entry)."""
    reach = [frozenset()] * len(model.subgraphs) if across_signatures else signatures_reaching(model)
    structures = [(reach[i], _structure(model, sg)) for i, sg in enumerate(model.subgraphs)]
    subgraph_class = list(range(len(model.subgraphs)))
    while True:
        first: dict[tuple, int] = {}
        new = []
        for i, sg in enumerate(model.subgraphs):
            if i in entries:
                new.append(i)
                continue
            key = (structures[i], _operators_key(sg, subgraph_class))
            new.append(first.setdefault(key, i))
        if new == subgraph_class:
            return subgraph_class
        subgraph_class = new


def dedupe_subgraphs_in(model: schema.ModelT, across_signatures: bool = False) -> int:
    """Points every reference to a duplicate control-flow subgraph at the first identical one and removes
    the duplicates, renumbering every subgraph index (operator options and signature defs).

    Args:
        model: The model, rewritten in place.
        across_signatures: Also merge identical subgraphs reached from different sets of signatures.
            Off by default: tflite-runtime 2.14 with an explicit XNNPACK delegate computes wrong outputs
            or fails when a branch shared by two signatures is run at two batch sizes (module docstring).

    Returns:
        The number of subgraphs removed.
    """
    entries = {0} | {int(s.subgraphIndex) for s in (model.signatureDefs or [])}
    subgraph_class = _classes(model, entries, across_signatures)
    kept = [i for i, c in enumerate(subgraph_class) if c == i]
    if len(kept) == len(model.subgraphs):
        return 0
    new_index = {old: new for new, old in enumerate(kept)}
    target = [new_index[subgraph_class[i]] for i in range(len(model.subgraphs))]
    for i in kept:
        for op in model.subgraphs[i].operators:
            for name, v in _subgraph_refs(op):
                if isinstance(v, (list, np.ndarray)):
                    setattr(op.builtinOptions, name, [target[int(j)] for j in v])
                else:
                    setattr(op.builtinOptions, name, target[int(v)])
    for signature in model.signatureDefs or []:
        signature.subgraphIndex = new_index[int(signature.subgraphIndex)]
    removed = len(model.subgraphs) - len(kept)
    model.subgraphs = [model.subgraphs[i] for i in kept]
    return removed
