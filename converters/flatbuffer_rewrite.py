"""Building blocks of the passes that rewrite an exported TFLite flatbuffer (``schema.ModelT``).

``write_model`` stores identical tensor quantization tables once: the converter gives every tensor its own
``QuantizationParameters`` (per-channel scales and int64 zero points), and a quantized frozen prefix is
repeated in every signature that runs it (Lite0 @128 int8: 1 146 tables, 4.06 MB, of which 102 distinct,
0.40 MB). A flatbuffer may reference one table from many tensors (the schema's verifier checks only that
each offset is in bounds).

Both initial-value passes (``converters.zero_fill``, ``converters.transposed_initial_values``) turn a
stored constant input into the output of an operator computed at run time: ``produce_before_first_use``
inserts each producer right before the first operator that reads the tensor and detaches the tensor from
its buffer; ``free_unread_buffers`` then empties the buffers no tensor reads any more (buffer indices stay
valid, so no other tensor needs renumbering).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import flatbuffers
import numpy as np
from tensorflow.lite.python import schema_py_generated as schema

__all__ = ["constant_tensor", "share_quantization_tables", "free_unread_buffers", "opcode_index", "operator", "produce_before_first_use", "read_model",
           "write_model"]


def read_model(raw: bytes) -> schema.ModelT:
    """The object API view of a TFLite flatbuffer (for a pass to edit)."""
    return schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(raw, 0))


def write_model(model: schema.ModelT, size_hint: int = 0) -> bytes:
    """Serialises an edited model (file identifier TFL3), each distinct quantization table once
    (``share_quantization_tables``); ``size_hint``: the expected size in bytes."""
    share_quantization_tables(model)
    builder = flatbuffers.Builder(size_hint + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


class _SharedQuantization(schema.QuantizationParametersT):
    """A quantization table packed once per builder; later ``Pack`` calls return the first offset."""

    def Pack(self, builder: flatbuffers.Builder) -> int:  # noqa: N802 - the generated API's name
        packed = getattr(self, "_packed", None)
        if packed is not None and packed[0] is builder:
            return packed[1]
        offset = super().Pack(builder)
        self._packed = (builder, offset)
        return offset


def _quantization_key(params: schema.QuantizationParametersT) -> tuple | None:
    if params.details is not None:  # custom quantization details: left as they are
        return None
    arrays = tuple(None if a is None else np.asarray(a).tobytes() + str(np.asarray(a).dtype).encode()
                   for a in (params.min, params.max, params.scale, params.zeroPoint))
    return arrays, int(params.quantizedDimension or 0), params.detailsType


def share_quantization_tables(model: schema.ModelT) -> int:
    """Makes tensors with equal quantization parameters share one table object (packed once). Returns the
    number of distinct shared tables. A model without a quantized tensor (no table holding scales) is left as
    it is: every float tensor of the converter's output has an empty table, and float exports stay byte for
    byte what they were before this pass."""
    tensors = [t for subgraph in model.subgraphs for t in subgraph.tensors or []]
    if not any(t.quantization is not None and t.quantization.scale is not None and np.size(t.quantization.scale)
               for t in tensors):
        return 0
    shared: dict[tuple, _SharedQuantization] = {}
    for subgraph in model.subgraphs:
        for tensor in subgraph.tensors or []:
            params = tensor.quantization
            key = None if params is None else _quantization_key(params)
            if key is None:
                continue
            if key not in shared:
                table = _SharedQuantization()
                table.__dict__.update({k: v for k, v in vars(params).items() if k != "_packed"})
                shared[key] = table
            tensor.quantization = shared[key]
    return len(shared)


def opcode_index(model: schema.ModelT, code: int) -> int:
    """Index of the builtin ``code`` in the model's operator codes (added, version 1, when absent)."""
    for i, op in enumerate(model.operatorCodes):
        if max(op.builtinCode, op.deprecatedBuiltinCode) == code:
            return i
    entry = schema.OperatorCodeT()
    entry.builtinCode = code
    entry.deprecatedBuiltinCode = min(code, schema.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES)
    entry.version = 1
    model.operatorCodes.append(entry)
    return len(model.operatorCodes) - 1


def constant_tensor(model: schema.ModelT, subgraph: schema.SubGraphT, value: np.ndarray, name: str) -> int:
    """Appends a constant tensor (own buffer) holding ``value`` (int32 or float32) to ``subgraph``; its index."""
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(np.ascontiguousarray(value).tobytes(), np.uint8)
    model.buffers.append(buffer)
    tensor = schema.TensorT()
    tensor.shape = np.array(value.shape, np.int32)
    tensor.type = schema.TensorType.INT32 if value.dtype == np.int32 else schema.TensorType.FLOAT32
    tensor.buffer = len(model.buffers) - 1
    tensor.name = name
    subgraph.tensors.append(tensor)
    return len(subgraph.tensors) - 1


def operator(opcode: int, inputs: Iterable[int], outputs: Iterable[int]) -> schema.OperatorT:
    """An operator of opcode index ``opcode`` (no builtin options)."""
    op = schema.OperatorT()
    op.opcodeIndex = opcode
    op.inputs = np.array(list(inputs), np.int32)
    op.outputs = np.array(list(outputs), np.int32)
    return op


def produce_before_first_use(subgraph: schema.SubGraphT,
                             producers: dict[int, Callable[[int], schema.OperatorT]]) -> set[int]:
    """For each tensor index t of ``producers``: inserts ``producers[t](t)`` (an operator writing t) before
    the first operator reading t, and detaches t from its buffer (buffer 0). Returns the detached buffers."""
    pending = dict(producers)
    detached: set[int] = set()
    operators = []
    for op in subgraph.operators:
        for t in [int(i) for i in op.inputs if int(i) in pending]:
            operators.append(pending.pop(t)(t))
            detached.add(subgraph.tensors[t].buffer)
            subgraph.tensors[t].buffer = 0
        operators.append(op)
    subgraph.operators = operators
    return detached


def free_unread_buffers(model: schema.ModelT, candidates: set[int]) -> None:
    """Empties each buffer of ``candidates`` that no tensor of any subgraph reads."""
    still_read = {t.buffer for sg in model.subgraphs for t in sg.tensors}
    for b in candidates - still_read:
        model.buffers[b] = schema.BufferT()
