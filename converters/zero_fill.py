"""Stores no all-zero initial values: they are written at run time by a FILL op instead.

The converter stores every variable's initial value as a constant buffer (the initialiser subgraph
and ``reset_state`` share it). The weights must be stored once; the optimizer slots, the channel
masks and the prototypes start at zero, and storing those zeros would make the file ~1 + (number of
slots) times the trainable weight bytes (issue 14's bound: file <= 1.25 x float32 parameter bytes +
metadata + self-test). This pass rewrites the flatbuffer so that each all-zero constant written by an
``ASSIGN_VARIABLE`` becomes the output of ``FILL(shape, 0)``, computed when the initialiser or
``reset_state`` runs; the values (+0.0 / 0 bit patterns) and hence the checkpoint semantics are
unchanged.
"""

from __future__ import annotations

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema

from tflite_train.converters.flatbuffer_rewrite import (constant_tensor, free_unread_buffers, opcode_index, operator,
                                                        produce_before_first_use)

MIN_ELEMENTS = 16
"""All-zero constants with fewer elements stay stored (a FILL and its two operands cost more)."""
_DTYPES = {schema.TensorType.FLOAT32: np.float32, schema.TensorType.INT32: np.int32}

__all__ = ["MIN_ELEMENTS", "fill_zero_initial_values_in"]


def _is_zeroconstant_tensor(model: schema.ModelT, tensor: schema.TensorT) -> bool:
    if tensor.type not in _DTYPES or tensor.buffer == 0 or tensor.shape is None or len(tensor.shape) == 0:
        return False
    data = model.buffers[tensor.buffer].data
    return (data is not None and int(np.prod(tensor.shape)) >= MIN_ELEMENTS
            and len(data) == 4 * int(np.prod(tensor.shape)) and not np.any(data))


def fill_zero_initial_values_in(obj: schema.ModelT) -> bool:
    """Makes every all-zero constant (>= ``MIN_ELEMENTS`` float32/int32 elements) that an
    ``ASSIGN_VARIABLE`` writes the output of a ``FILL`` placed before its first use, and empties its
    buffer when no other tensor reads it. Returns True when the model changed."""
    codes = obj.operatorCodes
    assign = [i for i, c in enumerate(codes) if max(c.builtinCode, c.deprecatedBuiltinCode)
              == schema.BuiltinOperator.ASSIGN_VARIABLE]
    if not assign:
        return False
    fill = None
    freed: set[int] = set()
    for subgraph in obj.subgraphs:
        targets = {int(op.inputs[1]) for op in subgraph.operators or [] if op.opcodeIndex in assign
                   and _is_zeroconstant_tensor(obj, subgraph.tensors[int(op.inputs[1])])}
        if not targets:
            continue
        fill = opcode_index(obj, schema.BuiltinOperator.FILL) if fill is None else fill

        def zero_fill(t: int, subgraph: schema.SubGraphT = subgraph) -> schema.OperatorT:
            tensor = subgraph.tensors[t]
            name = tensor.name.decode() if isinstance(tensor.name, bytes) else str(tensor.name)
            dims = constant_tensor(obj, subgraph, np.array(tensor.shape, np.int32), f"{name}/zero_fill_dims")
            zero = constant_tensor(obj, subgraph, np.zeros([], _DTYPES[tensor.type]), f"{name}/zero_fill_value")
            return operator(fill, [dims, zero], [t])

        freed |= produce_before_first_use(subgraph, {t: zero_fill for t in targets})
    free_unread_buffers(obj, freed)
    return bool(freed)
