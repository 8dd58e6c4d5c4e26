"""Keras backbones: structure matches the layer table and the paper; BN folding is exact."""

import keras
import numpy as np
import pytest

from tflite_train.models import build_backbone, conv_layers, fold_batchnorm
from tflite_train.paper_figures import ARCHITECTURES
from tflite_train.sparse import layer_cost

ALL = ("tiny", "mcunet", "mbv2", "proxyless")


def _conv_weight_count(backbone):
    return sum(int(np.prod(layer.get_weights()[0].shape)) for layer in conv_layers(backbone))


def _keras_macs(backbone):
    """MACs counted from the Keras layers' own shapes (independent of the cost model)."""
    total = 0
    for layer in conv_layers(backbone):
        _, h, w, _ = layer.output.shape
        total += h * w * int(np.prod(layer.get_weights()[0].shape))
    return total


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_paper_backbones_at_128(name):
    backbone = build_backbone(name, 128, seed=0)
    paper = ARCHITECTURES[name]
    convs = [l for l in backbone.model.layers if isinstance(l, (keras.layers.Conv2D, keras.layers.DepthwiseConv2D))]
    assert len(convs) == paper.layers == len(backbone.table)
    assert backbone.table.num_blocks == paper.blocks
    assert _conv_weight_count(backbone) == pytest.approx(paper.params, rel=1e-3)
    assert _keras_macs(backbone) == pytest.approx(paper.macs, rel=0.01)
    assert backbone.model.output_shape == (None, backbone.config.feature_dim)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("size", [32, 35])
def test_small_and_odd_sizes_match_table(name, size):
    backbone = build_backbone(name, size, in_channels=1, seed=1)
    for spec, layer in zip(backbone.table, conv_layers(backbone)):
        assert layer.name == spec.name
        assert tuple(layer.output.shape[1:3]) == spec.out_hw
        assert layer.get_weights()[0].size == layer_cost(spec).weights
    out = backbone.model(np.zeros((2, size, size, 1), np.float32), training=False)
    assert out.shape == (2, backbone.config.feature_dim)


def _randomize_batchnorm(model, rng):
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([
                rng.uniform(0.5, 1.2, gamma.shape), rng.normal(0, 0.2, beta.shape),
                rng.normal(0, 0.2, mean.shape), rng.uniform(0.5, 2.0, var.shape),
            ])


@pytest.mark.parametrize("name", ALL)
def test_bn_folding_preserves_outputs(name):
    rng = np.random.default_rng(0)
    backbone = build_backbone(name, 64, seed=2)
    _randomize_batchnorm(backbone.model, rng)
    folded = fold_batchnorm(backbone)
    assert not folded.batch_norm
    assert not any(isinstance(l, keras.layers.BatchNormalization) for l in folded.model.layers)
    images = rng.uniform(0, 1, (4, 64, 64, 3)).astype(np.float32)
    expected = backbone.model(images, training=False).numpy()
    got = folded.model(images).numpy()
    assert np.abs(expected).max() > 0.1  # non-trivial features
    assert np.abs(expected - got).max() <= 1e-4


def test_fold_twice_is_an_error():
    folded = fold_batchnorm(build_backbone("tiny", 32))
    with pytest.raises(ValueError, match="has no BatchNorm to fold"):
        fold_batchnorm(folded)


def test_seeded_builds_are_reproducible():
    a = build_backbone("tiny", 32, seed=5).model.get_weights()
    b = build_backbone("tiny", 32, seed=5).model.get_weights()
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (("mobilenet",), {}, "backbone must be one of"),
        (("mcunet", 31), {}, "input_size must be >= 32"),
        (("mcunet", 64, 0), {}, "in_channels must be a positive int; got 0"),
    ],
)
def test_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_backbone(*args, **kwargs)


@pytest.mark.parametrize("name", ALL)
def test_random_init_keeps_signal(name):
    """He init with the true fan-in (depthwise: k^2, not k^2 * C) keeps random-init features alive."""
    backbone = build_backbone(name, 33, seed=0)
    for spec, layer in zip(backbone.table, conv_layers(backbone)):
        if spec.is_depthwise:
            std = float(np.std(layer.get_weights()[0]))
            # truncated normal at 2 sigma has std 0.88 * sigma; sigma = sqrt(2 / k^2)
            assert std == pytest.approx(0.88 * np.sqrt(2.0 / spec.kernel**2), rel=0.35)
    images = np.random.default_rng(0).uniform(-1, 1, (2, 33, 33, 3)).astype(np.float32)
    norms = np.linalg.norm(fold_batchnorm(backbone).model(images).numpy(), axis=1)
    assert norms.min() > 0.5
