import numpy as np
import pytest

from tflite_train.data.episodes import EpisodeConfig, sample_episode, sample_episodes


def _labels(counts):
    return np.repeat(np.arange(len(counts)), counts).astype(np.int32)


@pytest.fixture(scope="module")
def labels():
    rng = np.random.default_rng(7)
    return _labels(rng.integers(4, 300, size=80))  # 80 classes, 4..299 images each


def _check(episode, labels, config):
    c = len(np.unique(labels))
    assert config.min_ways <= episode.ways <= min(config.max_ways, c)
    assert len(set(episode.classes.tolist())) == episode.ways
    shots = episode.shots()
    assert shots.min() >= 1 and shots.max() <= config.max_support_per_class
    assert shots.sum() <= config.max_support_total
    q = np.bincount(episode.query_labels, minlength=episode.ways)
    assert (q == q[0]).all() and 1 <= q[0] <= config.max_query  # class-balanced query
    assert not set(episode.support_indices.tolist()) & set(episode.query_indices.tolist())
    assert len(set(episode.support_indices.tolist())) == len(episode.support_indices)
    np.testing.assert_array_equal(labels[episode.support_indices], episode.classes[episode.support_labels])
    np.testing.assert_array_equal(labels[episode.query_indices], episode.classes[episode.query_labels])


def test_constraints_hold_over_1000_episodes(labels):
    config = EpisodeConfig()
    episodes = sample_episodes(labels, 1000, seed=0, config=config)
    for e in episodes:
        _check(e, labels, config)
    ways = np.array([e.ways for e in episodes])
    # ways uniform over 5..50: every value drawn, mean near 27.5
    assert set(ways.tolist()) == set(range(5, 51))
    assert abs(ways.mean() - 27.5) < 1.5
    # imbalanced shots occur, and the 500 cap binds sometimes
    assert any(e.shots().max() > e.shots().min() for e in episodes)
    assert max(int(e.shots().sum()) for e in episodes) >= 450


def test_query_size_rule_by_hand():
    # every class has 6 images: q = min(10, floor(6 / 2)) = 3, support per class <= 3
    labels = _labels([6] * 5)
    e = sample_episode(labels, np.random.default_rng(0))
    assert e.ways == 5
    assert (np.bincount(e.query_labels) == 3).all()
    assert e.shots().max() <= 3


def test_same_seed_same_episode(labels):
    a = sample_episodes(labels, 5, seed=42)
    b = sample_episodes(labels, 5, seed=42)
    c = sample_episodes(labels, 5, seed=43)
    for x, y in zip(a, b):
        for field in ("classes", "support_indices", "support_labels", "query_indices", "query_labels"):
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field))
    assert any(not np.array_equal(x.support_indices, z.support_indices) for x, z in zip(a, c))


def test_fixed_k_way_n_shot(labels):
    config = EpisodeConfig(ways=7, shots=3, queries=4)
    for e in sample_episodes(labels, 50, seed=1, config=config):
        assert e.ways == 7
        assert (e.shots() == 3).all()
        assert (np.bincount(e.query_labels) == 4).all()


def test_gather_returns_images():
    labels = _labels([10] * 6)
    images = np.arange(60)[:, None, None, None] * np.ones((1, 2, 2, 3))
    e = sample_episode(labels, np.random.default_rng(3), EpisodeConfig(ways=5, shots=2, queries=3))
    sx, sy, qx, qy = e.gather(images)
    assert sx.shape == (10, 2, 2, 3) and qx.shape == (15, 2, 2, 3)
    np.testing.assert_array_equal(sx[:, 0, 0, 0], e.support_indices)


@pytest.mark.parametrize(
    "labels, config, match",
    [
        (_labels([10] * 4), EpisodeConfig(), "min_ways"),
        (_labels([3] * 10), EpisodeConfig(ways=5, shots=2, queries=2), "needs 5 classes"),
    ],
)
def test_too_few_classes_raise(labels, config, match):
    with pytest.raises(ValueError, match=match):
        sample_episode(labels, np.random.default_rng(0), config)


def test_bad_config_raises():
    with pytest.raises(ValueError, match="min_ways"):
        EpisodeConfig(min_ways=10, max_ways=5)
    with pytest.raises(ValueError, match="ways, shots, queries"):
        EpisodeConfig(ways=5)
    with pytest.raises(TypeError, match="rng"):
        sample_episode(_labels([5] * 5), 0)
