"""Exports of trained weights take backbone, input spec and head scale from the weights' sidecar."""

import json

import pytest

from tflite_train.converters.weights_spec import export_fields_from_sidecar, resolve_export_config, sidecar_path


def _sidecar(tmp_path, **overrides):
    spec = {"backbone": "tiny", "input": {"shape": [40, 40, 3], "range": [0.0, 1.0]},
            "cosine_head": {"scale": 12.5, "bias": 0.0}}
    spec.update(overrides)
    (tmp_path / "w.json").write_text(json.dumps(spec))
    return str(tmp_path / "w.weights.h5")


def test_fields_from_sidecar(tmp_path):
    fields = export_fields_from_sidecar(_sidecar(tmp_path))
    assert fields == {"backbone": "tiny", "input_size": (40, 40), "in_channels": 3, "mean": (0.0,) * 3,
                      "std": (1.0,) * 3, "cosine_scale": 12.5}


def test_resolve_explicit_overrides_and_conflicts(tmp_path):
    weights = _sidecar(tmp_path)
    config = resolve_export_config(weights, candidate_blocks=3, input_size=40, backbone=None)
    assert (config.backbone, config.input_size, config.cosine_scale, config.candidate_blocks) == ("tiny", (40, 40), 12.5, 3)
    assert config.weights == weights and config.mean == (0.0, 0.0, 0.0)
    assert resolve_export_config(weights, cosine_scale=7.0).cosine_scale == 7.0
    with pytest.raises(ValueError, match="backbone='mcunet' contradicts the weights' sidecar"):
        resolve_export_config(weights, backbone="mcunet")
    with pytest.raises(ValueError, match="input_size=64 contradicts"):
        resolve_export_config(weights, input_size=64)


def test_resolve_imagenet_weights():
    """"imagenet": Lite0 (the builder loads the packaged weights, so no path), 128 px and 6 blocks unless given;
    another backbone or channel count is refused."""
    config = resolve_export_config("imagenet")
    assert (config.backbone, config.input_size, config.candidate_blocks, config.weights) == ("lite0", (128, 128), 6, None)
    assert config.mean is None and config.cosine_scale == 10.0
    config = resolve_export_config("imagenet", backbone="lite0", input_size=(96, 96), candidate_blocks=2, seed=3)
    assert (config.input_size, config.candidate_blocks, config.seed) == ((96, 96), 2, 3)
    with pytest.raises(ValueError, match="backbone='mcunet' contradicts the 'imagenet' weights"):
        resolve_export_config("imagenet", backbone="mcunet")
    with pytest.raises(ValueError, match="in_channels=1 contradicts the 'imagenet' weights"):
        resolve_export_config("imagenet", in_channels=1)


def test_no_sidecar_means_no_fields(tmp_path):
    assert export_fields_from_sidecar(str(tmp_path / "x.weights.h5")) == {}


@pytest.mark.parametrize("bad", [{"input": {"shape": [40, 40], "range": [0, 1]}}, {"backbone": None, "input": None},
                                 {"input": {"shape": [40, 40, 3], "range": [0, 255]}}])
def test_bad_sidecar(tmp_path, bad):
    with pytest.raises(ValueError, match="sidecar"):
        export_fields_from_sidecar(_sidecar(tmp_path, **bad))


def test_sidecar_with_a_duplicate_key_is_refused_naming_it(tmp_path):
    weights = _sidecar(tmp_path)
    side = tmp_path / "w.json"
    side.write_text('{"backbone": "mcunet", ' + side.read_text()[1:])  # json.loads would keep the second one
    with pytest.raises(ValueError) as info:
        export_fields_from_sidecar(weights)
    assert str(info.value) == f"weights sidecar {str(side)!r} is not a valid weights spec: duplicate key 'backbone'"


def test_weights_name_must_be_keras_weights():
    with pytest.raises(ValueError, match="weights must be a Keras '.weights.h5' file"):
        sidecar_path("model.h5")


def test_shipped_weights_export_module_matches_keras():
    """The export module (what is converted) embeds [0, 1] images like the trained Keras model."""
    import pathlib

    import numpy as np
    import tensorflow as tf

    from tflite_train.converters.build_module import module_from_config
    from tflite_train.models import build_backbone

    weights = pathlib.Path(__file__).resolve().parents[2] / "weights" / "mcunet_64_meta.weights.h5"
    config = resolve_export_config(str(weights), candidate_blocks=1, class_capacity=4)
    assert (config.backbone, config.input_size, config.mean, config.std) == ("mcunet", (64, 64), (0.0,) * 3, (1.0,) * 3)
    assert config.cosine_scale == pytest.approx(10.0692, abs=1e-3)
    module = module_from_config(config)
    keras_model = build_backbone("mcunet", 64).model
    keras_model.load_weights(weights)
    images = np.random.default_rng(0).uniform(size=(3, 64, 64, 3)).astype(np.float32)
    ref = keras_model(images, training=False).numpy()
    got = module.infer(tf.constant(images))["embeddings"].numpy()
    assert np.abs(ref).max() > 1e-2  # trained features, not a degenerate random net
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
