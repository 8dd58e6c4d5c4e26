"""Smoke run of the whole benchmark at tiny sizes: every section, BENCHMARKS.md and both PNGs written."""

import dataclasses
import json
import pathlib

import numpy as np
import pytest

from bench import BenchConfig, run_benchmarks
from bench.config import BackboneRun
from tests.bench.synthetic_images import patterns as _patterns
from tflite_train.data import DatasetSpec, LabeledImages, prepare_cache
from tflite_train.data.fashion_mnist import FASHION_MNIST_DIR, load_fashion_mnist


def _target(size: int) -> LabeledImages:
    if (FASHION_MNIST_DIR / "t10k-images-idx3-ubyte.gz").exists():
        return load_fashion_mnist(size, per_class=8)
    return _patterns(size, 1)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    prepare_cache(root / "cache", image_size=32, datasets=(
        DatasetSpec("src", "source", "synthetic patterns", lambda s: _patterns(s, 0, classes=10)),
        DatasetSpec("tgt", "target", "Debian fashion-mnist (or synthetic patterns)", _target),
    ))
    # Two seeded "weights" of the tiny backbone stand for the meta-trained and the not meta-trained ones.
    from tflite_train.models import build_backbone

    weights = []
    for name, seed in (("meta", 1), ("base", 2)):
        path = root / f"{name}.weights.h5"
        build_backbone("tiny", 32, 3, seed=seed).model.save_weights(path)
        weights.append(str(path))
    config = BenchConfig(
        cache_dir=str(root / "cache"), out_dir=str(root / "out"), model_dir=str(root / "models"), backbone="tiny",
        input_size=32, weights=weights[0], candidate_blocks=4, tasks=2, min_ways=2,
        max_ways=3, max_query=2, max_support_per_class=3, max_support_total=8, epochs=1, full_train_batch=4,
        ablation_tasks=2, channel_ratios=(0.5,), timing_runs=1, timing_support=6, tf_recipe=True,
        learning_rates=(1e-3, 3e-3), epochs_grid=(1, 2), train_variants=0,  # one train signature: a 2x faster export
        tuning_tasks=3, halving_rounds=(1,), halving_eta=2,  # 4 settings on 1 validation task, the best 2 on 3
        backbones=(BackboneRun("tiny_32", "tiny", 32, weights[0], weights[1], 4),), memory_budget_mib=8.0,
        int8_calibration="synthetic:16",  # the int8 section's calibration (test_int8_update_...)
        procedures=("previous", "pmf_fixed_ties_short"), procedure_tasks=2,
    )
    report = run_benchmarks(config, command="pytest smoke")
    return config, report


def _ranked_keys(round_: dict) -> list[str]:
    """A tuning round's "lr/passes" keys in ``successive_halving.ranked`` order."""
    from bench.successive_halving import ranked

    def setting(key):
        lr, passes = key.split("/")
        return float(lr), int(passes)

    order = ranked({setting(k): v for k, v in round_["scores"].items()},
                   {setting(k): v for k, v in round_["unchanged"].items()})
    return [f"{lr:g}/{passes}" for lr, passes in order]


def test_every_section_and_png_written(smoke_run):
    config, report = smoke_run
    out = pathlib.Path(config.out_dir)
    text = report.read_text()
    for heading in ("## Fine-tuning procedure (validation tasks only)", "## 1. Paired accuracy", "## 2. Backward-pass memory", "## 3. End-to-end adaptation time",
                    "## 4. Ablations", "## 5. Plots", "## Targets of the issue"):
        assert heading in text
    for method in ("None", "LastLayer", "FullTrain", "SparseUpdate", "TinyTrain", "TinyTrain without meta-training"):
        assert f"| {method} |" in text
    assert "| TinyTrain [pmf_fixed_ties_short] without meta-training |" in text and "**Decision** (N = 2 validation tasks" in text
    assert "| TF recipe" in text
    assert "TinyTL (lite residual modules) is not built" in text and "A reduced run: N = 2 tasks per target" in text
    for png in ("accuracy_vs_compute_tiny_32.png", "fisher_layers.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "config.json").read_text()) == config.to_dict()
    results = json.loads((out / "results.json").read_text())
    assert results["environment"]["cores"] >= 1 and results["environment"]["interpreter_module"]
    run = results["sections"]["accuracy"]["runs"]["tiny_32"]
    rows = run["per_target"]["tgt"]
    policies = ("None", "LastLayer", "FullTrain", "SparseUpdate", "TinyTrain")
    assert set(rows) == {*policies, *(f"{p} without meta-training" for p in policies)}
    assert all(len(r["accuracies"]) == 2 and all(0 <= x <= 100 for x in r["accuracies"]) for r in rows.values())
    assert results["sections"]["timing"]["tf_recipe"]["step_median"] > 0
    assert len(results["sections"]["backward_cost"]["mbv2/adam"]) == 4
    tuning = run["tuning"]
    assert set(tuning) == {*policies[1:], *(f"{p} without meta-training" for p in policies[1:])}
    for label, c in tuning.items():
        first, last = c["rounds"]  # successive halving: every setting on 1 task, the best 2 on 3
        assert (first["tasks"], last["tasks"]) == (1, 3)
        assert set(first["scores"]) == {"0.001/1", "0.001/2", "0.003/1", "0.003/2"}
        assert len(last["scores"]) == 2 and set(last["scores"]) <= set(first["scores"])
        assert c["scores"] == last["scores"]
        for r in (first, last):  # each setting's share of tasks left at the untrained row's accuracy
            assert set(r["unchanged"]) == set(r["scores"]) and all(0 <= u <= 1 for u in r["unchanged"].values())
        assert set(last["scores"]) == set(_ranked_keys(first)[:2])  # the best 2 (no-ops last)
        assert f"{c['learning_rate']:g}/{c['epochs']}" == _ranked_keys(last)[0]
        adapt = run["methods"][label]["adapt"]
        assert (adapt["learning_rate"], adapt["epochs"]) == (c["learning_rate"], c["epochs"])
        assert adapt["cache"] is True
    for label, cell in rows.items():  # every cell: cache use and the no-op count against its no-update row
        policy = run["methods"][label]["adapt"]["policy"]
        assert cell["tasks"] == 2
        # FullTrain's lowest candidate is the stem: no frozen prefix to cache; no update: no steps
        # (test_cache_use_is_recorded_per_task checks the record of each task)
        assert cell["cache_used"] == 0 if policy in ("none", "full_train") else 0 <= cell["cache_used"] <= 2
        if policy == "none":
            assert "equal_to_none" not in cell
        else:
            assert 0 <= cell["equal_to_none"] <= cell["compared_to_none"] == 2
    assert run["stage"] == "done" and run["complete"] and "partial" not in results
    assert run["noop"] == [{"label": label, "target": "tgt", "reference": "None without meta-training"
                            if label.endswith("meta-training") else "None", "equal": c["equal_to_none"], "tasks": 2}
                           for label, c in rows.items() if c.get("equal_to_none", 0) > 1]
    for n in run["noop"]:
        assert f"**No-op warning**: {n['label']} on tgt" in text
    assert (out / "accuracy_vs_cost_tiny_32.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![accuracy vs cost](accuracy_vs_cost_tiny_32.png)" in text
    # Paired: the delta's per-target mean is the difference of the two policies' means on the same tasks.
    summary = run["summary"]
    for a, b in (("TinyTrain", "FullTrain"), ("TinyTrain", "TinyTrain without meta-training")):
        d = summary["deltas"][f"{a} − {b}"]
        assert d["tgt"]["mean"] == pytest.approx(summary["means"][a]["tgt"]["mean"] - summary["means"][b]["tgt"]["mean"])
    assert [v["b"] for v in summary["targets"]] == [
        *(f"{b}{w}" for w in ("", " without meta-training") for b in ("FullTrain", "SparseUpdate", "LastLayer", "None")),
        "TinyTrain without meta-training"]
    assert "### tiny @ 32 px" in text and "Paired deltas" in text and "Validation accuracy" in text
    assert "TinyTrain ≥ LastLayer + 3 pp (average paired delta): **" in text


def test_timing_rows_follow_the_epochs_protocol(smoke_run):
    # The timing task is 5-way with timing_support // 5 = 1 shot: one pass over its 5 support images
    # (epochs=1) is 5 steps at batch 1 and ceil(5 / 4) = 2 at batch 4.
    config, _ = smoke_run
    results = json.loads((pathlib.Path(config.out_dir) / "results.json").read_text())
    steps = {r["label"]: r["steps"] for r in results["sections"]["timing"]["rows"]}
    assert steps == {"FullTrain (batch 4)": 2, "FullTrain (batch 1)": 5, "SparseUpdate": 5, "TinyTrain": 5,
                     "TinyTrain (B_compute of forward MACs)": 5}


def test_process_pool_gives_the_same_results(smoke_run):
    import concurrent.futures
    import multiprocessing

    from bench.methods import accuracy_methods
    from bench.models import ensure_models
    from bench.policy_runs import Job, run_methods, scaled_memory_budget
    from bench.tasks import target_tasks
    from tflite_train.runtime import TrainableModel

    config, _ = smoke_run
    paths = ensure_models(config, ("sparse",))
    tasks = target_tasks(config, "tgt", 3)
    candidates = TrainableModel(str(paths["sparse"])).candidates
    rows = {m.label: m for m in accuracy_methods(config, scaled_memory_budget(config), candidates)}
    jobs = [Job(rows[label], paths["sparse"], tasks) for label in ("TinyTrain", "LastLayer")]
    alone = run_methods(jobs)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        pooled = run_methods(jobs, executor=pool, chunk_tasks=2)  # chunks of 2 + 1 tasks per job
    for a, b in zip(alone, pooled):
        assert (b.label, b.accuracies, b.layers) == (a.label, a.accuracies, a.layers)
        assert (b.memory_bytes, b.backward_macs) == (a.memory_bytes, a.backward_macs)
    with pytest.raises(ValueError, match="chunk_tasks"):
        run_methods(jobs, chunk_tasks=0)


def test_cache_use_is_recorded_per_task(smoke_run, tmp_path, monkeypatch):
    """``AdaptResult.cache.used`` of each task reaches its stored line, the cell and the report's cost column."""
    import bench.policy_runs
    from bench.methods import accuracy_methods
    from bench.models import ensure_models
    from bench.policy_runs import Job, run_methods, scaled_memory_budget
    from bench.accuracy_report import _cost_cell
    from bench.task_store import open_cell, read_records, task_fingerprint
    from bench.tasks import target_tasks
    from tflite_train.runtime import TrainableModel

    config, _ = smoke_run
    paths = ensure_models(config, ("sparse",))
    tasks = target_tasks(config, "tgt", 3)
    method = next(m for m in accuracy_methods(config, scaled_memory_budget(config),
                                              TrainableModel(str(paths["sparse"])).candidates) if m.label == "LastLayer")
    real, used = bench.policy_runs.adapt, iter([True, False, True])

    def adapt(*args, **kwargs):
        result = real(*args, **kwargs)
        return dataclasses.replace(result, cache=dataclasses.replace(result.cache, used=next(used)))

    monkeypatch.setattr(bench.policy_runs, "adapt", adapt)
    store = open_cell(tmp_path, "sparse", method.label, "tgt", "test", {"test": 1})
    result, = run_methods([Job(method, paths["sparse"], tasks, store=store)])
    assert result.cache_used == 2 and result.to_dict()["cache_used"] == 2
    stored = read_records(store, [task_fingerprint(t) for t in tasks])
    assert [stored[i].cache for i in range(3)] == [True, False, True]
    assert [stored[i].accuracy for i in range(3)] == list(result.accuracies)
    assert _cost_cell({"adapt": {"policy": "last_layer"}}, {"seconds_per_task": 2.25, "cache_used": 2, "tasks": 3}) \
        == "2.2 (cache 2/3)"


def test_models_are_reused(smoke_run, caplog):
    from bench.models import ensure_models

    config, _ = smoke_run
    with caplog.at_level("INFO"):
        ensure_models(config)
    assert "reusing" in caplog.text and "exporting" not in caplog.text


def test_validation_and_test_tasks_share_no_image(smoke_run):
    """The tasks the run stored (tuning: validation pool; reported: test pool) share no image."""
    from bench.task_store import read_records, task_fingerprint
    from bench.tasks import target_pools, target_tasks

    config, _ = smoke_run
    data, split = target_pools(config, "tgt")
    assert split.by == "image" and split.validation.size and split.test.size
    used = {}
    for pool, n in (("validation", config.tuning_tasks), ("test", config.tasks)):
        tasks = target_tasks(config, "tgt", n, pool)
        stored = {r.fingerprint for path in (pathlib.Path(config.out_dir) / "tasks").glob(f"*/*/tgt/{pool}/*.jsonl")
                  for r in read_records(path, None).values()}
        assert stored == {task_fingerprint(t) for t in tasks}  # the run used exactly these tasks
        used[pool] = {im.tobytes() for t in tasks for im in (*t.support, *t.query)}
    assert used["validation"].isdisjoint(used["test"])
    assert used["validation"] <= {data.images[i].tobytes() for i in split.validation}
    # cut by class (every target with >= class_split_min_classes classes): no class in both pools' tasks
    by_class = dataclasses.replace(config, class_split_min_classes=2)
    data, split = target_pools(by_class, "tgt")
    assert split.by == "class"
    label = {im.tobytes(): int(c) for im, c in zip(data.images, data.labels)}
    classes = {pool: {label[im.tobytes()] for t in target_tasks(by_class, "tgt", 4, pool)
                      for im in (*t.support, *t.query)} for pool in ("validation", "test")}
    assert classes["validation"] and classes["test"] and classes["validation"].isdisjoint(classes["test"])


def _without_seconds(value):
    """``value`` without wall times (keys naming seconds), recursively."""
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items() if "seconds" not in k}
    if isinstance(value, list):
        return [_without_seconds(v) for v in value]
    return value


def test_interrupted_run_resumes_to_the_same_results(smoke_run, tmp_path, monkeypatch):
    """Stopped in the tuning, then in the test tasks, then finished: the same results as the smoke run's
    uninterrupted accuracy section, every adaptation run once, and --render-only reports each stop."""
    import bench.policy_runs
    from bench import render_saved
    from bench.paired_section import refresh_partial

    config, _ = smoke_run
    out = tmp_path / "out"
    resumed = dataclasses.replace(config, out_dir=str(out), sections=("accuracy",))
    real = bench.policy_runs.adapt
    calls = []

    class Stop(Exception):
        pass

    def adapt_at_most(limit):
        def adapt(*args, **kwargs):
            if len(calls) >= limit:
                raise Stop
            calls.append(1)
            return real(*args, **kwargs)
        return adapt

    # Tuning: round 1 = 8 trained policies (4 on each set of weights) x 4 settings x 1 task + the 2 untrained
    # rows (the no-op reference) x 1 task; round 2 = 8 x 2 survivors x 2 new tasks + 2 x 2. Tests: 10 policies
    # x 2 tasks. 34 + 36 + 20 = 90 adaptations in all.
    monkeypatch.setattr(bench.policy_runs, "adapt", adapt_at_most(10))
    with pytest.raises(Stop):
        run_benchmarks(resumed, command="pytest smoke")
    partial = json.loads((out / "results.json").read_text())
    assert partial["partial"] and partial["sections"]["accuracy"]["runs"]["tiny_32"]["stage"] == "tuning"
    text = render_saved(out).read_text()
    assert "**Unfinished run**" in text and "the current round has 10 of 34 validation adaptations stored" in text

    monkeypatch.setattr(bench.policy_runs, "adapt", adapt_at_most(75))
    with pytest.raises(Stop):
        run_benchmarks(resumed, command="pytest smoke")
    assert len(calls) == 75
    text = render_saved(out).read_text()
    section = json.loads((out / "results.json").read_text())["sections"]["accuracy"]
    assert section["runs"]["tiny_32"]["stage"] == "tests" and "per_target" not in section["runs"]["tiny_32"]
    run = refresh_partial(out, config.tasks, section)["runs"]["tiny_32"]  # what render_saved reads from tasks/
    done = {label: run["per_target"]["tgt"][label]["tasks"] for label in run["methods"]}
    assert sum(done.values()) == 5 and not run["complete"]
    assert "Tasks done per cell (of N = 2):" in text
    assert "\n".join(f"| {label} | {n} |" for label, n in done.items()) in text

    monkeypatch.setattr(bench.policy_runs, "adapt", adapt_at_most(10**6))
    run_benchmarks(resumed, command="pytest smoke")
    assert len(calls) == 90  # nothing stored ran again
    after = json.loads((out / "results.json").read_text())
    before = json.loads((pathlib.Path(config.out_dir) / "results.json").read_text())
    assert "partial" not in after
    assert _without_seconds(after["sections"]["accuracy"]) == _without_seconds(before["sections"]["accuracy"])
    tuning = [r["sections"]["accuracy"]["runs"]["tiny_32"]["tuning"] for r in (after, before)]
    assert tuning[0] == tuning[1] and all(len(t["rounds"]) == 2 for t in tuning[0].values())
    # a changed config never reads stored tasks: TinyTrain at another channel ratio has to run
    monkeypatch.setattr(bench.policy_runs, "adapt", adapt_at_most(91))
    with pytest.raises(Stop):
        run_benchmarks(dataclasses.replace(resumed, channel_ratio=0.5), command="pytest smoke")
    assert len(calls) == 91


def test_update_reruns_some_sections_and_keeps_the_others(smoke_run, tmp_path):
    import dataclasses
    import shutil

    config, _ = smoke_run
    copy = tmp_path / "out"
    shutil.copytree(config.out_dir, copy)
    before = json.loads((copy / "results.json").read_text())
    update = dataclasses.replace(config, out_dir=str(copy), sections=("plots",))
    report = run_benchmarks(update, command="pytest update", update=True)
    after = json.loads((copy / "results.json").read_text())
    assert after["commands"] == ["pytest smoke", "pytest update"]
    assert list(after["sections"]) == list(before["sections"])
    for name in ("accuracy", "timing", "ablations", "backward_cost"):
        assert after["sections"][name] == before["sections"][name]
    assert "`pytest smoke`; then, rerunning some sections and keeping the others: `pytest update`" in report.read_text()
    with pytest.raises(ValueError, match="tasks"):
        run_benchmarks(dataclasses.replace(update, tasks=3), update=True)
    with pytest.raises(ValueError, match="finished benchmark run"):
        run_benchmarks(dataclasses.replace(update, out_dir=str(tmp_path / "empty")), update=True)


def test_an_accuracy_update_keeps_the_saved_tuning_choices(smoke_run, tmp_path, monkeypatch):
    """``--update --section accuracy`` hands the saved accuracy section to the paired section, whose
    ``kept_choices`` keeps every unchanged method's tuning (only new or changed rows are tuned again)."""
    import dataclasses
    import shutil

    import bench.runner

    config, _ = smoke_run
    copy = tmp_path / "out"
    shutil.copytree(config.out_dir, copy)
    saved = json.loads((copy / "results.json").read_text())["sections"]["accuracy"]
    seen = {}

    def paired_section(config, targets, paths, runs, previous, checkpoint=None):
        seen["previous"] = previous
        return previous

    monkeypatch.setattr(bench.runner, "paired_section", paired_section)
    run_benchmarks(dataclasses.replace(config, out_dir=str(copy), sections=("accuracy",)), command="pytest update",
                   update=True)
    assert seen["previous"] == saved


def test_int8_update_pairs_the_int8_rows_with_the_stored_float_cells(smoke_run, tmp_path, monkeypatch):
    """``--update --section int8`` of a finished run: the int8 export runs None and TinyTrain on the accuracy
    section's test tasks (2 rows x N adaptations); the float rows are the stored cells (no adaptation)."""
    import dataclasses
    import shutil

    import bench.policy_runs
    from tflite_train.runtime import TrainableModel

    config, _ = smoke_run
    copy = tmp_path / "out"
    shutil.copytree(config.out_dir, copy)
    before = json.loads((copy / "results.json").read_text())["sections"]["accuracy"]["runs"]["tiny_32"]
    real, calls = bench.policy_runs.adapt, []

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(bench.policy_runs, "adapt", counting)
    report = run_benchmarks(dataclasses.replace(config, out_dir=str(copy), sections=("int8",)), command="pytest int8",
                            update=True)
    assert len(calls) == 2 * config.tasks
    results = json.loads((copy / "results.json").read_text())
    run = results["sections"]["int8"]["runs"]["tiny_32"]
    for label in ("None", "TinyTrain"):
        assert run["accuracies"][label]["tgt"] == before["per_target"]["tgt"][label]["accuracies"]
        assert len(run["accuracies"][f"{label} (int8)"]["tgt"]) == config.tasks
        assert run["methods"][f"{label} (int8)"]["adapt"] == before["methods"][label]["adapt"]
    int8_model = TrainableModel(results["models"]["tiny_32/int8"])
    assert int8_model.metadata["config"]["quantize"] == "int8-candidates"
    assert run["model_bytes"]["int8"] < run["model_bytes"]["float"]
    delta = run["summary"]["deltas"]["TinyTrain"]["tgt"]["mean"]
    assert delta == pytest.approx(np.mean(run["accuracies"]["TinyTrain (int8)"]["tgt"])
                                  - np.mean(run["accuracies"]["TinyTrain"]["tgt"]))
    timing = run["timing"]  # float and int8 timed side by side (bench.int8_timing)
    assert timing["runs"] == config.timing_runs and set(timing["infer"]) == {"float", "int8"}
    assert all(v > 0 for v in timing["infer"].values())
    trains = timing["rows"]["TinyTrain"]
    assert trains["float"]["steps"] == trains["int8"]["steps"] > 0 and trains["int8"]["step"] > 0
    assert timing["rows"]["None"]["int8"]["step"] == 0.0
    text = report.read_text()
    assert "## int8 export (`--quantize int8-candidates`)" in text and "| TinyTrain (int8) − TinyTrain |" in text
    assert "| `infer` (ms) |" in text and "| TinyTrain: optimizer step (ms" in text and "| None: optimizer step" not in text
    assert results["sections"]["accuracy"] == json.loads(
        (pathlib.Path(config.out_dir) / "results.json").read_text())["sections"]["accuracy"]
    with pytest.raises(ValueError, match="int8 section pairs with the accuracy section"):
        run_benchmarks(dataclasses.replace(config, out_dir=str(tmp_path / "fresh"), sections=("int8",)))


def test_render_only_reproduces_the_report(smoke_run, capsys):
    from tflite_train.cli import main

    config, report = smoke_run
    before = report.read_text()
    report.unlink()
    assert main(["bench", "--out", config.out_dir, "--render-only"]) == 0
    assert report.read_text() == before
