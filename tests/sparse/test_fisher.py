"""Golden tests of the Fisher information on activations (Eq. 2) and the Fisher potential."""

import numpy as np
import pytest

from tflite_train.sparse import fisher_information, fisher_potential, fisher_potentials, mean_fisher_potentials


def test_fisher_nhwc_by_hand():
    # N=2, H=1, W=2, C=2. Sample 0: a = (1,2) (3,4) at the two positions, g = (1,0) (1,1):
    #   channel 0: 1*1 + 3*1 = 4;  channel 1: 2*0 + 4*1 = 4.
    # Sample 1: a = (1,1) (2,2), g = (2,-1) (0,1): channel 0: 1*2 + 2*0 = 2; channel 1: -1 + 2 = 1.
    # Delta_0 = (4^2 + 2^2) / (2*2) = 5;  Delta_1 = (4^2 + 1^2) / 4 = 4.25.
    a = np.array([[[[1, 2], [3, 4]]], [[[1, 1], [2, 2]]]], dtype=np.float32)
    g = np.array([[[[1, 0], [1, 1]]], [[[2, -1], [0, 1]]]], dtype=np.float32)
    assert a.shape == (2, 1, 2, 2)
    delta = fisher_information(a, g)
    np.testing.assert_array_equal(delta, [5.0, 4.25])
    assert fisher_potential(delta) == 9.25


def test_fisher_nc_by_hand():
    # a = [[1,2],[3,4]], g = [[1,1],[2,0]]: per-sample products (1, 2) and (6, 0).
    # Delta_0 = (1 + 36) / 4 = 9.25; Delta_1 = (4 + 0) / 4 = 1.
    delta = fisher_information(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, 1.0], [2.0, 0.0]]))
    np.testing.assert_array_equal(delta, [9.25, 1.0])


def test_fisher_matches_loop_definition():
    rng = np.random.default_rng(3)
    a, g = rng.normal(size=(3, 4, 5, 6)), rng.normal(size=(3, 4, 5, 6))
    expected = [sum((a[n, :, :, o] * g[n, :, :, o]).sum() ** 2 for n in range(3)) / 6 for o in range(6)]
    np.testing.assert_allclose(fisher_information(a, g), expected, rtol=1e-12)


def test_potentials_and_mean_over_tasks():
    # task 1: a = 1 + 1 = 2, b = 0; task 2: a = 0, b = 8 -> means a = 1, b = 4.
    t1 = {"a": np.array([1.0, 1.0]), "b": np.array([0.0])}
    t2 = {"a": np.array([0.0, 0.0]), "b": np.array([8.0])}
    assert fisher_potentials(t1) == {"a": 2.0, "b": 0.0}
    assert mean_fisher_potentials([t1, t2]) == {"a": 1.0, "b": 4.0}


@pytest.mark.parametrize(
    "a, g, match",
    [
        (np.ones((2, 3)), np.ones((2, 4)), "gradients must have the shape"),
        (np.ones(3), np.ones(3), "ndim >= 2"),
        (np.ones((0, 3)), np.ones((0, 3)), "N >= 1"),
        (np.array([[np.nan, 1.0]]), np.ones((1, 2)), "finite"),
    ],
)
def test_fisher_bad_input(a, g, match):
    with pytest.raises(ValueError, match=match):
        fisher_information(a, g)


def test_potential_bad_input():
    with pytest.raises(ValueError, match=">= 0"):
        fisher_potential(np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="1-D"):
        fisher_potential(np.ones((2, 2)))
    with pytest.raises(ValueError, match="names layers"):
        mean_fisher_potentials([{"a": np.ones(1)}, {"b": np.ones(1)}])
    with pytest.raises(ValueError, match="non-empty list"):
        mean_fisher_potentials([])
