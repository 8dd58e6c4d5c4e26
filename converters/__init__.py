"""Offline converters (TensorFlow side): Keras backbone -> trainable, builtins-only ``.tflite``."""

from converters.build_module import folded_backbone, module_from_backbone
from converters.export import ExportResult, build_metadata, convert, export_model, write_export
from converters.export_config import ExportConfig
from converters.flatbuffer_metadata import add_metadata
from converters.trainable_module import TrainableModule, candidate_indices, same_padding, state_names

__all__ = [
    "ExportConfig",
    "ExportResult",
    "TrainableModule",
    "add_metadata",
    "build_metadata",
    "candidate_indices",
    "convert",
    "export_model",
    "folded_backbone",
    "module_from_backbone",
    "same_padding",
    "state_names",
    "write_export",
]
