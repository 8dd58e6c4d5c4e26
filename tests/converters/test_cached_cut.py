"""Where a step can start from a cached activation (``converters.cached_cut``): suffix, frontier, MACs.

Goldens by hand from Keras' MobileNetV2 (inverted residual blocks: the block input feeds the expand conv
and the residual add) and the plain CNN (a chain).
"""

from __future__ import annotations

from tflite_train.converters import ExportConfig, prepare_model
from tools.example_models import mobilenet_v2, plain_cnn
from tflite_train.converters.cached_cut import cache_cut, suffix_nodes
from tflite_train.sparse.cost_model import layer_cost


def _prepare(model, **fields):
    return prepare_model(model, ExportConfig(backbone="keras", input_size=None, **fields))


def test_block_input_is_the_frontier_of_a_block_cut():
    prepared = _prepare(mobilenet_v2(), candidates="blocks:2")
    graph, table = prepared.graph, prepared.table
    cut = table.index_of("block_16_expand")
    found = cache_cut(graph, table, cut)
    assert found is not None and found.layer == "block_16_expand"
    # block 16 has no residual (channels change); its input is block 15's residual sum
    assert found.frontier in {n.name for n in graph.nodes if n.op == "add"}
    assert found.shape == tuple(graph.by_name[found.frontier].shape)
    assert found.shape == (*table.layers[cut].in_hw, table.layers[cut].in_channels)
    above = [layer for layer in table.layers if layer.index >= cut]
    assert found.suffix_forward_macs == sum(layer_cost(layer).forward_macs for layer in above)
    assert graph.output in found.suffix and found.frontier not in found.suffix


def test_cut_inside_a_residual_block_has_two_frontier_tensors():
    prepared = _prepare(mobilenet_v2(), candidates="blocks:2")
    graph, table = prepared.graph, prepared.table
    # block 15 is residual: its depthwise reads the expand output while the add reads the block input
    cut = table.index_of("block_15_depthwise")
    assert cache_cut(graph, table, cut) is None
    suffix = suffix_nodes(graph, table, cut)
    assert "block_15_expand" not in suffix and "block_15_depthwise" in suffix


def test_chain_cut_frontier_is_the_previous_node():
    prepared = _prepare(plain_cnn(), candidates="all", feature_layer="features")
    graph, table = prepared.graph, prepared.table
    for cut in range(1, len(table)):
        found = cache_cut(graph, table, cut)
        node = graph.by_name[table.layers[cut].name]
        assert found is not None and found.frontier == node.inputs[0]
        assert found.suffix == frozenset(n.name for n in graph.nodes[graph.position()[node.name]:])
    # the stem reads the image itself: nothing to cache
    assert graph.by_name[table.layers[0].name].inputs == (graph.nodes[0].name,)
    assert cache_cut(graph, table, 0) is None
