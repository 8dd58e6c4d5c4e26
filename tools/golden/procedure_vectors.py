"""Golden vectors that pin the Java fine-tuning procedure's pure parts (``org.tflitetrain.core.adapt.RateChoice``
and ``UpdatePlan``) to Python's ``tflite_train.runtime.adaptation.rate_choice`` and ``tflite_train.runtime.adaptation.fine_tuning``.

One file, ``procedure.json``, of hand-picked cases (numpy only; no interpreter is opened):

* ``held_out_score``: embeddings, labels, prototypes and the head scale s -> (accuracy, cross-entropy) of the
  cosine classifier s cos(e, c_k); includes an argmax tie (two equal prototypes: the lower class id wins), a
  zero embedding and a wrong nearest prototype.
* ``choose_rate``: candidate rates, (accuracy, cross-entropy) scores, held-out count and rule -> the chosen
  rate and its reason, or ``error``; covers accuracy ties (to the rate listed first), accuracy_loss ties
  (the lower cross-entropy, then the order), the empty held-out set (``NO_HOLDOUT_RULE``) and refused input.
* ``plan_updates``: the config's modes and batch, the support size, the model's flags (cached cut, episode
  step, accumulation) and ``fits`` as a row limit (a call of r rows fits B_mem iff r <= limit) -> the plan
  (prototype mode, batch mode, batch, rows, note).

Accuracies are multiples of 1/4 or 1/3 so the reasons' ``%.3f`` is the same in both languages (no binary
half-way value to round).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adaptation.fine_tuning import plan_updates
from tflite_train.runtime.adaptation.rate_choice import choose_rate, held_out_score

PROCEDURE_FILE = "procedure.json"


def _score_cases() -> list[dict[str, Any]]:
    rng = np.random.default_rng(39)
    cases = [
        # two classes, both rows nearest their own prototype
        ([[1.0, 0.0], [0.0, 2.0]], [0, 1], [[2.0, 0.1], [0.1, 1.0]], 10.0),
        # the second row is nearer the wrong prototype
        ([[1.0, 0.0], [1.0, 0.2]], [0, 1], [[1.0, 0.1], [0.0, 1.0]], 5.0),
        # equal prototypes: an argmax tie goes to class 0; a zero embedding scores cosine 0 everywhere
        ([[0.3, 0.4], [0.0, 0.0], [0.3, 0.4]], [1, 1, 0], [[3.0, 4.0], [3.0, 4.0], [-1.0, 0.0]], 20.0),
    ]
    embeddings = rng.normal(size=(7, 5)).round(4)
    prototypes = rng.normal(size=(3, 5)).round(4)
    cases.append((embeddings.tolist(), [0, 1, 2, 0, 1, 2, 2], prototypes.tolist(), 16.0))
    out = []
    for e, y, c, s in cases:
        accuracy, loss = held_out_score(np.asarray(e), np.asarray(y), np.asarray(c), s)
        # the loss to 12 digits: numpy builds differ in the last bit of exp/log (the workstation and the Pi env)
        out.append({C.EMBEDDINGS: e, "labels": y, C.PROTOTYPES: c, "scale": s, "accuracy": accuracy,
                    "loss": round(loss, 12)})
    return out


def _choice_cases() -> list[dict[str, Any]]:
    cases = [
        ([0.0, 1e-3, 1e-2], [(0.5, 0.9), (0.75, 0.8), (0.75, 0.7)], 4, "accuracy"),  # tie -> the first listed
        ([0.0, 1e-3, 1e-2], [(0.5, 0.9), (0.75, 0.8), (0.75, 0.7)], 4, "accuracy_loss"),  # tie -> lower loss
        ([0.0, 1e-3, 1e-2], [(0.75, 0.6), (0.75, 0.6), (0.5, 0.1)], 4, "accuracy_loss"),  # full tie -> first
        ([0.0, 1e-3], [(2 / 3, 0.5), (2 / 3, 0.4)], 3, "accuracy"),  # no rate beat no update
        ([1e-3, 0.0], [(1 / 3, 1.2), (1 / 3, 1.1)], 3, "accuracy"),  # 0 not first: the first listed wins
        ([0.0, 1e-2], [], 0, "accuracy"),  # no held-out image
        ([0.0, 1e-2], [], 0, "accuracy_loss"),
        ([], [], 2, "accuracy"),  # refused: no rates
        ([0.0, -1e-3], [(0.5, 1.0), (0.5, 1.0)], 2, "accuracy"),  # refused: a negative rate
        ([0.0, 1e-3], [(0.5, 1.0)], 2, "accuracy"),  # refused: one score for two rates
        ([0.0, 1e-3], [(0.5, 1.0), (0.5, 1.0)], 2, "loss"),  # refused: unknown rule
    ]
    out = []
    for rates, scores, held, rule in cases:
        case: dict[str, Any] = {"rates": rates, "scores": [list(s) for s in scores], "held_out": held, "choice_score": rule}
        try:
            choice = choose_rate(rates, scores, held, rule)
        except ValueError:
            case["error"] = "ValueError"
        else:
            case.update(rate=choice.rate, reason=choice.reason)
        out.append(case)
    return out


def _plan_cases() -> list[dict[str, Any]]:
    out = []
    for prototypes in ("fixed", "refresh", "episode"):
        for mode in ("batch", "accumulate"):
            for cached, episode, accumulate in ((True, True, True), (True, False, False), (False, False, False)):
                for batch, support, limit in ((4, 6, 100), (4, 6, 2), (4, 6, 8), (1, 3, 0)):
                    plan = plan_updates(prototypes, mode, batch, support, cached=cached, episode=episode,
                                        accumulate=accumulate, fits=lambda rows, limit=limit: rows <= limit)
                    out.append({"prototype_mode": prototypes, "batch_mode": mode, "batch": batch,
                                "num_support": support, "cached": cached, "episode": episode,
                                "accumulate": accumulate, "fits_rows": limit, "plan": plan.to_dict()})
    return out


def procedure_vectors() -> dict[str, Any]:
    """Every case of ``procedure.json`` as a JSON-ready dict (pure)."""
    return {"held_out_score": _score_cases(), "choose_rate": _choice_cases(), "plan_updates": _plan_cases()}


def render_procedure_vectors() -> dict[str, str]:
    """File name -> file text of the procedure golden file (pure; no I/O)."""
    return {PROCEDURE_FILE: json.dumps(procedure_vectors(), indent=1, sort_keys=True, allow_nan=False) + "\n"}


__all__ = ["PROCEDURE_FILE", "procedure_vectors", "render_procedure_vectors"]
