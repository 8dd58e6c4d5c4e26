"""``adapt`` without ``--mem-budget`` uses the library's one B_mem (``sparse.scaled_memory_budget``)."""

from __future__ import annotations

import logging

import pytest

from runtime_fixtures import fixture_model, write_episode_folders
from tflite_train.cli import main
from tflite_train.runtime.checkpoint import load_checkpoint
from tflite_train.runtime.metadata import read_metadata
from tflite_train.runtime.model_contract import layer_table
from tflite_train.sparse import format_bytes, scaled_memory_budget


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


def test_a_default_that_fits_no_layer_adapts_the_head_and_warns_once(support, tmp_path, capsys, caplog):
    """The toy model's default (0.49 x its LastLayer memory) is below its cheapest layer: with the default
    budgets the run adapts the prototypes only and says so in one warning naming the flags."""
    with caplog.at_level(logging.WARNING):
        assert _adapt("tiny_adam_33", support, tmp_path / "m.ckpt") == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    budget = format_bytes(_default_budget("tiny_adam_33"))
    assert f"the default budget (B_mem {budget}, B_compute 15% of the full backward pass) fits no candidate " \
           "layer" in warnings[0] and "--mem-budget" in warnings[0] and "--compute-budget" in warnings[0]
    checkpoint = load_checkpoint(tmp_path / "m.ckpt")
    assert checkpoint.selection.layers == () and checkpoint.config["adapt"]["on_empty"] == "empty"


@pytest.mark.parametrize("flags", [("--mem-budget", "20KiB"), ("--on-empty", "raise")])
def test_a_budget_or_on_empty_given_that_fits_no_layer_is_one_line_in_readable_units(support, tmp_path, capsys, flags):
    assert _adapt("tiny_adam_33", support, tmp_path / "m.ckpt", *flags) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no candidate layer fits the budget (B_mem " in err
    budget = "20.0 KiB" if flags[0] == "--mem-budget" else format_bytes(_default_budget("tiny_adam_33"))
    assert f"B_mem {budget}, B_compute " in err and "the cheapest single layer needs " in err and "KiB (" in err
    assert not (tmp_path / "m.ckpt").exists()


def test_help_states_the_definition(capsys):
    with pytest.raises(SystemExit):
        main(["adapt", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ("B_mem: peak memory of the backward pass per image", "appendix A.4", "'unlimited'",
                   "the paper's 1 MiB for MCUNet at 128 px, scaled by this model's LastLayer backward memory",
                   "4.005 MiB for the default Lite0@128"):
        assert phrase in text
