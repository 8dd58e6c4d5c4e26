"""The issue's targets on a paired table, worked by hand (``bench.paired_accuracy``)."""

import pytest

from bench.methods import without_meta
from bench.paired_accuracy import summarize, time_sentence, time_verdicts, verdict_sentence

# Two targets, 3 tasks each. Per-task TinyTrain − B differences:
#   FullTrain:    t1 [1, 0, -1], t2 [0, 0, 0]   -> average delta 0 (>= 0)
#   SparseUpdate: t1 [2, 2, 2],  t2 [1, 1, 1]   -> 1.5 (< 2: missed), CI of the two target means
#   LastLayer:    t1 [3, 3, 3],  t2 [4, 4, 4]   -> 3.5 (>= 3)
TT = {"t1": [50.0, 60.0, 70.0], "t2": [40.0, 50.0, 60.0]}
ROWS = {"TinyTrain": TT,
        "FullTrain": {"t1": [49.0, 60.0, 71.0], "t2": [40.0, 50.0, 60.0]},
        "SparseUpdate": {"t1": [48.0, 58.0, 68.0], "t2": [39.0, 49.0, 59.0]},
        "LastLayer": {"t1": [47.0, 57.0, 67.0], "t2": [36.0, 46.0, 56.0]}}


def test_targets_by_hand():
    verdicts = {v["b"]: v for v in summarize(ROWS, ["t1", "t2"])["targets"]}
    assert set(verdicts) == {"FullTrain", "SparseUpdate", "LastLayer"}
    full, sparse, last = verdicts["FullTrain"], verdicts["SparseUpdate"], verdicts["LastLayer"]
    assert (full["threshold"], full["floor"], sparse["threshold"], last["threshold"]) == (0.0, -1.0, 2.0, 3.0)
    assert full["delta"] == pytest.approx(0.0) and sparse["delta"] == pytest.approx(1.5)
    assert last["delta"] == pytest.approx(3.5)
    # FullTrain: t1's differences have SD 1, so the average's CI is wide: the delta reaches 0 but the
    # lower bound is below -1 -> missed; SparseUpdate below its 2 pp; LastLayer's differences are constant
    # within each target (SE 0: the average's CI is the point 3.5).
    assert full["low"] < -1.0 and not full["met"]
    assert not sparse["met"] and last["met"] and last["low"] == pytest.approx(3.5)
    assert "the delta reaches the threshold but the CI's lower bound is below the floor" in verdict_sentence(full)
    assert verdict_sentence(sparse).startswith("TinyTrain ≥ SparseUpdate + 2 pp (average paired delta): **missed**")
    narrow = {**full, "low": -0.5, "high": 0.5, "met": True}
    assert verdict_sentence(narrow).endswith("**met**, +0.0 pp [95 % CI -0.5, +0.5]; the lower bound clears the floor.")


def test_time_target_by_hand_on_each_set_of_weights():
    cost = {"TinyTrain": {"seconds_per_task": 18.0}, "FullTrain": {"seconds_per_task": 50.0}}
    [v] = time_verdicts(cost)
    assert v == {"a": "TinyTrain", "b": "FullTrain", "ratio": 0.25, "measured": pytest.approx(0.36), "met": False}
    assert time_sentence(v).endswith("**missed**, 0.36×.")
    assert time_verdicts({**cost, "TinyTrain": {"seconds_per_task": 12.5}})[0]["met"]
    assert time_verdicts({"TinyTrain": {"seconds_per_task": 1.0}}) == []
    # the pair without meta-training is judged on its own rows, never against the meta-trained FullTrain
    both = {**cost, without_meta("TinyTrain"): {"seconds_per_task": 3.0},
            without_meta("FullTrain"): {"seconds_per_task": 15.0}}
    first, second = time_verdicts(both)
    assert (second["a"], second["b"], second["measured"]) == (without_meta("TinyTrain"), without_meta("FullTrain"),
                                                              pytest.approx(0.2))
    assert second["met"] and not first["met"]


def test_issue_39_goal_needs_every_target_and_applies_to_each_set_of_weights():
    """TinyTrain − None: average +3.5 pp with a tight CI, but t2 is below 0 -> missed, naming t2; the same goal
    is checked on the rows without meta-training."""
    none = {"t1": [40.0, 50.0, 60.0], "t2": [41.0, 51.0, 61.0]}  # TinyTrain − None: t1 +10, t2 -1 (constant)
    base = {"t1": [44.0, 54.0, 64.0], "t2": [37.0, 47.0, 57.0]}  # +6 and +3: met on every target
    rows = {"TinyTrain": TT, "None": none,
            "TinyTrain without meta-training": TT, "None without meta-training": base}
    verdicts = {(v["a"], v["b"]): v for v in summarize(rows, ["t1", "t2"])["targets"]}
    meta = verdicts[("TinyTrain", "None")]
    assert meta["delta"] == pytest.approx(4.5) and meta["low"] == pytest.approx(4.5)
    assert not meta["met"] and meta["below"] == {"t2": pytest.approx(-1.0)}
    assert verdict_sentence(meta).endswith("the average meets it; below on t2 (-1.0 pp).")
    assert "every target ≥ +0 pp" in verdict_sentence(meta)
    assert verdicts[("TinyTrain without meta-training", "None without meta-training")]["met"]
