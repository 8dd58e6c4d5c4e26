"""The per-task learning-rate choice (``tflite_train.runtime.adaptation.rate_choice``): golden cases worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tflite_train.runtime.adaptation.rate_choice import NO_HOLDOUT_RULE, choose_rate, held_out_score, held_out_split


def test_held_out_split_keeps_one_image_per_class_for_the_prototypes():
    labels = np.array([0, 0, 0, 1, 1, 2])
    proto, held = held_out_split(labels, seed=3)
    assert sorted(labels[proto].tolist()) == [0, 1, 2]
    assert sorted(np.concatenate([proto, held]).tolist()) == list(range(6))
    assert held.size == 3 and 5 not in held  # class 2 has one image: it can only form its prototype
    again = held_out_split(labels, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip((proto, held), again))


def test_one_shot_task_holds_nothing_out():
    proto, held = held_out_split(np.array([0, 1]), seed=0)  # 2-way 1-shot
    assert proto.tolist() == [0, 1] and held.size == 0


def test_held_out_score_by_hand():
    prototypes = np.array([[1.0, 0.0], [0.0, 1.0]])
    embeddings = np.array([[2.0, 1.0],   # cos 0.89 vs 0.45: class 0
                           [1.0, 3.0],   # class 1
                           [5.0, 4.9]])  # class 0 (just)
    accuracy, _ = held_out_score(embeddings, np.array([0, 1, 1]), prototypes, scale=10.0)
    assert accuracy == pytest.approx(2 / 3)
    # the cosine ignores the length: scaling a prototype changes nothing
    assert held_out_score(embeddings, np.array([0, 1, 1]), prototypes * [[10.0], [0.1]], 10.0)[0] == pytest.approx(2 / 3)
    # one row on the axis of class 0: logits (s, 0), CE = log(1 + e^-s)
    _, loss = held_out_score(np.array([[3.0, 0.0]]), np.array([0]), prototypes, scale=2.0)
    assert loss == pytest.approx(np.log1p(np.exp(-2.0)))


def test_no_update_wins_when_it_scores_best_or_ties():
    assert choose_rate([0, 1e-4, 1e-3], [0.8, 0.7, 0.75], held_out=10).rate == 0.0
    tie = choose_rate([0, 1e-4, 1e-3], [0.8, 0.8, 0.8], held_out=10)
    assert tie.rate == 0.0 and "no rate beat no update" in tie.reason
    best = choose_rate([0, 1e-4, 1e-3], [0.5, 0.6, 0.9], held_out=10)
    assert best.rate == 1e-3 and best.scores == ((0.0, 0.5), (1e-4, 0.6), (1e-3, 0.9))


def test_accuracy_loss_breaks_accuracy_ties_by_the_cross_entropy():
    scores = [(0.8, 0.50), (0.8, 0.40), (0.7, 0.10)]
    assert choose_rate([0, 1e-4, 1e-3], scores, held_out=10, rule="accuracy").rate == 0.0
    assert choose_rate([0, 1e-4, 1e-3], scores, held_out=10, rule="accuracy_loss").rate == 1e-4
    assert choose_rate([0, 1e-4], [(0.8, 0.4), (0.8, 0.4)], held_out=10, rule="accuracy_loss").rate == 0.0


def test_empty_held_out_set_follows_the_stated_rule():
    choice = choose_rate([0, 1e-3], [], held_out=0)
    assert choice.rate == 0.0 and choice.reason == NO_HOLDOUT_RULE and choice.scores == ()


@pytest.mark.parametrize("rates", [[], [-1e-3], [float("nan")]])
def test_bad_candidate_rates_are_refused(rates):
    with pytest.raises(ValueError, match="candidate rates"):
        choose_rate(rates, [0.5] * len(rates), held_out=3)
