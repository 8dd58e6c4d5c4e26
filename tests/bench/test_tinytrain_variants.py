"""The TinyTrain variant study: each variant is one field away from the protocol; scores and paired deltas by hand."""

import dataclasses

import pytest

from bench.policy_runs import Method
from bench.tinytrain_variants import VARIANTS, render, summarise, variant_methods
from tflite_train.runtime import AdaptConfig


def test_each_variant_changes_one_field_and_the_reference_none():
    base = Method("TinyTrain", "lite0_128/sparse", AdaptConfig(policy="tinytrain", memory_bytes=4e6, seed=3,
                                                               on_empty="empty"))
    rows = variant_methods(base, [Method("None", "lite0_128/sparse", AdaptConfig(policy="none"))])
    assert [r[0] for r in rows] == ["None", *[v.name for v in VARIANTS]]
    ref = base.adapt.to_dict()
    for name, _, method in rows[1:]:
        changed = {k for k, v in method.adapt.to_dict().items() if v != ref[k]}
        assert (len(changed) == 0) == (name == "protocol"), name
        assert changed <= {"learning_rate", "epochs", "channel_ratio", "compute_fraction", "memory_bytes", "augment",
                           "augment_views"}, (name, changed)
        assert method.model == base.model and method.label == f"TinyTrain {name}"
    assert len({r[2].adapt for r in rows[1:]}) == len(VARIANTS)  # every variant is a distinct config


def test_summary_by_hand():
    accuracies = {"protocol": {"a": [60.0, 80.0], "b": [50.0, 50.0]},
                  "x": {"a": [70.0, 80.0], "b": [40.0, 50.0]}}
    s = summarise(accuracies, "protocol")
    assert s["protocol"]["score"] == pytest.approx((70 + 50) / 2) and "delta" not in s["protocol"]
    assert s["x"]["targets"] == {"a": 75.0, "b": 45.0}
    # per-target mean differences: a +5, b -5 -> mean 0
    assert s["x"]["delta"]["mean"] == pytest.approx(0.0) and s["x"]["delta"]["n"] == 4
    for row in s.values():
        row["layers"] = ["b15_depthwise"]
    rows = [(n, "q", None) for n in ("protocol", "x")]
    text = render(s, rows, {"command": "cmd", "tasks": 2, "workers": 1, "seconds": 60.0, "load": 0.5})
    assert "| x | q | 60.0 | 75.0 | 45.0 | +0.0 ±" in text and "validation pool" in text
