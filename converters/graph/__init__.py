"""The exporter's graph IR of a Keras CNN: reading, preparation passes, layer table, gradient region."""

from tflite_train.converters.graph.ir import ACTIVATIONS, DIFFERENTIABLE_OPS, WEIGHTED_OPS, FeatureLayer, Graph, InputSpec, Node
from tflite_train.converters.graph.keras_reader import GraphReadError, read_keras
from tflite_train.converters.graph.layer_table import graph_layer_table
from tflite_train.converters.graph.passes import EmbeddingError, prepare_graph
from tflite_train.converters.graph.region import RegionError, check_region, deepest_cut, gradient_region, parse_candidates

__all__ = [
    "ACTIVATIONS",
    "DIFFERENTIABLE_OPS",
    "WEIGHTED_OPS",
    "EmbeddingError",
    "FeatureLayer",
    "Graph",
    "GraphReadError",
    "InputSpec",
    "Node",
    "RegionError",
    "check_region",
    "deepest_cut",
    "gradient_region",
    "graph_layer_table",
    "parse_candidates",
    "prepare_graph",
    "read_keras",
]
