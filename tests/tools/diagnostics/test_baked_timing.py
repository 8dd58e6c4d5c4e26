"""``tools.diagnostics.baked_timing`` on the tiny fixture: every model timed, ratios to the clean export, sizes, parity.

Timings are not asserted (the machine is shared); the figures' structure, the ratio arithmetic, the size
relation (the baked file within the export's inference part) and the baked logits' agreement with
``predict``'s are.
"""

import pytest

from tests.runtime.runtime_fixtures import episode_arrays, fixture_model, load_fashion
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt
from tflite_train.runtime.checkpoint.checkpoint import save_checkpoint
from tools.diagnostics.baked_timing import baked_timing

pytestmark = pytest.mark.pi


def test_figures_of_a_tiny_bake(tmp_path):
    model = TrainableModel(fixture_model("tiny_adam_33"))
    xs, ys, _, _ = episode_arrays(load_fashion(), model.input_shape, ways=3, shots=2, queries=1, seed=2)
    result = adapt(model, xs, ys, AdaptConfig(policy="tinytrain", memory_bytes=float(2**20), iterations=2))
    save_checkpoint(tmp_path / "c.ckpt", model, result.selection)
    figures = baked_timing(fixture_model("tiny_adam_33"), tmp_path / "c.ckpt", None, calls=3)
    names = {"clean", "restored", "predict", "baked"}
    assert set(figures["wall_seconds"]) == set(figures["cpu_seconds"]) == names and figures["classes"] == 3
    assert all(value > 0 for value in figures["wall_seconds"].values())
    for name in names:
        ratio = figures["cpu_seconds"][name] / figures["cpu_seconds"]["clean"]
        assert figures["cpu_ratio_to_clean"][name] == pytest.approx(ratio)
    sizes = figures["bytes"]
    assert sizes["inference_part"] == sizes["inference_constants"] + sizes["inference_tables"] + sizes["head"]
    assert 0 < sizes["baked"] <= sizes["inference_part"] < sizes["export"]
    assert figures["max_abs_logit_difference"] < 1e-4
