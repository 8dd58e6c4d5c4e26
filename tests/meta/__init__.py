"""Tests of ``tflite_train.meta``."""
