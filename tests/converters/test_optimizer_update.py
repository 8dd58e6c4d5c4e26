"""The channel-masked optimizer step (``converters.optimizer_update``) against the textbook updates.

Selected channels: Adam / SGD-momentum as written in Kingma & Ba (Alg. 1) and with momentum, to
1e-6 relative over 5 steps; unselected channels of the parameter and of every slot: equal values
(the increments are exact zeros).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tflite_train.converters.export_config import ExportConfig
from tflite_train.converters.optimizer_update import masked_optimizer_step


def _textbook(cfg: ExportConfig, cur: list[np.ndarray], g: np.ndarray, t: int) -> list[np.ndarray]:
    if cfg.optimizer == "adam":
        m = cfg.beta1 * cur[1] + (1 - cfg.beta1) * g
        v = cfg.beta2 * cur[2] + (1 - cfg.beta2) * g * g
        w = cur[0] - cfg.learning_rate * (m / (1 - cfg.beta1 ** t)) / (np.sqrt(v / (1 - cfg.beta2 ** t)) + cfg.epsilon)
        return [w, m, v]
    u = cfg.momentum * cur[1] + g
    return [cur[0] - cfg.learning_rate * u, u]


@pytest.mark.parametrize("optimizer", ["adam", "sgd_momentum"])
def test_masked_step_matches_the_textbook_update_on_selected_channels_only(optimizer):
    rng = np.random.default_rng(0)
    cfg = ExportConfig(optimizer=optimizer, learning_rate=0.01)
    slots = 2 if optimizer == "adam" else 1
    selected = np.array([1, 0, 1, 1, 0, 0], bool)
    mask = selected.astype(np.float32)
    cur = [rng.normal(size=(3, 3, 4, 6)).astype(np.float32)] + \
          [np.abs(rng.normal(size=(3, 3, 4, 6))).astype(np.float32) for _ in range(slots)]
    ref = [c.astype(np.float64) for c in cur]
    for t in range(1, 6):
        g = rng.normal(size=cur[0].shape).astype(np.float32)
        new = [v.numpy() for v in masked_optimizer_step(cfg, [tf.constant(c) for c in cur], tf.constant(g),
                                                        tf.constant(mask), tf.constant([cfg.learning_rate]),
                                                        tf.constant([float(t)]))]
        full = _textbook(cfg, ref, g.astype(np.float64), t)
        ref = [np.where(selected, f, r) for f, r in zip(full, ref)]
        for a, c in zip(new, cur):
            np.testing.assert_array_equal(a[..., ~selected], c[..., ~selected])
        cur = new
        for a, r in zip(cur, ref):
            assert np.max(np.abs(a - r)) / np.max(np.abs(r)) < 1e-6
