"""The graph reader and passes: tables, blocks, embeddings, folding, candidates, refusals.

Goldens by hand or from the plain-data backbone configs (``build_layer_table``).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tflite_train.converters import ExportConfig, backbone_model, prepare_model
from tools.example_models import mobilenet_v2, mobilenet_v3_small, plain_cnn, rescaling_net
from tflite_train.architectures import build_layer_table
from tflite_train.converters.cut_choice import train_cuts
from tflite_train.converters.graph import RegionError, parse_candidates
from tflite_train.converters.graph.keras_reader import GraphReadError
from tflite_train.converters.trainable_module import state_names
from tflite_train.sparse.cost_model import layer_cost
from tests.converters.byo_models import dense_cnn, separable_cnn


def _prepare(model, **fields):
    return prepare_model(model, ExportConfig(backbone="keras", input_size=None, **fields))


@pytest.mark.parametrize("backbone,size", [("tiny", 33), ("mcunet", 64), ("mbv2", 32), ("proxyless", 33)])
def test_builtin_backbones_read_from_their_keras_graph(backbone, size):
    config = ExportConfig(backbone=backbone, input_size=(size, size))
    prepared = prepare_model(backbone_model(config), config)
    assert prepared.table == build_layer_table(backbone, size)  # names, blocks, roles, shapes, activations


def test_blocks_and_roles_of_keras_mobilenet_v2():
    prepared = _prepare(mobilenet_v2(), candidates="blocks:1")
    table = prepared.table
    assert (len(table), table.num_blocks) == (52, 17)  # the paper's Table 5 counts for MobileNetV2
    assert [table.layers[i].name for i in prepared.candidates] == [
        "block_16_expand", "block_16_depthwise", "block_16_project", "Conv_1"]
    assert [table.layers[i].role for i in prepared.candidates] == ["expand", "depthwise", "project", "final"]
    assert prepared.graph.by_name[prepared.graph.output].op == "global_pool"  # the classifier Dense is dropped


def test_mobilenet_v3_small_embedding_preprocessing_and_squeeze_excite():
    prepared = _prepare(mobilenet_v3_small(), candidates="blocks:1")
    graph = prepared.graph
    # GAP(keepdims) -> [1, 1, 576] reshaped; the conv head, dropout, logits and softmax are dropped
    out = graph.by_name[graph.output]
    assert out.name.endswith("_embedding") and out.op == "reshape" and out.shape == (576,)
    assert graph.by_name[out.inputs[0]].attrs == {"keepdims": True}
    spec = graph.input_spec
    assert spec.value_range == (0.0, 255.0) and spec.source == "rescaling"
    np.testing.assert_allclose(spec.mean, [127.5] * 3, rtol=1e-6)
    names = [prepared.table.layers[i].name for i in prepared.candidates]
    assert "expanded_conv_10_squeeze_excite_conv" in names and names[-1] == "conv_1"
    ops = {graph.by_name[n].op for n in graph.descendants(set(names))}
    assert {"multiply", "add_const", "scale", "activation", "add"} <= ops


def test_plain_cnn_feature_layer_and_affine_after_activation():
    default = _prepare(plain_cnn(), candidates="all")
    assert default.graph.output == "flatten"
    prepared = _prepare(plain_cnn(), candidates="all", feature_layer="features")
    graph, table = prepared.graph, prepared.table
    assert table.num_blocks == 0 and [layer.name for layer in table] == ["conv1", "conv2", "fc"]
    assert [layer.activation for layer in table] == ["leaky_relu", "relu", "leaky_relu"]
    assert graph.output == "fc"  # Dropout removed, LeakyReLU fused into the Dense
    assert graph.by_name["conv2_post_bn"].op == "affine"  # BN after an activation cannot fold
    with pytest.raises(RegionError, match="no blocks"):
        parse_candidates("blocks:1", graph, table)


def test_batchnorm_folds_into_the_conv():
    prepared = _prepare(rescaling_net(), candidates="all")
    assert not any(n.op == "affine" for n in prepared.graph.nodes)
    model = rescaling_net()
    bn = model.get_layer("stem_bn")
    scale = bn.gamma.numpy() / np.sqrt(bn.moving_variance.numpy() + bn.epsilon)
    kernel, bias = prepared.graph.by_name["stem"].weights
    np.testing.assert_allclose(kernel, model.get_layer("stem").kernel.numpy() * scale, rtol=1e-6)
    np.testing.assert_allclose(bias, bn.beta.numpy() - bn.moving_mean.numpy() * scale, rtol=1e-5, atol=1e-7)


def test_nested_and_sequential_models_are_flattened():
    inner = keras.Sequential([keras.layers.Conv2D(4, 3, padding="same", name="c1"),
                              keras.layers.BatchNormalization(name="c1_bn"), keras.layers.ReLU(name="c1_relu")],
                             name="inner")
    x = inputs = keras.Input((12, 12, 3))
    x = inner(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    outer = keras.Model(inputs, keras.layers.Dense(3, name="cls")(x))
    prepared = _prepare(outer, candidates="all")
    assert [layer.name for layer in prepared.table] == ["c1"] and prepared.table.layers[0].activation == "relu"
    seq = keras.Sequential([keras.Input((10, 10, 1)), keras.layers.Conv2D(2, 3, name="a"),
                            keras.layers.Flatten(name="f"), keras.layers.Dense(2, name="d")])
    assert [layer.name for layer in _prepare(seq, candidates="all").table] == ["a"]


def test_candidate_specs():
    prepared = _prepare(mobilenet_v2())
    graph, table = prepared.graph, prepared.table
    assert parse_candidates("layers:2", graph, table) == (50, 51)
    assert parse_candidates("from:block_16_project", graph, table) == (50, 51)
    assert parse_candidates("all", graph, table) == tuple(range(52))
    assert parse_candidates("blocks:17", graph, table) == tuple(range(52))  # the stem joins at K = num_blocks
    for bad in ("blocks:0", "blocks:18", "layers:53", "from:nope", "some"):
        with pytest.raises(RegionError, match="--candidates"):
            parse_candidates(bad, graph, table)


def _with_layer_norm():
    x = inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu", name="early")(x)
    x = keras.layers.GroupNormalization(groups=2, name="ln_3")(x)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="late")(x)
    x = keras.layers.Conv2D(8, 1, name="last")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(2)(x))


def test_unsupported_layer_in_region_names_layer_and_cut():
    with pytest.raises(RegionError) as err:
        _prepare(_with_layer_norm(), candidates="all")
    assert str(err.value) == ("layer 'ln_3' (GroupNormalization) has no on-device gradient; candidates from 'late' "
                              "upward would export (--candidates from:late)")
    prepared = _prepare(_with_layer_norm(), candidates="from:late")  # frozen part: anything TFLite converts
    assert [prepared.table.layers[i].name for i in prepared.candidates] == ["late", "last"]


def test_non_image_and_multi_input_models_are_refused():
    seq = keras.Input((10, 8))
    with pytest.raises(GraphReadError, match="rank-3 input"):
        _prepare(keras.Model(seq, keras.layers.Dense(2)(keras.layers.Flatten()(seq))))
    a, b = keras.Input((8, 8, 3)), keras.Input((8, 8, 3))
    with pytest.raises(GraphReadError, match="exactly one input"):
        _prepare(keras.Model([a, b], keras.layers.Add()([a, b])))


def test_state_names_and_train_cuts_by_hand():
    table = build_layer_table("tiny", 33)
    adam = state_names(["b03_expand", "final"], "adam")
    assert adam[:7] == ["b03_expand_kernel", "b03_expand_bias", "b03_expand_kernel_m", "b03_expand_kernel_v",
                        "b03_expand_bias_m", "b03_expand_bias_v", "b03_expand_mask"]
    assert state_names(["final"], "sgd_momentum")[:5] == ["final_kernel", "final_bias", "final_kernel_mom",
                                                          "final_bias_mom", "final_mask"]
    assert adam[-4:] == ["prototypes", "num_classes", "step", "learning_rate"]
    # candidates: blocks 2, 3 and the final conv (indices 6..12); cuts at each block's first layer
    assert train_cuts(table, tuple(range(6, 13)), 4) == (9, 12)
    assert train_cuts(table, tuple(range(6, 13)), 1) == (12,)
    assert train_cuts(table, tuple(range(6, 13)), 3) == (9, 12)  # more variants than cuts: every cut
    # candidates within one block: every candidate layer is a cut
    assert train_cuts(table, (9, 10, 11), 5) == (10, 11)


def test_separable_and_concat_in_the_layer_table_and_cost_model():
    """A SeparableConv2D is two table layers (depthwise half: groups = C; pointwise half: a 1x1 conv) whose
    costs add up to the layer's: MACs = H' W' (k^2 C + C C_out), weights k^2 C + C C_out (+ the depthwise
    half's C zero-initialised biases); a conv after a Concatenate reads the concatenated channels."""
    table = _prepare(separable_cnn(), candidates="all").table
    dw, pw = table["head_sep_depthwise"], table["head_sep"]
    assert (dw.kernel, dw.groups, dw.in_channels, dw.out_channels, dw.role) == (3, 32, 32, 32, "final")
    assert (pw.kernel, pw.groups, pw.in_channels, pw.out_channels, pw.activation) == (1, 1, 32, 96, "relu")
    h, w = pw.out_hw
    cost_dw, cost_pw = layer_cost(dw), layer_cost(pw)
    assert cost_dw.forward_macs + cost_pw.forward_macs == h * w * (9 * 32 + 32 * 96)
    assert cost_dw.weights + cost_pw.weights == 9 * 32 + 32 * 96
    assert cost_dw.input_grad_macs == cost_dw.forward_macs and cost_pw.input_grad_macs == cost_pw.forward_macs
    assert table.num_blocks == 1 and "s0_sep1_depthwise" in table.names  # a separable half ends no block
    dense = _prepare(dense_cnn(), candidates="all").table
    assert dense["t_conv"].in_channels == 16 + 2 * 8 and dense["b1_l0_conv1"].in_channels == 16
