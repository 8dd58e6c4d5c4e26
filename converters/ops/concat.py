"""Concatenate: forward and builtin-op backward; the family's registry entry (``FAMILY``: Concatenate ->
concat).

y = concat(x_1, ..., x_n) along a non-batch axis a (sizes c_1, ..., c_n on that axis). Each input
is a slice of the output, so the backward is the split of the upstream gradient at the same
offsets: g_{x_k} = g_y[..., o_k : o_k + c_k, ...] with o_k = c_1 + ... + c_{k-1} (one SPLIT_V).
"""

from __future__ import annotations

import tensorflow as tf

from tflite_train.converters.ops.spec import LayerRule, OpFamily, OpKind, ReadContext


def concat_forward(inputs, axis: int):
    """y = concat(inputs) along IR axis ``axis`` (batch excluded; one CONCATENATION)."""
    return tf.concat(list(inputs), axis=axis + 1)


def concat_backward(g_y, in_shapes: list[tuple[int, ...]], axis: int) -> list:
    """One gradient per input: ``g_y`` split along ``axis`` into the inputs' sizes."""
    return list(tf.split(g_y, [int(s[axis]) for s in in_shapes], axis=axis + 1))


# ------------------------------------------------------------------ the family's registry entry
def read_concatenate(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Concatenate of two or more tensors of one rank, equal sizes off the axis, along a non-batch axis."""
    rank = len(shapes[0])
    axis = int(layer.axis)
    axis = axis + rank if axis < 0 else axis - 1  # IR shapes have no batch axis
    if len(inputs) < 2 or not 0 <= axis < rank or any(len(s) != rank for s in shapes):
        return None
    rest = [tuple(s[:axis]) + tuple(s[axis + 1:]) for s in shapes]
    if any(r != rest[0] for r in rest):
        return None
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return ctx.add(layer.name, "concat", inputs, out, "Concatenate", attrs={"axis": axis})


FAMILY = OpFamily(
    __name__,
    kinds=(OpKind("concat", lambda node, xs: (None, concat_forward(xs, node.attrs["axis"])),
                  lambda node, xs, z, y, g_y, in_shapes: concat_backward(g_y, in_shapes, node.attrs["axis"])),),
    layers=(LayerRule("Concatenate", read_concatenate, ("concat",), "any non-batch axis"),),
)
