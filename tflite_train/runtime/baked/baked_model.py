"""Baking an adapted checkpoint into a plain classifier: one ``.tflite`` from images to class scores, no state.

``bake_classifier(model, checkpoint)`` writes a new flatbuffer (``flatbuffer_tables``; no TensorFlow) from
the export's ``infer`` and the checkpoint, laid out as CONTRACT.md "Baked classifier" says:

1. the operators of ``infer``'s main subgraph that compute the normalised embedding
   e_hat = e (|e|^2 + eps)^-1/2, i.e. the input of the head's ``FULLY_CONNECTED`` (the one whose weights are
   read from the ``prototypes`` variable), with everything they read; every copy-on-write ``IF`` among them
   (``converters.copy_on_write``) is replaced by the operators of its else-branch, the constant path; for a
   trained layer its kernel and bias become float32 constants with the checkpoint's channels written
   (``adapted_constants``: ``copy_on_write_branches``, ``filter_write``), each a copy of its own, so a constant
   that several layers share is never written for another; an int8 kernel (``--quantize int8-candidates``,
   ``int8``: a ``DEQUANTIZE`` before the convolution) is dequantized as that operator does and the
   ``DEQUANTIZE`` dropped; nothing that reads or writes a variable is kept;
2. the head, one ``FULLY_CONNECTED`` with constant weights (TinyTrain's cosine classifier, as in ``infer``):
   logits_c = s <e_hat, p_hat_c>, p_hat_c = p_c (|p_c|^2 + eps)^-1/2, with W = s P_hat [k, D] computed here
   in float64 from the checkpoint's k prototypes and the metadata's scale s (``head_weights``);
3. one signature ``classify`` (``images`` -> ``logits`` [N, k]), the export's input tensor unchanged (same
   range, normalised inside the graph), the baked metadata (``contract.BAKED_FIELDS``) and the integrity
   seal, which ``baked_classifier.read_baked_metadata`` checks on the result before it is returned.

Every constant is stored once (the export's constants that several tensors share stay shared) and is
packed by a delegate like any constant weight. The scores equal ``predict``'s (``infer``'s first k logits
after restoring the checkpoint) up to float rounding: W's rounding and the order of the dot products
(``tests/runtime/baked/test_baked_model.py``: within 1e-5 of the largest logit on both runtimes).

A checkpoint of another model, or one that does not fit it, is refused before anything is built
(``checkpoint.checkpoint_writes``); so is a file this bake cannot read (``BakeError``: a head or branch of
another form, a trained layer whose constants are neither float32 nor per-channel int8). The command's
file-level edge is ``bake_job.run_bake``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.baked.baked_classifier import STATEFUL_OPS, read_baked_metadata
from tflite_train.runtime.checkpoint.checkpoint import Checkpoint, checkpoint_writes, decode_checkpoint
from tflite_train.runtime.errors import CheckpointError, UserError
from tflite_train.runtime.model.adapted_constants import FILTER_TRANSPOSE, copy_on_write_branches, filter_write
from tflite_train.runtime.model.flatbuffer_graph import Graph, Operator, read_graph
from tflite_train.runtime.model.flatbuffer_tables import (BUFFER_ALIGNMENT, Table, Vector, new_table, read_table,
                                                          write_flatbuffer)
from tflite_train.runtime.model.integrity import PLACEHOLDER, check_model_bytes, seal
from tflite_train.runtime.model.metadata import _Reader, _root, read_metadata, read_metadata_buffers, read_signature_defs
from tflite_train.runtime.model.model_contract import check_metadata
from tflite_train.runtime.model.model_metadata_schema import check_model_metadata

__all__ = ["NORM_EPS", "BakeError", "ExportedModelFile", "bake_classifier", "head_weights", "inference_part_bytes",
           "read_exported_model"]

NORM_EPS = 1e-12
"""eps of the cosine head's normalisation (the exporter's ``converters.cosine_head.NORM_EPS``; a test checks)."""
FLOAT32, INT8 = 0, 9
"""Schema ``TensorType`` codes of float32 and int8."""
# schema field ids (tflite_schema.SCHEMA)
MODEL_VERSION, MODEL_CODES, MODEL_SUBGRAPHS, MODEL_DESCRIPTION, MODEL_BUFFERS = 0, 1, 2, 3, 4
MODEL_METADATA, MODEL_SIGNATURES = 6, 7
TENSOR_SHAPE, TENSOR_TYPE, TENSOR_BUFFER, TENSOR_NAME, TENSOR_QUANTIZATION, TENSOR_IS_VARIABLE = 0, 1, 2, 3, 4, 5
TENSOR_SHAPE_SIGNATURE = 7
QUANT_SCALE, QUANT_ZERO_POINT, QUANT_DIMENSION = 2, 3, 6
OP_OPCODE, OP_INPUTS, OP_OUTPUTS, OP_MUTATING, OP_INTERMEDIATES, OP_LARGE_CUSTOM = 0, 1, 2, 7, 8, 9
DESCRIPTION = b"tflite-train bake: a classifier baked from an adapted checkpoint"


class BakeError(UserError):
    """The model file is not laid out as the bake reads it (module docstring); nothing was written."""


@dataclasses.dataclass(frozen=True)
class ExportedModelFile:
    """An exported model's checked metadata and state variables, read without an interpreter: what
    ``checkpoint.checkpoint_writes`` reads of a ``TrainableModel``."""

    metadata: Mapping[str, Any]
    state_specs: Mapping[str, tuple[tuple[int, ...], str]]

    @property
    def candidates(self) -> list[str]:
        """The candidate layers, in forward order."""
        return list(self.metadata[C.F_CANDIDATES])

    @property
    def candidate_channels(self) -> dict[str, int]:
        """Candidate layer -> its output channels."""
        return {layer[C.F_NAME]: int(layer[C.F_OUT_CHANNELS]) for layer in self.metadata[C.F_LAYERS]
                if layer[C.F_NAME] in self.metadata[C.F_CANDIDATES]}

    @property
    def capacity(self) -> int:
        """K, the most classes a head holds."""
        return int(self.metadata[C.F_CLASS_CAPACITY])


def read_exported_model(data: bytes, source: str = "model") -> ExportedModelFile:
    """The checks ``TrainableModel`` makes before it builds an interpreter: the seal and structure, the
    metadata schema, the contract's version and fields, the graph against the metadata (ValueErrors naming
    ``source``)."""
    check_model_bytes(data, source)
    try:
        raw = read_metadata(data)
    except ValueError as err:
        baked = C.BAKED_METADATA_NAME in read_metadata_buffers(data)
        raise BakeError(f"{source}: " + ("a baked classifier, not an export: bake from the exported model" if baked
                                         else str(err))) from None
    metadata = check_model_metadata(raw, source)
    check_metadata(metadata)
    signature_defs = read_signature_defs(data)
    C.validate_graph(metadata, signature_defs)
    return ExportedModelFile(metadata, dict(signature_defs[C.GET_STATE][C.F_OUTPUTS]))


def head_weights(prototypes: np.ndarray, scale: float) -> np.ndarray:
    """W = s P_hat f32[k, D], P_hat's rows p_c (|p_c|^2 + eps)^-1/2 (module docstring, step 2), in float64."""
    p = np.asarray(prototypes, np.float64)
    return (scale * p / np.sqrt(np.sum(p * p, axis=1, keepdims=True) + NORM_EPS)).astype(np.float32)


def inference_part_bytes(data: bytes) -> tuple[int, int]:
    """(constants, tables): the bytes of the constants ``infer`` reads and of its subgraphs' tables (laid out by
    ``flatbuffer_tables``, as a baked file is), over ``infer``'s subgraphs and their branches without the
    ``CALL_ONCE`` init that holds the variables' initial values: the inference part of an export, which also
    reads the prototypes from its state."""
    graph = read_graph(data)
    reader = _Reader(data)
    subgraphs = graph.reachable([graph.signatures[C.INFER]])
    subgraphs -= {op.subgraphs[0] for index in subgraphs for op in graph.operators[index] if op.name == "CALL_ONCE"}
    buffers = {graph.tensor_buffer(index, t) for index in subgraphs for op in graph.operators[index]
               for t in op.inputs if t >= 0}
    positions = reader.table_vector(_root(reader), MODEL_SUBGRAPHS)
    tables = sum(len(write_flatbuffer(read_table(reader, positions[index], "SubGraph"))) for index in subgraphs)
    return sum(graph.buffer_span(b)[1] for b in buffers), tables


def _branch_reads(graph: Graph, branch: int) -> list[int]:
    """Positions of the inputs an else-branch's operators read (BakeError if it holds state or an output
    that no operator of it produces)."""
    inputs, outputs = graph.subgraph_io(branch)
    operators = graph.operators[branch]
    stateful = sorted({op.name for op in operators} & STATEFUL_OPS)
    produced = {t for op in operators for t in op.outputs}
    if stateful or not set(outputs) <= produced:
        raise BakeError(f"the constant branch (subgraph {branch}) of an IF in infer runs {stateful or 'no operator'} "
                        "for its output; not a copy-on-write layer")
    read = {t for op in operators for t in op.inputs}
    return [j for j, t in enumerate(inputs) if t in read]


def _upstream(graph: Graph, operators: Sequence[Operator], tensors: Iterable[int]) -> set[int]:
    """Positions of the operators that ``tensors`` depend on; a copy-on-write ``IF`` depends on the inputs its
    else-branch reads only (not on its condition or the variable handles it passes on); any other ``IF`` is a
    BakeError (the bake would not know which branch runs)."""
    copy_on_write = {branch for _, branch in copy_on_write_branches(graph)}
    producer = {t: i for i, op in enumerate(operators) for t in op.outputs}
    seen: set[int] = set()
    stack = list(tensors)
    while stack:
        i = producer.get(stack.pop())
        if i is None or i in seen:
            continue
        seen.add(i)
        op = operators[i]
        if op.name == "IF" and op.subgraphs[1] not in copy_on_write:
            raise BakeError(f"infer runs an IF (subgraphs {list(op.subgraphs)}) that is not a copy-on-write layer")
        if op.name == "IF":
            stack += [op.inputs[1 + j] for j in _branch_reads(graph, op.subgraphs[1])]
        else:
            stack += [t for t in op.inputs if t >= 0]
    return seen


def _head(graph: Graph, main: int) -> Operator:
    """The ``FULLY_CONNECTED`` of ``infer`` whose weights are read from the ``prototypes`` variable."""
    operators = graph.operators[main]
    handles = {t: op.variable for op in operators if op.name == "VAR_HANDLE" for t in op.outputs}
    heads = [op for op in operators if op.name == "FULLY_CONNECTED" and len(op.inputs) > 1 and any(
        operators[i].name == "READ_VARIABLE" and handles.get(operators[i].inputs[0]) == C.PROTOTYPES
        for i in _upstream(graph, operators, [op.inputs[1]]))]
    if len(heads) != 1:
        raise BakeError(f"infer has {len(heads)} FULLY_CONNECTED operators with the prototypes as weights; the bake "
                        "reads the cosine head from exactly one")
    return heads[0]


def _signature_tensor(reader: _Reader, signature: str, field: int, name: str) -> int:
    """The tensor index of input (``field`` 0) or output (1) ``name`` of a signature."""
    for entry in reader.table_vector(_root(reader), MODEL_SIGNATURES):
        if reader.string(entry, 2) == signature:
            for tensor_map in reader.table_vector(entry, field):
                if reader.string(tensor_map, 0) == name:
                    return reader.u32_field(tensor_map, 1)
    raise BakeError(f"the model has no {signature} tensor {name!r}")


class _Baker:
    """The baked subgraph's tensors, buffers, operators and operator codes, copied from the export (tensor
    indices renumbered, each buffer copied once) or new."""

    def __init__(self, graph: Graph, data: bytes, constants: Mapping[tuple[int, int], np.ndarray],
                 replaced: set[tuple[int, int]]) -> None:
        self.graph, self.data, self.constants, self.replaced = graph, data, constants, replaced
        self.reader = _Reader(data)
        self.code_tables = self.reader.table_vector(_root(self.reader), MODEL_CODES)
        self.tensors: list[Table] = []
        self.buffers: list[Table] = [new_table()]  # buffer 0: no data
        self.operators: list[Table] = []
        self.codes: list[Table] = []
        self.alias: dict[tuple[int, int], tuple[int, int]] = {}
        """An inlined branch's input and output tensors -> the main subgraph's tensors in their place."""
        self._tensors: dict[tuple[int, int], int] = {}
        self._buffers: dict[int, int] = {}
        self._codes: dict[int, int] = {}

    def buffer(self, data: bytes | memoryview) -> int:
        self.buffers.append(new_table(refs={0: Vector(data, 1, BUFFER_ALIGNMENT)}))
        return len(self.buffers) - 1

    def tensor(self, subgraph: int, tensor: int) -> int:
        """The baked index of a tensor of the export (copied at its first use)."""
        key = self.alias.get((subgraph, tensor), (subgraph, tensor))
        if key in self._tensors:
            return self._tensors[key]
        table = read_table(self.reader, self.graph.tensor_table(*key), "Tensor")
        if table.get(TENSOR_IS_VARIABLE, "B"):
            raise BakeError(f"the classifier would read the variable tensor {table.refs.get(TENSOR_NAME, b'')!r}")
        old = self.graph.tensor_buffer(*key)
        start, size = self.graph.buffer_span(old)
        if key in self.constants:
            new = self.buffer(self.constants[key].astype("<f4").tobytes())
        elif size and old in self._buffers:
            new = self._buffers[old]
        elif size:
            new = self._buffers[old] = self.buffer(memoryview(self.data)[start:start + size])
        else:
            new = 0
        table.set(TENSOR_BUFFER, "I", new)
        self.tensors.append(table)
        self._tensors[key] = len(self.tensors) - 1
        return self._tensors[key]

    def new_tensor(self, name: str, shape: Sequence[int], shape_signature: Sequence[int],
                   data: np.ndarray | None = None) -> int:
        """A new float32 tensor (a constant when ``data`` is given)."""
        buffer = 0 if data is None else self.buffer(np.ascontiguousarray(data, "<f4").tobytes())
        self.tensors.append(new_table({TENSOR_TYPE: ("b", FLOAT32), TENSOR_BUFFER: ("I", buffer)},
                                      {TENSOR_SHAPE: Vector.of("i", shape), TENSOR_NAME: name.encode(),
                                       TENSOR_SHAPE_SIGNATURE: Vector.of("i", shape_signature)}))
        return len(self.tensors) - 1

    def operator(self, subgraph: int, op: Operator, inputs: Sequence[int] | None = None,
                 outputs: Sequence[int] | None = None) -> None:
        """Appends a copy of an operator of the export: its options as they are, its tensors renumbered
        (or the baked ``inputs``/``outputs`` given)."""
        table = read_table(self.reader, op.table, "Operator")
        if table.has(OP_LARGE_CUSTOM):
            raise BakeError(f"{op.name} has custom options outside the flatbuffer; not a builtin operator")
        code = int(table.get(OP_OPCODE, "I"))
        if code not in self._codes:
            self.codes.append(read_table(self.reader, self.code_tables[code], "OperatorCode"))
            self._codes[code] = len(self.codes) - 1
        table.set(OP_OPCODE, "I", self._codes[code])

        def renumbered(tensors: Sequence[int]) -> Vector:
            return Vector.of("i", [t if t < 0 else self.tensor(subgraph, t) for t in tensors])

        table.set_ref(OP_INPUTS, Vector.of("i", inputs) if inputs is not None else renumbered(op.inputs))
        table.set_ref(OP_OUTPUTS, Vector.of("i", outputs) if outputs is not None else renumbered(op.outputs))
        table.drop(OP_MUTATING)
        if table.has(OP_INTERMEDIATES):
            start, n = self.reader.vector(op.table, OP_INTERMEDIATES)
            table.set_ref(OP_INTERMEDIATES, renumbered([self.reader.i32(start + 4 * i) for i in range(n)]))
        self.operators.append(table)

    def inline(self, main: int, op: Operator) -> None:
        """Appends the operators of a copy-on-write ``IF``'s else-branch in its place (not a replaced
        ``DEQUANTIZE``: its output is then the float constant of the trained kernel)."""
        branch = op.subgraphs[1]
        inputs, outputs = self.graph.subgraph_io(branch)
        self.alias.update({(branch, t): (main, op.inputs[1 + j]) for j, t in enumerate(inputs)})
        self.alias.update({(branch, t): (main, op.outputs[j]) for j, t in enumerate(outputs)})
        for position, inner in enumerate(self.graph.operators[branch]):
            if (branch, position) not in self.replaced:
                self.operator(branch, inner)

    def check_dataflow(self, images: int) -> None:
        """BakeError unless every tensor an operator reads is produced before it, a constant, or the images."""
        available = {images} | {i for i, t in enumerate(self.tensors) if t.get(TENSOR_BUFFER, "I")}
        for table in self.operators:
            data = table.refs[OP_INPUTS].data
            missing = [t for t in np.frombuffer(data, "<i4") if t >= 0 and t not in available]
            if missing:
                name = self.tensors[missing[0]].refs.get(TENSOR_NAME, b"").decode("utf-8", "replace")
                raise BakeError(f"the embedding reads {name!r}, which nothing before it computes")
            available.update(int(t) for t in np.frombuffer(table.refs[OP_OUTPUTS].data, "<i4"))


def _float_constant(graph: Graph, reader: _Reader, data: bytes, subgraph: int, tensor: int, what: str) -> np.ndarray:
    """A copy of a float32 constant, or an int8 one dequantized as TFLite's ``DEQUANTIZE`` does:
    scale_c (q - zero_point_c) per channel c of its ``quantized_dimension``."""
    start, size = graph.buffer_span(graph.tensor_buffer(subgraph, tensor))
    shape = graph.tensor_shape(subgraph, tensor)
    kind = graph.tensor_type(subgraph, tensor)
    if kind == FLOAT32 and size == 4 * int(np.prod(shape)):
        return np.frombuffer(data, "<f4", size // 4, start).reshape(shape).copy()
    quantization = read_table(reader, graph.tensor_table(subgraph, tensor), "Tensor").refs.get(TENSOR_QUANTIZATION)
    if kind != INT8 or size != int(np.prod(shape)) or not isinstance(quantization, Table) or \
            not {QUANT_SCALE, QUANT_ZERO_POINT} <= set(quantization.refs):
        raise BakeError(f"{what} is not a float32 or quantized int8 constant")
    axis = int(quantization.get(QUANT_DIMENSION, "i"))
    scale = np.frombuffer(quantization.refs[QUANT_SCALE].data, "<f4")
    zero_point = np.frombuffer(quantization.refs[QUANT_ZERO_POINT].data, "<i8")
    if not 0 <= axis < len(shape) or len(scale) not in (1, shape[axis]) or len(zero_point) != len(scale):
        raise BakeError(f"{what}: quantization of {len(scale)} scales on axis {axis} of {list(shape)}")
    per_channel = [1] * len(shape)
    per_channel[axis] = len(scale)
    q = np.frombuffer(data, "i1", size, start).reshape(shape).astype(np.int32)
    return ((q - zero_point.reshape(per_channel)).astype(np.float32) * scale.reshape(per_channel)).astype(np.float32)


def _trained_constants(graph: Graph, data: bytes, model: ExportedModelFile, checkpoint: Checkpoint
                       ) -> tuple[dict[tuple[int, int], np.ndarray], set[tuple[int, int]]]:
    """What the trained layers change in their else-branches: (branch subgraph, tensor) -> its float32 constant
    with the checkpoint's channels written (a copy per branch), and the (branch, position) of each
    ``DEQUANTIZE`` whose int8 kernel that float constant replaces."""
    writes = [w for w in checkpoint_writes(model, checkpoint)  # the weights: not the slots, masks or head
              if w.layer is not None and w.name in (w.layer + C.KERNEL_SUFFIX, w.layer + C.BIAS_SUFFIX)]
    reader = _Reader(data)
    branches = copy_on_write_branches(graph) if checkpoint.selection.layers else []
    missing = sorted(set(checkpoint.selection.layers) - {layer for layer, _ in branches})
    if missing:
        raise BakeError(f"infer has no copy-on-write branch for the trained layers {missing}")
    constants: dict[tuple[int, int], np.ndarray] = {}
    replaced: set[tuple[int, int]] = set()
    for layer, branch in branches:
        if layer not in checkpoint.selection.layers:
            continue
        body = graph.operators[branch]
        conv = body[-1]
        dequantize = len(body) == 2 and body[0].name == "DEQUANTIZE" and conv.inputs[1:2] == body[0].outputs
        if conv.name not in FILTER_TRANSPOSE or len(conv.inputs) != 3 or len(body) != 1 + dequantize:
            raise BakeError(f"{layer}: its constant branch in infer is not one CONV_2D/DEPTHWISE_CONV_2D (after a "
                            f"DEQUANTIZE of its kernel) but {[op.name for op in body]}")
        source = body[0].inputs[0] if dequantize else conv.inputs[1]
        kernel = _float_constant(graph, reader, data, branch, source, f"{layer}'s kernel")
        bias = _float_constant(graph, reader, data, branch, conv.inputs[2], f"{layer}'s bias")
        for write in (w for w in writes if w.layer == layer):
            shape = model.state_specs[write.name][0]
            if write.name.endswith(C.KERNEL_SUFFIX):
                if kernel.shape != tuple(shape[a] for a in FILTER_TRANSPOSE[conv.name]):
                    raise BakeError(f"{layer}: filter {list(kernel.shape)} is not {write.name} {list(shape)} "
                                    "transposed")
                index, value = filter_write(conv.name, write)
                kernel[index] = value
            elif bias.shape == tuple(shape):
                bias[write.index] = write.value
            else:
                raise BakeError(f"{layer}: bias {list(bias.shape)} is not {write.name} {list(shape)}")
        constants[branch, conv.inputs[1]], constants[branch, conv.inputs[2]] = kernel, bias
        if dequantize:
            replaced.add((branch, 0))
    return constants, replaced


def bake_classifier(model_data: bytes, checkpoint_data: bytes, model_source: str = "model",
                    checkpoint_source: str = "checkpoint") -> bytes:
    """The baked classifier's bytes (module docstring) from an export's and a checkpoint's bytes.

    Raises:
      ValueError (ModelIntegrityError, ContractError): the model file is not an intact export.
      CheckpointError: the checkpoint is damaged, of another model, or does not fit this one (one line
        naming ``checkpoint_source``).
      BakeError: the export is not laid out as the bake reads it.
    """
    model = read_exported_model(model_data, model_source)
    checkpoint = decode_checkpoint(checkpoint_data, checkpoint_source)
    graph = read_graph(model_data)
    try:
        return _bake(graph, model_data, model, checkpoint, hashlib.sha256(checkpoint_data).hexdigest())
    except CheckpointError as err:
        message = str(err)
        raise CheckpointError(message if message.startswith(checkpoint_source) else
                              f"{checkpoint_source}: {message}") from None
    except BakeError as err:
        raise BakeError(f"{model_source}: cannot bake: {err}") from None


def _bake(graph: Graph, model_data: bytes, model: ExportedModelFile, checkpoint: Checkpoint,
          checkpoint_sha256: str) -> bytes:
    """``bake_classifier`` on the checked export and checkpoint (CheckpointError, BakeError without the file)."""
    constants, replaced = _trained_constants(graph, model_data, model, checkpoint)
    if not graph.plain_control_flow or C.INFER not in graph.signatures:
        raise BakeError("infer runs subgraphs through other control flow than IF/WHILE/CALL_ONCE")
    main = graph.signatures[C.INFER]
    operators = graph.operators[main]
    head = _head(graph, main)
    kept = sorted(_upstream(graph, operators, [head.inputs[0]]))
    stateful = sorted({operators[i].name for i in kept} & (STATEFUL_OPS - {"IF"}))
    if stateful:
        raise BakeError(f"infer's embedding runs {stateful}; the bake keeps no state")
    baker = _Baker(graph, model_data, constants, replaced)
    reader = baker.reader
    images = baker.tensor(main, _signature_tensor(reader, C.INFER, 0, C.IMAGES))
    for i in kept:
        (baker.inline if operators[i].name == "IF" else baker.operator)(main, operators[i])
    k = int(checkpoint.arrays[C.NUM_CLASSES])
    scale = float(model.metadata[C.F_HEAD][C.F_SCALE])
    weights = head_weights(checkpoint.arrays[C.PROTOTYPES], scale)
    embedding = baker.tensor(main, head.inputs[0])
    weight_tensor = baker.new_tensor("classifier_weights", weights.shape, weights.shape, weights)
    logits = baker.new_tensor(C.LOGITS, (1, k), (-1, k))
    baker.operator(main, head, inputs=(embedding, weight_tensor, -1), outputs=(logits,))
    baker.check_dataflow(images)

    metadata = {
        C.F_FORMAT: C.BAKED_FORMAT, C.F_FORMAT_VERSION: C.BAKED_FORMAT_VERSION,
        C.CK_CLASS_NAMES: list(checkpoint.class_names or (str(c) for c in range(k))),
        C.F_INPUT: model.metadata[C.F_INPUT], C.F_HEAD: model.metadata[C.F_HEAD],
        C.F_MODEL_ID: model.metadata[C.F_MODEL_ID], C.F_CHECKPOINT_SHA256: checkpoint_sha256,
    }
    entries = [(C.BAKED_METADATA_NAME, json.dumps(metadata, sort_keys=True, allow_nan=False).encode()),
               (C.CHECKSUM_NAME, PLACEHOLDER)]
    subgraph = new_table(refs={0: baker.tensors, 1: Vector.of("i", [images]), 2: Vector.of("i", [logits]),
                               3: baker.operators, 4: C.CLASSIFY.encode()})
    signature = new_table({4: ("I", 0)}, {0: [new_table({1: ("I", images)}, {0: C.IMAGES.encode()})],
                                          1: [new_table({1: ("I", logits)}, {0: C.LOGITS.encode()})],
                                          2: C.CLASSIFY.encode()})
    metadata_tables = [new_table({1: ("I", baker.buffer(value))}, {0: name.encode()}) for name, value in entries]
    version = reader.u32_field(_root(reader), MODEL_VERSION)
    root = new_table({MODEL_VERSION: ("I", version)},
                     {MODEL_CODES: baker.codes, MODEL_SUBGRAPHS: [subgraph], MODEL_DESCRIPTION: DESCRIPTION,
                      MODEL_BUFFERS: baker.buffers, MODEL_METADATA: metadata_tables, MODEL_SIGNATURES: [signature]})
    data = seal(write_flatbuffer(root))
    read_baked_metadata(data, "the baked classifier")  # what every reader checks, on what is about to be written
    return data
