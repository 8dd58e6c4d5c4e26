"""The paired accuracy table of one backbone: each policy's mean with a 95 % CI, the deltas that matter
with paired 95 % CIs, and the issue's targets as verdicts (pure functions of per-task accuracies).

Every policy runs on the same tasks of each target, so a delta A − B is estimated from the per-task
differences (``bench.confidence.paired_delta_ci95``); the average over targets is the mean of the
per-target means, for policies and deltas alike (``mean_over_groups_ci95``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench.confidence import mean_over_groups_ci95, paired_delta_ci95
from bench.methods import NO_META, NONE_NO_META

AVERAGE = "average"
DELTAS = (("TinyTrain", "FullTrain"), ("TinyTrain", "SparseUpdate"), ("TinyTrain", "LastLayer"),
          ("TinyTrain", "None"), ("TinyTrain", NO_META), ("None", NONE_NO_META))
"""(A, B) of every reported delta A − B (those whose rows exist)."""
TARGETS = (("TinyTrain", "FullTrain", 0.0), ("TinyTrain", "SparseUpdate", 0.0), ("TinyTrain", "LastLayer", 3.0),
           ("TinyTrain", NO_META, 3.0))
"""The issue's targets for the new default: average paired delta A − B ≥ threshold (pp)."""


def delta_name(a: str, b: str) -> str:
    """``"A − B"``."""
    return f"{a} − {b}"


def target_means(per_target: Mapping[str, Sequence[float]], targets: Sequence[str]) -> dict:
    """``{target|"average": MeanCI dict}`` of one row's per-task accuracies (the average: the mean of the
    target means with its Welch–Satterthwaite interval, ``mean_over_groups_ci95``)."""
    out = {t: mean_over_groups_ci95([per_target[t]]).to_dict() for t in targets}
    out[AVERAGE] = mean_over_groups_ci95([per_target[t] for t in targets]).to_dict()
    return out


def paired_deltas(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], targets: Sequence[str]) -> dict:
    """``{target|"average": MeanCI dict}`` of A − B on the same tasks: per target the paired t-interval, on
    average the mean of the per-target differences' means (``mean_over_groups_ci95``).

    Raises:
      ValueError: A and B have different task counts on a target (``paired_delta_ci95``).
    """
    out = {t: paired_delta_ci95(a[t], b[t]).to_dict() for t in targets}
    out[AVERAGE] = mean_over_groups_ci95([[x - y for x, y in zip(a[t], b[t])] for t in targets]).to_dict()
    return out


def summarize(accuracies: Mapping[str, Mapping[str, Sequence[float]]], targets: Sequence[str]) -> dict:
    """Means, paired deltas and target verdicts of one backbone's paired table.

    Args:
      accuracies: label -> target -> per-task accuracies (%), every label on the same tasks in order.
      targets: The targets, in report order (each needs >= 2 tasks).

    Returns:
      ``{"means": {label: {target|"average": MeanCI dict}}, "deltas": {"A − B": {...}},
      "targets": [{"a", "b", "threshold", "delta", "low", "high", "met"}]}``; "met" compares the
      average delta's point estimate with the threshold; "low"/"high" are its 95 % CI.

    Raises:
      ValueError: a label that lacks a target or has tasks of another count than its partner.
    """
    means = {}
    for label, per_target in accuracies.items():
        missing = [t for t in targets if t not in per_target]
        if missing:
            raise ValueError(f"{label}: no accuracies for targets {missing}")
        means[label] = target_means(per_target, targets)
    deltas = {delta_name(a, b): paired_deltas(accuracies[a], accuracies[b], targets)
              for a, b in DELTAS if a in accuracies and b in accuracies}
    verdicts = []
    for a, b, threshold in TARGETS:
        d = deltas.get(delta_name(a, b))
        if d is None:
            continue
        avg = d[AVERAGE]
        verdicts.append({"a": a, "b": b, "threshold": threshold, "delta": avg["mean"],
                         "low": avg["mean"] - avg["ci95"], "high": avg["mean"] + avg["ci95"],
                         "met": avg["mean"] >= threshold})
    return {"means": means, "deltas": deltas, "targets": verdicts}


def verdict_sentence(v: Mapping, baseline_word: str | None = None) -> str:
    """One plain-words line for a target verdict, e.g. "TinyTrain ≥ LastLayer + 3 pp: **missed** (...)"."""
    b = baseline_word or v["b"]
    goal = f"{v['a']} ≥ {b}" + (f" + {v['threshold']:g} pp" if v["threshold"] else "")
    if v["met"]:
        word = "**met**"
        sure = ("the whole 95 % CI clears it" if v["low"] >= v["threshold"] else
                "but the 95 % CI reaches below it, so it is not established")
    else:
        word = "**missed**"
        sure = ("the whole 95 % CI is below it" if v["high"] < v["threshold"] else
                "the 95 % CI reaches above it, so the miss is not established either")
    return (f"{goal} (average paired delta): {word}, {v['delta']:+.1f} pp "
            f"[95 % CI {v['low']:+.1f}, {v['high']:+.1f}]; {sure}.")
