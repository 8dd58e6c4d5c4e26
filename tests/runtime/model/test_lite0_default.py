"""EfficientNet-Lite0 (the default backbone; this fixture has the meta-trained weights, the default export the
same graph with the ImageNet weights alone) on the device side, no TensorFlow: its exported fixture (small: 64 px, last 2 blocks) passes ``verify`` and adapts with TinyTrain.
Runs in the main env and in the Pi env (tflite-runtime 2.14)."""

from __future__ import annotations

import numpy as np

from tests.runtime.runtime_fixtures import fixture_model, write_episode_folders
from tflite_train.cli import main
from tflite_train.runtime import load_checkpoint, read_metadata
from tflite_train.runtime.model.selftest import verify

NAME = "lite0_meta_adam_64"


def test_verify_passes():
    result = verify(fixture_model(NAME))
    assert result.passed, result.format()


def test_raw_pixel_input_with_the_lite_normalisation():
    meta = read_metadata(fixture_model(NAME))
    assert meta["input"]["range"] == [0.0, 255.0]
    np.testing.assert_allclose(meta["input"]["mean"], [127.0] * 3, rtol=1e-6)
    np.testing.assert_allclose(meta["input"]["std"], [128.0] * 3, rtol=1e-6)


def test_adapts_with_tinytrain(fashion, tmp_path):
    support, query = write_episode_folders(fashion, tmp_path / "data", ways=3, shots=3, queries=4, seed=3)
    out = tmp_path / "m.ckpt"
    assert main(["adapt", "--model", str(fixture_model(NAME)), "--support", str(support), "--query", str(query),
                 "--out", str(out), "--iterations", "8", "--policy", "tinytrain", "--mem-budget", "4MiB"]) == 0
    report = load_checkpoint(out).report
    assert report["selection"]["layers"], "TinyTrain selected nothing"
    losses = report["losses"]
    assert len(losses) == 8 and all(np.isfinite(losses))
    assert 0.0 <= report["query_accuracy"] <= 1.0
