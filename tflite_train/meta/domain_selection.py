"""Leave-one-domain-out model selection (Gulrajani & Lopez-Paz, "In Search of Lost Domain Generalization", 2021).

Selecting on validation classes of the training sources ("training-domain validation") rewards
specialising to those sources. Leave-one-domain-out instead trains every candidate configuration
once per source h on all sources but h and scores it on h's validation classes, i.e. on a domain
it never trained on, as the evaluation targets will be:

    score(c, alpha, t) = (1 / |H|) sum_{h in H} acc_h(c, alpha, t),

where acc_h is the held-out accuracy of candidate c, trained without h for t steps and interpolated
with weight alpha towards its start (``weight_interpolation``). The chosen (c, alpha, t) is the
argmax; ties (scores within ``TIE``, i.e. equal up to float summation order) go to fewer steps, then
to the smaller alpha (less drift from the start), then to the earlier candidate. t = 0 (the start
itself, the same for every c and alpha) is a legitimate outcome: then no configuration transfers
better than not meta-training. The final model trains on all sources
with c for t steps (same learning-rate schedule as the held-out runs) and is interpolated with alpha.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

TIE = 1e-9
"""Scores closer than this are equal (accuracy means of the same tasks, summed in another order)."""


@dataclasses.dataclass(frozen=True)
class HeldOutScore:
    """One validation of a held-out run: ``candidate`` trained without ``held_out`` for ``step``
    steps, interpolated with ``alpha``, reaches ``accuracy`` on ``held_out``'s validation classes."""

    candidate: str
    held_out: str
    step: int
    alpha: float
    accuracy: float


@dataclasses.dataclass(frozen=True)
class LodoChoice:
    """The selected (candidate, alpha, step), its score (mean over held-out sources) and the per-source accuracies."""

    candidate: str
    alpha: float
    step: int
    score: float
    per_held_out: dict[str, float]


def lodo_scores(scores: Iterable[HeldOutScore]) -> dict[tuple[str, float, int], tuple[float, dict[str, float]]]:
    """Mean held-out accuracy per (candidate, alpha, step) over the held-out sources (module docstring).

    Raises:
      ValueError: a (candidate, alpha, step) lacks a held-out source others have, or is given twice.
    """
    table: dict[tuple[str, float, int], dict[str, float]] = {}
    held_out: set[str] = set()
    for s in scores:
        per = table.setdefault((s.candidate, float(s.alpha), int(s.step)), {})
        if s.held_out in per:
            raise ValueError(f"{s.candidate} alpha={s.alpha:g} step={s.step} held out {s.held_out}: given twice")
        per[s.held_out] = float(s.accuracy)
        held_out.add(s.held_out)
    out = {}
    for key, per in table.items():
        missing = sorted(held_out - set(per))
        if missing:
            raise ValueError(f"{key[0]} alpha={key[1]:g} step={key[2]}: no score with {', '.join(missing)} held out")
        out[key] = (sum(per.values()) / len(per), dict(sorted(per.items())))
    return out


def select_leave_one_domain_out(scores: Iterable[HeldOutScore]) -> LodoChoice:
    """The argmax of ``lodo_scores`` with the module docstring's tie-breaking.

    Raises:
      ValueError: no scores, or those of ``lodo_scores``.
    """
    scores = list(scores)
    if not scores:
        raise ValueError("no held-out scores to select from")
    order = {c: i for i, c in reversed(list(enumerate(s.candidate for s in scores)))}
    table = lodo_scores(scores)
    (candidate, alpha, step), (score, per) = max(
        table.items(), key=lambda kv: (round(kv[1][0] / TIE), -kv[0][2], -kv[0][1], -order[kv[0][0]]))
    return LodoChoice(candidate, alpha, step, score, per)
