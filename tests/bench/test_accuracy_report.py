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
    assert "71.2 % on the meta-trained weights and 70.0 % without" in line
    assert "which favours the meta-trained weights (`meta.h5`)" in line
    assert blank == ""
    assert "which favours the weights without meta-training (`imagenet`)" in weights_decision(_run(69.0, 70.0))[0]


def test_the_line_names_what_the_default_export_ships():
    from tflite_train.default_weights import default_lite0_meta_trained

    shipped = "`meta.h5`" if default_lite0_meta_trained() else "`imagenet`"
    assert f"the default export ships the {'meta-trained weights' if default_lite0_meta_trained() else 'weights without meta-training'} ({shipped})" \
        in weights_decision(_run(71.25, 70.0))[0]


def test_a_tie_ships_the_weights_without_meta_training():
    assert "which favours the weights without meta-training" in weights_decision(_run(70.0, 70.0))[0]


def test_no_decision_without_both_rows():
    assert weights_decision(_run(70.0, 60.0, meta_trained=False)) == []
    run = _run(70.0, 60.0)
    del run["tuning"][NO_META]
    assert weights_decision(run) == []


def test_power_words_state_what_n_can_show_from_the_runs_own_intervals():
    from bench.accuracy_report import _power_words

    deltas = {"TinyTrain − FullTrain": {"t1": {"mean": 1.0, "ci95": 2.5}, "t2": {"mean": 0.0, "ci95": 1.5},
                                       "average": {"mean": 0.5, "ci95": 1.1}},
              "TinyTrain − None": {"t1": {"mean": 3.0, "ci95": 3.0}, "t2": {"mean": 1.0, "ci95": 2.0},
                                  "average": {"mean": 2.0, "ci95": 1.3}}}
    full = _power_words({"paired_tasks": {"t1": 60, "t2": 60}}, deltas, ["t1", "t2"])
    assert full.startswith("What N = 60 paired tasks per target can show: the average deltas' 95 % CIs are ±1.1-1.3 pp")
    assert "(±1.5-3.0 pp)" in full and "Below N" not in full
    small = _power_words({"paired_tasks": {"t1": 60, "t2": 12}}, deltas, ["t1", "t2"])
    assert small.startswith("What N = 12 ") and small.endswith("Below N = 60 per target no comparison of about 1 pp is settled.")


def test_noop_table_shows_unchanged_predictions_beside_equal_accuracies():
    from bench.accuracy_report import noop_table

    def cell(unchanged: int, equal: int, predicted: int) -> dict:
        return {"unchanged_from_none": unchanged, "equal_to_none": equal, "compared_to_none": 60,
                "predictions_compared": predicted}

    run = {"methods": {"None": {"adapt": {"policy": "none"}}, "LastLayer": {"adapt": {"policy": "last_layer"}}},
           "per_target": {"a": {"None": {}, "LastLayer": cell(12, 31, 60)},
                          "b": {"None": {}, "LastLayer": cell(3, 3, 0)}},
           "queries_per_task": {"a": 7.5}}
    lines = noop_table(run, ["a", "b"])
    assert "(mean queries per task: a 7.5)" in lines[0]
    assert lines[2:5] == ["| policy | a | b |", "|---|---|---|", "| LastLayer | 12 (31) / 60 | 3 (3) / 60 ‡ |"]
    del run["per_target"]["b"]["LastLayer"]["unchanged_from_none"]  # a run stored before the counts
    assert noop_table(run, ["a", "b"]) == []
