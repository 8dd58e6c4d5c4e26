"""The op registry (``converters.ops.registry``): every IR kind has forward, gradient and cost; the reader,
dispatcher and IR take their kinds from it; a layer it does not map runs frozen and is refused in the
gradient region with the one-line message; the documented list of what trains (docs/bring-your-own-model.md,
linked from the README) is the registry's."""

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

from byo_models import convnext_cnn, dense_cnn, grouped_cnn, separable_cnn
from test_graph import _prepare

OP_LIST_DOCUMENT = pathlib.Path(__file__).resolve().parents[2] / "docs" / "bring-your-own-model.md"
"""Where the user documentation lists what trains (between ``registry.README_BEGIN`` and ``README_END``)."""


def test_every_kind_has_forward_gradient_and_cost():
    assert set(registry.KINDS) == set(DIFFERENTIABLE_OPS) and set(registry.WEIGHTED_KINDS) == set(WEIGHTED_OPS)
    for name, spec in registry.KINDS.items():
        assert spec.name == name and callable(spec.forward) and callable(spec.cost), name
        if isinstance(spec, WeightedKind):
            assert callable(spec.input_grad) and callable(spec.weight_grad) and callable(spec.geometry), name
            assert callable(spec.filter_layout) and callable(spec.kernel_mask) and spec.out_axis in (1, 2, 3), name
        else:
            assert isinstance(spec, OpKind) and callable(spec.backward), name
    assert not set(registry.STRUCTURAL_KINDS) & set(registry.KINDS)


def test_every_layer_rule_maps_to_registered_kinds_and_each_kind_is_reached():
    reached = {k for rule in [*registry.LAYER_RULES, *registry.OPERATIONS.values()] for k in rule.kinds}
    assert reached == set(registry.KINDS)  # no kind without a Keras layer or op that produces it
    assert set(registry.trainable_layers()) == {"Conv2D", "DepthwiseConv2D", "SeparableConv2D", "Dense"}
    assert {"Concatenate", "BatchNormalization", "Add", "ReLU"} <= set(registry.differentiable_layers())
    assert not set(registry.trainable_layers()) & set(registry.differentiable_layers())


@pytest.mark.parametrize("build", [separable_cnn, dense_cnn, grouped_cnn, convnext_cnn])
def test_weighted_cost_is_the_cost_models(build):
    """Each weighted kind's declared cost equals the cost model's forward MACs of its layer-table row."""
    prepared = _prepare(build(), candidates="all")
    graph, table = prepared.graph, prepared.table
    by_name = graph.by_name
    for layer in table:
        node = by_name[layer.name]
        in_shapes = [by_name[i].shape for i in node.inputs]
        assert registry.kind(node.op).cost(node, in_shapes) == layer_cost(layer).forward_macs, layer.name
    for node in graph.nodes[1:]:
        cost = registry.kind(node.op).cost(node, [by_name[i].shape for i in node.inputs])
        assert isinstance(cost, int) and cost >= 0, node.name


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
