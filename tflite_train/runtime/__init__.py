"""On-device runtime helpers (numpy + a TFLite interpreter; never TensorFlow)."""

from tflite_train.runtime.interpreter import TrainableModel, load_interpreter_class
from tflite_train.runtime.metadata import OperatorCode, read_metadata, read_metadata_buffers, read_operator_codes

__all__ = [
    "OperatorCode",
    "TrainableModel",
    "load_interpreter_class",
    "read_metadata",
    "read_metadata_buffers",
    "read_operator_codes",
]
