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


def test_updates_and_the_cost_goal():
    """Batch-1 passes of 25 support images against ``AFFORDABLE_UPDATES`` (150); a rate choice is priced by the
    measured table, never counted affordable here."""
    from bench.procedures import AFFORDABLE_UPDATES, passes_procedure

    assert AFFORDABLE_UPDATES == 150
    assert (PREVIOUS.updates(), PREVIOUS.affordable()) == (1000, False)
    assert (passes_procedure(5, 1e-3).updates(), passes_procedure(5, 1e-3).affordable()) == (125, True)
    assert (passes_procedure(6, 1e-3).updates(), passes_procedure(6, 1e-3).affordable()) == (150, True)
    assert passes_procedure(7, 1e-3).affordable() is False
    assert (procedure("pmf_one_rate").updates(), procedure("pmf").updates(), procedure("pmf").affordable()) == (
        500, None, False)
    config = passes_procedure(5, 1e-2).apply(AdaptConfig())
    assert (config.epochs, config.learning_rate, config.batch_size, config.rate_choice) == (5, 1e-2, 1, None)


def test_default_is_the_best_affordable_within_the_tolerance_on_the_shipped_weights():
    from bench.procedure_section import DEFAULT_TOLERANCE_PP, choose_default

    assert DEFAULT_TOLERANCE_PP == 1.0
    rows = {"a": _row(BEFORE_META, "a", 75.0), "c": _row(BEFORE_META, "c", 74.0), "d": _row(BEFORE_META, "d", 73.5),
            "a main": _row(MAIN, "a", 60.0), "c main": _row(MAIN, "c", 90.0)}
    cheap = {"a": False, "c": True, "d": True}
    d = choose_default(rows, ["a", "c", "d"], BEFORE_META, cheap)
    assert (d["procedure"], d["best"], d["best_affordable"]) == ("c", "a", "c")  # 74.0 >= 75.0 - 1.0
    assert d["scores"] == {"a": 75.0, "c": 74.0, "d": 73.5}  # the main weights' rows do not count
    rows["c"] = _row(BEFORE_META, "c", 73.9)
    assert choose_default(rows, ["a", "c", "d"], BEFORE_META, cheap)["procedure"] == "a"  # 73.9 < 74.0: too dear
    assert choose_default(rows, ["a", "c", "d"], BEFORE_META, {})["best_affordable"] is None


def test_the_shipped_weights_follow_the_default_export():
    from bench.config import BackboneRun
    from bench.procedure_section import shipped_weights
    from tflite_train.default_weights import default_lite0_meta_trained

    lite0 = BackboneRun(key="l", backbone="efficientnet_lite0", input_size=128, weights="w.h5",
                        baseline_weights="imagenet", candidate_blocks=6)
    expected = MAIN if default_lite0_meta_trained() else BEFORE_META
    assert shipped_weights(lite0) == expected
    mcunet = BackboneRun(key="m", backbone="mcunet", input_size=64, weights="w.h5", baseline_weights="pre.h5",
                         candidate_blocks=7)
    assert shipped_weights(mcunet) == MAIN


def test_the_report_states_the_default_decision_in_words():
    from bench.procedure_report import procedure_report
    from bench.procedures import passes_procedure

    stats = {"mean": 74.0, "ci95": 1.0, "n": 20}
    row = {"weights": BEFORE_META, "procedure": "passes5_lr0.001", "accuracy": {"t": stats, AVERAGE: stats},
           "delta_none": {"t": stats, AVERAGE: stats}, "seconds": 0.5, "trained_tasks": 20}
    default = {"procedure": "passes5_lr0.001", "weights": BEFORE_META, "best": "previous",
               "best_affordable": "passes5_lr0.001", "scores": {"previous": 74.5, "passes5_lr0.001": 74.0},
               "tolerance_pp": 1.0}
    section = {"tasks": 20, "procedures": {"passes5_lr0.001": passes_procedure(5, 1e-3).to_dict()},
               "runs": {"r": {"label": "Net", "rows": {"TinyTrain [passes5_lr0.001]": row}, "default": default,
                              "decision": {"procedure": "passes5_lr0.001", "weights": BEFORE_META,
                                           "scores": {"passes5_lr0.001": 74.0}, "weights_scores": {BEFORE_META: 74.0}}}}}
    lines = []
    procedure_report(section, ["t"], lines)
    text = "\n".join(lines)
    assert "| 125 (affordable) |" in text
    assert ("the most accurate procedure is **previous** (74.5 %); the most accurate one that fits the cost goal "
            "(at most 150 updates of 25 images") in text
    assert "**passes5_lr0.001** ships." in text
    assert "On the test pool" not in text
    default["test"] = {"tasks": 60, "accuracy": {"t": stats, AVERAGE: stats},
                       "none": {"t": stats, AVERAGE: {"mean": 70.0, "ci95": 2.0, "n": 60}},
                       "delta_none": {"t": stats, AVERAGE: {"mean": 4.0, "ci95": 1.0, "n": 60}}}
    lines = []
    procedure_report(section, ["t"], lines)
    text = "\n".join(lines)
    assert "On the test pool's first 60 tasks per target" in text and "**+4.0 ± 1.0 pp** (t +74.0 ± 1.0)" in text
    default.update(procedure="previous")
    lines = []
    procedure_report(section, ["t"], lines)
    assert "**previous** ships, and the cost goal is missed." in "\n".join(lines)
