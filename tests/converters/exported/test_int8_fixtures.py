"""The int8 exports (issue 27, ``docs/int8.md``) on whatever interpreter is installed: ai-edge-litert in the
main env, tflite-runtime 2.14 in the Pi env (builtin kernels: it refuses its explicit XNNPACK delegate for them).

Fixtures (``tools/fixtures.py``, the shape of ``tiny_adam_33``): ``tiny_int8c_33``
(``--quantize int8-candidates``) and ``tiny_int8_33`` (``--quantize int8``, synthetic calibration).
The self-test is the file's own (float tolerances for int8-candidates, the int8 ones for int8);
``adapt`` runs end to end from image folders (its steps from the cached cut) and writes a
checkpoint that ``predict`` reads.
"""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model, run_cli, write_episode_folders
from tflite_train.runtime import TrainableModel, read_metadata
from tflite_train.runtime.checkpoint.checkpoint import load_checkpoint
from tflite_train.runtime.model import interpreter_choice
from tflite_train.runtime.model.selftest import verify

MODES = {"tiny_int8c_33": "int8-candidates", "tiny_int8_33": "int8"}


@pytest.mark.parametrize("name", MODES)
def test_metadata_records_the_quantization_and_the_state_is_float32(name):
    assert read_metadata(fixture_model(name))["config"]["quantize"] == MODES[name]
    model = TrainableModel(fixture_model(name))
    model.reset_state()
    state = model.get_state()
    assert {k: v.dtype for k, v in state.items() if v.dtype != np.float32} == {"num_classes": np.int32}


COARSE_ON_2_14 = pytest.mark.xfail(
    os.environ.get("TFLITE_TRAIN_PI_ENV") == "1", strict=True,
    reason="--quantize int8 on tflite-runtime 2.14's builtin int8 kernels: the state after the Adam steps deviates "
           "past the int8 self-test's state floor (measured 0.128 vs 0.02, worst final_bias; infer, fisher and "
           "train_step pass), the coarse int8 self-test of docs/int8.md section 7")


@pytest.mark.parametrize("name", ["tiny_int8c_33", pytest.param("tiny_int8_33", marks=COARSE_ON_2_14)])
def test_selftest_passes(name):
    report = verify(fixture_model(name))
    assert report.passed, report.format()


@pytest.mark.parametrize("name", MODES)
def test_no_explicit_xnnpack_delegate_on_an_int8_file(name, caplog):
    """tflite-runtime 2.14's explicit XNNPACK delegate crashes the process when an int8 file's interpreter is
    freed after train_step + reset_state (docs/int8.md): ``xnnpack=True`` runs the builtin kernels instead, with
    one warning naming the mode, and that sequence completes."""
    with caplog.at_level(logging.WARNING, logger=interpreter_choice.LOG.name):
        model = TrainableModel(fixture_model(name), xnnpack=True)
    if model.runtime not in interpreter_choice.EXPLICIT_XNNPACK_MODULES:
        pytest.skip(f"explicit XNNPACK is for tflite-runtime; this env runs {model.runtime}")
    assert not model.explicit_xnnpack and not model.delegated
    assert [r.levelno for r in caplog.records] == [logging.WARNING] and MODES[name] in caplog.text
    rng = np.random.default_rng(0)
    images = rng.uniform(size=(3, *model.input_shape)).astype(np.float32)
    model.set_head(rng.normal(size=(3, model.feature_dim)).astype(np.float32))
    model.set_selection({layer: np.arange(0, c, 2) for layer, c in model.candidate_channels.items()})
    assert np.isfinite(model.train_step(images, np.arange(3))["loss"])
    model.reset_state()
    del model  # with the delegate, 2.14 crashed here


@pytest.mark.parametrize("name", MODES)
def test_adapt_and_predict_from_image_folders(name, fashion, tmp_path, capsys):
    support, query = write_episode_folders(fashion, tmp_path / "data", ways=3, shots=4, queries=4, seed=0)
    out = tmp_path / "m.ckpt"
    model = str(fixture_model(name))
    assert run_cli(["adapt", "--model", model, "--support", str(support), "--query", str(query), "--out", str(out),
                    "--mem-budget", "unlimited", "--iterations", "10", "--json", "--quiet"]) == 0
    record = json.loads(capsys.readouterr().out)
    losses = np.asarray(record["losses"])
    assert len(losses) == 10 and np.isfinite(losses).all() and losses[-1] < losses[0]
    assert record["cache"]["used"], "the steps run from the frozen prefix's cached activations"
    checkpoint = load_checkpoint(out)
    assert checkpoint.selection.to_dict(), "the default policy (TinyTrain) trains some candidate channels"
    assert checkpoint.model_id == read_metadata(fixture_model(name))["model_id"]
    images = sorted(str(p) for p in (query / "class0").iterdir())
    assert run_cli(["predict", "--model", model, "--checkpoint", str(out), "--json", *images]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["file"] for r in rows] == images
