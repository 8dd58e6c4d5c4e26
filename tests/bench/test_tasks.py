"""``bench.tasks``: each backbone reads the data cache at its own input size."""

import numpy as np
import pytest

from bench import BenchConfig
from tests.bench.synthetic_images import patterns as _patterns
from tflite_train.data import DatasetSpec, LabeledImages, prepare_cache


def test_each_backbone_reads_the_cache_at_its_size(tmp_path):
    """``cache_for_size``: the smallest cache at or above the model's input size, never an upscaled one; the
    same episodes (labels) with the larger cache's pixels."""
    from PIL import Image

    from bench.tasks import cache_for_size, target_tasks

    def patterns(size):
        # one seeded image per index at every size: the 48 px image is the 32 px one, resampled
        small = _patterns(16, 3)
        return LabeledImages(np.stack([np.asarray(Image.fromarray(im).resize((size, size))) for im in small.images]),
                             small.labels, small.class_names)

    for size in (32, 48):
        prepare_cache(tmp_path / f"c{size}", image_size=size,
                      datasets=(DatasetSpec("tgt", "target", "patterns", patterns),))
    config = BenchConfig(cache_dir=str(tmp_path / "c32"), size_caches=(str(tmp_path / "c48"), str(tmp_path / "none")),
                         out_dir=str(tmp_path / "out"), min_ways=2, max_ways=3, max_query=2,
                         max_support_per_class=2, max_support_total=6)
    assert cache_for_size(config, None) == str(tmp_path / "c32")
    assert cache_for_size(config, 24) == str(tmp_path / "c32")
    assert cache_for_size(config, 32) == str(tmp_path / "c32")
    assert cache_for_size(config, 40) == str(tmp_path / "c48")
    with pytest.raises(ValueError, match=r"no data cache at >= 64 px.*c48 \(48 px\).*--image-size 64"):
        cache_for_size(config, 64)
    small, large = target_tasks(config, "tgt", 3, "test", 32), target_tasks(config, "tgt", 3, "test", 40)
    assert [t.support.shape[1] for t in small] == [32] * 3 and [t.support.shape[1] for t in large] == [48] * 3
    for a, b in zip(small, large):
        np.testing.assert_array_equal(a.support_labels, b.support_labels)
        np.testing.assert_array_equal(a.query_labels, b.query_labels)


def test_fixed_task_by_hand(tmp_path):
    """``fixed_task``: ways x shots support images and ways x queries queries, each image the one of its index, labels
    0..ways-1 per episode class, uint8 pixels; the same seed gives the same task; ``dataset_task`` reads the cache's
    whole "test" split."""
    from bench.tasks import dataset_task, fixed_task

    labels = np.repeat(np.arange(4), 5)
    images = np.repeat(np.arange(20, dtype=np.uint8), 4 * 4 * 3).reshape(20, 4, 4, 3)  # image i is all i
    task = fixed_task(images, labels, ways=3, shots=2, queries=1, seed=5)
    assert task.support.shape == (6, 4, 4, 3) and task.query.shape == (3, 4, 4, 3) and task.support.dtype == np.uint8
    assert sorted(task.support_labels.tolist()) == [0, 0, 1, 1, 2, 2] and task.support_labels.dtype == np.int32
    source = task.support[:, 0, 0, 0] // 5  # the original class of each support image
    for label in range(3):  # one original class per episode label, and no image twice
        assert len(set(source[task.support_labels == label])) == 1
    assert len(set(task.support[:, 0, 0, 0]) | set(task.query[:, 0, 0, 0])) == 9
    again = fixed_task(images, labels, ways=3, shots=2, queries=1, seed=5)
    np.testing.assert_array_equal(task.support, again.support)
    np.testing.assert_array_equal(task.query_labels, again.query_labels)
    prepare_cache(tmp_path, image_size=32, datasets=(DatasetSpec("tgt", "target", "patterns", lambda s: _patterns(s, 3)),))
    from tflite_train.data import load_split

    data = load_split(str(tmp_path), "tgt", "test")
    expected = fixed_task(data.images, data.labels, ways=2, shots=1, queries=1, seed=0)
    got = dataset_task(str(tmp_path), "tgt", ways=2, shots=1, queries=1, seed=0)
    np.testing.assert_array_equal(got.support, expected.support)
    np.testing.assert_array_equal(got.query_labels, expected.query_labels)
