"""Tests of ``tflite_train.data``."""
