"""The replay memory's rule (issue 42, ``replay_memory``): which images and which of their views a budget keeps,
and which stored row a pass reads, computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tflite_train.runtime.adaptation.replay_memory import (DEFAULT_REPLAY_BUDGET_BYTES, ReplayMemory, ViewActivations,
                                                           keep_rows, keep_views, layers_above, lineage_cut, remember,
                                                           replay_capacity)
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


def test_keep_views_by_hand():
    labels, four = np.array([0, 1, 2, 0, 1]), np.full(5, 4)
    # pass 1: class 0 -> image 3 (its newest), 1 -> 4, 2 -> 2, 0 -> 0, 1 -> 1 (5 views); pass 2: 0 -> 3, 1 -> 4
    assert keep_views(labels, four, 7).tolist() == [1, 1, 1, 2, 2]
    assert keep_views(labels, four, 100).tolist() == [4, 4, 4, 4, 4]  # every view fits
    assert keep_views(labels, four, 0).tolist() == [0, 0, 0, 0, 0]
    # image 0 has 1 view, 1 has 3, 2 none: pass 1: 0 -> 1, 1 -> (none), 0 -> 0; pass 2: 0 -> 1 (0 has no second)
    assert keep_views(np.array([0, 0, 1]), np.array([1, 3, 0]), 3).tolist() == [1, 2, 0]
    assert keep_views(np.array([0, 0, 1]), np.array([1, 3, 0]), 2).tolist() == [1, 1, 0]
    # pass 1 offers images 0, 2, 3: class 0 -> 3, class 2 -> 2 then 0; pass 2 offers 0 and 3: class 0 -> 3
    assert keep_views(np.array([2, 2, 2, 0]), np.array([2, 0, 1, 2]), 4).tolist() == [1, 0, 1, 2]
    assert keep_views(np.array([0, 1]), np.array([0, 0]), 5).tolist() == [0, 0]


def test_remember_keeps_every_plain_view_then_views_class_balanced_and_carries_them_on():
    cut = _cut(shape=(1,))
    plain = np.array([[10], [20], [30]], np.float32)
    views = ViewActivations(cut.layer, 2, np.array([[11], [21], [31], [12], [22], [32]], np.float32))  # view-major
    assert views.per_image()[:, :, 0].tolist() == [[11, 12], [21, 22], [31, 32]]
    # seed 0 orders the run's images [2, 0, 1] (numpy default_rng(0).permutation(3)): the pool is image 2 (class 0),
    # image 0 (class 0), image 1 (class 1). 5 rows: the 3 plain views, then 2 views: class 0's newest (image 0),
    # class 1's (image 1); image 2 gets none
    assert np.random.default_rng(0).permutation(3).tolist() == [2, 0, 1]
    first = remember(None, cut, plain, np.array([0, 1, 0], np.int32), 5 * 4, seed=0, views=views.per_image())
    assert first.activations[:, 0].tolist() == [30, 10, 20, 11, 21]
    assert first.images.tolist() == [0, 1, 2, 1, 2] and first.labels.tolist() == [0, 0, 1, 0, 1]
    assert first.num_images == 3 and len(first) == 5 and first.further_views().tolist() == [0, 1, 1]
    assert first.image_labels.tolist() == [0, 0, 1] and first.class_counts(2) == [2, 1]
    # a later run adds image 40 (class 1) with views 41, 42 under 6 rows: the 4 plain views, then pass 1 offers the
    # stored image 1 (class 0, its view 11), image 2 (class 1, 21) and the new one: class 0 -> 11, class 1 -> the
    # newer image's 41; the stored view 21 leaves
    second = remember(first, cut, np.array([[40]], np.float32), np.array([1], np.int32), 6 * 4, seed=0,
                      views=np.array([[[41], [42]]], np.float32))
    assert second.activations[:, 0].tolist() == [30, 10, 20, 40, 11, 41]
    assert second.images.tolist() == [0, 1, 2, 3, 1, 3] and second.labels.tolist() == [0, 0, 1, 1, 0, 1]
    # without views the run's images keep their plain views only (today's memory)
    plain_only = remember(None, cut, plain, np.array([0, 1, 0], np.int32), 5 * 4, seed=0)
    assert plain_only.activations[:, 0].tolist() == [30, 10, 20] and plain_only.images.tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"run views must be \[3, V, 1\]"):
        remember(None, cut, plain, np.array([0, 1, 0], np.int32), 20, seed=0, views=np.zeros((2, 2, 1), np.float32))


def test_view_rows_by_hand():
    def memory(images, labels):
        n = len(images)
        return ReplayMemory("x", 1, (1,), 4 * n, np.zeros((n, 1), np.float32), np.array(labels, np.int32),
                            np.array(images, np.int32))

    # images 0, 1, 2; image 0's further views are rows 3 and 4, image 2's row 5, image 1 has none (its plain row 1)
    m = memory([0, 1, 2, 0, 0, 2], [0, 1, 0, 0, 0, 0])
    assert m.further_views().tolist() == [2, 0, 1]
    assert m.view_rows(3).tolist() == [[3, 4, 3], [1, 1, 1], [5, 5, 5]]
    assert m.plain.shape == (3, 1) and m.image_labels.tolist() == [0, 1, 0]
    # a one-view memory (version 1): every pass reads the plain view
    one = ReplayMemory("x", 1, (1,), 8, np.zeros((2, 1), np.float32), np.array([1, 0], np.int32))
    assert one.images.tolist() == [0, 1] and one.view_rows(2).tolist() == [[0, 0], [1, 1]]


@pytest.mark.parametrize("images,labels,fragment", [
    ([0, 2, 1], [0, 0, 0], "must begin with 0, 1, ..., I-1"),
    ([0, 1, 1, 0], [0, 1, 1, 0], "in ascending order"),
    ([0, 1, -1], [0, 1, 0], "negative image index -1"),
    ([0, 1, 0], [0, 1, 1], "labels must be those of each row's image"),
])
def test_memory_refuses_an_inconsistent_row_to_image_index(images, labels, fragment):
    with pytest.raises(ValueError, match=fragment.replace(".", r"\.")):
        ReplayMemory("x", 1, (1,), 100, np.zeros((len(images), 1), np.float32), np.array(labels, np.int32),
                     np.array(images, np.int32))


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


def test_the_report_counts_images_and_rows_and_the_summary_says_so():
    from tflite_train.runtime.adaptation.summary import format_replay

    memory = ReplayMemory("b12", 9, (1,), 1024, np.zeros((5, 1), np.float32), np.array([0, 1, 0, 0, 1], np.int32),
                          np.array([0, 1, 0, 0, 1], np.int32))
    report = memory.report(["cat", "dog"])
    assert (report["examples"], report["rows"], report["per_class"], report["bytes"]) == (2, 5, {"cat": 1, "dog": 1}, 20)
    assert format_replay(report).startswith("2 example(s), 5 activations with their views at the cut b12: ")
    plain = ReplayMemory("b12", 9, (1,), 1024, np.zeros((2, 1), np.float32), np.array([0, 1], np.int32)).report(["a", "b"])
    assert format_replay(plain).startswith("2 example(s) at the cut b12: ")
    del plain["rows"]  # a report written before the views were stored
    assert format_replay(plain).startswith("2 example(s) at the cut b12: ")
