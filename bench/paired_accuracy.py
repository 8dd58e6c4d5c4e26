"""The paired accuracy table of one backbone: each policy's mean with a 95 % CI, the deltas that matter
with paired 95 % CIs, and the issue's targets as verdicts (pure functions of per-task accuracies).

Every policy runs on the same tasks of each target, so a delta A − B is estimated from the per-task
differences (``bench.confidence.paired_delta_ci95``); the average over targets is the mean of the
per-target means, for policies and deltas alike (``mean_over_groups_ci95``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench.confidence import mean_over_groups_ci95, paired_delta_ci95
from bench.methods import NO_META, NONE_NO_META, without_meta

AVERAGE = "average"
DELTAS = tuple((w(a), w(b)) for w in (str, without_meta)
               for a, b in (("TinyTrain", "FullTrain"), ("TinyTrain", "SparseUpdate"), ("TinyTrain", "LastLayer"),
                            ("TinyTrain", "None"))) + (("TinyTrain", NO_META), ("None", NONE_NO_META))
"""(A, B) of every reported delta A − B (those whose rows exist): on each set of weights, and across them."""
TARGETS = tuple((w(a), w(b), threshold, floor, each) for w in (str, without_meta)
                for a, b, threshold, floor, each in (("TinyTrain", "FullTrain", 0.0, -1.0, None),
                                                     ("TinyTrain", "SparseUpdate", 2.0, None, None),
                                                     ("TinyTrain", "LastLayer", 3.0, None, None),
                                                     ("TinyTrain", "None", 3.0, 0.0, 0.0))) + (
    ("TinyTrain", NO_META, 3.0, None, None),)
"""The issues' targets for the default backbone (issues 28 and 39), on each set of weights, as (A, B, threshold,
floor, each): the average paired delta A − B ≥ threshold (pp); where a floor is given, its 95 % CI's lower
bound ≥ floor (pp; issue 39's "> 0" for TinyTrain − None is read as ≥ 0); where ``each`` is given, every
target's mean delta ≥ each (pp)."""
TIME_TARGETS = tuple((w("TinyTrain"), w("FullTrain"), 0.25) for w in (str, without_meta))
"""(A, B, ratio) on each set of weights: A's measured seconds per adaptation (at its chosen passes) ≤ ratio × B's.
Both rows of a pair run on the same weights, so that a run which recomputed one set of weights' rows compares
seconds measured in one invocation."""


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
    for a, b, threshold, floor, each in TARGETS:
        d = deltas.get(delta_name(a, b))
        if d is None:
            continue
        avg = d[AVERAGE]
        low = avg["mean"] - avg["ci95"]
        below = [t for t in targets if each is not None and d[t]["mean"] < each]
        verdicts.append({"a": a, "b": b, "threshold": threshold, "floor": floor, "delta": avg["mean"],
                         "low": low, "high": avg["mean"] + avg["ci95"], "each": each,
                         "below": {t: d[t]["mean"] for t in below},
                         "met": avg["mean"] >= threshold and (floor is None or low >= floor) and not below})
    return {"means": means, "deltas": deltas, "targets": verdicts}


def time_verdicts(cost: Mapping[str, Mapping]) -> list[dict]:
    """``TIME_TARGETS`` on a run's measured costs (label -> ``seconds_per_task``), those whose two rows exist:
    ``[{"a", "b", "ratio", "measured", "met"}]``, measured = A's seconds per task / B's."""
    verdicts = []
    for a, b, ratio in TIME_TARGETS:
        if a not in cost or b not in cost or not cost[b].get("seconds_per_task"):
            continue
        measured = float(cost[a]["seconds_per_task"]) / float(cost[b]["seconds_per_task"])
        verdicts.append({"a": a, "b": b, "ratio": ratio, "measured": measured, "met": measured <= ratio})
    return verdicts


def verdict_sentence(v: Mapping, baseline_word: str | None = None) -> str:
    """One plain-words line for a target verdict, e.g. "TinyTrain ≥ LastLayer + 3 pp: **missed** (...)"."""
    b = baseline_word or v["b"]
    goal = f"{v['a']} ≥ {b}" + (f" + {v['threshold']:g} pp" if v["threshold"] else "")
    floor, each, below = v.get("floor"), v.get("each"), v.get("below") or {}
    if floor is not None:
        goal += f", its 95 % CI's lower bound ≥ {floor:+g} pp"
    if each is not None:
        goal += f", every target ≥ {each:+g} pp"
    head = f"{goal} (average paired delta): {{}}, {v['delta']:+.1f} pp [95 % CI {v['low']:+.1f}, {v['high']:+.1f}]; "
    targets = "; below on " + ", ".join(f"{t} ({d:+.1f} pp)" for t, d in below.items()) if below else ""
    if v["met"]:
        sure = ("the lower bound clears the floor" if floor is not None else
                "the whole 95 % CI clears it" if v["low"] >= v["threshold"] else
                "but the 95 % CI reaches below it, so it is not established")
        return head.format("**met**") + sure + "."
    average_met = v["delta"] >= v["threshold"] and (floor is None or v["low"] >= floor)
    if average_met:  # only a target's mean is below ``each``
        return head.format("**missed**") + "the average meets it" + targets + "."
    if floor is not None and v["delta"] >= v["threshold"]:
        return (head.format("**missed**") + "the delta reaches the threshold but the CI's lower bound is below the "
                "floor" + targets + ".")
    sure = ("the whole 95 % CI is below it" if v["high"] < v["threshold"] else
            "the 95 % CI reaches above it, so the miss is not established either")
    return head.format("**missed**") + sure + targets + "."


def time_sentence(v: Mapping) -> str:
    """One plain-words line for a ``time_verdicts`` entry."""
    return (f"{v['a']}'s adaptation ≤ {v['ratio']:g} × {v['b']}'s (measured seconds per task at the chosen passes, "
            f"the *s / task* column): {'**met**' if v['met'] else '**missed**'}, {v['measured']:.2f}×.")
