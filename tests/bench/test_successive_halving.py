"""Golden tests of the tuning protocol, worked by hand: successive halving over the default grid, the
passes it costs (``run_cost``), and the presets."""

import math

import pytest

from bench.config import LITE0_128, BenchConfig, preset_config
from bench.policy_runs import Method
from bench.run_cost import estimate_seconds, tuning_passes
from bench.successive_halving import ValidationScore, ranked, successive_halving
from tflite_train.runtime import AdaptConfig

GRID = BenchConfig().tuning_grid  # {1e-4, 3e-4, 1e-3, 3e-3} x {5, 20, 40}, rate-major

# Validation scores by (label, tasks per target) -> "lr/passes" -> score.
# A, round 1 (2 tasks): best 60 twice (1e-3/5 before 3e-4/20: fewer passes), then 58 (3e-4/40), then
#   55 twice for the 4th place of ceil(12 / 3) = 4: 3e-4/5 (5 passes) beats 1e-3/20 (20 passes).
# A, round 2 (5 tasks): 61 twice: 3e-4/20 beats 3e-4/40 (fewer passes) -> A trains at 3e-4 for 20 passes.
# B, round 1: 3e-3/40 = 70, every other 50: the ties keep 5 passes, the smaller rates first:
#   1e-4/5, 3e-4/5, 1e-3/5. Round 2: 49 for 3e-3/40, 50 for the three others -> the smallest rate, 1e-4/5.
SCORES = {
    ("A", 2): {"0.0001/5": 40, "0.0001/20": 45, "0.0001/40": 50, "0.0003/5": 55, "0.0003/20": 60, "0.0003/40": 58,
               "0.001/5": 60, "0.001/20": 55, "0.001/40": 48, "0.003/5": 30, "0.003/20": 35, "0.003/40": 20},
    ("A", 5): {"0.001/5": 57, "0.0003/20": 61, "0.0003/40": 61, "0.0003/5": 50},
    ("B", 2): {**{f"{lr:g}/{e}": 50 for lr, e in GRID}, "0.003/40": 70},
    ("B", 5): {"0.003/40": 49, "0.0001/5": 50, "0.0003/5": 50, "0.001/5": 50},
}


def _methods():
    return [Method("None", "m", AdaptConfig(policy="none")), Method("A", "m", AdaptConfig(policy="last_layer")),
            Method("B", "m", AdaptConfig(policy="tinytrain")), Method("TinyTL", "m", None)]


def test_successive_halving_by_hand():
    calls = []

    def mean_accuracies(trials, tasks):
        calls.append((tasks, [(m.label, m.adapt.learning_rate, m.adapt.epochs) for m in trials]))
        return [ValidationScore(SCORES[m.label, tasks][f"{m.adapt.learning_rate:g}/{m.adapt.epochs}"]) for m in trials]

    chosen = successive_halving(_methods(), GRID, rounds=(2, 5), eta=3, mean_accuracies=mean_accuracies)
    assert {k: (v["learning_rate"], v["epochs"]) for k, v in chosen.items()} == {"A": (3e-4, 20), "B": (1e-4, 5)}
    # round 1: both trained policies x the 12 settings on 2 tasks; round 2: their 4 survivors on 5
    assert [(n, len(trials)) for n, trials in calls] == [(2, 24), (5, 8)]
    assert calls[0][1][:3] == [("A", 1e-4, 5), ("A", 1e-4, 20), ("A", 1e-4, 40)]
    assert {(lr, e) for label, lr, e in calls[1][1] if label == "A"} == {(1e-3, 5), (3e-4, 20), (3e-4, 40), (3e-4, 5)}
    assert {(lr, e) for label, lr, e in calls[1][1] if label == "B"} == {(3e-3, 40), (1e-4, 5), (3e-4, 5), (1e-3, 5)}
    a = chosen["A"]
    assert [r["tasks"] for r in a["rounds"]] == [2, 5]
    assert a["rounds"][0]["scores"] == SCORES["A", 2] and a["rounds"][1]["scores"] == SCORES["A", 5]
    assert a["scores"] == SCORES["A", 5]


def test_one_setting_needs_no_run_and_bad_arguments_are_refused():
    def never(trials, tasks):
        raise AssertionError("no validation run for a one-setting grid")

    chosen = successive_halving(_methods(), [(1e-3, 3)], rounds=(1,), eta=3, mean_accuracies=never)
    assert chosen == {label: {"learning_rate": 1e-3, "epochs": 3, "scores": {}, "rounds": []} for label in ("A", "B")}
    ok = lambda trials, tasks: [ValidationScore(50.0)] * len(trials)  # noqa: E731
    with pytest.raises(ValueError, match="rounds"):
        successive_halving(_methods(), GRID, rounds=(5, 2), eta=3, mean_accuracies=ok)
    with pytest.raises(ValueError, match="eta"):
        successive_halving(_methods(), GRID, rounds=(2, 5), eta=1, mean_accuracies=ok)
    with pytest.raises(ValueError, match="returned 1 values"):
        successive_halving(_methods(), GRID, rounds=(2,), eta=3,
                           mean_accuracies=lambda trials, tasks: [ValidationScore(1.0)])
    assert ranked({(1e-3, 40): 50.0, (3e-3, 5): 50.0, (1e-4, 5): 50.0, (1e-3, 20): 51.0}) == [
        (1e-3, 20), (1e-4, 5), (3e-3, 5), (1e-3, 40)]


def test_no_op_settings_rank_below_every_setting_that_trains():
    """B's scores as above, but its 1e-4 and 3e-4 settings leave None's accuracy unchanged on 3 of 4 tasks
    (share 0.75 > 0.5) and 1e-3/5 on exactly half (0.5: not a no-op). Round 1 keeps 3e-3/40 (70), then
    the best that train: 1e-3/5, 3e-3/5, 1e-3/20 (50 each; fewer passes, then the smaller rate); the
    no-op 1e-4/5 (50) is out. Round 2: 50 for the three, 49 for 3e-3/40 -> 1e-3/5. Without the rule B
    chose the no-op 1e-4/5."""
    def mean_accuracies(trials, tasks):
        out = []
        for m in trials:
            key = f"{m.adapt.learning_rate:g}/{m.adapt.epochs}"
            score = SCORES[m.label, tasks].get(key, 50.0 if m.label == "B" else None)
            unchanged = 0.75 if m.label == "B" and m.adapt.learning_rate < 1e-3 else 0.0
            if m.label == "B" and key == "0.001/5":
                unchanged = 0.5
            out.append(ValidationScore(score, unchanged))
        return out

    chosen = successive_halving(_methods(), GRID, rounds=(2, 5), eta=3, mean_accuracies=mean_accuracies)
    assert (chosen["B"]["learning_rate"], chosen["B"]["epochs"]) == (1e-3, 5)
    assert (chosen["A"]["learning_rate"], chosen["A"]["epochs"]) == (3e-4, 20)  # no no-op: unchanged choice
    assert set(chosen["B"]["scores"]) == {"0.003/40", "0.001/5", "0.003/5", "0.001/20"}
    assert chosen["B"]["rounds"][0]["unchanged"]["0.0001/5"] == 0.75
    # ranked: a no-op scoring 90 still comes after a setting that trains scoring 10; without shares, by score
    scores = {(1e-4, 5): 90.0, (1e-3, 5): 10.0}
    assert ranked(scores, {(1e-4, 5): 0.6, (1e-3, 5): 0.0}) == [(1e-3, 5), (1e-4, 5)]
    assert ranked(scores) == [(1e-4, 5), (1e-3, 5)]
    # every setting a no-op: the order among them is the usual one (the policy is flagged in the report)
    assert ranked(scores, {(1e-4, 5): 1.0, (1e-3, 5): 1.0}) == [(1e-4, 5), (1e-3, 5)]


def test_tuning_passes_and_the_wall_time_estimate_by_hand():
    # Default grid: passes 40 x 4, 20 x 4, 5 x 4 (sum 260). Round 1: 2 tasks x 260 = 520; ceil(12 / 3) = 4
    # survivors, at most the four 40s: 3 new tasks x 160 = 480. 1000 passes per target and policy.
    assert tuning_passes(BenchConfig()) == 1000
    assert tuning_passes(BenchConfig(halving_rounds=())) == 5 * 260  # the full grid on every task
    assert tuning_passes(BenchConfig(learning_rates=(1e-3,), epochs_grid=(3,))) == 0  # nothing to choose
    # rounds (1, 3, 6), eta 2: 1 x 260 + 2 x (6 largest: 4 x 40 + 2 x 20 = 200) + 3 x (3 largest: 120) = 1020
    assert tuning_passes(BenchConfig(tuning_tasks=6, halving_rounds=(1, 3), halving_eta=2)) == 1020
    # TinyTrain measured 40 s per task at 20 passes (2 s per pass), None 0.5 s per task; powered preset (5
    # rates: round 1 2 x 5 x 65 = 650 passes, round 2 the five 40s on 3 new tasks = 600), 4 targets, 1 worker:
    # tuning 4 x 1250 x 2 = 10000 s; tests 60 x 4 x (40 x 2 + 0.5) = 19320 s.
    run = {"methods": {"None": {"adapt": {"policy": "none", "epochs": 40}},
                       "TinyTrain": {"adapt": {"policy": "tinytrain", "epochs": 20}}},
           "cost": {"None": {"seconds_per_task": 0.5}, "TinyTrain": {"seconds_per_task": 40.0}}}
    powered = preset_config("powered", workers=1)
    est = estimate_seconds(powered, {"lite0_128": run, "mcunet_64": run}, 4)
    assert est == {"lite0_128": {"tuning": 10000.0, "tests": 19320.0, "total": 29320.0}}  # mcunet: not in the preset


def test_powered_preset():
    powered = preset_config("powered")
    assert powered.backbones == (LITE0_128,) and powered.targets is None  # every target of the cache
    assert powered.tasks >= 60 and powered.tuning_tasks >= 5 and powered.full_train_batch == 1
    assert powered.learning_rates == (3e-5, 1e-4, 3e-4, 1e-3, 3e-3) and powered.epochs_grid == (5, 20, 40)
    assert powered.tuning_schedule == (2, 5) and math.ceil(len(powered.tuning_grid) / powered.halving_eta) == 5
    assert "accuracy" in powered.sections
    assert preset_config("powered", tasks=2).tasks == 2
    assert BenchConfig(tuning_tasks=1).tuning_schedule == (1,)  # rounds at or above tuning_tasks are dropped
    with pytest.raises(ValueError, match="unknown bench preset 'nope'"):
        preset_config("nope")


def test_kept_choices_keeps_only_unchanged_methods():
    """A saved choice survives only for a method with the same model, model id and untuned config: a
    changed policy setting (here SparseUpdate's criterion), another model id or another tuning rule
    sends that method (only) back to the tuning."""
    from bench.learning_rates import with_setting
    from bench.successive_halving import TUNING_RULE, kept_choices

    sparse = Method("SparseUpdate", "m", AdaptConfig(policy="sparse_update", memory_bytes=1e6))
    methods = [*_methods(), sparse]
    chosen = {"A": {"learning_rate": 3e-4, "epochs": 20}, "B": {"learning_rate": 1e-4, "epochs": 5},
              "SparseUpdate": {"learning_rate": 1e-3, "epochs": 40}}
    saved_methods = {m.label: {"model": m.model, "adapt": with_setting(
        m, (chosen[m.label]["learning_rate"], chosen[m.label]["epochs"])).adapt.to_dict()}
        for m in methods if m.label in chosen}
    saved = {"tuning_rule": TUNING_RULE, "tuning": chosen, "methods": saved_methods, "model_ids": {"m": "id1"}}
    assert kept_choices(saved, methods, {"m": "id1"}) == chosen
    changed = Method("SparseUpdate", "m", AdaptConfig(policy="sparse_update", memory_bytes=1e6, criterion="fisher"))
    assert kept_choices(saved, [*_methods(), changed], {"m": "id1"}) == {k: chosen[k] for k in ("A", "B")}
    assert kept_choices(saved, methods, {"m": "id2"}) == {}
    assert kept_choices({**saved, "tuning_rule": "older rule"}, methods, {"m": "id1"}) == {}
    assert kept_choices({}, methods, {"m": "id1"}) == {}
    assert successive_halving([changed.__class__("None", "m", AdaptConfig(policy="none"))], GRID, (2, 5), 3,
                              lambda trials, n: pytest.fail("nothing to tune")) == {}
