"""The weights decision of the paired section: made on validation scores only, ties to no meta-training."""

from bench.accuracy_report import weights_decision
from bench.methods import NO_META


def _run(meta: float, base: float, meta_trained: bool = True) -> dict:
    def tuned(score: float) -> dict:
        return {"learning_rate": 0.001, "epochs": 20, "scores": {"0.001/20": score, "0.0001/40": 99.0}}

    return {"meta_trained": meta_trained, "weights": "meta.h5", "baseline_weights": "imagenet",
            "tuning": {"TinyTrain": tuned(meta), NO_META: tuned(base)},
            # the reported tasks' means must not enter the decision
            "summary": {"means": {"TinyTrain": {"average": {"mean": 0.0}}, NO_META: {"average": {"mean": 100.0}}}}}


def test_the_better_validation_score_wins():
    (line, blank), = [weights_decision(_run(71.25, 70.0))]
    assert "71.2 % on the meta-trained weights and 70.0 % without" in line and "so the meta-trained weights (`meta.h5`)" in line
    assert blank == ""
    assert "so the weights without meta-training (`imagenet`)" in weights_decision(_run(69.0, 70.0))[0]


def test_a_tie_ships_the_weights_without_meta_training():
    assert "so the weights without meta-training" in weights_decision(_run(70.0, 70.0))[0]


def test_no_decision_without_both_rows():
    assert weights_decision(_run(70.0, 60.0, meta_trained=False)) == []
    run = _run(70.0, 60.0)
    del run["tuning"][NO_META]
    assert weights_decision(run) == []
