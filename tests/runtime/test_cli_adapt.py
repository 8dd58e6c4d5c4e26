"""``tflite-train adapt`` / ``predict`` end to end on PNG folders of real images (no TF needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runtime_fixtures import fixture_model, write_episode_folders
from tflite_train.cli import main
from tflite_train.runtime.checkpoint import load_checkpoint

MODEL = "tiny_adam_33"


@pytest.fixture()
def folders(fashion, tmp_path):
    return write_episode_folders(fashion, tmp_path / "data", ways=3, shots=4, queries=5, seed=0)


def _adapt(out, support, *extra):
    return main(["adapt", "--model", str(fixture_model(MODEL)), "--support", str(support), "--out", str(out),
                 "--iterations", "5", *extra])


def test_adapt_then_predict(folders, tmp_path, capsys):
    support, query = folders
    out = tmp_path / "run" / "m.ckpt"
    out.parent.mkdir()
    assert _adapt(out, support, "--query", str(query), "--mem-budget", "1MiB", "--compute-budget", "0.15",
                  "--policy", "TinyTrain", "--seed", "3") == 0
    summary = json.loads(capsys.readouterr().out)
    assert 0.0 <= summary["query_accuracy"] <= 1.0 and summary["within_budget"]
    assert set(summary["seconds"]) == {"load", "head", "fisher_selection", "training", "eval"}
    config = json.loads((tmp_path / "run" / "m.ckpt.config.json").read_text())
    assert config["adapt"]["policy"] == "tinytrain" and config["adapt"]["memory_bytes"] == 2**20
    assert config["adapt"]["compute_fraction"] == 0.15 and config["adapt"]["seed"] == 3
    report = json.loads((tmp_path / "run" / "m.ckpt.report.json").read_text())
    assert report["classes"] == ["class0", "class1", "class2"] and report["memory_bytes"] <= 2**20
    assert load_checkpoint(out).class_names == ("class0", "class1", "class2")

    images = sorted(str(p) for p in (query / "class1").iterdir())
    assert main(["predict", "--model", str(fixture_model(MODEL)), "--checkpoint", str(out), *images]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == images
    assert all(line.split("\t")[2] == f"class{line.split(chr(9))[1]}" for line in lines)


def _corrupt_png(support, _):
    (support / "class0" / "zz.png").write_bytes(b"not an image at all")


def _one_class(support, tmp):
    only = tmp / "one"
    (only / "a").mkdir(parents=True)
    for f in sorted((support / "class0").iterdir()):
        (only / "a" / f.name).write_bytes(f.read_bytes())
    return only


def _nan_image(support, _):
    np.save(support / "class1" / "nan.npy", np.full((28, 28), np.nan, np.float32))


def _empty(support, tmp):
    (tmp / "empty" / "a").mkdir(parents=True)
    return tmp / "empty"


@pytest.mark.parametrize(
    "damage, flags, message",
    [
        (_corrupt_png, [], "cannot read image"),
        (_one_class, [], "at least 2"),
        (_nan_image, [], "NaN"),
        (_empty, [], "no images"),
        (None, ["--policy", "magic"], "unknown policy"),
        (None, ["--mem-budget=-1MiB"], "negative"),
        (None, ["--mem-budget", "1XB"], "unknown byte unit"),
    ],
    ids=["unreadable", "one-class", "nan", "empty", "policy", "negative-mem", "bad-unit"],
)
def test_bad_input_leaves_saved_files_intact(folders, tmp_path, capsys, damage, flags, message):
    support, _ = folders
    out = tmp_path / "m.ckpt"
    assert _adapt(out, support) == 0
    saved = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert set(saved) == {"m.ckpt", "m.ckpt.config.json", "m.ckpt.report.json"}
    capsys.readouterr()
    target = support
    if damage is not None:
        target = damage(support, tmp_path) or support
    assert _adapt(out, target, *flags) == 2
    assert message in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == saved


def test_negative_compute_budget_is_rejected(folders, tmp_path):
    support, _ = folders
    with pytest.raises(SystemExit) as exit_info:
        _adapt(tmp_path / "m.ckpt", support, "--compute-budget=-0.2")
    assert exit_info.value.code == 2 and not (tmp_path / "m.ckpt").exists()


def test_predict_refuses_other_model(folders, tmp_path, capsys):
    support, query = folders
    out = tmp_path / "m.ckpt"
    assert _adapt(out, support) == 0
    image = str(next((query / "class0").iterdir()))
    assert main(["predict", "--model", str(fixture_model("tiny_sgd_full_17")), "--checkpoint", str(out), image]) == 2
    assert "not this model" in capsys.readouterr().err
