"""Tests of ``tflite_train.contract``: CONTRACT.md and Contract.java generated from it, its spelling, strict JSON."""
