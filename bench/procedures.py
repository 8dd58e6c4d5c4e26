"""The fine-tuning procedures the benchmark compares (issue 39): each a named set of ``AdaptConfig`` fields.

TinyTrain's appendix C runs every method with P>M>F's fine-tuning (prototypes through the current backbone,
batches of augmented pseudo-queries, a learning rate chosen per task on held-out support images, 0 among
the choices). ``PREVIOUS`` is what the benchmark and ``adapt`` ran before: prototypes fixed at the untrained
backbone's, one update per pseudo-query (batch 1) for 40 passes, one rate for every task. The other entries
switch the parts on one at a time, so that the procedure section (``bench.procedure_section``) measures
each part alone on validation tasks.

Every update over B pseudo-queries is priced by the selection at the rows one train-step call holds
(``AdaptConfig.rows_per_call``): accumulation (``batch_mode="accumulate"``) keeps one image's backward
memory, so the selection under B_mem is the same as at batch 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tflite_train.runtime import AdaptConfig

__all__ = ["PMF_RATES", "PREVIOUS", "PROCEDURES", "Procedure", "procedure"]

PMF_RATES = (0.0, 1e-4, 1e-3, 1e-2)
"""P>M>F's candidate rates (its reference code's list; 0 = no update, listed first so that it wins ties)."""


@dataclasses.dataclass(frozen=True)
class Procedure:
    """A fine-tuning procedure: the ``AdaptConfig`` fields it sets.

    Attributes:
      name: Its key (``BenchConfig.procedures`` names).
      description: One line for the report.
      fields: ``AdaptConfig`` field -> value, as sorted pairs.
    """

    name: str
    description: str
    fields: tuple[tuple[str, Any], ...]

    def apply(self, config: AdaptConfig) -> AdaptConfig:
        """``config`` with this procedure's fields (``AdaptConfig`` drops ``epochs`` when ``iterations`` is set)."""
        return dataclasses.replace(config, **dict(self.fields))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {"name": self.name, "description": self.description,
                "fields": {k: list(v) if isinstance(v, tuple) else v for k, v in self.fields}}


def _procedure(name: str, description: str, **fields: Any) -> Procedure:
    return Procedure(name, description, tuple(sorted(fields.items())))


PREVIOUS = _procedure(
    "previous", "prototypes fixed at the untrained backbone's; one update per pseudo-query (batch 1), 40 passes; "
    "rate 3e-3 for every task (the powered run's validation choice)",
    prototype_mode="fixed", batch_mode="batch", batch_size=1, epochs=40, learning_rate=3e-3, rate_choice=None)
"""The procedure before issue 39 (``adapt``'s defaults then)."""

_PMF = dict(batch_mode="accumulate", batch_size=25, iterations=20, rate_choice=PMF_RATES)

PROCEDURES: Mapping[str, Procedure] = {p.name: p for p in (
    PREVIOUS,
    _procedure("pmf", "P>M>F: prototypes refreshed through the current backbone before every update (no gradient "
               "through them); 20 updates of 25 accumulated pseudo-queries; rate chosen per task from "
               f"{list(PMF_RATES)} by held-out accuracy", prototype_mode="refresh", **_PMF),
    _procedure("pmf_fixed", "as pmf, prototypes fixed at the untrained backbone's", prototype_mode="fixed", **_PMF),
    _procedure("pmf_fixed_ties", "as pmf_fixed, accuracy ties between rates broken by the held-out cross-entropy",
               prototype_mode="fixed", choice_score="accuracy_loss", **_PMF),
    _procedure("pmf_one_rate", "as pmf, one rate (1e-3) for every task instead of the per-task choice",
               prototype_mode="refresh", **{**_PMF, "rate_choice": None, "learning_rate": 1e-3}),
    _procedure("pmf_episode", "as pmf, prototypes inside the step with the gradient through them (P>M>F's loss; "
               "support and pseudo-query rows in one batch, which the selection prices against B_mem)",
               prototype_mode="episode", **{**_PMF, "batch_mode": "batch"}),
    _procedure("pmf_fixed_ties_short", "as pmf_fixed_ties at about a quarter of the cost: 10 updates of 10 "
               "accumulated pseudo-queries, rates {0, 1e-3, 1e-2}", prototype_mode="fixed", choice_score="accuracy_loss",
               **{**_PMF, "batch_size": 10, "iterations": 10, "rate_choice": (0.0, 1e-3, 1e-2)}),
    _procedure("pmf_fixed_ties_batch5", "as pmf_fixed_ties with real batches of 5 pseudo-queries instead of "
               "accumulation: the selection counts the 5 rows against B_mem (fewer or smaller layers), each update "
               "one train step", prototype_mode="fixed", choice_score="accuracy_loss",
               **{**_PMF, "batch_mode": "batch", "batch_size": 5}),
)}
"""Every procedure the bench knows, by name."""


def procedure(name: str) -> Procedure:
    """The procedure called ``name``.

    Raises:
      ValueError: an unknown name (the message lists the known ones).
    """
    if name not in PROCEDURES:
        raise ValueError(f"unknown procedure {name!r}; known: {', '.join(PROCEDURES)}")
    return PROCEDURES[name]
