"""Golden tests of the multi-objective score (Eq. 3), its Table 3 ablations, L2 layer norms, ranking."""

import numpy as np
import pytest

from tflite_train.sparse import fisher_scores, l2_layer_scores, multi_objective_scores, rank_layers

# strided_table: |W| / max|W| = 18/36 = 1/2, 8/36 = 2/9, 36/36 = 1;  M / max M = 288/288 = 1,
# 32/288 = 1/9, 144/288 = 1/2.  Potentials P = 2, 1, 3.
POTENTIALS = {"s0": 2.0, "s1": 1.0, "s2": 3.0}


@pytest.mark.parametrize(
    "criterion, expected, ranking",
    [
        # P / (mem * comp): 2/(1/2*1) = 4;  1/(2/9 * 1/9) = 81/2 = 40.5;  3/(1*1/2) = 6.
        ("tinytrain", {"s0": 4.0, "s1": 40.5, "s2": 6.0}, ("s1", "s2", "s0")),
        ("fisher", {"s0": 2.0, "s1": 1.0, "s2": 3.0}, ("s2", "s0", "s1")),
        # P / mem: 2/(1/2) = 4;  1/(2/9) = 4.5;  3/1 = 3.
        ("fisher_memory", {"s0": 4.0, "s1": 4.5, "s2": 3.0}, ("s1", "s0", "s2")),
        # P / comp: 2/1 = 2;  1/(1/9) = 9;  3/(1/2) = 6.
        ("fisher_compute", {"s0": 2.0, "s1": 9.0, "s2": 6.0}, ("s1", "s2", "s0")),
    ],
)
def test_score_variants_by_hand(strided_table, criterion, expected, ranking):
    scores = multi_objective_scores(strided_table, POTENTIALS, criterion=criterion)
    assert scores == pytest.approx(expected, rel=1e-12)
    assert rank_layers(strided_table, scores) == ranking


def test_normalisation_is_over_all_layers_of_the_table(strided_table):
    # Only s0 and s1 are candidates, but the maxima stay |W| = 36 (s2) and M = 288 (s0).
    scores = multi_objective_scores(strided_table, {"s0": 2.0, "s1": 1.0})
    assert scores == pytest.approx({"s0": 4.0, "s1": 40.5}, rel=1e-12)


def test_fisher_scores_from_vectors(strided_table):
    fisher = {"s0": np.array([1.5, 0.5]), "s1": np.array([0.25] * 4), "s2": np.array([1 / 3] * 9)}
    assert fisher_scores(strided_table, fisher) == pytest.approx({"s0": 4.0, "s1": 40.5, "s2": 6.0})
    with pytest.raises(ValueError, match=r"fisher\['s1'\] must have shape \(4,\)"):
        fisher_scores(strided_table, {"s1": np.ones(3)})


def test_ties_rank_deeper_layer_first(abc_table):
    assert rank_layers(abc_table, {"a": 1.0, "b": 2.0, "c": 2.0}) == ("c", "b", "a")
    assert rank_layers(abc_table, {"a": 5.0, "c": 5.0, "b": 5.0}) == ("c", "b", "a")
    assert rank_layers(abc_table, {"a": 3.0, "b": 2.0, "c": 1.0}) == ("a", "b", "c")


def test_l2_layer_scores_by_hand(abc_table):
    # a: 8 weights all 0.5 -> sqrt(8 * 0.25) = sqrt(2); c: 8 weights, one 3 one 4 -> 5.
    c = np.zeros((1, 1, 4, 2))
    c[0, 0, 0, 0], c[0, 0, 3, 1] = 3.0, 4.0
    scores = l2_layer_scores(abc_table, {"a": np.full((1, 1, 2, 4), 0.5), "c": c})
    assert scores == pytest.approx({"a": np.sqrt(2.0), "c": 5.0})
    with pytest.raises(ValueError, match=r"weights\['b'\] must hold fan_in \* C_out = 16"):
        l2_layer_scores(abc_table, {"b": np.ones(15)})


def test_bad_scores(abc_table):
    with pytest.raises(ValueError, match="criterion must be one of"):
        multi_objective_scores(abc_table, {"a": 1.0}, criterion="magic")
    with pytest.raises(ValueError, match=r"potentials\['a'\] must be finite and >= 0"):
        multi_objective_scores(abc_table, {"a": float("nan")})
    with pytest.raises(ValueError, match="layer 'zz' does not exist"):
        multi_objective_scores(abc_table, {"zz": 1.0})
    with pytest.raises(ValueError, match="finite number"):
        rank_layers(abc_table, {"a": float("inf")})
