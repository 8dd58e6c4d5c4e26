"""Differentiable op families in TFLite builtin ops, one module per family (Keras layer rules, forward,
builtin-op backward, what the graph passes ask of each kind), gathered in one table by ``registry`` and looked
up by ``dispatch``."""

from tflite_train.converters.ops import (activations, concat, conv, dispatch, elementwise, grouped_conv, normalization,
                                         pooling, registry, shape_ops, spec)

__all__ = ["activations", "concat", "conv", "dispatch", "elementwise", "grouped_conv", "normalization", "pooling",
           "registry", "shape_ops", "spec"]
