"""Tests of ``tflite_train.runtime``, the on-device half (TF-free; ``pi``)."""
