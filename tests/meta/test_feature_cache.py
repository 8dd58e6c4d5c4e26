"""The prefix-feature cache: device-equal resizing, reuse when unchanged, rebuild when anything changes."""

import json

import numpy as np
import pytest

from tflite_train.data.cache import DatasetSpec, prepare_cache
from tflite_train.data.dataset import LabeledImages
from tflite_train.meta.feature_cache import FEATURES_JSON, FeatureCacheConfig, build_feature_cache, model_inputs
from tflite_train.runtime.images.model_input import to_model_input


@pytest.mark.parametrize("size", [64, 40])
def test_resizing_is_the_devices(size):
    images = np.random.default_rng(size).integers(0, 256, (3, size, size, 3), dtype=np.uint8)
    ours = model_inputs(images, 128)
    device = np.stack([to_model_input(im, (128, 128, 3), (0.0, 255.0)) for im in images])
    np.testing.assert_allclose(ours, device, atol=1e-3)


def _toy(size):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(6), 4).astype(np.int32)
    return LabeledImages(rng.integers(0, 256, (24, size, size, 3), dtype=np.uint8), labels, tuple("abcdef"))


def _prefix(calls):
    def prefix(x):
        calls.append(len(x))
        return x[:, ::8, ::8, :2]  # (N, 4, 4, 2) from 32 px
    return prefix


def test_build_reuse_and_rebuild(tmp_path):
    prepare_cache(tmp_path / "cache", image_size=32, datasets=(DatasetSpec("src", "source", "toy", _toy),))
    config = FeatureCacheConfig(input_size=32, entries=(("src", "train", 2, 0), ("src", "val", 1, 0)), batch_size=5)
    calls = []
    sets = build_feature_cache(tmp_path / "cache", tmp_path / "f", config, _prefix(calls), weights_sha256="a")
    train = sets["src/train"]
    assert train.features.dtype == np.float16 and train.features.shape[1:] == (4, 4, 2)
    assert len(train.labels) == 2 * 4 * 4  # 4 train classes x 4 images x 2 views
    assert np.array_equal(train.image_index, np.repeat(np.arange(16), 2))
    # view 0 is the plain image, view 1 an augmented one
    assert not np.array_equal(train.features[0], train.features[1])
    n = len(calls)
    build_feature_cache(tmp_path / "cache", tmp_path / "f", config, _prefix(calls), weights_sha256="a")
    assert len(calls) == n  # reused
    build_feature_cache(tmp_path / "cache", tmp_path / "f", config, _prefix(calls), weights_sha256="b")
    assert len(calls) > n  # other weights: rebuilt
    n = len(calls)
    path = tmp_path / "f" / "src_train.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    build_feature_cache(tmp_path / "cache", tmp_path / "f", config, _prefix(calls), weights_sha256="b")
    assert len(calls) > n  # a corrupt file: rebuilt
    record = json.loads((tmp_path / "f" / FEATURES_JSON).read_text())
    assert record["key"]["weights_sha256"] == "b" and set(record["files"]) >= {"src_train.npy", "src_val_labels.npy"}


def test_missing_data_set_names_the_fix(tmp_path):
    prepare_cache(tmp_path / "cache", image_size=32, datasets=(DatasetSpec("src", "source", "toy", _toy),))
    config = FeatureCacheConfig(input_size=32, entries=(("emoji", "train", 1, 0),))
    with pytest.raises(ValueError, match="make data"):
        build_feature_cache(tmp_path / "cache", tmp_path / "f", config, _prefix([]), weights_sha256="a")
