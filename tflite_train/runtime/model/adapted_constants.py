"""An adapted checkpoint's weights written into the exported constants: an inference-only model for ``predict``.

Restoring a checkpoint through the contract (``checkpoint.restore_checkpoint``) reads and writes the whole
state (``get_state``, ``set_state``: every candidate kernel with its two optimizer slots, 33 MiB on the
default EfficientNet-Lite0@128 export, held by each signature's tensors and by numpy), and the selected
layers then run their variable path. A command that only classifies needs none of it. Each candidate
layer's forward is a copy-on-write ``IF`` (``converters.copy_on_write``): while the layer's flag variable is
0 its else-branch runs one ``CONV_2D`` (filter [O, kh, kw, I]) or ``DEPTHWISE_CONV_2D`` (filter
[1, kh, kw, C]) on the exported kernel and bias as constants, which the init also copies into the layer's
variables. ``adapted_constants_edit(checkpoint)`` returns the ``TrainableModel`` edit that, in the bytes
about to be handed to the interpreter (after the integrity check of the file as exported):

1. writes each selected channel of the checkpoint into those constants of ``infer``'s branches (the
   kernel slice transposed from the contract's [kh, kw, I, C] resp. [k, k, C, 1] layout), so that the
   constant path computes the adapted layer, at the speed of a frozen one;
2. keeps, of the init's assignments, only those of the variables the constant path reads: not the
   candidate kernels, biases, optimizer slots and masks (the flags stay 0, since this model opens no
   signature that sets them; a variable path that ran anyway would stop with an error, never compute on
   stale values).

The model is opened with ``INFERENCE_SIGNATURES`` only, and ``set_head`` then writes the prototypes. Every
array is checked first as by ``restore_checkpoint`` (``checkpoint.checkpoint_writes``). A file this edit
cannot read that way (a branch of another form, a non-float32 constant as in ``--quantize`` exports, a
constant another operator also reads) raises ``ConstantLayoutError`` before anything is written; the
caller then restores through the contract.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.checkpoint.checkpoint import Checkpoint, StateWrite, checkpoint_writes
from tflite_train.runtime.model.flatbuffer_graph import Graph, read_graph
from tflite_train.runtime.model.interpreter import TrainableModel

__all__ = ["INFERENCE_SIGNATURES", "ConstantLayoutError", "adapted_constants_edit", "copy_on_write_branches",
           "filter_write"]

INFERENCE_SIGNATURES = (C.INFER, C.SET_HEAD)
"""What the inference-only model opens."""
FLOAT32 = 0
"""Schema ``TensorType`` code of float32."""
FILTER_TRANSPOSE = {"CONV_2D": (3, 0, 1, 2), "DEPTHWISE_CONV_2D": (3, 0, 1, 2)}
"""Else-branch op -> the transpose of the contract's kernel [kh, kw, I, O] (depthwise [k, k, C, 1]) to its
filter [O, kh, kw, I] (depthwise [1, k, k, C])."""


class ConstantLayoutError(ValueError):
    """The file's constants are not laid out as the edit expects (module docstring); nothing was written."""


@dataclasses.dataclass(frozen=True)
class _Branch:
    """The else-branch of one copy-on-write ``IF``: its subgraph, operator and constant buffers."""

    subgraph: int
    op: str
    weights: int
    bias: int
    weights_shape: tuple[int, ...]


def copy_on_write_branches(graph: Graph) -> list[tuple[str, int]]:
    """(candidate layer, else-branch subgraph) of each ``IF`` operator of ``infer``'s main subgraph that runs a
    layer (whose inputs include the handles of ``<layer>_kernel`` and ``<layer>_bias``), in order."""
    operators = graph.operators[graph.signatures[C.INFER]]
    handles = {out: op.variable for op in operators if op.name == "VAR_HANDLE" for out in op.outputs}
    found = []
    for op in operators:
        names = {handles.get(t) for t in op.inputs} - {None}
        kernels = [n[:-len(C.KERNEL_SUFFIX)] for n in names if n.endswith(C.KERNEL_SUFFIX)]
        if op.name == "IF" and len(kernels) == 1 and kernels[0] + C.BIAS_SUFFIX in names:
            found.append((kernels[0], op.subgraphs[1]))
    return found


def filter_write(op: str, write: StateWrite) -> tuple[Any, np.ndarray]:
    """(index, value) of a kernel write (the contract's [kh, kw, I, C] resp. [k, k, C, 1] slice) in the filter
    of ``op`` (``FILTER_TRANSPOSE``: CONV_2D [O, kh, kw, I], the channels on axis 0; DEPTHWISE_CONV_2D
    [1, k, k, C], on axis 3)."""
    index = write.index if op == "CONV_2D" else (slice(None),) * 3 + (write.index,)
    return index, np.transpose(write.value, FILTER_TRANSPOSE[op])


def _layer_branches(graph: Graph) -> dict[str, list[_Branch]]:
    """Candidate layer -> the else-branches of ``copy_on_write_branches``, each one ``CONV_2D`` or
    ``DEPTHWISE_CONV_2D`` on float32 constants (ConstantLayoutError otherwise)."""
    found: dict[str, list[_Branch]] = {}
    for layer, branch in copy_on_write_branches(graph):
        body = graph.operators[branch]
        if len(body) != 1 or body[0].name not in FILTER_TRANSPOSE or len(body[0].inputs) != 3:
            raise ConstantLayoutError(f"{layer}: the constant branch of infer is not one CONV_2D/DEPTHWISE_CONV_2D")
        _, weights, bias = body[0].inputs
        buffers = [graph.tensor_buffer(branch, tensor) for tensor in (weights, bias)]
        if any(graph.tensor_type(branch, t) != FLOAT32 for t in (weights, bias)) or not all(
                graph.buffer_span(b)[1] for b in buffers):
            raise ConstantLayoutError(f"{layer}: the constant branch's weights are not float32 constants")
        found.setdefault(layer, []).append(_Branch(branch, body[0].name, *buffers, graph.tensor_shape(branch, weights)))
    return found


def _init_keeps(graph: Graph, subgraphs: set[int], dropped: set[str]) -> dict[int, list[int]]:
    """Per init subgraph (a ``CALL_ONCE`` target among ``subgraphs``), the operators that assign the
    variables not in ``dropped``, with everything they read (positions, ascending)."""
    inits = {op.subgraphs[0] for index in subgraphs for op in graph.operators[index] if op.name == "CALL_ONCE"}
    keeps = {}
    for init in inits:
        operators = graph.operators[init]
        producer = {t: i for i, op in enumerate(operators) for t in op.outputs}
        kept: set[int] = set()
        for i, op in enumerate(operators):
            assign = op.name == "ASSIGN_VARIABLE"
            handle = operators[producer[op.inputs[0]]] if assign and op.inputs[0] in producer else None
            if assign and (handle is None or handle.variable not in dropped):
                stack = [i]
                while stack:
                    j = stack.pop()
                    if j not in kept:
                        kept.add(j)
                        stack.extend(producer[t] for t in operators[j].inputs if t in producer)
            elif op.name not in ("ASSIGN_VARIABLE", "VAR_HANDLE") and not op.outputs:
                kept.add(i)  # an operator with an effect of its own
        keeps[init] = sorted(kept)
    return keeps


def _check_readers(graph: Graph, subgraphs: set[int], keeps: dict[int, list[int]],
                   owners: dict[int, tuple[str, set[int]]]) -> None:
    """ConstantLayoutError unless every operator left to run that reads a buffer about to be written is one of
    that buffer's own branches (``owners``: buffer -> (layer, its else-branch subgraphs))."""
    for index in subgraphs:
        positions = keeps.get(index, range(len(graph.operators[index])))
        for position in positions:
            op = graph.operators[index][position]
            for tensor in op.inputs:
                if tensor < 0:
                    continue
                owner = owners.get(graph.tensor_buffer(index, tensor))
                if owner is not None and index not in owner[1]:
                    raise ConstantLayoutError(f"{owner[0]}: its constant is also read by a {op.name} of "
                                              f"subgraph {index}")


def _constant_writes(graph: Graph, data: bytearray, model: TrainableModel, writes: list[StateWrite],
                     branches: list[_Branch]) -> list[tuple[np.ndarray, Any, np.ndarray]]:
    """(view of a constant in ``data``, index, value) of each kernel and bias write of one layer into each of
    its branches, every shape checked first."""
    out = []
    for write in writes:
        shape = model.state_specs[write.name][0]
        for branch in branches:
            kernel = write.name.endswith(C.KERNEL_SUFFIX)
            start, size = graph.buffer_span(branch.weights if kernel else branch.bias)
            if size != 4 * int(np.prod(shape)):
                raise ConstantLayoutError(f"{write.layer}: a constant of {size} bytes for {write.name} {list(shape)}")
            if not kernel:
                out.append((np.frombuffer(data, np.float32, size // 4, start), write.index, write.value))
                continue
            transpose = FILTER_TRANSPOSE[branch.op]
            if len(shape) != 4 or branch.weights_shape != tuple(shape[a] for a in transpose):
                raise ConstantLayoutError(f"{write.layer}: filter {list(branch.weights_shape)} is not {write.name} "
                                          f"{list(shape)} transposed")
            view = np.frombuffer(data, np.float32, size // 4, start).reshape(branch.weights_shape)
            out.append((view, *filter_write(branch.op, write)))
    return out


def adapted_constants_edit(checkpoint: Checkpoint) -> Callable[[bytearray, TrainableModel], None]:
    """The ``TrainableModel(edit=...)`` that turns the file into the inference-only model of ``checkpoint``
    (module docstring); open it with ``signatures=INFERENCE_SIGNATURES`` and call ``set_head`` afterwards.

    The edit raises CheckpointError when the checkpoint does not fit the model and ConstantLayoutError when
    the file is not laid out as expected, both before writing anything.
    """

    def edit(data: bytearray, model: TrainableModel) -> None:
        writes = [w for w in checkpoint_writes(model, checkpoint)
                  if w.layer is not None and w.name in (w.layer + C.KERNEL_SUFFIX, w.layer + C.BIAS_SUFFIX)]
        graph = read_graph(data)
        if not graph.plain_control_flow or C.INFER not in graph.signatures:
            raise ConstantLayoutError("the model runs subgraphs through other control flow than IF/WHILE/CALL_ONCE")
        # what runs (subgraph 0, which keep_signatures leaves whole for LiteRT's delegate, is never called)
        subgraphs = graph.reachable(graph.signatures[name] for name in INFERENCE_SIGNATURES)
        dropped = {name for layer in model.candidates for name in model.state_specs  # weights, slots, masks
                   if name.startswith((layer + C.KERNEL_SUFFIX, layer + C.BIAS_SUFFIX))
                   or name == layer + C.MASK_SUFFIX}
        keeps = _init_keeps(graph, subgraphs, dropped)
        branches = _layer_branches(graph)
        if set(branches) != set(model.candidates):
            raise ConstantLayoutError(f"infer has copy-on-write branches for {sorted(branches)}, not for every "
                                      f"candidate {model.candidates}")
        targets = []
        owners: dict[int, tuple[str, set[int]]] = {}
        for layer in checkpoint.selection.layers:
            own = {branch.subgraph for branch in branches[layer]}
            owners.update({b: (layer, own) for branch in branches[layer] for b in (branch.weights, branch.bias)})
            targets += _constant_writes(graph, data, model, [w for w in writes if w.layer == layer], branches[layer])
        _check_readers(graph, subgraphs, keeps, owners)
        for view, index, value in targets:
            view[index] = value
        for init, kept in keeps.items():
            graph.keep_operators(data, init, kept)

    return edit
