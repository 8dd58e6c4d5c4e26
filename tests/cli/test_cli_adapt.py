"""``tflite-train adapt`` / ``predict`` end to end on folders of real images (no TF needed)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.runtime.runtime_fixtures import fixture_model, write_episode_folders
from tflite_train.cli import main
from tflite_train.runtime.checkpoint.checkpoint import load_checkpoint
from tflite_train.sparse.units import format_bytes

MODEL = "tiny_adam_33"


@pytest.fixture()
def folders(fashion, tmp_path):
    return write_episode_folders(fashion, tmp_path / "data", ways=3, shots=4, queries=5, seed=0)


def _adapt(out, support, *extra):
    return main(["adapt", "--mem-budget", "unlimited",
                 "--model", str(fixture_model(MODEL)), "--support", str(support), "--out", str(out),
                 "--iterations", "5", *extra])


def test_adapt_json_then_predict(folders, tmp_path, capsys):
    support, query = folders
    out = tmp_path / "run" / "m.ckpt"
    out.parent.mkdir()
    assert _adapt(out, support, "--query", str(query), "--mem-budget", "1MiB", "--compute-budget", "0.15",
                  "--policy", "TinyTrain", "--seed", "3", "--json") == 0
    record = json.loads(capsys.readouterr().out)
    assert 0.0 <= record["query_accuracy"] <= 1.0 and record["within_budget"]
    assert set(record["seconds"]) == {"load", "read", "head", "fisher_selection", "reopen", "cache", "training",
                                      "remember", "eval"}
    assert record["cache"]["used"] and record["cache"]["cache_bytes"] <= record["cache"]["image_bytes"]
    assert record["shots"] == [4, 4, 4] and len(record["losses"]) == 5
    assert set(record["fisher_potentials"]) == set(record["layer_costs"])
    assert isinstance(record["peak_rss_bytes"], int) and record["peak_rss_bytes"] > 0  # read from the OS (no figure)
    checkpoint = load_checkpoint(out)  # one file: the config and the report travel inside the checkpoint
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.ckpt"], "no sidecar, lock or temporary file"
    config, report = checkpoint.config, checkpoint.report
    assert config["adapt"]["policy"] == "tinytrain" and config["adapt"]["memory_bytes"] == 2**20
    assert config["adapt"]["compute_fraction"] == 0.15 and config["adapt"]["seed"] == 3
    assert config["model_id"] == checkpoint.model_id and config["out"] == str(out)
    assert report["classes"] == ["class0", "class1", "class2"] and report["memory_bytes"] <= 2**20
    assert report["losses"] == record["losses"] and report["selection"] == checkpoint.selection.to_dict()
    assert checkpoint.class_names == ("class0", "class1", "class2")
    assert main(["show", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == {"config": config, "report": record}, "show reads back exactly what adapt reported"

    images = sorted(str(p) for p in (query / "class1").iterdir())
    model = str(fixture_model(MODEL))
    assert main(["predict", "--model", model, "--checkpoint", str(out), "--json", *images]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["file"] for r in rows] == images
    assert all(r["class"] == f"class{r['class_id']}" and 1 / 3 <= r["confidence"] <= 1 for r in rows)
    assert main(["predict", "--model", model, "--checkpoint", str(out), "--csv", *images]) == 0
    table = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert table[0] == ["file", "class_id", "class", "confidence"]
    assert [(r[0], r[2]) for r in table[1:]] == [(r["file"], r["class"]) for r in rows]
    assert main(["predict", "--model", model, "--checkpoint", str(out), *images]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["file", "class", "confidence"] and len(lines) == len(images) + 1
    assert all(line.startswith(r["file"]) and r["class"] in line for line, r in zip(lines[1:], rows))


def test_adapt_prints_a_summary(folders, tmp_path, capsys):
    support, query = folders
    out = tmp_path / "m.ckpt"
    assert _adapt(out, support, "--query", str(query), "--mem-budget", "1MiB", "--compute-budget", "0.15") == 0
    text = capsys.readouterr().out
    report = load_checkpoint(out).report
    assert main(["show", str(out)]) == 0
    assert capsys.readouterr().out == text, "show prints the summary adapt printed, from the checkpoint alone"
    labels = [line.split()[0] for line in text.splitlines()[1:]]
    assert labels == ["classes", "selection", "memory", "compute", "cache", "updates", "loss", "support", "query",
                      "replay", "time", "checkpoint"]
    assert "steps from the activation below" in text and "(the views as images:" in text
    assert "batches of 1, prototypes fixed" in text
    assert "class0 (4), class1 (4), class2 (4)" in text and str(out) in text
    for layer, channels in report["selection"]["channels"].items():
        assert f"{layer} {len(channels)}/{report['layer_costs'][layer]['out_channels']}" in text
    assert "of 1.0 MiB budget" in text and "within" in text
    assert f"{100 * report['support_accuracy_after']:.1f} %" in text
    assert f"; peak RSS {format_bytes(report['peak_rss_bytes'])}" in text


@pytest.mark.parametrize("policy", ["none", "last_layer", "full_train", "sparse_update", "tinytrain"])
def test_every_policy_runs(folders, tmp_path, capsys, policy):
    support, _ = folders
    assert _adapt(tmp_path / "m.ckpt", support, "--policy", policy, "--json") == 0
    record = json.loads(capsys.readouterr().out)
    assert record["policy"] == policy and record["selection"]["policy"] == policy
    assert (len(record["losses"]) == 0) == (policy == "none")


def test_sparse_update_with_a_layer_list(folders, tmp_path, capsys):
    support, _ = folders
    assert _adapt(tmp_path / "m.ckpt", support, "--policy", "sparse_update", "--json") == 0
    layers = list(json.loads(capsys.readouterr().out)["layer_costs"])
    assert _adapt(tmp_path / "m.ckpt", support, "--policy", "sparse_update", "--sparse-update-layers",
                  layers[-1], "--json") == 0
    assert json.loads(capsys.readouterr().out)["selection"]["layers"] == [layers[-1]]


def test_runtime_choice(folders, tmp_path, capsys):
    support, _ = folders
    from tflite_train.runtime.model.interpreter import load_interpreter_class

    _, installed = load_interpreter_class()
    name = {"ai_edge_litert.interpreter": "litert", "tflite_runtime.interpreter": "tflite-runtime"}[installed]
    assert _adapt(tmp_path / "m.ckpt", support, "--runtime", name, "--json") == 0
    assert json.loads(capsys.readouterr().out)["runtime"] == installed
    missing = "tflite-runtime" if name == "litert" else "litert"
    assert _adapt(tmp_path / "n.ckpt", support, "--runtime", missing) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not installed" in err and not (tmp_path / "n.ckpt").exists()
    with pytest.raises(SystemExit) as exit_info:
        _adapt(tmp_path / "n.ckpt", support, "--runtime", "magic")
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_predict_refuses_other_model(folders, tmp_path, capsys):
    support, query = folders
    out = tmp_path / "m.ckpt"
    assert _adapt(out, support) == 0
    image = str(next((query / "class0").iterdir()))
    assert main(["predict", "--model", str(fixture_model("tiny_sgd_full_17")), "--checkpoint", str(out), image]) == 2
    assert "not this model" in capsys.readouterr().err


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("tflite-train 0.1.0 (Python")
    for command in ("adapt", "predict", "verify"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert "(default: None)" not in text and "(default: False)" not in text
    with pytest.raises(SystemExit):
        main(["adapt", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for unit in ("1MiB", "fraction of the full backward pass", "(default: 0.25)", "(default: the protocol's 40,",
                 "(default: the protocol's 1)", "(default: the protocol's 0.15,"):
        assert unit in text


def test_verify_runtime_choice(capsys):
    from tflite_train.runtime.model.interpreter import load_interpreter_class

    _, installed = load_interpreter_class()
    missing = "litert" if installed == "tflite_runtime.interpreter" else "tflite-runtime"
    assert main(["verify", str(fixture_model(MODEL)), "--runtime", missing]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"runtime '{missing}'" in err and "is not installed" in err


def test_unbudgeted_policy_with_a_budget_is_stated(folders, tmp_path, capsys, caplog):
    import logging

    support, _ = folders
    with caplog.at_level(logging.WARNING):
        assert _adapt(tmp_path / "m.ckpt", support, "--policy", "full_train", "--mem-budget", "1KiB") == 0
    assert any("full_train ignores the memory and compute budgets" in r.getMessage() for r in caplog.records)
    memory_line = next(line for line in capsys.readouterr().out.splitlines() if line.lstrip().startswith("memory"))
    assert "of 1.0 KiB budget" in memory_line and memory_line.endswith("OVER)")


def test_adapt_runs_the_fine_tuning_options(folders, tmp_path, capsys):
    """--prototypes, --batch-mode, --rate-choice and --choice-score reach adapt; the summary says what ran."""
    support, _ = folders
    assert _adapt(tmp_path / "m.ckpt", support, "--prototypes", "refresh", "--batch-mode", "accumulate",
                  "--batch-size", "4", "--rate-choice", "0,1e-3,1e-2", "--choice-score", "accuracy_loss",
                  "--choice-updates", "2", "--json") == 0
    record = json.loads(capsys.readouterr().out)
    assert record["updates"]["prototype_mode"] == "refresh" and record["updates"]["mode"] == "accumulate"
    assert record["rate_choice"]["held_out"] == 9 and len(record["rate_choice"]["scores"]) == 3
    assert len(record["losses"]) == (5 if record["rate_choice"]["rate"] else 0)


@pytest.mark.parametrize("value", ["a,b", "1e-3,-1", "", "0," * 20])
def test_bad_rate_choice_is_one_line(folders, tmp_path, capsys, value):
    support, _ = folders
    with pytest.raises(SystemExit) as exit_:
        _adapt(tmp_path / "m.ckpt", support, "--rate-choice", value)
    assert exit_.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert "--rate-choice" in err[-1] and "Traceback" not in "\n".join(err)


def test_adapt_runs_fisher_one_image_at_a_time(folders, tmp_path, monkeypatch):
    """The command's Fisher pass holds one image's activations and gradients (``adapt_job.COMMAND_FISHER_ROWS``);
    the checkpoint's config records the chunk it ran."""
    from tflite_train.runtime.model.interpreter import TrainableModel

    rows = []
    fisher = TrainableModel.fisher
    monkeypatch.setattr(TrainableModel, "fisher", lambda self, images, labels: rows.append(len(images))
                        or fisher(self, images, labels))
    out = tmp_path / "m.ckpt"
    assert _adapt(out, folders[0], "--policy", "TinyTrain", "-q") == 0
    assert rows == [1] * 12  # 3 classes x 4 shots
    assert load_checkpoint(out).config["adapt"]["fisher_chunk_size"] == 1
