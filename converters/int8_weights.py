"""Stores the candidate layers' initial kernels as int8 with per-channel scales (``export --quantize int8``).

A candidate kernel W (Keras layout, output channel o on the last axis; a depthwise kernel [kh, kw, C, 1]
on axis 2) is quantized symmetrically per output channel,

    s_o = max(|W[..., o]|) / 127,   q = clip(round(W / s_o), -127, 127) (int8),   W' = float32(s_o) * float32(q),

and the exported module uses W' (``dequantized``) everywhere it used W: the variables' initial values, the
copy-on-write constants, the model id and the self-test's TensorFlow goldens. After conversion, the
flatbuffer pass ``store_int8_kernels_in`` replaces every float32 buffer holding the bytes of a W' (in the
Keras layout or the forward op's filter layout, ``converters.transposed_initial_values``) by the int8 q.
In each subgraph, the convolutions that read it as their filter read a ``DEQUANTIZE`` of an int8 tensor with
the per-channel scales (``quantized_dimension`` = the output-channel axis of that layout; XNNPACK packs it
as a static weight), and every other reader (the initialiser's and ``reset_state``'s TRANSPOSE or
ASSIGN_VARIABLE, ``set_state``'s comparison, an IF handing the kernel to a backward branch) reads
``CAST(q) * scales`` (``FILTER_READERS``). Both compute ``scale[o] * q`` in float32: the same bits as W', so
``reset_state`` writes exactly the dequantized stored weights and the constant forward path reads them.
Training, optimizer slots and every state variable stay float32.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema

from tflite_train.converters.flatbuffer_rewrite import free_unread_buffers, opcode_index, operator, produce_before_first_use

LOG = logging.getLogger(__name__)

__all__ = ["FILTER_READERS", "Int8Kernel", "dequantized", "int8_kernel", "store_int8_kernels_in"]

QMAX = 127
"""Symmetric narrow range [-127, 127] (TFLite's per-channel weight convention)."""


@dataclasses.dataclass(frozen=True)
class Int8Kernel:
    """One kernel as stored: int8 values and per-channel scales.

    Attributes:
      values: int8 array in the Keras layout of the kernel.
      scales: float32 [C_out], one per output channel.
      axis: The output-channel axis of ``values``.
    """

    values: np.ndarray
    scales: np.ndarray
    axis: int

    def dequantize(self) -> np.ndarray:
        """float32(scales) * float32(values), broadcast along ``axis`` (the bits TFLite's DEQUANTIZE gives)."""
        shape = [1] * self.values.ndim
        shape[self.axis] = -1
        return self.values.astype(np.float32) * self.scales.reshape(shape)


def _out_axis(kernel: np.ndarray, depthwise: bool) -> int:
    """Output-channel axis of a Keras kernel: the last one, or 2 for a depthwise [kh, kw, C, 1]."""
    return 2 if depthwise and kernel.ndim == 4 and kernel.shape[3] == 1 else kernel.ndim - 1


def int8_kernel(kernel: np.ndarray, depthwise: bool = False) -> Int8Kernel:
    """Per-channel symmetric int8 quantization of a Keras-layout kernel (module docstring).

    Args:
      kernel: float kernel, [kh, kw, C_in, C_out] (conv), [kh, kw, C, 1] (depthwise) or [D_in, D_out].
      depthwise: The kernel is a depthwise one (channels on axis 2).

    Raises:
      ValueError: a kernel that is not finite.
    """
    kernel = np.asarray(kernel, np.float32)
    if not np.all(np.isfinite(kernel)):
        raise ValueError("cannot quantize a kernel with NaN or infinite values")
    axis = _out_axis(kernel, depthwise)
    moved = np.moveaxis(kernel, axis, -1).reshape(-1, kernel.shape[axis])
    peak = np.abs(moved).max(axis=0)
    scales = np.where(peak > 0, peak / QMAX, 1.0).astype(np.float32)
    shape = [1] * kernel.ndim
    shape[axis] = -1
    values = np.clip(np.rint(kernel / scales.reshape(shape)), -QMAX, QMAX).astype(np.int8)
    return Int8Kernel(values, scales, axis)


def dequantized(kernel: np.ndarray, depthwise: bool = False) -> np.ndarray:
    """W' of ``kernel``: what the int8 export stores, as float32 (``int8_kernel(...).dequantize()``)."""
    return int8_kernel(kernel, depthwise).dequantize()


def _layouts(stored: Int8Kernel) -> list[tuple[np.ndarray, int]]:
    """(int8 values, channel axis) of the kernel in each layout a float tensor may hold it in: the Keras
    layout and the forward op's filter layout (``converters.ops.dispatch.forward_filter_layout``)."""
    q, axis = stored.values, stored.axis
    if q.ndim == 4 and axis == 2:  # depthwise [kh, kw, C, 1] = DEPTHWISE_CONV_2D [1, kh, kw, C] (same bytes)
        return [(q, 2), (q.reshape(1, *q.shape[:3]), 3)]
    if q.ndim == 4:  # conv HWIO -> CONV_2D OHWI
        return [(q, 3), (np.ascontiguousarray(np.transpose(q, (3, 0, 1, 2))), 0)]
    if q.ndim == 2:  # dense [D_in, D_out] -> FULLY_CONNECTED [D_out, D_in]
        return [(q, 1), (np.ascontiguousarray(q.T), 0)]
    return [(q, axis)]


def _digest(data: np.ndarray) -> bytes:
    return hashlib.sha256(np.ascontiguousarray(data).tobytes()).digest()


def store_int8_kernels_in(obj: schema.ModelT, kernels: dict[str, Int8Kernel]) -> int:
    """Replaces the float32 buffers holding a dequantized kernel by int8 (module docstring).

    Args:
      obj: The converted model (edited in place).
      kernels: Layer name -> its stored int8 kernel.

    Returns:
      The number of float32 buffers replaced.
    """
    wanted: dict[bytes, list[tuple[tuple[int, ...], np.ndarray, int, np.ndarray]]] = {}
    for stored in kernels.values():
        scales = stored.scales
        for q, axis in _layouts(stored):
            shape = [1] * q.ndim
            shape[axis] = -1
            w = q.astype(np.float32) * scales.reshape(shape)
            wanted.setdefault(_digest(w), []).append((tuple(q.shape), q, axis, scales))
    if not wanted:
        return 0
    matches: dict[int, list] = {}
    for index, buffer in enumerate(obj.buffers):
        if index and buffer.data is not None and len(buffer.data) >= 4:
            found = wanted.get(_digest(np.asarray(buffer.data, np.uint8)))
            if found:
                matches[index] = found
    if not matches:
        return 0
    codes = _Codes(obj)
    int8_buffers: dict[int, int] = {}  # float buffer -> its int8 buffer (shared by every layout's tensor)
    scale_buffers: dict[tuple[int, tuple[int, ...]], int] = {}  # (float buffer, shape) -> broadcast scales

    def shared_buffer(cache: dict, key, value: np.ndarray) -> int:
        if key not in cache:
            buffer = schema.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(value).tobytes(), np.uint8)
            obj.buffers.append(buffer)
            cache[key] = len(obj.buffers) - 1
        return cache[key]

    freed: set[int] = set()
    for subgraph in obj.subgraphs:
        targets = {}
        for t, tensor in enumerate(subgraph.tensors):
            if tensor.type != schema.TensorType.FLOAT32 or tensor.buffer not in matches:
                continue
            shape = tuple(int(d) for d in tensor.shape)
            entry = next((e for e in matches[tensor.buffer] if e[0] == shape), None)
            if entry is None:
                LOG.warning("tensor %s holds a quantized kernel's bytes in an unknown shape %s; left float32",
                            tensor.name, shape)
                continue
            targets[t] = entry
        if targets:
            freed |= _rewrite_readers(obj, subgraph, targets, codes, lambda b, q: shared_buffer(int8_buffers, b, q),
                                      lambda b, s: shared_buffer(scale_buffers, (b, s.shape), s))
    free_unread_buffers(obj, freed)
    return len(freed)


class _Codes:
    """Operator-code indices of the ops the pass inserts (added on first use)."""

    def __init__(self, obj: schema.ModelT) -> None:
        self._obj = obj
        self._index: dict[int, int] = {}

    def __getitem__(self, code: int) -> int:
        if code not in self._index:
            self._index[code] = opcode_index(self._obj, code)
        return self._index[code]


FILTER_READERS = {schema.BuiltinOperator.CONV_2D, schema.BuiltinOperator.DEPTHWISE_CONV_2D,
                  schema.BuiltinOperator.FULLY_CONNECTED}
"""Operators whose input 1 (the filter) reads a kernel through ``DEQUANTIZE``; every other reader gets
``CAST`` + ``MUL`` (the same float32 product). tflite-runtime 2.14's XNNPACK delegate takes a ``DEQUANTIZE`` of
a static int8 tensor into the delegate as a static weight and never writes its output tensor, so an operator
outside the delegate that reads it (an IF handing the kernel to a backward branch, a TRANSPOSE) read garbage:
the Fisher potentials of the layers below went wrong (``docs/int8.md``)."""


def _tensor(subgraph: schema.SubGraphT, shape, dtype: int, buffer: int, name: str) -> int:
    tensor = schema.TensorT()
    tensor.shape = np.array(shape, np.int32)
    tensor.type = dtype
    tensor.buffer = buffer
    tensor.name = name
    subgraph.tensors.append(tensor)
    return len(subgraph.tensors) - 1


def _rewrite_readers(obj: schema.ModelT, subgraph: schema.SubGraphT, targets: dict, codes: _Codes,
                     int8_buffer, scale_buffer) -> set[int]:
    """Makes every reader of a target tensor read a value computed from its int8 kernel (``FILTER_READERS``):
    one ``DEQUANTIZE`` output for the filter readers and one ``CAST`` * scales output for the others, each
    produced right before its first reader. Returns the float buffers detached."""
    made: dict[tuple[int, bool], int] = {}
    operators = []
    for op in subgraph.operators:
        inputs = [int(i) for i in op.inputs]
        code = obj.operatorCodes[op.opcodeIndex]
        is_filter_reader = max(code.builtinCode, code.deprecatedBuiltinCode) in FILTER_READERS
        for position, t in enumerate(inputs):
            if t not in targets:
                continue
            as_filter = is_filter_reader and position == 1
            if (t, as_filter) not in made:
                target = subgraph.tensors[t]
                _, q, axis, scales = targets[t]
                name = target.name.decode() if isinstance(target.name, bytes) else str(target.name)
                source = _tensor(subgraph, q.shape, schema.TensorType.INT8, int8_buffer(target.buffer, q),
                                 f"{name}/int8")
                out = _tensor(subgraph, target.shape, schema.TensorType.FLOAT32, 0,
                              f"{name}/{'dequantized' if as_filter else 'scaled'}")
                if as_filter:
                    params = schema.QuantizationParametersT()
                    params.scale = scales.astype(np.float32)
                    params.zeroPoint = np.zeros(len(scales), np.int64)
                    params.quantizedDimension = axis
                    subgraph.tensors[source].quantization = params
                    operators.append(operator(codes[schema.BuiltinOperator.DEQUANTIZE], [source], [out]))
                else:
                    shape = [1] * q.ndim
                    shape[axis] = -1
                    broadcast = scales.astype(np.float32).reshape(shape)
                    cast = _tensor(subgraph, q.shape, schema.TensorType.FLOAT32, 0, f"{name}/cast")
                    scale = _tensor(subgraph, broadcast.shape, schema.TensorType.FLOAT32,
                                    scale_buffer(target.buffer, broadcast), f"{name}/scales")
                    operators.append(operator(codes[schema.BuiltinOperator.CAST], [source], [cast]))
                    operators.append(operator(codes[schema.BuiltinOperator.MUL], [cast, scale], [out]))
                made[(t, as_filter)] = out
            inputs[position] = made[(t, as_filter)]
        op.inputs = np.array(inputs, np.int32)
        operators.append(op)
    subgraph.operators = operators
    detached = {subgraph.tensors[t].buffer for t in targets}
    for t in targets:
        subgraph.tensors[t].buffer = 0
    return detached
