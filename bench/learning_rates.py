"""Each policy's Adam learning rate and epochs, chosen on validation tasks that no reported task uses.

Methods that update 0.1 MiB of weights and methods that update every weight share neither a best
learning rate nor a best training length, so one fixed setting would favour whichever method it
happens to suit. For every policy with training steps, the benchmark searches the (learning rate,
epochs) pairs of ``BenchConfig.tuning_grid`` on episodes drawn from each target's *validation pool*
(``bench.validation_split``: images, or whole classes, that no reported task contains) by successive
halving (``bench.successive_halving``) and keeps the pair with the best mean accuracy over all targets
(``best_setting``'s order); the reported tables then use the chosen pair on the test-pool tasks.

This module holds the settings' order and how a setting is applied to a ``Method``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from bench.policy_runs import Method

Setting = tuple[float, int]
"""(learning rate, epochs)."""


def setting_key(setting: Setting) -> str:
    """``"lr/epochs"``: the JSON key of a setting's score."""
    return f"{setting[0]:g}/{setting[1]}"


def best_setting(scores: Mapping[Setting, float]) -> Setting:
    """argmax_(lr, epochs) scores; ties go to fewer epochs, then the smaller rate (the cheaper, more
    conservative update).

    Args:
      scores: (learning rate, epochs) -> mean validation accuracy.

    Raises:
      ValueError: empty ``scores`` or a non-finite score.
    """
    if not scores:
        raise ValueError("scores must hold at least one setting")
    bad = {k: s for k, s in scores.items() if not math.isfinite(s)}
    if bad:
        raise ValueError(f"scores must be finite; got {bad}")
    return min(scores, key=lambda k: (-scores[k], k[1], k[0]))


def best_learning_rate(scores: Mapping[float, float]) -> float:
    """argmax_lr scores[lr] (one epoch count); ties go to the smaller rate."""
    return best_setting({(lr, 0): s for lr, s in scores.items()})[0]


def with_setting(method: Method, setting: Setting) -> Method:
    """``method`` training at (learning rate, epochs) = ``setting``."""
    lr, epochs = setting
    return dataclasses.replace(method, adapt=dataclasses.replace(method.adapt, learning_rate=float(lr),
                                                                 epochs=int(epochs)))


def with_settings(methods: Sequence[Method], chosen: Mapping[str, Mapping]) -> list[Method]:
    """``methods`` with the chosen learning rate and epochs (label -> choice) where given."""
    return [m if m.adapt is None or m.label not in chosen else
            with_setting(m, (chosen[m.label]["learning_rate"], chosen[m.label]["epochs"])) for m in methods]
