"""Stores each candidate kernel once: a variable's initial value is derived from the forward's constant.

A candidate layer's forward reads its exported weights as constants until the layer is first changed
(copy-on-write, ``converters.copy_on_write``), stored in the forward op's filter layout
(``converters.ops.dispatch.forward_filter_layout``): CONV_2D [C_out, kh, kw, C_in], FULLY_CONNECTED
[D_out, D_in]. The variable holds the Keras layout ([kh, kw, C_in, C_out], [D_in, D_out]) and its
initial value (written by the initialiser subgraph and ``reset_state``) is another constant with the
same numbers permuted, which the converter's byte-wise buffer deduplication cannot merge (a depthwise
kernel and every bias have identical bytes in both layouts and are merged already). This pass rewrites
the flatbuffer so that each such initial value becomes the output of ``TRANSPOSE(forward constant,
inverse permutation)``, computed when the initialiser or ``reset_state`` runs, and empties its buffer
when no other tensor reads it: the values (bit patterns) are unchanged, the file holds the weights once.

    W_keras = transpose(W_forward, P^-1),  W_forward = transpose(W_keras, P),
    P = [3, 0, 1, 2] (rank 4, HWIO -> OHWI), [1, 0] (rank 2).
"""

from __future__ import annotations

import hashlib

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema

from tflite_train.converters.flatbuffer_rewrite import (constant_tensor, free_unread_buffers, opcode_index, operator,
                                                        produce_before_first_use)
from tflite_train.converters.zero_fill import MIN_ELEMENTS

FORWARD_PERMUTATIONS = {4: (3, 0, 1, 2), 2: (1, 0)}
"""Permutation from a variable's layout to its forward op's filter layout, by rank."""

__all__ = ["FORWARD_PERMUTATIONS", "transpose_initial_values_in"]


def _float_value(model: schema.ModelT, tensor: schema.TensorT) -> np.ndarray | None:
    """The float32 constant held by ``tensor`` (None for a non-constant, other types or small ones)."""
    if tensor.type != schema.TensorType.FLOAT32 or tensor.buffer == 0 or tensor.shape is None:
        return None
    data = model.buffers[tensor.buffer].data
    size = int(np.prod(tensor.shape)) if len(tensor.shape) else 1
    if data is None or size < MIN_ELEMENTS or len(data) != 4 * size:
        return None
    return np.frombuffer(np.asarray(data, np.uint8).tobytes(), np.float32).reshape(tensor.shape)


def _digest(data) -> bytes:
    return hashlib.sha256(np.asarray(data, np.uint8).tobytes()).digest()


def transpose_initial_values_in(obj: schema.ModelT) -> bool:
    """Makes every float32 constant written by an ``ASSIGN_VARIABLE`` whose permutation by
    ``FORWARD_PERMUTATIONS`` is stored in another buffer the output of a ``TRANSPOSE`` of that buffer,
    placed before its first use; empties its buffer when no tensor reads it any more. Returns True
    when the model changed."""
    codes = obj.operatorCodes
    assign = {i for i, c in enumerate(codes)
              if max(c.builtinCode, c.deprecatedBuiltinCode) == schema.BuiltinOperator.ASSIGN_VARIABLE}
    if not assign:
        return False
    by_digest = {}
    for index, buffer in enumerate(obj.buffers):
        if index and buffer.data is not None and len(buffer.data) >= 4 * MIN_ELEMENTS:
            by_digest.setdefault(_digest(buffer.data), index)
    transpose = None
    freed: set[int] = set()
    for subgraph in obj.subgraphs:
        sources: dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]] = {}
        for op in subgraph.operators or []:
            if op.opcodeIndex not in assign:
                continue
            t = int(op.inputs[1])
            value = _float_value(obj, subgraph.tensors[t])
            if value is None or value.ndim not in FORWARD_PERMUTATIONS or t in sources:
                continue
            perm = FORWARD_PERMUTATIONS[value.ndim]
            permuted = np.ascontiguousarray(np.transpose(value, perm))
            source = by_digest.get(_digest(np.frombuffer(permuted.tobytes(), np.uint8)))
            if source is not None and source != subgraph.tensors[t].buffer:
                sources[t] = (source, tuple(permuted.shape), perm)
        if not sources:
            continue
        transpose = opcode_index(obj, schema.BuiltinOperator.TRANSPOSE) if transpose is None else transpose

        def transposed(t: int, subgraph: schema.SubGraphT = subgraph, sources: dict = sources) -> schema.OperatorT:
            tensor = subgraph.tensors[t]
            name = tensor.name.decode() if isinstance(tensor.name, bytes) else str(tensor.name)
            source, shape, perm = sources[t]
            forward = schema.TensorT()
            forward.shape = np.array(shape, np.int32)
            forward.type = schema.TensorType.FLOAT32
            forward.buffer = source
            forward.name = f"{name}/forward_layout"
            subgraph.tensors.append(forward)
            forward_index = len(subgraph.tensors) - 1
            inverse = constant_tensor(obj, subgraph, np.argsort(perm).astype(np.int32), f"{name}/to_variable_layout")
            return operator(transpose, [forward_index, inverse], [t])

        freed |= produce_before_first_use(subgraph, {t: transposed for t in sources})
    free_unread_buffers(obj, freed)
    return bool(freed)
