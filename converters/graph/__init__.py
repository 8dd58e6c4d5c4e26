"""The exporter's graph IR of a Keras CNN: reading, preparation passes, layer table, gradient region."""

from converters.graph.ir import ACTIVATIONS, DIFFERENTIABLE_OPS, WEIGHTED_OPS, FeatureLayer, Graph, InputSpec, Node
from converters.graph.keras_reader import GraphReadError, read_keras
from converters.graph.layer_table import graph_layer_table
from converters.graph.passes import EmbeddingError, prepare_graph
from converters.graph.region import RegionError, check_region, deepest_cut, gradient_region, parse_candidates

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
