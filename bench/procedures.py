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

__all__ = ["AFFORDABLE_UPDATES", "PMF_RATES", "PREVIOUS", "PROCEDURES", "Procedure", "passes_procedure", "procedure"]

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

    def updates(self, support: int = 25) -> int | None:
        """Batch-1 train-step passes of one adaptation of ``support`` images, or None for a per-task rate choice.

        ``epochs * support`` (``iterations * batch_size`` when set); a rate choice adds a fine-tuning run per
        candidate rate on the prototype split, which ``bench.adaptation_cost`` measures instead (every such
        procedure measured over the cost goal: ``pmf_fixed_ties_short``, the cheapest, 515 calls on LiteRT).
        """
        fields = dict(self.fields)
        if fields.get("rate_choice"):
            return None
        if fields.get("iterations"):
            return int(fields["iterations"]) * int(fields.get("batch_size", 1))
        return int(fields["epochs"]) * support

    def affordable(self, support: int = 25) -> bool:
        """Whether the adaptation of ``support`` images fits issue 39's cost goal (``AFFORDABLE_UPDATES``)."""
        updates = self.updates(support)
        return updates is not None and updates <= AFFORDABLE_UPDATES

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {"name": self.name, "description": self.description, "updates": self.updates(),
                "affordable": self.affordable(), "fields": {k: list(v) if isinstance(v, tuple) else v for k, v in self.fields}}


def _procedure(name: str, description: str, **fields: Any) -> Procedure:
    return Procedure(name, description, tuple(sorted(fields.items())))


PREVIOUS = _procedure(
    "previous", "prototypes fixed at the untrained backbone's; one update per pseudo-query (batch 1), 40 passes; "
    "rate 3e-3 for every task (the powered run's validation choice)",
    prototype_mode="fixed", batch_mode="batch", batch_size=1, epochs=40, learning_rate=3e-3, rate_choice=None)
"""The procedure before issue 39 (``adapt``'s defaults then)."""

AFFORDABLE_UPDATES = 150
"""The most batch-1 updates per 25 support images that fit issue 39's cost goal (<= 500 batch-1 ``infer``
calls for the whole adaptation): ``bench/results/ADAPTATION_COST.md`` measured, on LiteRT (the dearer runtime in
``infer`` units), about 190 calls for head, Fisher, selection and cache and 2.04 calls per update, so
(500 - 190) / 2.04 = 152 updates; tflite-runtime 2.14 pays 1.06 per update. Six passes would be 150."""


def passes_procedure(epochs: int, rate: float) -> Procedure:
    """The previous procedure (fixed prototypes, batch 1, one rate for every task) at ``epochs`` passes and ``rate``.

    ``epochs * N_support`` updates; at ``epochs <= AFFORDABLE_UPDATES / 25`` the adaptation of 25 support images
    fits the cost goal.
    """
    return _procedure(f"passes{epochs}_lr{rate:g}",
                      f"as previous, {epochs} passes ({epochs * 25} updates of 25 images), rate {rate:g} for every task",
                      prototype_mode="fixed", batch_mode="batch", batch_size=1, epochs=epochs, learning_rate=rate,
                      rate_choice=None)


SHORT_PASSES = 5
"""The passes of the affordable procedures: ``AFFORDABLE_UPDATES`` / 25 = 6 passes, less one for a margin (the
fixed costs vary with the task and the selection). Their rates span the tuning's grid and one step above it
(1e-2), as fewer updates may want larger ones."""

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
    passes_procedure(40, 3e-4),
    *(passes_procedure(SHORT_PASSES, rate) for rate in (3e-4, 1e-3, 3e-3, 1e-2)),
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
