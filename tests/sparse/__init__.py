"""Tests of ``tflite_train.sparse`` (TF-free; ``pi``)."""
