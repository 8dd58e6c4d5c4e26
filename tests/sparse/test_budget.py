"""One B_compute: a relative compute budget is a fraction of the full backward pass.

The number is pinned on both sides: here for Python, and in the Java core's
``ComputeBudgetGoldenTest`` from the same golden file (``tflite-train golden``).
"""

import json
import math
import pathlib

import pytest

from tflite_train.architectures import build_layer_table
from tflite_train.golden.selection_vectors import PAPER_COMPUTE_FRACTION, selection_vectors
from tflite_train.sparse import Budget, backward_cost, full_backward_macs, total_forward_macs

GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "android_demo/core/src/test/resources/golden"
MCUNET_128_FULL_BACKWARD_MACS = 43_137_536  # = 2 x 22,453,504 forward MACs - the stem's input gradient


def test_mcunet_paper_budget_is_fifteen_percent_of_the_full_backward_pass():
    table = build_layer_table("mcunet", 128)
    assert full_backward_macs(table) == MCUNET_128_FULL_BACKWARD_MACS
    assert full_backward_macs(table) == 2 * total_forward_macs(table) - 64 * 64 * 16 * 27
    limit = Budget(memory_bytes=2**20, compute_fraction=0.15).compute_limit(table)
    assert limit == 0.15 * MCUNET_128_FULL_BACKWARD_MACS  # 6,470,630.4 MACs, not 15 % of the forward MACs
    assert limit != pytest.approx(0.15 * total_forward_macs(table))


def test_fraction_one_admits_full_train_and_nothing_more():
    table = build_layer_table("mcunet", 128)
    full = backward_cost(table, {layer.name: layer.out_channels for layer in table})
    assert Budget(compute_fraction=1.0).admits(full, table)
    assert not Budget(compute_fraction=math.nextafter(1.0, 0.0) * 0.999999).admits(full, table)


def test_golden_file_holds_the_same_number_the_java_core_checks():
    data = json.loads((GOLDEN / "selection_mcunet_128.json").read_text())
    assert data["compute_budget"] == {"compute_fraction": PAPER_COMPUTE_FRACTION,
                                      "full_backward_macs": MCUNET_128_FULL_BACKWARD_MACS,
                                      "compute_limit_macs": 0.15 * MCUNET_128_FULL_BACKWARD_MACS}
    assert selection_vectors("mcunet")["compute_budget"] == data["compute_budget"]  # the file is up to date


# ---- one B_mem: the paper's 1 MiB (set for MCUNet@128) scaled by the model's LastLayer memory ----

def test_reference_last_layer_memory_is_mcunet_128s():
    from tflite_train.sparse import REFERENCE_LAST_LAYER_BYTES, REFERENCE_MODEL, last_layer_memory

    table = build_layer_table(*REFERENCE_MODEL)
    assert REFERENCE_MODEL == ("mcunet", 128)
    assert last_layer_memory(table) == REFERENCE_LAST_LAYER_BYTES == 2_132_480
    last = table.layers[-1]
    assert REFERENCE_LAST_LAYER_BYTES == backward_cost(table, {last.name: last.out_channels}, optimizer="adam").total_bytes


def test_scaled_memory_budget_is_the_paper_budget_for_mcunet_128_and_scales_with_the_last_layer():
    from tflite_train.sparse import PAPER_MEMORY_BYTES, last_layer_memory, scaled_memory_budget

    assert PAPER_MEMORY_BYTES == 2**20
    assert scaled_memory_budget(build_layer_table("mcunet", 128)) == 2**20
    mcunet_64 = build_layer_table("mcunet", 64)
    assert scaled_memory_budget(mcunet_64) == pytest.approx(2**20 * 1_640_960 / 2_132_480)  # 0.770 MiB
    assert last_layer_memory(mcunet_64) == 1_640_960  # activations scale with the resolution, weights do not
    assert scaled_memory_budget(mcunet_64, 2 * 2**20) == 2 * scaled_memory_budget(mcunet_64)
    assert scaled_memory_budget(mcunet_64, math.inf) == math.inf
    with pytest.raises(ValueError, match="reference_bytes"):
        scaled_memory_budget(mcunet_64, -1.0)
    with pytest.raises(ValueError, match="reference_bytes"):
        scaled_memory_budget(mcunet_64, float("nan"))


def test_golden_file_holds_the_memory_budget_the_java_core_checks():
    from tflite_train.sparse import last_layer_memory, scaled_memory_budget

    for backbone in ("mcunet", "mbv2", "proxyless", "tiny"):
        data = json.loads((GOLDEN / f"selection_{backbone}_128.json").read_text())
        table = build_layer_table(backbone, 128)
        assert data["memory_budget"] == {"reference_bytes": 2**20, "reference_last_layer_bytes": 2_132_480,
                                         "last_layer_bytes": last_layer_memory(table),
                                         "memory_limit_bytes": scaled_memory_budget(table)}
    mcunet = json.loads((GOLDEN / "selection_mcunet_128.json").read_text())
    assert mcunet["memory_budget"]["memory_limit_bytes"] == 2**20
    assert selection_vectors("mcunet")["memory_budget"] == mcunet["memory_budget"]  # the file is up to date
