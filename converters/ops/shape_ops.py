"""Shape ops: ZeroPadding2D, Flatten/Reshape, Dropout and the random data-augmentation layers (inference
identities); the family's registry entry (``FAMILY``).

* zero_pad:  y = pad(x, ((t, b), (l, r))),  g_x = g_y[:, t:t + H, l:l + W, :]
* reshape:   y = reshape(x, shape),         g_x = reshape(g_y, shape(x))
* identity:  y = x,                         g_x = g_y
"""

from __future__ import annotations

import math

import tensorflow as tf

from tflite_train.converters.ops.spec import GraphReadError, LayerRule, OpFamily, OpKind, ReadContext

IDENTITY_LAYERS = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "GaussianDropout", "GaussianNoise",
                   "AlphaDropout", "ActivityRegularization", "Identity")
"""Keras layers that are identities at inference."""
AUGMENTATION_LAYERS = ("RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation", "RandomContrast",
                       "RandomBrightness", "RandomGrayscale", "RandomHue", "RandomSaturation", "RandomSharpness",
                       "RandomColorJitter", "RandomErasing", "RandomGaussianBlur", "RandomPosterization",
                       "RandomShear", "RandomPerspective", "RandomInvert", "RandomColorDegeneration",
                       "RandomElasticTransform")
"""Keras' random data-augmentation layers: they change images in training only, identities at inference
(checked against Keras by ``tests/converters/ops/test_shape_ops.py``). ``RandomCrop`` is one only when its
input already has the crop's size (at inference it resizes to it)."""


def zero_pad_forward(x, pads):
    """Zero padding of H and W by ((top, bottom), (left, right))."""
    (t, b), (lft, r) = pads
    return tf.pad(x, [[0, 0], [t, b], [lft, r], [0, 0]])


def zero_pad_backward(g_y, pads, in_shape):
    """The crop of ``g_y`` back to the input."""
    (t, _), (lft, _) = pads
    return g_y[:, t:t + in_shape[0], lft:lft + in_shape[1], :]


def reshape_forward(x, shape):
    """Reshape to batch + ``shape``."""
    return tf.reshape(x, [-1, *shape])


def reshape_backward(g_y, in_shape):
    """Reshape back to batch + ``in_shape``."""
    return tf.reshape(g_y, [-1, *in_shape])


# ------------------------------------------------------------------ the family's registry entry
def read_zero_pad(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """ZeroPadding2D of an [H, W, C] map -> zero_pad."""
    shape = shapes[0]
    if len(shape) != 3:
        return None
    (t, b), (lft, r) = layer.padding
    return ctx.add(layer.name, "zero_pad", inputs, (shape[0] + t + b, shape[1] + lft + r, shape[2]), "ZeroPadding2D",
                   attrs={"pads": ((int(t), int(b)), (int(lft), int(r)))})


def read_flatten(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Flatten -> reshape to one axis."""
    return ctx.add(layer.name, "reshape", inputs, (math.prod(shapes[0]),), "Flatten")


def read_reshape(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Reshape (one -1 allowed) -> reshape.

    Raises:
      GraphReadError: the target does not hold the input's elements.
    """
    shape = shapes[0]
    target = list(layer.target_shape)
    if -1 in target:
        known = math.prod(v for v in target if v != -1)
        target[target.index(-1)] = math.prod(shape) // known
    if math.prod(target) != math.prod(shape):
        raise GraphReadError(f"layer {layer.name!r} (Reshape) cannot reshape {shape} to {tuple(layer.target_shape)}")
    return ctx.add(layer.name, "reshape", inputs, tuple(target), "Reshape")


def read_identity(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """Dropout and other inference identities -> identity (dropped by the passes)."""
    return ctx.add(layer.name, "identity", inputs, shapes[0], type(layer).__name__)


def read_random_crop(ctx: ReadContext, layer, inputs: list[str], shapes) -> str | None:
    """RandomCrop of an input that already has the crop's size -> identity (else it resizes: run frozen)."""
    shape = shapes[0]
    if len(shape) != 3 or (shape[0], shape[1]) != (layer.height, layer.width):
        return None
    return read_identity(ctx, layer, inputs, shapes)


FAMILY = OpFamily(
    __name__,
    kinds=(
        OpKind("zero_pad", lambda node, xs: (None, zero_pad_forward(xs[0], node.attrs["pads"])),
               lambda node, xs, z, y, g_y, in_shapes: [zero_pad_backward(g_y, node.attrs["pads"], in_shapes[0])]),
        OpKind("reshape", lambda node, xs: (None, reshape_forward(xs[0], node.shape)),
               lambda node, xs, z, y, g_y, in_shapes: [reshape_backward(g_y, in_shapes[0])]),
        OpKind("identity", lambda node, xs: (None, xs[0]), lambda node, xs, z, y, g_y, in_shapes: [g_y],
               inference_identity=True, head=True),
    ),
    layers=(
        LayerRule("ZeroPadding2D", read_zero_pad, ("zero_pad",)),
        LayerRule("Flatten", read_flatten, ("reshape",), embedding="Flatten"),
        LayerRule("Reshape", read_reshape, ("reshape",)),
        *(LayerRule(cls, read_identity, ("identity",), "an identity at inference") for cls in IDENTITY_LAYERS),
        *(LayerRule(cls, read_identity, ("identity",), "data augmentation: an identity at inference")
          for cls in AUGMENTATION_LAYERS),
        LayerRule("RandomCrop", read_random_crop, ("identity",), "an identity at inference when its input has the "
                  "crop's size"),
    ),
)
