"""B_mem and B_compute of the benchmark rows are the library's one definition of each budget."""

import pytest


def test_compute_budget_is_a_fraction_of_full_backward_macs():
    from bench.policy_runs import compute_budget_macs

    # MCUNet@128: forward 22,453,504 MACs; the full backward pass is twice that minus the stem's
    # input gradient (64x64 outputs x 16 channels x 27 taps = 1,769,472), i.e. 43,137,536.
    assert compute_budget_macs("mcunet", 128, 0.15) == pytest.approx(0.15 * (2 * 22_453_504 - 64 * 64 * 16 * 27))


def test_memory_budget_scales_with_last_layer_memory():
    from bench.policy_runs import memory_budget_bytes
    from tflite_train.architectures import build_layer_table

    from tflite_train.sparse import scaled_memory_budget

    assert memory_budget_bytes(build_layer_table("mcunet", 128), 1.0) == pytest.approx(2**20)
    assert memory_budget_bytes(build_layer_table("mcunet", 64), 1.0) < 2**20
    for backbone, size, mib in (("mcunet", 64, 1.0), ("mbv2", 128, 1.0), ("proxyless", 96, 2.5)):
        table = build_layer_table(backbone, size)  # the bench's B_mem is the library's one definition
        assert memory_budget_bytes(table, mib) == scaled_memory_budget(table, mib * 2**20)


def test_published_memory_budgets_are_the_librarys():
    """The committed results' B_mem per model equals the library's definition of its layer table."""
    import json
    import pathlib

    from tflite_train.architectures import build_layer_table
    from tflite_train.sparse import scaled_memory_budget

    results = json.loads((pathlib.Path(__file__).resolve().parents[2] / "bench/results/results.json").read_text())
    runs = {k: r for k, r in results["sections"].get("accuracy", {}).get("runs", {}).items()
            if "memory_budget_bytes" in r}
    if not runs:  # a resumable run (results.json is rewritten as it goes) that has not reached its first model
        pytest.skip("the committed results hold no accuracy run with a budget yet")
    for run in runs.values():
        if run["backbone"] == "mcunet":
            assert scaled_memory_budget(build_layer_table("mcunet", run["input_size"])) == pytest.approx(
                run["memory_budget_bytes"])
        else:
            assert run["input_size"] == 128 and run["memory_budget_bytes"] / 2**20 == pytest.approx(4.005, abs=5e-4)


def test_memory_budget_of_a_model_is_the_default_rule_with_the_benchs_compute_budget():
    """With the candidates: the scaled B_mem where a candidate fits it (MCUNet@128), raised to admit one on a
    small model (tiny@128), B_compute held at the bench's."""
    from bench.policy_runs import memory_budget_bytes
    from tflite_train.architectures import build_layer_table
    from tflite_train.sparse import Budget, admitting_budget, scaled_memory_budget

    mcunet = build_layer_table("mcunet", 128)
    assert memory_budget_bytes(mcunet, 1.0, mcunet.names) == 2**20
    tiny = build_layer_table("tiny", 128)
    paper = Budget(scaled_memory_budget(tiny), compute_fraction=0.15)
    raised = memory_budget_bytes(tiny, 1.0, tiny.names)
    assert raised == admitting_budget(paper, tiny, tiny.names, channel_ratio=0.25, raise_compute=False).budget.memory_bytes
    assert raised > paper.memory_bytes
