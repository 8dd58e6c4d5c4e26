"""Golden tests of output-channel selection: top-K Fisher (with ties), L2 norms, seeded random."""

import numpy as np
import pytest

from tflite_train.sparse import (
    channel_l2_norms,
    fisher_channels,
    l2_channels,
    live_channels,
    random_channels,
    top_k_channels,
)


@pytest.mark.parametrize(
    "k, expected",
    [
        (1, (1,)),            # 2.0 at 1, 2, 4 -> lowest index 1
        (2, (1, 2)),          # two of the three 2.0s, lowest indices first
        (3, (1, 2, 4)),
        (4, (1, 2, 3, 4)),    # then 1.0 at index 3
        (5, (0, 1, 2, 3, 4)),
    ],
)
def test_top_k_with_ties(k, expected):
    assert fisher_channels(np.array([0.5, 2.0, 2.0, 1.0, 2.0]), k) == expected


def test_top_k_returns_python_ints_sorted():
    chosen = top_k_channels(np.array([3.0, 1.0, 2.0, 5.0]), 2)  # 5.0 at 3, 3.0 at 0
    assert chosen == (0, 3) and all(type(c) is int for c in chosen)


def test_l2_channels_by_hand():
    # Weights (kh=1, kw=1, C_in=2, C_out=3): channel 0 = (3, 4) -> 5; channel 1 = (1, 0) -> 1;
    # channel 2 = (0, -5) -> 5. Top-2: the two 5s, (0, 2); top-1: tie -> lower index 0.
    w = np.array([[[[3.0, 1.0, 0.0], [4.0, 0.0, -5.0]]]])
    assert w.shape == (1, 1, 2, 3)
    np.testing.assert_allclose(channel_l2_norms(w), [5.0, 1.0, 5.0])
    assert l2_channels(w, 2) == (0, 2)
    assert l2_channels(w, 1) == (0,)
    assert l2_channels(w, 3) == (0, 1, 2)


def test_l2_channels_live_first():
    # Norms 5, 1, 5, 3 (output channel last, one input).
    w = np.array([[[[5.0, 1.0, -5.0, 3.0]]]])
    assert l2_channels(w, 2) == (0, 2)
    assert l2_channels(w, 2, live=None) == (0, 2)
    # Channels 0 and 2 get no gradient: the live ones by norm (3 at 3, then 1 at 1).
    live = np.array([False, True, False, True])
    assert l2_channels(w, 1, live=live) == (3,)
    assert l2_channels(w, 2, live=live) == (1, 3)
    # Fewer live channels than K: the dead ones fill up by norm (5 at 0 and at 2: tie -> lower index).
    assert l2_channels(w, 3, live=live) == (0, 1, 3)
    assert l2_channels(w, 4, live=live) == (0, 1, 2, 3)
    # All live or all dead: the plain norm order.
    assert l2_channels(w, 2, live=np.ones(4, bool)) == l2_channels(w, 2, live=np.zeros(4, bool)) == (0, 2)
    chosen = l2_channels(w, 2, live=live)
    assert all(type(c) is int for c in chosen)


def test_l2_channels_bad_live():
    w = np.ones((1, 1, 2, 3))
    with pytest.raises(ValueError, match="live must be a bool array of shape"):
        l2_channels(w, 1, live=np.ones(3))
    with pytest.raises(ValueError, match="live must be a bool array of shape"):
        l2_channels(w, 1, live=np.ones(4, bool))
    with pytest.raises(ValueError, match="k must be an int in 1..3"):
        l2_channels(w, 4, live=np.ones(3, bool))


def test_live_channels():
    tasks = [{"x": np.array([0.0, 0.5, 0.0, 0.0])}, {"x": np.array([0.0, 0.0, 1e-30, 0.0])}]
    np.testing.assert_array_equal(live_channels(tasks, "x"), [False, True, True, False])
    assert live_channels(tasks, "x").dtype == np.bool_
    with pytest.raises(ValueError, match="must not be empty"):
        live_channels([], "x")
    with pytest.raises(ValueError, match=r"fisher_tasks\[1\] has no Fisher vector for layer 'x'"):
        live_channels([tasks[0], {"y": np.ones(4)}], "x")
    with pytest.raises(ValueError, match="different lengths"):
        live_channels([tasks[0], {"x": np.ones(3)}], "x")
    with pytest.raises(ValueError, match=">= 0"):
        live_channels([{"x": np.array([1.0, -1.0])}], "x")


def test_random_channels_reproducible_by_seed():
    first = random_channels(64, 8, 123)
    assert first == random_channels(64, 8, 123)
    assert first == random_channels(64, 8, np.random.default_rng(123))
    assert len(set(first)) == 8 and all(0 <= c < 64 for c in first) and list(first) == sorted(first)
    assert len({random_channels(64, 8, seed) for seed in range(10)}) > 1
    assert random_channels(5, 5, 0) == (0, 1, 2, 3, 4)


def test_random_channels_advance_a_shared_generator():
    rng = np.random.default_rng(7)
    draws = [random_channels(1000, 3, rng) for _ in range(2)]
    assert draws[0] != draws[1]


@pytest.mark.parametrize("k", [0, 6, 2.5, True])
def test_bad_k(k):
    with pytest.raises(ValueError, match="k must be an int in 1..5"):
        top_k_channels(np.ones(5), k)


def test_bad_values():
    with pytest.raises(ValueError, match="finite"):
        top_k_channels(np.array([1.0, np.nan]), 1)
    with pytest.raises(ValueError, match="finite"):
        channel_l2_norms(np.array([[np.inf]]))
    with pytest.raises(TypeError, match="rng must be"):
        random_channels(4, 2, "seed")
