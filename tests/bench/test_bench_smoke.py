"""Smoke run of the whole benchmark at tiny sizes: every section, BENCHMARKS.md and both PNGs written."""

import json
import pathlib

import numpy as np
import pytest

from bench import BenchConfig, mean_ci95, run_benchmarks
from tflite_train.data import DatasetSpec, LabeledImages, prepare_cache
from tflite_train.data.fashion_mnist import FASHION_MNIST_DIR, load_fashion_mnist


def _patterns(size: int, seed: int, classes: int = 8, per_class: int = 8) -> LabeledImages:
    """Class-structured images (a per-class random template + noise), uint8 RGB."""
    rng = np.random.default_rng(seed)
    templates = rng.integers(0, 256, (classes, size, size, 3))
    noise = rng.normal(0, 30, (classes, per_class, size, size, 3))
    images = np.clip(templates[:, None] + noise, 0, 255).astype(np.uint8).reshape(-1, size, size, 3)
    return LabeledImages(images, np.repeat(np.arange(classes), per_class).astype(np.int32),
                         tuple(f"c{i}" for i in range(classes)))


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
    config = BenchConfig(
        cache_dir=str(root / "cache"), out_dir=str(root / "out"), model_dir=str(root / "models"), backbone="tiny",
        input_size=32, weights=None, pretrained_weights=None, candidate_blocks=4, tasks=2, min_ways=2, max_ways=3,
        max_query=2, max_support_per_class=3, max_support_total=8, iterations=2, full_train_batch=4,
        ablation_tasks=2, channel_ratios=(0.5,), timing_runs=1, timing_support=6, tf_recipe=True,
    )
    report = run_benchmarks(config, command="pytest smoke")
    return config, report


def test_every_section_and_png_written(smoke_run):
    config, report = smoke_run
    out = pathlib.Path(config.out_dir)
    text = report.read_text()
    for heading in ("## 1. Accuracy", "## 2. Backward-pass memory", "## 3. End-to-end adaptation time",
                    "## 4. Ablations", "## 5. Plots", "## Targets of the issue"):
        assert heading in text
    for method in ("None", "LastLayer", "FullTrain", "TinyTL", "SparseUpdate", "TinyTrain", "TF recipe"):
        assert f"| {method}" in text
    assert "not built" in text and "below the issue's N ≥ 50" in text
    for png in ("accuracy_vs_compute.png", "fisher_layers.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "config.json").read_text()) == config.to_dict()
    results = json.loads((out / "results.json").read_text())
    assert results["environment"]["cores"] >= 1 and results["environment"]["interpreter_module"]
    rows = results["sections"]["accuracy"]["per_target"]["tgt"]
    accuracies = {r["label"]: r["accuracies"] for r in rows if not r.get("not_built")}
    assert set(accuracies) == {"None", "LastLayer", "FullTrain", "SparseUpdate", "TinyTrain"}
    assert all(len(a) == 2 and all(0 <= x <= 100 for x in a) for a in accuracies.values())
    assert results["sections"]["timing"]["tf_recipe"]["step_median"] > 0
    assert len(results["sections"]["backward_cost"]["mbv2/adam"]) == 4


def test_models_are_reused(smoke_run, caplog):
    from bench.models import ensure_models

    config, _ = smoke_run
    with caplog.at_level("INFO"):
        ensure_models(config)
    assert "reusing" in caplog.text and "exporting" not in caplog.text


def test_mean_ci95_by_hand():
    # values 1, 2, 3: mean 2, s = 1, ci = 1.96 / sqrt(3)
    result = mean_ci95([1.0, 2.0, 3.0])
    assert result.mean == pytest.approx(2.0) and result.ci95 == pytest.approx(1.959963984540054 / np.sqrt(3))
    with pytest.raises(ValueError, match="at least 2"):
        mean_ci95([1.0])


@pytest.mark.parametrize("field, value", [("tasks", 1), ("sections", ("nope",)), ("channel_ratio", 1.5),
                                          ("iterations", -1), ("channel_ratios", ())])
def test_config_validation(field, value):
    with pytest.raises(ValueError, match=field):
        BenchConfig(**{field: value})


def test_render_only_reproduces_the_report(smoke_run, capsys):
    from tflite_train.cli import main

    config, report = smoke_run
    before = report.read_text()
    report.unlink()
    assert main(["bench", "--out", config.out_dir, "--render-only"]) == 0
    assert report.read_text() == before


def test_render_only_without_a_run_fails_cleanly(tmp_path, capsys):
    from tflite_train.cli import main

    assert main(["bench", "--out", str(tmp_path), "--render-only"]) == 2
    assert "no finished benchmark run" in capsys.readouterr().err
