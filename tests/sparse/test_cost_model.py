"""Golden tests of the cost model on a hand-computed three-layer net (numbers derived by hand in
the comments), plus the paper's figures where the cost model reproduces them."""

import pytest

from tflite_train.sparse import (
    BackwardCost,
    LayerSpec,
    LayerTable,
    backward_cost,
    channel_count,
    layer_cost,
    total_forward_macs,
    total_weights,
    unfused_activation_bytes,
    weight_grad_macs,
)


@pytest.fixture
def three_layer() -> LayerTable:
    # L0: 3x3/s2 conv 2->4, 8x8 -> 4x4, relu6.  L1: 3x3 depthwise 4, 4x4, relu6.  L2: 1x1 4->3, linear.
    return LayerTable((
        LayerSpec(0, "conv", -1, "stem", 3, 2, 2, 4, 1, (8, 8), (4, 4), "relu6"),
        LayerSpec(1, "dw", 0, "depthwise", 3, 1, 4, 4, 4, (4, 4), (4, 4), "relu6"),
        LayerSpec(2, "pw", 0, "project", 1, 1, 4, 3, 1, (4, 4), (4, 4), "linear"),
    ))


def test_layer_costs_by_hand(three_layer):
    c0, c1, c2 = (layer_cost(layer) for layer in three_layer)
    # weights k*k*Cin/g*Cout; MACs = H'W' * weights; activations H*W*C.
    assert (c0.weights, c0.biases, c0.forward_macs, c0.in_activation, c0.out_activation) == (72, 4, 1152, 128, 64)
    assert (c1.weights, c1.biases, c1.forward_macs, c1.in_activation, c1.out_activation) == (36, 4, 576, 64, 64)
    assert (c2.weights, c2.biases, c2.forward_macs, c2.in_activation, c2.out_activation) == (12, 3, 192, 64, 48)
    assert c0.input_grad_macs == c0.weight_grad_macs == 1152
    assert c1.params == 40
    assert total_weights(three_layer) == 120
    assert total_forward_macs(three_layer) == 1920


def test_weight_grad_macs_for_channel_fraction(three_layer):
    # 16 output pixels * fan-in 18 * 3 channels.
    assert weight_grad_macs(three_layer.layers[0], 3) == 864
    assert weight_grad_macs(three_layer.layers[1], 1) == 144


def test_sparse_selection_adam_batch2(three_layer):
    cost = backward_cost(three_layer, {"dw": 2, 2: 3}, optimizer="adam", batch_size=2)
    assert cost == BackwardCost(
        updated_params=35,             # 2*(9+1) + 3*(4+1)
        updated_weight_bytes=140,
        optimizer_bytes=420,           # (m, v, gradient) = 3 x 140
        saved_input_bytes=768,         # (dw: 4*4*2 selected input channels + pw: 64) * 4 B * 2
        relu_mask_bytes=16,            # dw's 64 ReLU6 outputs * 2 samples / 8
        inference_activation_bytes=1536,  # max(128+64, 64+64, 64+48) * 4 B * 2
        activation_bytes=1536,         # max(1536, 768 + 16)
        input_grad_macs=192,           # only pw lies above the deepest updated layer
        weight_grad_macs=480,          # 16*9*2 + 16*4*3
        deepest_layer=1,
    )
    assert cost.total_bytes == 2096
    assert cost.backward_macs == 672


def test_full_first_layer_sgd_without_gradient_buffer(three_layer):
    cost = backward_cost(three_layer, {"conv": 4}, optimizer="sgd", gradient_buffer=False)
    assert cost.updated_weight_bytes == 304      # 4 * (18 + 1) * 4 B
    assert cost.optimizer_bytes == 0
    assert cost.saved_input_bytes == 512         # 128 * 4 B
    assert cost.relu_mask_bytes == 16            # (64 + 64) bits
    assert cost.activation_bytes == 768          # max(192 * 4, 512 + 16)
    assert cost.total_bytes == 1072
    assert cost.input_grad_macs == 768           # dw + pw
    assert cost.weight_grad_macs == 1152


def test_sgd_momentum_keeps_one_slot(three_layer):
    sgd_m = backward_cost(three_layer, {"pw": 3}, optimizer="sgd_momentum")
    assert sgd_m.optimizer_bytes == 2 * sgd_m.updated_weight_bytes  # momentum + gradient


def test_empty_selection_costs_nothing(three_layer):
    cost = backward_cost(three_layer, {})
    assert cost.total_bytes == 0 and cost.backward_macs == 0 and cost.deepest_layer is None


def test_unfused_activation_bytes(three_layer):
    # (128+64+64) + (64+64+64) + (64+48) = 560 floats.
    assert unfused_activation_bytes(three_layer) == 2240
    assert unfused_activation_bytes(three_layer, 3) == 3 * 2240


@pytest.mark.parametrize("ratio, expected", [(1.0, 576), (0.5, 288), (0.25, 144), (0.125, 72), (0.001, 1)])
def test_channel_count(ratio, expected):
    assert channel_count(576, ratio) == expected


def test_channel_count_rounds_up():
    assert channel_count(10, 0.25) == 3


@pytest.mark.parametrize(
    "channels, kwargs, match",
    [
        ({"nope": 1}, {}, "layer 'nope' does not exist"),
        ({7: 1}, {}, "layer index 7 out of range"),
        ({"pw": 4}, {}, r"channels for layer 'pw' must be an int in 1..3; got 4"),
        ({"pw": 0}, {}, "got 0"),
        ({"pw": 1.5}, {}, "got 1.5"),
        ({"pw": 1, 2: 1}, {}, "named twice"),
        ({"pw": 1}, {"optimizer": "rmsprop"}, "optimizer must be one of .*got 'rmsprop'"),
        ({"pw": 1}, {"batch_size": 0}, "batch_size must be an int >= 1; got 0"),
    ],
)
def test_bad_input(three_layer, channels, kwargs, match):
    with pytest.raises(ValueError, match=match):
        backward_cost(three_layer, channels, **kwargs)


@pytest.mark.parametrize("ratio", [0, -0.5, 1.5, "half", True])
def test_channel_count_rejects(ratio):
    with pytest.raises(ValueError, match="ratio must be"):
        channel_count(8, ratio)


def test_selection_naming_missing_layer_type_error(three_layer):
    with pytest.raises(TypeError, match="layer must be a name"):
        backward_cost(three_layer, {1.0: 1})
