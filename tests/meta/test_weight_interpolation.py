"""WiSE-FT weight interpolation: exact at both ends, linear in between."""

import numpy as np
import pytest

from tflite_train.meta.weight_interpolation import interpolate_weights


def _pair(seed=0):
    rng = np.random.default_rng(seed)
    start = [rng.normal(size=(3, 3, 4, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32)]
    tuned = [a + rng.normal(scale=0.1, size=a.shape).astype(np.float32) for a in start]
    return start, tuned


def test_exact_at_zero_and_one():
    start, tuned = _pair()
    for a, b in zip(interpolate_weights(start, tuned, 0.0), start):
        assert a.dtype == np.float32 and np.array_equal(a, b)
    for a, b in zip(interpolate_weights(start, tuned, 1.0), tuned):
        assert np.array_equal(a, b)


def test_half_way_is_the_mean():
    start, tuned = [np.array([0.0, 2.0, -4.0], np.float32)], [np.array([1.0, 4.0, 0.0], np.float32)]
    np.testing.assert_array_equal(interpolate_weights(start, tuned, 0.5)[0], [0.5, 3.0, -2.0])
    np.testing.assert_allclose(interpolate_weights(start, tuned, 0.25)[0], [0.25, 2.5, -3.0], rtol=0, atol=1e-7)


def test_bad_arguments_are_refused():
    start, tuned = _pair()
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        interpolate_weights(start, tuned, 1.5)
    with pytest.raises(ValueError, match="start has 2 tensors, tuned 1"):
        interpolate_weights(start, tuned[:1], 0.5)
    with pytest.raises(ValueError, match="tensor 1: shape"):
        interpolate_weights(start, [tuned[0], tuned[1][:4]], 0.5)
