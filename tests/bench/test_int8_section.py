"""The int8 section's paired summary, worked by hand (``bench.int8_section.int8_summary``)."""

import pytest

from bench.int8_section import INT8_TOLERANCE_PP, int8_label, int8_summary


def test_int8_minus_float_by_hand():
    # t1: TinyTrain float 60, 70, 80; int8 59, 70, 78 -> differences -1, 0, -2: mean -1, s = 1,
    #     ci = t(0.975, 2) * 1 / sqrt(3) = 4.303 / 1.732 = 2.484.
    # t2: TinyTrain float 50, 50; int8 50, 52 -> differences 0, 2: mean +1.
    # average of the per-target means: (-1 + 1) / 2 = 0. None: identical files -> 0 everywhere.
    acc = {"None": {"t1": [10.0, 20.0, 30.0], "t2": [40.0, 50.0]},
           int8_label("None"): {"t1": [10.0, 20.0, 30.0], "t2": [40.0, 50.0]},
           "TinyTrain": {"t1": [60.0, 70.0, 80.0], "t2": [50.0, 50.0]},
           int8_label("TinyTrain"): {"t1": [59.0, 70.0, 78.0], "t2": [50.0, 52.0]}}
    s = int8_summary(acc, ["t1", "t2"])
    d = s["deltas"]["TinyTrain"]
    assert d["t1"]["mean"] == pytest.approx(-1.0) and d["t1"]["ci95"] == pytest.approx(4.3027 / 3 ** 0.5, rel=1e-3)
    assert d["t2"]["mean"] == pytest.approx(1.0) and d["average"]["mean"] == pytest.approx(0.0)
    assert s["deltas"]["None"]["average"]["mean"] == 0.0
    assert s["means"][int8_label("TinyTrain")]["t1"]["mean"] == pytest.approx(69.0)
    assert s["met"] and INT8_TOLERANCE_PP == 1.0
    # a 2-point loss on every task of both targets misses the goal
    acc[int8_label("TinyTrain")] = {"t1": [58.0, 68.0, 78.0], "t2": [48.0, 48.0]}
    assert not int8_summary(acc, ["t1", "t2"])["met"]


def test_rows_need_their_int8_partner_with_as_many_tasks():
    with pytest.raises(ValueError, match="needs both"):
        int8_summary({"None": {"t": [1.0, 2.0]}}, ["t"], rows=("None",))
    with pytest.raises(ValueError, match="2 tasks, its int8 row 3"):
        int8_summary({"None": {"t": [1.0, 2.0]}, int8_label("None"): {"t": [1.0, 2.0, 3.0]}}, ["t"], rows=("None",))


def test_timing_table_by_hand():
    from bench.int8_report import timing_table

    def row(seconds: float, step: float) -> dict:
        return {"end_to_end": seconds, "step": step, "steps": 1000}

    timing = {"task": {"ways": 5, "support": 25}, "runs": 3, "threads": 1, "infer": {"float": 0.008, "int8": 0.004},
              "rows": {"None": {"float": row(0.3, 0.0), "int8": row(0.6, 0.0)},
                       "TinyTrain": {"float": row(15.0, 0.0135), "int8": row(12.0, 0.009)}}}
    lines = timing_table(timing)
    assert "median of 3 run(s)" in lines[0] and "5-way task with 25 support images" in lines[0]
    assert lines[2:] == ["| | float | int8 | speed-up (float / int8) |", "|---|---|---|---|",
                         "| `infer` (ms) | 8.00 | 4.00 | 2.00x |",
                         "| None: adaptation (s) | 0.30 | 0.60 | 0.50x |",
                         "| TinyTrain: adaptation (s) | 15.00 | 12.00 | 1.25x |",
                         "| TinyTrain: optimizer step (ms, 1000 steps) | 13.50 | 9.00 | 1.50x |", ""]
