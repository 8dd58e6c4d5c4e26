"""Tests of ``tflite_train.cli``: the commands as a user runs them (TF-free; ``pi``)."""
