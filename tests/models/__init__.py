"""Tests of ``tflite_train.models``."""
