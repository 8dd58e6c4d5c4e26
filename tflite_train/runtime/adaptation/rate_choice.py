"""The per-task choice of the learning rate on held-out support images (pure; numpy only).

P>M>F's fine-tuning (Hu et al., CVPR 2022; TinyTrain appendix C runs every method with it) does not use one
learning rate for every task: it splits the support set S into a prototype set S_p (one image per class)
and a held-out set S_h (the rest), fine-tunes on S_p alone with each candidate rate eta of a short list that
contains 0 (no update), scores each adapted backbone f_eta by the nearest-prototype accuracy on S_h,

    acc(eta) = 1/|S_h| sum_{(x, y) in S_h} [ argmax_k cos(f_eta(x), c_k^eta) = y ],
    c_k^eta = mean of f_eta(x') over x' in S_p with label k,

and then fine-tunes on the whole support set with eta* = argmax acc(eta). Ties go to the rate listed first;
the list starts with 0, so "no update" wins unless some rate does strictly better on the held-out images
(``SCORES["accuracy"]``, P>M>F's rule). A dozen held-out images make many ties; ``SCORES["accuracy_loss"]``
breaks them by the held-out cross-entropy of the cosine classifier (the exported head, scale s),

    ce(eta) = 1/|S_h| sum_{(x, y) in S_h} -log softmax_k( s cos(f_eta(x), c_k^eta) )[y],

the lower winning, and only then by the order of the list.
A task with nothing to hold out (every class has one image: |S_h| = 0) cannot score a rate: the stated rule
(``NO_HOLDOUT_RULE``) is P>M>F's, rate 0 (the prototypes of the untrained backbone, no update).

``held_out_split`` and ``choose_rate`` are pure functions of their inputs; ``tflite_train.runtime.adaptation.trainer``
runs the fine-tuning and calls them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["NO_HOLDOUT_RULE", "SCORES", "RateChoice", "choose_rate", "held_out_score", "held_out_split"]

SCORES = {"accuracy": "held-out accuracy; ties to the rate listed first (P>M>F)",
          "accuracy_loss": "held-out accuracy; ties to the lower held-out cross-entropy, then the rate listed first"}
"""How candidate rates are ranked, by name."""

NO_HOLDOUT_RULE = "no held-out image (every class has one support image): rate 0, no update (P>M>F's rule)"
"""What the choice does when the held-out set is empty."""


def held_out_split(labels: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(prototype indices, held-out indices) of a support set: one image per class, picked by a seeded
    generator (``numpy.random.default_rng(seed + 2)``, apart from the pseudo-query and Fisher generators),
    forms the prototypes; all the others are held out. Both sorted ascending.

    Args:
      labels: i32 [N], classes 0..K-1 (a continued run's classes without a row get no prototype image).
      seed: The adaptation's seed.
    """
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed + 2)
    chosen = np.sort(np.asarray([int(rng.choice(np.flatnonzero(labels == k))) for k in np.unique(labels)], np.int64))
    held = np.setdiff1d(np.arange(labels.shape[0]), chosen)
    return chosen, held


def held_out_score(embeddings: np.ndarray, labels: np.ndarray, prototypes: np.ndarray,
                   scale: float) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of the cosine classifier logits = s cos(e, c_k) on the rows (the exported
    head; ties of the argmax go to the lower class id)."""
    e = np.asarray(embeddings, np.float64)
    c = np.asarray(prototypes, np.float64)
    e = e / np.sqrt((e * e).sum(axis=1, keepdims=True) + 1e-12)
    c = c / np.sqrt((c * c).sum(axis=1, keepdims=True) + 1e-12)
    logits = scale * (e @ c.T)
    logits -= logits.max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    labels = np.asarray(labels)
    accuracy = float(np.mean(np.argmax(logits, axis=1) == labels))
    return accuracy, float(-np.mean(log_p[np.arange(labels.shape[0]), labels]))


@dataclasses.dataclass(frozen=True)
class RateChoice:
    """The outcome of the per-task choice.

    Attributes:
      rate: The chosen learning rate (0.0 = no update).
      scores: Held-out accuracy per candidate rate, in the candidates' order (empty when nothing was held out).
      held_out: Number of held-out images.
      reason: How the rate was chosen, in words.
    """

    rate: float
    scores: tuple[tuple[float, float], ...]
    held_out: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {"rate": self.rate, "scores": [[r, s] for r, s in self.scores], "held_out": self.held_out,
                "reason": self.reason}


def choose_rate(rates: Sequence[float], scores: Sequence[float | tuple[float, float]], held_out: int,
                rule: str = "accuracy") -> RateChoice:
    """The rate with the best held-out score by ``rule`` (``SCORES``; module docstring).

    Args:
      rates: The candidate rates, in priority order (0 first: "no update" wins ties).
      scores: Each rate's held-out accuracy, or (accuracy, cross-entropy) as ``held_out_score`` gives
        (ignored when ``held_out`` is 0).
      held_out: Number of held-out images; 0 applies ``NO_HOLDOUT_RULE``.
      rule: A ``SCORES`` name; "accuracy_loss" needs (accuracy, cross-entropy) scores.

    Raises:
      ValueError: no rates, a negative or non-finite rate, or ``scores`` of another length.
    """
    rates = [float(r) for r in rates]
    if not rates or any(not np.isfinite(r) or r < 0 for r in rates):
        raise ValueError(f"candidate rates must be a non-empty list of finite numbers >= 0; got {rates}")
    if rule not in SCORES:
        raise ValueError(f"unknown rate-choice score {rule!r}; known: {', '.join(SCORES)}")
    if held_out == 0:
        return RateChoice(0.0, (), 0, NO_HOLDOUT_RULE)
    if len(scores) != len(rates):
        raise ValueError(f"{len(scores)} scores for {len(rates)} candidate rates")
    pairs = [(s, 0.0) if np.isscalar(s) else (float(s[0]), float(s[1])) for s in scores]
    if rule == "accuracy":
        key = [(-a, i) for i, (a, _) in enumerate(pairs)]
    else:
        key = [(-a, loss, i) for i, (a, loss) in enumerate(pairs)]
    best = min(range(len(rates)), key=lambda i: key[i])
    reason = (f"best held-out accuracy {pairs[best][0]:.3f} on {held_out} image(s)"
              + (f", cross-entropy {pairs[best][1]:.3f}" if rule == "accuracy_loss" else "")
              + (" (no rate beat no update)" if rates[best] == 0.0 else ""))
    return RateChoice(rates[best], tuple((r, a) for r, (a, _) in zip(rates, pairs)), held_out, reason)
