"""Offline converters (TensorFlow side): any supported Keras CNN -> trainable, builtins-only ``.tflite``."""

from tflite_train.converters.build_module import (
    PreparedModel,
    backbone_model,
    folded_backbone,
    module_from_config,
    module_from_keras,
    prepare_model,
)
from tflite_train.converters.export import (ExportResult, build_metadata, convert, ensure_export, export_is_current,
                                            export_keras, export_model, write_export)
from tflite_train.converters.export_config import ExportConfig
from tflite_train.converters.export_stamp import code_stamp, stamp_path
from tflite_train.converters.flatbuffer_metadata import add_metadata
from tflite_train.converters.graph import Graph, GraphReadError, EmbeddingError, RegionError, graph_layer_table, read_keras
from tflite_train.converters.trainable_module import TrainableModule, state_names

__all__ = [
    "EmbeddingError",
    "ExportConfig",
    "ExportResult",
    "Graph",
    "GraphReadError",
    "PreparedModel",
    "RegionError",
    "TrainableModule",
    "add_metadata",
    "backbone_model",
    "build_metadata",
    "code_stamp",
    "convert",
    "ensure_export",
    "export_is_current",
    "export_keras",
    "export_model",
    "folded_backbone",
    "graph_layer_table",
    "module_from_config",
    "module_from_keras",
    "prepare_model",
    "read_keras",
    "stamp_path",
    "state_names",
    "write_export",
]
