"""One B_compute: a relative compute budget is a fraction of the full backward pass.

The number is pinned on both sides: here for Python, and in the Java core's
``ComputeBudgetGoldenTest`` from the same golden file (``tflite-train golden``).
"""

import json
import math
import pathlib

import pytest

from tflite_train.architectures import build_layer_table
from tools.golden.selection_vectors import PAPER_COMPUTE_FRACTION, selection_vectors
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


# ---- the default budget: the paper's, raised on a small model just enough to admit one candidate ----

def _single(table, name, ratio=0.25, batch_size=1):
    from tflite_train.sparse import channel_count

    return backward_cost(table, {name: channel_count(table[name].out_channels, ratio)}, batch_size=batch_size)


def test_default_budget_is_the_papers_where_a_candidate_fits_it():
    from tflite_train.sparse import default_budget

    table = build_layer_table("mcunet", 128)
    candidates = table.last_blocks(4)
    budget = default_budget(table, candidates, compute_fraction=0.15, channel_ratio=0.25)
    assert budget == Budget(memory_bytes=2**20, compute_fraction=0.15)  # MCUNet@128: the paper's 1 MiB, 15 %


def test_default_budget_of_a_small_model_admits_the_candidate_needing_the_least_raise():
    """tiny@32: the scaled B_mem (16.0 KiB) and 15 % of the backward pass (71 k MACs) admit none of its 13
    candidates; each layer l needs the raise max(mem_l / B_mem, macs_l / B_compute); b03_expand needs the least
    (its MACs fit, its memory is 25.2 KiB), so the default becomes exactly its memory, B_compute unchanged."""
    from tflite_train.sparse import admitting_budget, default_budget, scaled_memory_budget

    table = build_layer_table("tiny", 32)
    candidates = range(len(table))
    paper = Budget(memory_bytes=scaled_memory_budget(table), compute_fraction=0.15)
    costs = {layer.name: _single(table, layer.name) for layer in table}
    assert not any(paper.admits(c, table) for c in costs.values())
    needs = {n: max(c.total_bytes / paper.memory_bytes, c.backward_macs / paper.compute_limit(table))
             for n, c in costs.items()}
    best = min(needs, key=needs.get)
    assert best == "b03_expand" and needs[best] > 1
    budget = default_budget(table, candidates, compute_fraction=0.15, channel_ratio=0.25)
    assert budget == Budget(memory_bytes=costs[best].total_bytes, compute_fraction=0.15)
    assert [table.layers[i].name for i in range(len(table)) if budget.admits(costs[table.layers[i].name], table)] == \
        [best]
    admission = admitting_budget(paper, table, candidates, channel_ratio=0.25)
    assert admission.budget == budget and table.layers[admission.layer].name == best and admission.cost == costs[best]
    assert admitting_budget(budget, table, candidates, channel_ratio=0.25).layer is None  # admits one already
    assert round(budget.memory_bytes / 1024, 1) == 25.2 and round(paper.memory_bytes / 1024, 1) == 16.0


def test_a_raised_compute_bound_becomes_absolute_macs_and_only_default_bounds_are_raised():
    from tflite_train.sparse import admitting_budget, scaled_memory_budget

    table = build_layer_table("tiny", 128)
    names = table.names
    paper = Budget(memory_bytes=scaled_memory_budget(table), compute_fraction=0.15)
    raised = admitting_budget(paper, table, names, channel_ratio=0.25).budget
    chosen = [n for n in names if raised.admits(_single(table, n), table)]
    assert chosen and raised.compute_fraction is None and raised.compute_macs > paper.compute_limit(table)
    assert raised.memory_bytes > paper.memory_bytes  # tiny@128: 193.0 KiB -> 384.6 KiB, 1.13 M -> 2.13 M MACs
    assert (round(paper.memory_bytes / 1024, 1), round(raised.memory_bytes / 1024, 1)) == (193.0, 384.6)
    assert (round(paper.compute_limit(table) / 1e6, 2), round(raised.compute_macs / 1e6, 2)) == (1.13, 2.13)
    # a bound the user gave stays; a layer over it cannot be the one admitted
    memory_only = admitting_budget(paper, table, names, channel_ratio=0.25, raise_compute=False).budget
    assert memory_only.compute_fraction == 0.15 and memory_only.compute_macs is None
    assert any(memory_only.admits(_single(table, n), table) for n in names)
    given = Budget(memory_bytes=1024, compute_fraction=0.15)  # 1 KiB: no layer fits, and it may not be raised
    assert admitting_budget(given, table, names, channel_ratio=0.25, raise_memory=False).budget == given
    # the run's channel ratio and batch size decide the costs
    wide = admitting_budget(paper, table, names, channel_ratio=1.0, batch_size=4).budget
    assert any(wide.admits(_single(table, n, 1.0, 4), table) for n in names)
    assert wide.memory_bytes > raised.memory_bytes


def test_golden_file_holds_the_default_budgets_the_java_core_checks():
    """The Java core recomputes these (``DefaultBudgetGoldenTest``); both bounds raised is ``default_budget``."""
    from tflite_train.sparse import default_budget

    raised = 0
    for backbone in ("mcunet", "mbv2", "proxyless", "tiny"):
        data = json.loads((GOLDEN / f"selection_{backbone}_128.json").read_text())
        table = build_layer_table(backbone, 128)
        assert data["default_budget"] == selection_vectors(backbone)["default_budget"]  # the file is up to date
        for case in data["default_budget"]:
            if case["raise_memory"] and case["raise_compute"]:
                budget = default_budget(table, case["candidates"], compute_fraction=0.15,
                                        channel_ratio=case["channel_ratio"], optimizer=case["optimizer"],
                                        batch_size=case["batch_size"])
                assert budget.to_dict() == case["budget"]
                raised += case["budget"] != case["paper"]
    assert raised > 0
    mcunet = json.loads((GOLDEN / "selection_mcunet_128.json").read_text())["default_budget"]
    assert all(c["budget"] == c["paper"] for c in mcunet if c["set"] == "blocks:4" and c["batch_size"] == 1
               and c["channel_ratio"] == 0.25)  # MCUNet@128 at adapt's defaults: the paper's 1 MiB
