"""Tests of the exporter (``tflite_train.converters``, the top-level ``converters/`` folder)."""
