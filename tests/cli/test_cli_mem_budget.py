"""``adapt`` without ``--mem-budget`` uses the library's one default budget (``sparse.default_budget``: the
scaled B_mem, raised on a small model to admit a layer)."""

from __future__ import annotations

import logging

import pytest

from tests.runtime.runtime_fixtures import fixture_model, write_episode_folders
from tflite_train.cli import main
from tflite_train.runtime.checkpoint.checkpoint import load_checkpoint
from tflite_train.runtime.model.metadata import read_metadata
from tflite_train.runtime.model.model_contract import layer_table
from tflite_train.sparse import Budget, default_budget, format_bytes, scaled_memory_budget


@pytest.fixture()
def support(fashion, tmp_path):
    return write_episode_folders(fashion, tmp_path / "data", ways=3, shots=2, queries=1, seed=0)[0]


def _adapt(model, support, out, *extra):
    return main(["adapt", "--model", str(fixture_model(model)), "--support", str(support), "--out", str(out),
                 "--iterations", "2", "--quiet", *extra])


def _default_budget(model: str) -> float:
    return scaled_memory_budget(layer_table(read_metadata(fixture_model(model))))


def test_default_is_the_scaled_paper_budget_of_the_model(support, tmp_path):
    out = tmp_path / "m.ckpt"
    assert _adapt("lite0_meta_adam_64", support, out, "--on-empty", "empty") == 0
    config = load_checkpoint(out).config["adapt"]
    assert config["memory_bytes"] == _default_budget("lite0_meta_adam_64")
    assert 3 * 2**20 < config["memory_bytes"] < 4 * 2**20  # Lite0@64: 3.3 MiB (its 1280-channel head conv)
    report = load_checkpoint(out).report
    assert report["budget"]["memory_bytes"] == config["memory_bytes"]


def test_explicit_and_unlimited_budgets_are_not_scaled(support, tmp_path):
    assert _adapt("lite0_meta_adam_64", support, tmp_path / "a.ckpt", "--mem-budget", "3MiB") == 0
    assert load_checkpoint(tmp_path / "a.ckpt").config["adapt"]["memory_bytes"] == 3 * 2**20
    assert _adapt("lite0_meta_adam_64", support, tmp_path / "b.ckpt", "--mem-budget", "unlimited") == 0
    assert load_checkpoint(tmp_path / "b.ckpt").config["adapt"]["memory_bytes"] is None


def test_unbudgeted_policies_get_no_default_budget(support, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert _adapt("tiny_adam_33", support, tmp_path / "m.ckpt", "--policy", "last_layer") == 0
    assert load_checkpoint(tmp_path / "m.ckpt").config["adapt"]["memory_bytes"] is None
    assert not [r for r in caplog.records if "ignores the memory and compute budgets" in r.getMessage()]


def test_on_a_small_model_the_default_is_raised_to_train_a_layer(support, tmp_path, capsys, caplog):
    """The toy model's scaled budget (17.5 KiB, 0.49 x its LastLayer memory) admits none of its candidates alone:
    the default raises it just enough to admit one, the run trains that layer, no warning, and the summary says
    that the budget was raised."""
    model = read_metadata(fixture_model("tiny_adam_33"))
    table = layer_table(model)
    paper = Budget(scaled_memory_budget(table), compute_fraction=0.15)
    expected = default_budget(table, model["candidates"], compute_fraction=0.15, channel_ratio=0.25)
    assert expected.memory_bytes > paper.memory_bytes  # the case this test is about
    with caplog.at_level(logging.WARNING):
        assert main(["adapt", "--model", str(fixture_model("tiny_adam_33")), "--support", str(support), "--out",
                     str(tmp_path / "m.ckpt"), "--iterations", "2"]) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    checkpoint = load_checkpoint(tmp_path / "m.ckpt")
    assert checkpoint.selection.layers and checkpoint.config["adapt"]["on_empty"] == "raise"
    config = checkpoint.config["adapt"]
    assert Budget(config["memory_bytes"], config["compute_macs"], config["compute_fraction"]) == expected
    assert checkpoint.report["raised_from"]["memory_bytes"] == paper.memory_bytes
    memory_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("  memory"))
    assert f"of {format_bytes(expected.memory_bytes)} budget (" in memory_line
    assert memory_line.endswith(f"within); the default, raised from the paper's {format_bytes(paper.memory_bytes)} "
                                "to admit a layer")


@pytest.mark.parametrize("flags", [("--mem-budget", "20KiB"), ("--mem-budget", "20KiB", "--on-empty", "raise")])
def test_a_budget_given_that_fits_no_layer_is_one_line_in_readable_units(support, tmp_path, capsys, flags):
    """A bound the user gives is never raised: the default B_compute cannot admit a layer over 20 KiB."""
    assert _adapt("tiny_adam_33", support, tmp_path / "m.ckpt", *flags) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no candidate layer fits the budget (B_mem " in err
    assert "B_mem 20.0 KiB, B_compute " in err and "the cheapest single layer needs " in err and "KiB (" in err
    assert not (tmp_path / "m.ckpt").exists()


def test_help_states_the_definition(capsys):
    with pytest.raises(SystemExit):
        main(["adapt", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ("B_mem: peak memory of the backward pass per image", "appendix A.4", "'unlimited'",
                   "the paper's 1 MiB for MCUNet at 128 px, scaled by this model's LastLayer backward memory",
                   "raised just enough to admit the candidate that needs the least raise",
                   "1 MiB for MCUNet@128 and 4.005 MiB for the default Lite0@128",
                   "193.0 KiB and 1.13 M MACs raised to 384.6 KiB and 2.13 M MACs"):
        assert phrase in text
