"""The resumable per-task store (``bench.task_store``) and the assembly of a (partial) paired run from it."""

import dataclasses
import json
import logging

import numpy as np
import pytest

from bench.methods import NO_META, NONE_NO_META
from bench.paired_section import assemble_run
from bench.task_store import TaskRecord, append_record, cell_key, open_cell, read_records, task_fingerprint
from bench.tasks import Task

CELL = {"model": {"model_id": "abc", "export": None}, "adapt": {"policy": "tinytrain", "learning_rate": 1e-3},
        "target": "t", "pool": "test", "fisher": None, "interpreter": "litert 2.3.0", "threads": 1}


def _task(seed: int) -> Task:
    rng = np.random.default_rng(seed)
    return Task(rng.integers(0, 256, (4, 8, 8, 3), dtype=np.uint8), np.array([0, 1, 0, 1], np.int32),
                rng.integers(0, 256, (2, 8, 8, 3), dtype=np.uint8), np.array([0, 1], np.int32))


def _record(task: int, fingerprint: str, accuracy: float = 50.0) -> TaskRecord:
    return TaskRecord(task, fingerprint, accuracy, 1024.0, 2048.0, 0.5, ("b1", "b2"), True)


def test_fingerprint_sees_every_pixel_and_label():
    a = _task(0)
    assert task_fingerprint(a) == task_fingerprint(_task(0)) and len(task_fingerprint(a)) == 16
    query = a.query.copy()
    query[1, 7, 7, 2] ^= 1
    assert task_fingerprint(Task(a.support, a.support_labels, query, a.query_labels)) != task_fingerprint(a)
    swapped = Task(a.support, a.support_labels[::-1].copy(), a.query, a.query_labels)
    assert task_fingerprint(swapped) != task_fingerprint(a)


def test_cell_file_is_keyed_by_everything_that_changes_a_result(tmp_path):
    path = open_cell(tmp_path, "lite0_128/sparse", "TinyTrain without meta-training", "t", "test", CELL)
    name = f"TinyTrain_without_meta-training-{cell_key(CELL)}.jsonl"
    assert path == tmp_path / "tasks/lite0_128/sparse/t/test" / name
    assert json.loads(path.read_text()) == {"cell": CELL, "key": cell_key(CELL)}
    assert open_cell(tmp_path, "lite0_128/sparse", "TinyTrain without meta-training", "t", "test", dict(CELL)) == path
    assert len(path.read_text().splitlines()) == 1  # the header is written once
    for change in ({"adapt": {**CELL["adapt"], "learning_rate": 3e-3}}, {"model": {"model_id": "abd", "export": None}},
                   {"pool": "validation"}, {"threads": 2}, {"fisher": {"source": "s", "tasks": ["x"]}}):
        assert cell_key({**CELL, **change}) != cell_key(CELL)


def test_records_append_and_read_back_skipping_torn_stale_and_extra_lines(tmp_path, caplog):
    path = open_cell(tmp_path, "m", "A", "t", "test", CELL)
    fingerprints = ["f0", "f1", "f2"]
    append_record(path, _record(1, "f1", 75.0))
    append_record(path, _record(0, "stale", 10.0))  # another data cache's task 0
    append_record(path, _record(0, "f0", 25.0))
    append_record(path, _record(1, "f1", 99.0))  # a duplicate: the first line wins
    append_record(path, _record(5, "f5"))  # beyond this run's N
    with open(path, "a") as f:
        f.write('{"task": 2, "fingerprint": "f2", "accur')  # a write cut short
    with caplog.at_level(logging.WARNING):
        records = read_records(path, fingerprints)
    assert records == {0: _record(0, "f0", 25.0), 1: _record(1, "f1", 75.0)}
    assert "1 stored task(s) are not this config's tasks" in caplog.text
    assert set(read_records(path, None)) == {0, 1, 5}  # counting progress without the tasks
    assert read_records(tmp_path / "missing.jsonl", fingerprints) == {}
    line = json.loads(path.read_text().splitlines()[1])
    assert line == {"task": 1, "fingerprint": "f1", "accuracy": 75.0, "memory_bytes": 1024.0, "backward_macs": 2048.0,
                    "seconds": 0.5, "layers": ["b1", "b2"], "cache": True}


def test_assemble_a_partial_run_by_hand():
    methods = {label: {"model": "m", "adapt": {"policy": policy, "batch_size": 1}} for label, policy in (
        ("None", "none"), ("LastLayer", "last_layer"), (NO_META, "tinytrain"), (NONE_NO_META, "none"))}

    def rows(accuracies):
        return {i: _record(i, f"f{i}", a) for i, a in accuracies.items()}

    # t1: every policy has tasks 0-2 (LastLayer also 3); LastLayer equals None on 2 of 3 shared tasks -> no-op.
    # t2: only task 0 is shared by every policy: no summary for t2.
    records = {
        "t1": {"None": rows({0: 50.0, 1: 60.0, 2: 70.0}), "LastLayer": rows({0: 50.0, 1: 60.0, 2: 90.0, 3: 10.0}),
               NO_META: rows({0: 40.0, 1: 40.0, 2: 40.0}), NONE_NO_META: rows({0: 30.0, 1: 40.0, 2: 50.0})},
        "t2": {"None": rows({0: 50.0, 1: 50.0}), "LastLayer": rows({0: 60.0}), NO_META: rows({0: 10.0}),
               NONE_NO_META: rows({0: 10.0, 2: 20.0})},
    }
    run = assemble_run(4, methods, ["t1", "t2"], records)
    assert not run["complete"] and run["paired_tasks"] == {"t1": 3, "t2": 1} and run["summary_targets"] == ["t1"]
    assert run["per_target"]["t1"]["LastLayer"]["tasks"] == 4 and run["per_target"]["t2"]["LastLayer"]["tasks"] == 1
    last_layer = run["per_target"]["t1"]["LastLayer"]
    assert (last_layer["equal_to_none"], last_layer["compared_to_none"]) == (2, 3)
    # "TinyTrain without meta-training" is compared with "None without meta-training": 1 of 3 on t1, 1 of 1 on t2
    assert run["per_target"]["t1"][NO_META]["equal_to_none"] == 1
    assert run["noop"] == [{"label": "LastLayer", "target": "t1", "reference": "None", "equal": 2, "tasks": 3},
                           {"label": NO_META, "target": "t2", "reference": NONE_NO_META, "equal": 1, "tasks": 1}]
    assert "equal_to_none" not in run["per_target"]["t1"]["None"]
    # means over the shared tasks 0-2 of t1 only: LastLayer (50 + 60 + 90) / 3
    assert run["summary"]["means"]["LastLayer"]["t1"]["mean"] == pytest.approx(200 / 3)
    assert run["summary"]["means"]["LastLayer"]["average"]["mean"] == pytest.approx(200 / 3)
    assert run["cost"]["LastLayer"]["tasks"] == 5 and run["cost"]["LastLayer"]["cache_used"] == 5
    assert run["cost"]["LastLayer"]["seconds_per_task"] == pytest.approx(0.5)
    complete = assemble_run(1, methods, ["t1"], {"t1": {k: {0: v[0]} for k, v in records["t1"].items()}})
    assert complete["complete"] and complete["summary"] is None  # one task: no CI


def test_predictions_round_trip_and_old_lines_read_without_them(tmp_path):
    path = open_cell(tmp_path, "m", "A", "t", "test", CELL)
    stored = dataclasses.replace(_record(0, "f0"), predictions=(2, 0, 1))
    append_record(path, stored)
    append_record(path, _record(1, "f1"))  # a line written before predictions were stored
    records = read_records(path, ["f0", "f1"])
    assert records == {0: stored, 1: _record(1, "f1")} and records[1].predictions is None
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert lines[0]["predictions"] == [2, 0, 1] and "predictions" not in lines[1]


def test_unchanged_compares_predictions_and_falls_back_to_accuracy():
    none = dataclasses.replace(_record(0, "f0", 50.0), predictions=(0, 1, 1, 0))
    swapped = dataclasses.replace(none, predictions=(1, 0, 1, 0))  # two queries swap right and wrong: same accuracy
    assert swapped.accuracy == none.accuracy and not swapped.unchanged_from(none)
    assert dataclasses.replace(none, accuracy=50.0).unchanged_from(none)
    old = _record(0, "f0", 50.0)  # no predictions: equal accuracy is all there is to compare
    assert old.unchanged_from(none) and none.unchanged_from(old)
    assert not _record(0, "f0", 75.0).unchanged_from(none)


def test_the_no_op_check_counts_equal_predictions_not_equal_accuracies():
    methods = {label: {"model": "m", "adapt": {"policy": policy, "batch_size": 1}} for label, policy in (
        ("None", "none"), ("LastLayer", "last_layer"))}

    def rows(predictions):
        # labels 0, 1, 2, 3: accuracy from the predictions
        return {i: dataclasses.replace(_record(i, f"f{i}", 100.0 * np.mean(np.equal(p, [0, 1, 2, 3]))),
                                       predictions=tuple(p)) for i, p in enumerate(predictions)}

    # LastLayer ties None's accuracy on all three tasks but changes its predictions on two of them
    records = {"t": {"None": rows([(0, 1, 0, 0), (0, 0, 0, 0), (3, 3, 3, 3)]),
                     "LastLayer": rows([(0, 1, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2)])}}
    cell = assemble_run(3, methods, ["t"], records)["per_target"]["t"]["LastLayer"]
    assert (cell["equal_to_none"], cell["unchanged_from_none"], cell["predictions_compared"]) == (3, 1, 3)
    assert assemble_run(3, methods, ["t"], records)["noop"] == []
    records["t"]["LastLayer"][1] = dataclasses.replace(records["t"]["None"][1])
    run = assemble_run(3, methods, ["t"], records)
    assert run["noop"] == [{"label": "LastLayer", "target": "t", "reference": "None", "equal": 2, "tasks": 3}]


def test_stored_seconds_sum_every_session_of_a_run_by_hand(tmp_path):
    from bench.paired_section import stored_seconds

    def cell(model, label, pool, model_id, seconds):
        path = open_cell(tmp_path, model, label, "t", pool, {**CELL, "model": {"model_id": model_id, "export": None},
                                                            "pool": pool, "label": label})
        for i, s in enumerate(seconds):
            append_record(path, dataclasses.replace(_record(i, f"f{i}"), seconds=s))
        return path

    cell("run/sparse", "A", "validation", "m1", [1.0, 2.0])  # a tuning round
    cell("run/sparse", "B", "validation", "m1", [4.0])  # another setting
    cell("run/full", "C", "validation", "m2", [8.0])
    cell("run/sparse", "D", "validation", "other", [100.0])  # another model's tuning: not this run's
    cell("elsewhere/sparse", "E", "validation", "m1", [200.0])  # another run key
    test = cell("run/sparse", "A", "test", "m1", [16.0, 32.0])
    cell("run/sparse", "F", "test", "m1", [64.0])  # a test cell the run does not report (a superseded setting)
    entry = {"cells": {"t": {"A": str(test.relative_to(tmp_path))}}, "model_ids": {"sparse": "m1", "full": "m2"}}
    assert stored_seconds(tmp_path, "run", entry) == {"tuning": 15.0, "tests": 48.0}


def test_the_fine_tuning_fields_at_their_neutral_values_keep_an_older_cells_key(tmp_path):
    """Cells stored before ``AdaptConfig`` had the fine-tuning options stay valid: those fields at their neutral
    values are not part of the key (nor of the stored header); another value is."""
    from bench.task_store import NEUTRAL_ADAPT_FIELDS

    newer = {**CELL, "adapt": {**CELL["adapt"], **NEUTRAL_ADAPT_FIELDS}}
    path = open_cell(tmp_path, "m", "TinyTrain", "t", "test", newer)
    assert path == open_cell(tmp_path, "m", "TinyTrain", "t", "test", CELL)
    assert json.loads(path.read_text()) == {"cell": CELL, "key": cell_key(CELL)}
    episode = {**newer, "adapt": {**newer["adapt"], "prototype_mode": "episode"}}
    assert open_cell(tmp_path, "m", "TinyTrain", "t", "test", episode) != path


@pytest.mark.parametrize("fields", [{"policy": "none"}, {"policy": "tinytrain", "rate_choice": [0.0, 1e-3]}])
def test_a_learning_rate_nothing_reads_is_not_part_of_the_key(tmp_path, fields):
    """No update (policy none) and a per-task rate choice read no ``learning_rate``: a change of the default rate
    keeps their cells; where the rate is read (a plain TinyTrain cell) another rate makes another cell."""
    one = {**CELL, "adapt": {**CELL["adapt"], **fields, "learning_rate": 3e-3}}
    other = {**one, "adapt": {**one["adapt"], "learning_rate": 3e-4}}
    assert open_cell(tmp_path, "m", "x", "t", "test", one) == open_cell(tmp_path, "m", "x", "t", "test", other)
    plain = {**CELL, "adapt": {**CELL["adapt"], "learning_rate": 3e-4}}
    assert open_cell(tmp_path, "m", "x", "t", "test", plain) != open_cell(tmp_path, "m", "x", "t", "test", CELL)
