"""XNNPACK on tflite-runtime 2.14 (whose wheel does not apply its default delegate): the explicitly
created delegate (``xnnpack=True``) takes the whole exported contract and the self-test passes on it;
a delegate that cannot be created falls back to the builtin kernels with a warning, never to
different results.

Behaviour only (which delegate ran, what the self-test says); timings are in bench/results.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from runtime_fixtures import fixture_model
from tflite_train.runtime import TrainableModel
from tflite_train.runtime import interpreter as interpreter_module
from tflite_train.runtime.selftest import verify

FIXTURES = ["tiny_adam_33", "mcunet_adam_35"]
"""Exported with ``skip_dynamic_subgraphs`` (converters/fixtures.py)."""
UNMARKED = ["tiny_sgd_full_17", "mbv2_adam_32", "byo_mobilenet_v3_small_32"]
"""Exported without it (the default): 2.14's XNNPACK refuses them, so the model runs on the builtin kernels."""


@pytest.mark.parametrize("name", FIXTURES)
def test_tflite_runtime_gets_xnnpack_on_the_whole_contract(name):
    model = TrainableModel(fixture_model(name), xnnpack=True)
    if model.runtime != "tflite_runtime.interpreter":
        pytest.skip(f"explicit XNNPACK is for tflite-runtime; this env runs {model.runtime}")
    assert model.explicit_xnnpack and model.delegated
    plain = TrainableModel(fixture_model(name), xnnpack=False)
    assert not plain.explicit_xnnpack and not plain.delegated


@pytest.mark.parametrize("name", UNMARKED)
def test_a_model_exported_without_delegate_skipping_falls_back_to_builtin_kernels(name, caplog):
    with caplog.at_level(logging.WARNING, logger=interpreter_module.LOG.name):
        model = TrainableModel(fixture_model(name), xnnpack=True)
    if model.runtime != "tflite_runtime.interpreter":
        pytest.skip(f"explicit XNNPACK is for tflite-runtime; this env runs {model.runtime}")
    assert not model.explicit_xnnpack
    assert any("XNNPACK delegate could not be applied" in r.getMessage() for r in caplog.records)
    assert verify(fixture_model(name), xnnpack=True).passed


@pytest.mark.parametrize("name", FIXTURES)
def test_selftest_passes_with_the_delegate_applied(name):
    report = verify(fixture_model(name), xnnpack=True)
    assert report.passed, report


def test_a_delegate_that_cannot_be_created_falls_back_with_a_warning(monkeypatch, caplog):
    path = fixture_model("tiny_adam_33")
    reference = TrainableModel(path, xnnpack=False)
    monkeypatch.setitem(interpreter_module.EXPLICIT_XNNPACK_MODULES, reference.runtime, "no_such_runtime_package")
    with caplog.at_level(logging.WARNING, logger=interpreter_module.LOG.name):
        model = TrainableModel(path, xnnpack=True)
    assert not model.explicit_xnnpack
    assert any("XNNPACK delegate could not be applied" in r.getMessage() for r in caplog.records)
    images = np.random.default_rng(0).uniform(0, 1, (2, *model.input_shape)).astype(np.float32)
    np.testing.assert_array_equal(model.infer(images)["embeddings"], reference.infer(images)["embeddings"])
