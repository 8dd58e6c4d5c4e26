"""Differentiable op families in TFLite builtin ops: forward and backward, one module per family."""

from converters.ops import activations, conv, dispatch, elementwise, pooling, shape_ops

__all__ = ["activations", "conv", "dispatch", "elementwise", "pooling", "shape_ops"]
