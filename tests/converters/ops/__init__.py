"""Parity tests of the op families (``tflite_train.converters.ops``)."""
