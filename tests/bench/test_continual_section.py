"""The class-incremental section (issue 42): its pure parts against hand-computed goldens, and one tiny run on the
tiny_adam_33 fixture model (build/test-models) over a synthetic cache."""

import json
import math
import pathlib

import numpy as np
import pytest

from bench.config import BenchConfig
from bench.continual_report import continual_report
from bench.continual_section import (ARMS, DESIGNS, Design, class_accuracy, continual_goals, continual_records,
                                     continual_tasks, cost_bound_seconds, design_for, run_scenario, split_task,
                                     step_scores, summarize_continual, base_config)
from bench.paired_accuracy import AVERAGE
from bench.policy_runs import for_model
from bench.tasks import Task
from tests.bench.synthetic_images import patterns
from tests.runtime.runtime_fixtures import FIXTURE_DIR
from tflite_train.data import DatasetSpec, prepare_cache
from tflite_train.runtime import AdaptConfig

FIXTURE = FIXTURE_DIR / "tiny_adam_33.tflite"


def test_split_task_by_hand():
    # 3 classes, 2 support images each, support order 0 1 2 0 1 2; old classes 0, 1; 1 shot in steps 1-2
    support = np.arange(6, dtype=np.uint8).reshape(6, 1, 1, 1)
    task = Task(support, np.array([0, 1, 2, 0, 1, 2], np.int32), support[:3], np.array([0, 1, 2], np.int32))
    s = split_task(task, old_ways=2, shots=1)
    assert s.step1[0].ravel().tolist() == [0, 1] and s.step1[1].tolist() == [0, 1]
    assert s.step2[0].ravel().tolist() == [2] and s.step2[1].tolist() == [2]
    assert s.step3[0].ravel().tolist() == [3, 4, 5] and s.step3[1].tolist() == [0, 1, 2]
    assert s.ways == 3 and s.old_ways == 2
    with pytest.raises(ValueError, match="old and new"):
        split_task(task, old_ways=3, shots=1)
    with pytest.raises(ValueError, match="more than 2 support images"):
        split_task(task, old_ways=2, shots=2)


def test_accuracy_over_old_and_new_classes_by_hand():
    predictions = np.array([0, 1, 1, 2, 2, 0])
    labels = np.array([0, 1, 2, 2, 0, 0])
    # old (0, 1): queries 0, 1, 4, 5 -> right 0, 1, 5 = 3/4; new (2): queries 2, 3 -> right 3 = 1/2; all 4/6
    assert step_scores(predictions, labels, 2) == pytest.approx({"all": 400 / 6, "old": 75.0, "new": 50.0})
    assert math.isnan(class_accuracy(predictions, labels, [7]))


def test_design_for_by_hand():
    assert design_for([20] * 10) == DESIGNS[0]
    # 9 classes of 13, 10 of >= 8: the 3+2+3 design
    assert design_for([13] * 9 + [8]) == Design(3, 2, 3)
    # line icons: 6 classes of >= 7 images, 26 of >= 5: the 2+1+2 design
    assert design_for([8, 8, 7, 7, 7, 7] + [5] * 20 + [3] * 60) == Design(2, 1, 2)
    # fewer than 10 classes at any size: the first design that 5 fill
    assert design_for([13] * 5 + [4] * 3) == DESIGNS[0]
    with pytest.raises(ValueError, match="5 classes with >= 5 images"):
        design_for([20] * 4 + [4] * 9)


def _run(all_, old, new=50.0, checkpoint=1000, replay=0, seconds=1.0, updates=10, rows=10):
    return {"all": all_, "old": old, "new": new, "checkpoint_bytes": checkpoint, "replay_bytes": replay,
            "seconds": seconds, "updates": updates, "rows": rows, "predictions": []}


def _steps(replay_all, replay_old, replay_bytes=2**19):
    """One task: step 1 old 90 %; every arm 80 % / 85 % old, scratch 10 s on 20 rows; replay as given, 12 s on 30
    rows."""
    arms = {arm: _run(80.0, 85.0, seconds=10.0, rows=20) for arm in ARMS}
    arms["with_replay"] = _run(replay_all, replay_old, replay=replay_bytes, seconds=12.0, rows=30)
    return {"1": {"base": _run(90.0, 90.0, None)}, "2": arms, "3": arms}


def test_summary_and_goal_verdicts_by_hand():
    records = {"a": [_steps(77.0, 88.0), _steps(79.0, 86.0)], "b": [_steps(80.0, 90.0), _steps(82.0, 90.0)]}
    summary = summarize_continual(records)
    replay = summary["steps"]["2"]["with_replay"]
    # delta all to scratch: a: -3, -1 (mean -2); b: 0, +2 (mean +1); average of target means -0.5
    assert replay["delta_all"]["a"]["mean"] == pytest.approx(-2.0)
    assert replay["delta_all"][AVERAGE]["mean"] == pytest.approx(-0.5)
    # old change from step 1 (90): a: -2, -4 (mean -3); b: 0, 0; average -1.5
    assert replay["old_change"][AVERAGE]["mean"] == pytest.approx(-1.5)
    assert summary["steps"]["2"]["from_scratch"]["delta_all"] is None
    assert summary["step1_old"][AVERAGE]["mean"] == pytest.approx(90.0)
    assert replay["seconds"] == pytest.approx(12.0) and replay["replay_bytes_max"] == 2**19
    # cost bound: 10 s / 20 rows x 30 rows = 15 s
    assert cost_bound_seconds(records["a"][0]) == pytest.approx(15.0) and summary["cost_bound_seconds"] == 15.0
    goals = {g["goal"]: g for g in continual_goals(summary)}
    assert goals["all_classes"]["met"] and goals["old_classes"]["met"] and goals["cost"]["met"]

    worse = {"a": [_steps(70.0, 80.0, 2**20 + 4), _steps(74.0, 86.0)], "b": records["b"]}
    goals = {g["goal"]: g for g in continual_goals(summarize_continual(worse))}
    # delta all: a: -10, -6 (-8); b: +1 -> average -3.5 < -2; old: a: -10, -4 (-7), b: 0 -> -3.5; memory over 1 MiB
    assert goals["all_classes"]["measured"] == pytest.approx(-3.5) and not goals["all_classes"]["met"]
    assert goals["old_classes"]["measured"] == pytest.approx(-3.5) and not goals["old_classes"]["met"]
    assert goals["all_classes"]["replay_bytes_max"] == 2**20 + 4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    if not FIXTURE.exists():
        pytest.fail(f"missing test model {FIXTURE}: run `python -m converters.fixtures --out {FIXTURE_DIR}`")
    root = tmp_path_factory.mktemp("continual")
    prepare_cache(root / "cache", image_size=33, datasets=(
        DatasetSpec("tgt", "target", "synthetic patterns", lambda s: patterns(s, 3, classes=8, per_class=12)),))
    config = BenchConfig(cache_dir=str(root / "cache"), size_caches=(), out_dir=str(root / "out"), continual_tasks=2,
                         continual_epochs=1, targets=("tgt",))
    return config


def test_tiny_run_structure_resume_and_report(tiny):
    records, designs = continual_records(tiny, FIXTURE, ("tgt",), 33, "tiny", "test")
    assert designs == {"tgt": Design(3, 2, 3)}  # 8 classes of 8-9 test images: too few for 5+3+5
    assert len(records["tgt"]) == 2
    for steps in records["tgt"]:
        assert set(steps) == {"1", "2", "3"} and set(steps["1"]) == {"base"}
        assert steps["1"]["base"]["new"] is None and len(steps["1"]["base"]["predictions"]) == 3 * 3
        for step in ("2", "3"):
            assert set(steps[step]) == set(ARMS)
            assert all(len(steps[step][arm]["predictions"]) == 5 * 3 for arm in ARMS)
            assert steps[step]["prototypes_only"]["updates"] == 0 and steps[step]["without_replay"]["replay_bytes"] == 0
            assert 0 < steps[step]["with_replay"]["replay_bytes"] <= 2**20
        assert steps["2"]["with_replay"]["rows"] == 2 * 3 + steps["1"]["base"]["replay_image_count"]
        # the memory keeps augmented views of its images beside their plain views (the budget holds them all)
        assert steps["1"]["base"]["replay_image_count"] == 3 * 3
        assert steps["1"]["base"]["replay_rows"] == 3 * 3 * (1 + AdaptConfig().augment_views)
    cell = next(pathlib.Path(tiny.out_dir).glob("tasks/tiny/continual/tgt/test/*.jsonl"))
    lines = cell.read_text().splitlines()
    assert len(lines) == 3 and "cell" in json.loads(lines[0])
    again, _ = continual_records(tiny, FIXTURE, ("tgt",), 33, "tiny", "test")  # resumed: nothing rerun
    assert again == records and cell.read_text().splitlines() == lines

    summary = summarize_continual(records)
    section = {"adapt": base_config(tiny).to_dict(), "replay_budget": 2**20, "old_ways": 3, "new_ways": 2,
               "runs": {"tiny": {"label": "tiny @ 33", "model": "tiny", "designs": {"tgt": {"shots": 3, "more_shots": 2,
                                                                                       "queries": 3}},
                                 **summary, "goals": continual_goals(summary)}}}
    lines = []
    continual_report(section, ["tgt"], lines)
    text = "\n".join(lines)
    assert "## Class-incremental adaptation (issue 42)" in text and "| (b) prototypes only, no update |" in text
    assert text.count("| --from with replay |") == 3 and "Old-class accuracy drops by at most 2 pp" in text
    old = summary["steps"]["2"]["with_replay"]["delta_old"]["average"]  # the old classes against (a), paired
    assert "| old − (a) (pp) |" in text
    assert f"against (a)'s old-class accuracy (paired on the same tasks), the replay run's is {old['mean']:+.1f} ± " \
           f"{old['ci95']:.1f} pp" in text


def test_the_prototypes_arm_does_no_update(tiny):
    from tflite_train import contract as C
    from tflite_train.runtime import TrainableModel

    model = TrainableModel(str(FIXTURE))
    design, tasks = continual_tasks(tiny, "tgt", 1, 33)
    kept = {}
    run_scenario(model, split_task(for_model(tasks[0], model), 3, design.shots), base_config(tiny), checkpoints=kept)
    first, added = kept["1", "base"], kept["2", "prototypes_only"]
    assert added.class_names == ("class0", "class1", "class2", "class3", "class4")
    weights = [k for k in first.arrays if k not in C.GLOBAL_STATE]  # the layers' stored weights
    assert weights and sorted(k for k in added.arrays if k not in C.GLOBAL_STATE) == sorted(weights)
    for name in weights:
        np.testing.assert_array_equal(added.arrays[name], first.arrays[name])
    np.testing.assert_array_equal(added.arrays[C.PROTOTYPES][:3], first.arrays[C.PROTOTYPES])
    assert int(added.arrays[C.NUM_CLASSES]) == 5 and added.arrays[C.PROTOTYPES].shape[0] == 5
    assert added.replay is None
    # the trained arms do update: --from without replay changes some stored weight
    moved = kept["2", "without_replay"]
    assert any(not np.array_equal(moved.arrays[k], first.arrays[k]) for k in weights if k in moved.arrays)
