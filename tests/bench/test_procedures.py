"""The bench's fine-tuning procedures and the procedure section's decisions (golden cases by hand)."""

from __future__ import annotations

import pytest

from bench.config import BenchConfig
from bench.paired_accuracy import AVERAGE
from bench.procedure_section import BEFORE_META, MAIN, decide
from bench.procedures import PREVIOUS, PROCEDURES, procedure
from tflite_train.runtime import AdaptConfig


def test_previous_procedure_is_the_old_default():
    config = PREVIOUS.apply(AdaptConfig())
    assert (config.prototype_mode, config.batch_mode, config.batch_size, config.epochs, config.learning_rate,
            config.rate_choice) == ("fixed", "batch", 1, 40, 3e-3, None)


def test_every_procedure_makes_a_valid_config():
    for p in PROCEDURES.values():
        config = p.apply(AdaptConfig(memory_bytes=2**22))
        assert config.num_steps(25) >= 1
    assert procedure("pmf").apply(AdaptConfig()).iterations == 20


def test_unknown_procedure_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match="unknown procedure 'nope'; known: previous, pmf"):
        BenchConfig(procedures=("nope",))


def _row(weights, name, mean, seconds=1.0):
    return {"weights": weights, "procedure": name, "accuracy": {AVERAGE: {"mean": mean}}, "seconds": seconds}


def test_decision_takes_the_best_procedure_then_the_best_weights():
    rows = {"None": _row(MAIN, None, 70.0), "a": _row(MAIN, "a", 71.0), "b": _row(MAIN, "b", 72.0),
            "b'": _row(BEFORE_META, "b", 73.0), "a'": _row(BEFORE_META, "a", 80.0)}
    d = decide(rows, ["a", "b"])
    assert (d["procedure"], d["weights"]) == ("b", BEFORE_META)  # a's 80 % before meta-training does not count
    assert d["scores"] == {"a": 71.0, "b": 72.0} and d["weights_scores"] == {MAIN: 72.0, BEFORE_META: 73.0}


def test_decision_ties_go_to_the_cheaper_procedure_and_the_main_weights():
    rows = {"a": _row(MAIN, "a", 72.0, seconds=5.0), "b": _row(MAIN, "b", 72.0, seconds=2.0),
            "b'": _row(BEFORE_META, "b", 72.0)}
    assert decide(rows, ["a", "b"])["procedure"] == "b"
    assert decide(rows, ["a", "b"])["weights"] == MAIN


def test_procedure_points_keep_trained_rows_by_weights_and_the_plot_is_written(tmp_path):
    from bench.figures import procedure_points, write_procedure_figures

    delta = {"average": {"mean": 1.5, "ci95": 2.0}}
    rows = {"None": {"weights": "main", "procedure": None, "delta_none": None, "trained_tasks": 0, "seconds": 0.1},
            "TinyTrain [a]": {"weights": "main", "procedure": "a", "delta_none": delta, "trained_tasks": 80,
                              "seconds": 5.0},
            "TinyTrain [b]": {"weights": "main", "procedure": "b", "delta_none": delta, "trained_tasks": 0,
                              "seconds": 0.1},  # a no-op: nothing trained, no point
            "TinyTrain [a] before": {"weights": "before meta-training", "procedure": "a", "delta_none": delta,
                                     "trained_tasks": 80, "seconds": 3.0}}
    groups = procedure_points({"rows": rows})
    assert groups == {"the run's main weights": [{"label": "a", "delta": 1.5, "ci95": 2.0, "seconds": 5.0}],
                      "weights before meta-training": [{"label": "a", "delta": 1.5, "ci95": 2.0, "seconds": 3.0}]}
    results = {"sections": {"procedure": {"tasks": 20, "runs": {"r": {"label": "Net @ 8", "rows": rows}}}}}
    assert write_procedure_figures(results, tmp_path) == {"r": "procedures_r.png"}
    assert (tmp_path / "procedures_r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
