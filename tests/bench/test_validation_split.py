"""Golden tests of the validation/test pools, by hand: the hashes were computed with coreutils'
``sha256sum`` (e.g. ``printf '7/t/image/3' | sha256sum`` starts 262799ff...)."""

import numpy as np
import pytest

from bench.validation_split import split_pools, unit_hash


def test_unit_hash_is_the_first_8_bytes_of_sha256():
    # printf '7/t/image/3' | sha256sum -> 262799ff6bfb4e85...
    assert unit_hash(7, "t", "image/3") == int("262799ff6bfb4e85", 16) / 2**64
    assert unit_hash(7, "t", "class/a") == int("d67cafba6cde7d03", 16) / 2**64
    assert unit_hash(8, "t", "image/3") != unit_hash(7, "t", "image/3")  # the seed is part of the key
    assert unit_hash(7, "u", "image/3") != unit_hash(7, "t", "image/3")  # so is the target


def test_split_by_image_by_hand():
    # 2 classes x 5 images, fraction 0.4: k = min(max(2, round(0.4 * 5)), 5 - 2) = 2 per class.
    # sha256 prefixes of "7/t/image/i": 0 53f5, 1 6a91, 2 bf46, 3 2627, 4 2afe | 5 7ff8, 6 4e43, 7 55ae, 8 7b08, 9 b6fe
    # smallest two per class: {3, 4} and {6, 7}.
    labels = np.repeat([0, 1], 5)
    split = split_pools(labels, ("x", "y"), "t", 7, 0.4, class_split_min_classes=40)
    assert split.by == "image"
    assert split.validation.tolist() == [3, 4, 6, 7]
    assert split.test.tolist() == [0, 1, 2, 5, 8, 9]
    assert split.summary(labels) == {"by": "image", "validation": {"images": 4, "classes": 2},
                                     "test": {"images": 6, "classes": 2}}


def test_split_by_class_by_hand():
    # 4 classes >= class_split_min_classes: class c is validation iff u("class/c") < 0.5, i.e. its
    # sha256 starts below 0x8: a d67c (no), b 75de (yes), c 5e1a (yes), d ce46 (no).
    labels = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    split = split_pools(labels, ("a", "b", "c", "d"), "t", 7, 0.5, class_split_min_classes=4)
    assert split.by == "class"
    assert split.validation.tolist() == [1, 2, 5, 6] and split.test.tolist() == [0, 3, 4, 7]


def test_small_classes_stay_test_only_and_both_pools_keep_two_images():
    labels = np.array([0, 0, 0] + [1] * 4 + [2] * 30)
    split = split_pools(labels, ("a", "b", "c"), "t", 1, 0.3, class_split_min_classes=40)
    val = labels[split.validation]
    assert (val == 0).sum() == 0                                   # n = 3 < 4: test only
    assert (val == 1).sum() == 2 and (labels[split.test] == 1).sum() == 2  # n = 4: k = min(max(2, 1), 2)
    assert (val == 2).sum() == 9                                   # round(0.3 * 30)
    assert np.intersect1d(split.validation, split.test).size == 0
    assert np.union1d(split.validation, split.test).tolist() == list(range(labels.size))


def test_split_does_not_depend_on_other_targets_or_order_and_refuses_bad_input():
    labels = np.repeat(np.arange(50), 3)
    names = tuple(f"k{i}" for i in range(50))
    a = split_pools(labels, names, "glyphs", 3, 0.3, class_split_min_classes=40)
    b = split_pools(labels, names, "glyphs", 3, 0.3, class_split_min_classes=40)
    assert a.validation.tolist() == b.validation.tolist() and a.by == "class"
    with pytest.raises(ValueError, match="fraction"):
        split_pools(labels, names, "glyphs", 3, 1.0, class_split_min_classes=40)
    with pytest.raises(ValueError, match="empty"):
        split_pools(np.array([0, 0, 0]), ("a",), "t", 1, 0.3, class_split_min_classes=40)
