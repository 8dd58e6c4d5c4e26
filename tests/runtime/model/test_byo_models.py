"""User Keras models on the device side (no TensorFlow needed): verify, adapt and predict.

The fixtures are keras.applications MobileNetV2-0.35 and MobileNetV3-Small (raw-pixel input:
its Rescaling layer became the input spec) and a plain CNN, exported by the same path as the
built-in backbones (``tools.fixtures``). Runs in the main env and in the Pi env.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model, write_episode_folders
from tflite_train.cli import main
from tflite_train.runtime import TrainableModel, load_checkpoint, read_metadata
from tflite_train.runtime.images.image_folder import load_image_folder
from tflite_train.runtime.model.selftest import verify

BYO = ["byo_plain_cnn_23", "byo_rescaling_20", "byo_mobilenet_v2_32", "byo_mobilenet_v3_small_32"]


@pytest.mark.parametrize("name", BYO)
def test_verify_passes(name):
    result = verify(fixture_model(name))
    assert result.passed, result.format()


def test_raw_pixel_models_declare_their_range():
    meta = read_metadata(fixture_model("byo_mobilenet_v3_small_32"))
    assert meta["input"]["range"] == [0.0, 255.0]
    np.testing.assert_allclose(meta["input"]["mean"], [127.5] * 3, rtol=1e-6)
    np.testing.assert_allclose(meta["input"]["std"], [127.5] * 3, rtol=1e-6)
    assert read_metadata(fixture_model("byo_mobilenet_v2_32"))["input"]["range"] == [0.0, 1.0]


@pytest.mark.parametrize("name", ["byo_mobilenet_v3_small_32", "byo_plain_cnn_23"])
def test_adapt_and_predict_cli(name, fashion, tmp_path, capsys):
    support, query = write_episode_folders(fashion, tmp_path / "data", ways=3, shots=3, queries=4, seed=1)
    out = tmp_path / "m.ckpt"
    model = str(fixture_model(name))
    assert main(["adapt", "--model", model, "--support", str(support), "--query", str(query), "--out", str(out),
                 "--iterations", "6", "--policy", "tinytrain", "--mem-budget", "4MiB"]) == 0
    report = load_checkpoint(out).report
    assert report["selection"]["layers"], "TinyTrain selected nothing"
    assert len(report["losses"]) == 6 and all(np.isfinite(report["losses"]))
    assert 0.0 <= report["query_accuracy"] <= 1.0
    capsys.readouterr()
    images = sorted(str(p) for p in (query / "class2").iterdir())
    assert main(["predict", "--model", model, "--checkpoint", str(out), "--json", *images]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["file"] for row in rows] == images
    assert all(row["class"] in ("class0", "class1", "class2") for row in rows)


def test_raw_pixel_model_gets_raw_pixels(fashion, tmp_path):
    """Image files reach a [0, 255] model as raw pixels: its embeddings of the folder read for its
    range equal those of the [0, 1] read scaled by 255."""
    support, _ = write_episode_folders(fashion, tmp_path / "data", ways=2, shots=2, queries=1, seed=2)
    model = TrainableModel(fixture_model("byo_mobilenet_v3_small_32"))
    raw, _, _ = load_image_folder(support, model.input_shape, model.metadata["input"]["range"])
    unit, _, _ = load_image_folder(support, model.input_shape)
    assert raw.max() > 1.5 and unit.max() <= 1.0
    # x / 255 * 255 differs from x by float32 rounding (~1e-5 relative), which the 16 layers carry to the
    # embeddings (measured up to 1.7e-5 on a fresh export); a wrong range would differ by a factor of 255
    np.testing.assert_allclose(model.infer(raw)["embeddings"], model.infer(unit * 255.0)["embeddings"],
                               rtol=1e-4, atol=1e-4)
