"""The shipped weights' card drives the export: input size, [0, 1] input without normalisation, scale."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from converters.build_module import folded_backbone, module_from_backbone
from converters.export_config import ExportConfig
from tflite_train.models import build_backbone, card_path, read_weights_card

ROOT = pathlib.Path(__file__).resolve().parents[2]
WEIGHTS = ROOT / "weights" / "mcunet_64_meta.weights.h5"


def test_card_of_shipped_weights():
    card = read_weights_card(WEIGHTS)
    assert card_path(WEIGHTS).name == "mcunet_64_meta.json"
    assert card.backbone == "mcunet" and card.input_size == (64, 64) and card.in_channels == 3
    assert card.mean == (0.0, 0.0, 0.0) and card.std == (1.0, 1.0, 1.0)
    assert card.cosine_scale == pytest.approx(10.0692, abs=1e-3)


def test_card_errors(tmp_path):
    assert read_weights_card(tmp_path / "none.weights.h5") is None
    (tmp_path / "bad.json").write_text(json.dumps({"backbone": "mcunet"}))
    with pytest.raises(ValueError, match="malformed"):
        read_weights_card(tmp_path / "bad.weights.h5")
    (tmp_path / "r.json").write_text(json.dumps({"backbone": "mcunet", "input": {"shape": [8, 8, 3], "range": [-1, 1]}}))
    with pytest.raises(ValueError, match="range"):
        read_weights_card(tmp_path / "r.weights.h5")


def test_export_module_with_shipped_weights_matches_keras():
    """The export module (what is converted) embeds [0, 1] images like the trained Keras model."""
    card = read_weights_card(WEIGHTS)
    config = ExportConfig(backbone=card.backbone, input_size=card.input_size, mean=card.mean, std=card.std,
                          cosine_scale=card.cosine_scale, candidate_blocks=1, class_capacity=4, weights=str(WEIGHTS))
    module = module_from_backbone(config, folded_backbone(config))
    keras_model = build_backbone("mcunet", 64).model
    keras_model.load_weights(WEIGHTS)
    images = np.random.default_rng(0).uniform(size=(3, 64, 64, 3)).astype(np.float32)
    ref = keras_model(images, training=False).numpy()
    got = module.infer(tf.constant(images))["embeddings"].numpy()
    assert np.abs(ref).max() > 1e-2  # trained features, not a degenerate random net
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
