"""The replay memory's rule (issue 42, ``replay_memory``): which rows a budget keeps, computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tflite_train.runtime.adaptation.replay_memory import (DEFAULT_REPLAY_BUDGET_BYTES, ReplayMemory, keep_rows,
                                                           layers_above, lineage_cut, remember, replay_capacity)
from tflite_train.runtime.model.cached_cut import CachedCut

pytestmark = pytest.mark.pi


def _cut(layer: str = "b03_expand", index: int = 9, shape=(2, 1, 1)) -> CachedCut:
    return CachedCut(layer, index, shape, "features", "train", "infer", 100)


def test_capacity_is_the_whole_rows_the_budget_holds():
    assert replay_capacity(2**20, 12288) == 85  # Lite0 @128 at b12..b15: 4 x 4 x 192 float32
    assert replay_capacity(2**20, 28672) == 36  # at b10: 8 x 8 x 112
    assert replay_capacity(DEFAULT_REPLAY_BUDGET_BYTES, 28672) == 36
    assert replay_capacity(8, 8) == 1 and replay_capacity(7, 8) == 0 and replay_capacity(0, 8) == 0


def test_keep_rows_by_hand():
    # pool oldest first; classes take turns (0, 1, 2, 0, 1, ...), each its newest row not yet taken:
    # class 0 -> row 2, class 1 -> row 4, class 2 -> row 8, class 0 -> row 1, class 1 -> row 3
    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    assert keep_rows(labels, 5).tolist() == [1, 2, 3, 4, 8]
    # class 1 runs out after two rows; the turns go on among 0 and 2: 2, 4, 8, 1, 3, 7, 0, 6
    assert keep_rows(labels, 8).tolist() == [0, 1, 2, 3, 4, 6, 7, 8]
    assert keep_rows(labels, 100).tolist() == list(range(9))
    assert keep_rows(labels, 0).tolist() == []
    assert keep_rows(np.array([3, 3, 1]), 2).tolist() == [1, 2]  # class ids need not be contiguous


def test_remember_keeps_the_old_rows_first_and_balances_a_new_class():
    cut = _cut()
    old = ReplayMemory(cut.layer, cut.index, cut.shape, 12 * 8,
                       np.arange(24, dtype=np.float32).reshape(12, 2, 1, 1), np.repeat(np.arange(3), 4).astype(np.int32))
    new_x = 100 + np.arange(8, dtype=np.float32).reshape(4, 2, 1, 1)
    memory = remember(old, cut, new_x, np.full(4, 3, np.int32), 12 * 8, seed=0)
    # 12 rows of 8 bytes for 4 classes: 3 each; each old class drops its oldest row
    assert memory.class_counts(4) == [3, 3, 3, 3]
    assert memory.activations[:9, 0, 0, 0].tolist() == [2, 4, 6, 10, 12, 14, 18, 20, 22]
    # the new class's 3 rows: the last 3 of its seeded order (numpy default_rng(0).permutation(4))
    order = np.random.default_rng(0).permutation(4)
    assert memory.activations[9:, 0, 0, 0].tolist() == (100 + 2 * order[1:]).astype(float).tolist()
    assert memory.nbytes == 96 <= memory.budget_bytes and len(memory) == 12
    # deterministic with the seed; another seed may keep other rows of the new class
    again = remember(old, cut, new_x, np.full(4, 3, np.int32), 12 * 8, seed=0)
    assert np.array_equal(again.activations, memory.activations) and np.array_equal(again.labels, memory.labels)


def test_remember_without_room_or_at_another_cut():
    cut = _cut()
    assert remember(None, cut, np.zeros((3, 2, 1, 1), np.float32), np.zeros(3, np.int32), 7, seed=0) is None
    old = ReplayMemory("final", 12, (2, 1, 1), 64, np.zeros((1, 2, 1, 1), np.float32), np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="cut final"):
        remember(old, cut, np.zeros((1, 2, 1, 1), np.float32), np.zeros(1, np.int32), 64, seed=0)


def test_memory_refuses_rows_over_its_budget_or_of_another_shape():
    with pytest.raises(ValueError, match="over their budget"):
        ReplayMemory("x", 1, (2,), 15, np.zeros((2, 2), np.float32), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="float32"):
        ReplayMemory("x", 1, (3,), 100, np.zeros((2, 2), np.float32), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="int32"):
        ReplayMemory("x", 1, (2,), 100, np.zeros((2, 2), np.float32), np.zeros(3, np.int32))


def test_lineage_cut_and_the_layers_above_it():
    cuts = [_cut("final", 12), _cut("b02_expand", 6), _cut("b03_expand", 9)]
    assert lineage_cut(cuts, 10).layer == "b03_expand"  # the highest cut at or below the deepest selected layer
    assert lineage_cut(cuts, 6).layer == "b02_expand"
    assert lineage_cut(cuts, 3).layer == "b02_expand"  # every selected layer below every cut: the lowest
    assert lineage_cut(cuts, None).layer == "b02_expand"  # nothing selected: the lowest
    assert lineage_cut([], 10) is None
    index = {"a": 5, "b": 6, "c": 9, "d": 12}
    assert layers_above(9, ["a", "b", "c", "d"], index) == ["c", "d"]
