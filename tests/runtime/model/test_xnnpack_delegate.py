"""XNNPACK on tflite-runtime 2.14 (whose wheel does not apply its default delegate): the explicitly
created delegate (``xnnpack=True``) takes the whole exported contract (every export: the update
branches have static shapes), matches the builtin kernels at a fixed batch size and the self-test
passes on it; a delegate that cannot be created falls back to the builtin kernels with a warning,
never to different results.

Behaviour only (which delegate ran, what the self-test says); timings are in bench/results.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train.runtime import TrainableModel
from tflite_train.runtime.model import interpreter_choice
from tflite_train.runtime.model.selftest import verify

FIXTURES = ["tiny_adam_33", "mcunet_adam_35", "tiny_sgd_full_17", "mbv2_adam_32", "byo_mobilenet_v3_small_32"]
"""Built-in and user models, Adam and SGD (tools/fixtures.py): the update branches have static
shapes, so 2.14's delegate takes every export."""


@pytest.mark.parametrize("name", FIXTURES)
def test_tflite_runtime_gets_xnnpack_on_the_whole_contract(name):
    model = TrainableModel(fixture_model(name), xnnpack=True)
    if model.runtime != "tflite_runtime.interpreter":
        pytest.skip(f"explicit XNNPACK is for tflite-runtime; this env runs {model.runtime}")
    assert model.explicit_xnnpack and model.delegated
    plain = TrainableModel(fixture_model(name), xnnpack=False)
    assert not plain.explicit_xnnpack and not plain.delegated


@pytest.mark.parametrize("name", ["tiny_adam_33", "mbv2_adam_32"])
def test_train_steps_at_a_fixed_batch_size_match_the_builtin_kernels(name):
    """fisher, then train steps at one batch size, with and without the delegate: same losses and
    state (tolerance 1e-4 relative: XNNPACK sums in another order; a kernel or bias may have 0.1 % of
    its weights off by up to 2e-3, the Adam allowance of ``test_signature_parity``: the candidate
    layers' forward runs on XNNPACK too since the copy-on-write constants). A changed batch size is not
    supported with the delegate on 2.14 (runtime.interpreter docstring)."""
    models = [TrainableModel(fixture_model(name), xnnpack=x) for x in (True, False)]
    if models[0].runtime != "tflite_runtime.interpreter":
        pytest.skip(f"explicit XNNPACK is for tflite-runtime; this env runs {models[0].runtime}")
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 1, (3, *models[0].input_shape)).astype(np.float32)
    labels = np.arange(3)
    protos = rng.normal(size=(3, models[0].feature_dim)).astype(np.float32)
    runs = []
    for model in models:
        model.set_head(protos)
        model.fisher(images, labels)
        model.set_selection({name: np.arange(0, c, 2) for name, c in model.candidate_channels.items()})
        losses = [model.train_step(images, labels)["loss"] for _ in range(3)]
        runs.append((losses, model.get_state()))
    (losses, state), (ref_losses, ref_state) = runs
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    for key, value in ref_state.items():
        scale = max(float(np.max(np.abs(value))), 1e-6)
        off = np.abs(state[key] - value) > 1e-4 * scale
        if key in {f"{c}_{param}" for c in models[0].candidates for param in ("kernel", "bias")}:  # Adam: a weight whose gradient is at float-noise level
            assert float(np.max(np.abs(state[key] - value))) <= 2e-3 * scale, key  # moves by up to lr
            assert off.mean() <= 0.001, key  # either way (test_signature_parity's allowance, tighter)
        else:
            assert not off.any(), key


@pytest.mark.parametrize("name", FIXTURES)
def test_selftest_passes_with_the_delegate_applied(name):
    report = verify(fixture_model(name), xnnpack=True)
    assert report.passed, report


def test_a_delegate_that_cannot_be_created_falls_back_with_a_warning(monkeypatch, caplog):
    path = fixture_model("tiny_adam_33")
    reference = TrainableModel(path, xnnpack=False)
    monkeypatch.setitem(interpreter_choice.EXPLICIT_XNNPACK_MODULES, reference.runtime, "no_such_runtime_package")
    with caplog.at_level(logging.WARNING, logger=interpreter_choice.LOG.name):
        model = TrainableModel(path, xnnpack=True)
    assert not model.explicit_xnnpack
    assert any("XNNPACK delegate could not be applied" in r.getMessage() for r in caplog.records)
    images = np.random.default_rng(0).uniform(0, 1, (2, *model.input_shape)).astype(np.float32)
    np.testing.assert_array_equal(model.infer(images)["embeddings"], reference.infer(images)["embeddings"])


@pytest.mark.parametrize("name", ["tiny_adam_33", "mcunet_adam_35"])
def test_infer_after_a_batch_size_change_is_right_or_refused(name):
    """After train steps at batch 3, infer at batch 3 then 1: 2.14's delegate has returned 3 rows for
    1 image here; ``infer`` must then raise, never hand back rows of another batch, and rows it does
    return equal the builtin kernels' (1e-4 relative)."""
    path = fixture_model(name)
    delegated, plain = TrainableModel(path, xnnpack=True), TrainableModel(path, xnnpack=False)
    rng = np.random.default_rng(1)
    images = rng.uniform(0, 1, (3, *plain.input_shape)).astype(np.float32)
    protos = rng.normal(size=(3, plain.feature_dim)).astype(np.float32)
    for model in (delegated, plain):
        model.set_head(protos)
        model.set_selection({n: np.arange(c) for n, c in model.candidate_channels.items()})
        for _ in range(2):
            model.train_step(images, np.arange(3))
        model.infer(images)
    one = images[:1]
    expected = plain.infer(one)["embeddings"]
    try:
        got = delegated.infer(one)["embeddings"]
    except RuntimeError as err:
        assert "rows for 1 images" in str(err) and delegated.explicit_xnnpack
        return
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(expected))))
