"""Differentiable op families in TFLite builtin ops: forward and backward, one module per family."""

from converters.ops import activations, concat, conv, dispatch, elementwise, pooling, shape_ops

__all__ = ["activations", "concat", "conv", "dispatch", "elementwise", "pooling", "shape_ops"]
