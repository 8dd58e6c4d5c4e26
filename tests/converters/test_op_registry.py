"""The op registry (``converters.ops.registry``): every IR kind has forward and gradient; the reader,
dispatcher and IR take their kinds from it; the passes and the layer table ask its predicates; a layer it does
not map runs frozen and is refused in the gradient region with the one-line message; the documented list of
what trains (docs/bring-your-own-model.md, linked from the README) is the registry's."""

from __future__ import annotations

import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from tflite_train.converters.graph import DIFFERENTIABLE_OPS, WEIGHTED_OPS
from tflite_train.converters.graph.ir import Node
from tflite_train.converters.graph.keras_reader import read_keras
from tflite_train.converters.ops import dispatch, registry
from tflite_train.converters.ops.spec import OpKind, WeightedKind
from tflite_train.sparse.cost_model import layer_cost
from tflite_train.sparse.layer_table import ROLES

from tests.converters.byo_models import convnext_cnn, dense_cnn, grouped_cnn, separable_cnn
from tests.converters.test_graph import _prepare

OP_LIST_DOCUMENT = pathlib.Path(__file__).resolve().parents[2] / "docs" / "bring-your-own-model.md"
"""Where the user documentation lists what trains (between ``registry.README_BEGIN`` and ``README_END``)."""


def test_every_kind_has_forward_and_gradient():
    assert set(registry.KINDS) == set(DIFFERENTIABLE_OPS) and set(registry.WEIGHTED_KINDS) == set(WEIGHTED_OPS)
    for name, spec in registry.KINDS.items():
        assert spec.name == name and callable(spec.forward), name
        if isinstance(spec, WeightedKind):
            assert callable(spec.input_grad) and callable(spec.weight_grad) and callable(spec.geometry), name
            assert callable(spec.filter_layout) and callable(spec.kernel_mask) and spec.out_axis in (1, 2, 3), name
            assert spec.role in ROLES and spec.channelwise == (spec.out_axis == 2), name
        else:
            assert isinstance(spec, OpKind) and callable(spec.backward), name
    assert not set(registry.STRUCTURAL_KINDS) & set(registry.KINDS)


def test_every_layer_rule_maps_to_registered_kinds_and_each_kind_is_reached():
    reached = {k for rule in [*registry.LAYER_RULES, *registry.OPERATIONS.values()] for k in rule.kinds}
    assert reached == set(registry.KINDS)  # no kind without a Keras layer or op that produces it
    assert set(registry.trainable_layers()) == {"Conv2D", "DepthwiseConv2D", "SeparableConv2D", "Dense"}
    assert {"Concatenate", "BatchNormalization", "Add", "ReLU"} <= set(registry.differentiable_layers())
    assert not set(registry.trainable_layers()) & set(registry.differentiable_layers())


def test_what_the_passes_ask_is_declared_by_the_kinds_and_rules():
    """The passes' and the layer table's questions are answered by the kinds' and rules' attributes."""
    def kinds(flag: str) -> set[str]:
        return {name for name, spec in registry.KINDS.items() if getattr(spec, flag, False)}

    assert kinds("inference_identity") == {"identity"} and kinds("fusable_activation") == {"activation"}
    assert kinds("channel_scale") == {"affine"} and kinds("residual_join") == {"add"}
    assert kinds("head") == {"dense", "activation", "identity", "affine"} and kinds("channelwise") == {"depthwise"}
    assert {name: registry.weighted_kind(name).role for name in registry.WEIGHTED_KINDS} == {
        "conv2d": "conv", "depthwise": "depthwise", "dense": "dense", "grouped_conv2d": "conv"}
    assert {r.keras_class: r.embedding for r in registry.LAYER_RULES if r.embedding} == {
        "GlobalAveragePooling2D": "global average pooling", "GlobalMaxPooling2D": "global max pooling",
        "Flatten": "Flatten"}
    assert [r.keras_class for r in registry.LAYER_RULES if r.folds] == ["BatchNormalization"]


def test_node_predicates_read_the_kind_and_the_rule_that_made_the_node():
    def node(op: str, keras_class: str = "") -> Node:
        return Node("n", op, ("image",), (4,), keras_class=keras_class)

    assert registry.folds_into_weighted(node("affine", "BatchNormalization"))
    assert not registry.folds_into_weighted(node("affine", "LayerScale"))  # a per-channel scale that stays
    assert not registry.folds_into_weighted(node("opaque", "BatchNormalization"))  # a variant read frozen
    assert registry.embedding_rule(node("reshape", "Flatten")) == "Flatten"
    assert registry.embedding_rule(node("reshape", "Reshape")) == ""
    assert registry.embedding_rule(node("global_max_pool", "GlobalMaxPooling2D")) == "global max pooling"
    assert registry.is_opaque(node("opaque", "GroupNormalization")) and not registry.is_opaque(node("add", "Add"))
    assert registry.is_inference_identity(node("identity", "Dropout"))
    assert not registry.is_inference_identity(node("opaque", "Dropout"))  # structural kinds have no attributes
    assert registry.is_head_part(node("dense", "Dense")) and not registry.is_head_part(node("opaque"))
    assert registry.embedding_reduction((1, 1, 8)) == ("reshape", "Flatten", {})
    assert registry.embedding_reduction((4, 4, 8)) == ("global_pool", "GlobalAveragePooling2D", {"keepdims": False})
    dilated = keras.layers.Conv2D(4, 3, dilation_rate=2, groups=2)
    assert registry.frozen_settings(dilated) == ["groups=2", "dilation_rate=(2, 2)"]
    assert registry.frozen_settings(keras.layers.Dense(3)) == []


@pytest.mark.parametrize("build", [separable_cnn, dense_cnn, grouped_cnn, convnext_cnn])
def test_weighted_geometry_prices_each_layer_as_its_kernel(build):
    """Each weighted kind's geometry gives the layer-table row whose forward MACs (the cost model's
    H' W' k^2 (C_in / g) C_out) are one MAC per kernel weight per output position."""
    prepared = _prepare(build(), candidates="all")
    graph, table = prepared.graph, prepared.table
    by_name = graph.by_name
    for layer in table:
        node = by_name[layer.name]
        positions = int(np.prod(node.shape[:-1]))
        assert layer_cost(layer).forward_macs == positions * node.weights[0].size, layer.name


@pytest.mark.parametrize("build", [dense_cnn, convnext_cnn])
def test_dispatch_runs_every_non_weighted_kind_of_a_model_through_the_registry(build):
    """Forward and backward of each non-weighted node of the DenseNet- and ConvNeXt-style models via the
    registry: the backward is the adjoint of the forward, <g_y, J v> = <J^T g_y, v> (TF autodiff)."""
    rng = np.random.default_rng(0)
    graph = _prepare(build(), candidates="all").graph
    by_name = graph.by_name
    for node in graph.nodes[1:]:
        if node.is_weighted:
            continue
        shapes = [by_name[i].shape for i in node.inputs]
        xs = [tf.constant(rng.normal(size=(2, *s)).astype(np.float32)) for s in shapes]
        with tf.GradientTape() as tape:
            tape.watch(xs)
            z, y = dispatch.forward(node, xs)
        g_y = tf.constant(rng.normal(size=y.shape).astype(np.float32))
        ref = tape.gradient(y, xs, output_gradients=g_y)
        got = dispatch.backward(node, [x for x in xs], z, y, g_y, shapes)
        for r, g in zip(ref, got):
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-6, err_msg=node.name)


def test_unknown_layer_runs_frozen_and_is_refused_with_the_one_line_message():
    inputs = keras.Input((8, 8, 4))
    x = keras.layers.GroupNormalization(groups=2, name="ln")(inputs)
    nodes, _ = read_keras(keras.Model(inputs, x), (8, 8, 4))
    node = nodes[-1]
    assert registry.layer_rules("GroupNormalization") == ()
    assert node.op == "opaque" and not node.differentiable
    with pytest.raises(ValueError) as err:
        dispatch.backward(node, [], None, None, None, [(8, 8, 4)])
    assert str(err.value) == "layer 'ln' (GroupNormalization) has no on-device gradient"
    with pytest.raises(ValueError, match="no forward/gradient in the op registry"):
        registry.kind("opaque")
    grouped = Node("g", "opaque", ("image",), (8, 8, 4), keras_class="Conv2D with groups=4")
    assert registry.gradient_refusal(grouped) == "layer 'g' (Conv2D with groups=4) has no on-device gradient"


def test_the_documents_list_what_is_trainable_from_the_registry():
    text = OP_LIST_DOCUMENT.read_text()
    name = OP_LIST_DOCUMENT.relative_to(OP_LIST_DOCUMENT.parents[1])
    begin, end = text.find(registry.README_BEGIN), text.find(registry.README_END)
    assert 0 <= begin < end, f"{name} lacks the op-registry section ({registry.README_BEGIN})"
    assert text[begin:end + len(registry.README_END)] == registry.readme_section(), (
        f"{name}'s op-registry section is stale: paste converters.ops.registry.readme_section()")
