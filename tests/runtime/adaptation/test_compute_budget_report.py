"""The compute budget reads the same in the adaptation report and the demo's output: a fraction of
the full backward pass (FullTrain's backward MACs per sample) of the adapted model."""

from __future__ import annotations

import numpy as np
import pytest

from tflite_train.demo import DemoConfig, format_report
from tflite_train.runtime import TrainableModel
from tflite_train.runtime import AdaptConfig, adapt
from tflite_train.runtime.model.model_contract import layer_table
from tflite_train.sparse import full_backward_macs

from tests.runtime.runtime_fixtures import episode_arrays, fixture_model


@pytest.fixture(scope="module")
def model():
    return TrainableModel(fixture_model("tiny_adam_33"))


def test_adapt_and_demo_report_the_fraction_of_the_full_backward_pass(model, fashion):
    xs, ys, _, _ = episode_arrays(fashion, model.input_shape, seed=3)
    result = adapt(model, xs, ys, AdaptConfig(policy="tinytrain", memory_bytes=float(2**20), compute_fraction=0.15,
                                              iterations=2))
    table = layer_table(model.metadata)
    full = full_backward_macs(table)
    assert result.full_backward_macs == full and full > result.forward_macs
    assert result.compute_limit_macs == 0.15 * full
    assert result.to_dict()["full_backward_macs"] == full and result.cost.backward_macs <= 0.15 * full
    report = {"model": "m.tflite", "runtime": "test", "load_seconds": 0.0, "mean_accuracy_none": 0.5,
              "mean_accuracy_tinytrain": 0.6, "memory_budget_bytes": float(2**20)}
    text = format_report(DemoConfig(compute_fraction=0.15, policy="tinytrain"), report, result, 0.0)
    assert f"of {0.15 * full / 1e6:.2f}M (15% of the full backward pass, {full / 1e6:.2f}M MACs)" in text
    assert "forward MACs" not in text
    np.testing.assert_equal(result.compute_limit_macs, result.budget.compute_limit(table))
