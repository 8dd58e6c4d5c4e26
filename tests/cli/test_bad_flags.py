"""Category 4: out-of-range and absurd flags are refused up front, in one line, before any work.

Parse-time refusals never read a file; the few checks that need the support set (batch larger than
it, too many steps) run before the model is trained: ``adapt`` is replaced by a function that fails
the test if it is ever called. Earlier outputs stay byte-for-byte intact.
"""

from __future__ import annotations

import pytest

from tests.runtime.runtime_fixtures import adapt_cli, assert_one_line_error, run_cli, snapshot


PARSE_CASES = [
    (["--mem-budget", "0"], "argument --mem-budget: must be at least 1 byte"),
    (["--mem-budget=-1MiB"], "argument --mem-budget: byte size must not be negative"),
    (["--mem-budget", "1XB"], "unknown byte unit 'XB'"),
    (["--mem-budget", "nan"], "argument --mem-budget: cannot parse byte size 'nan'"),
    (["--mem-budget", "1e400"], "byte size must be finite"),
    (["--compute-budget", "0"], "argument --compute-budget: must be > 0 and <= 100"),
    (["--compute-budget=-0.2"], "argument --compute-budget: must be > 0"),
    (["--compute-budget", "nan"], "argument --compute-budget: must be > 0"),
    (["--compute-budget", "1e9"], "argument --compute-budget: must be > 0 and <= 100"),
    (["--compute-budget", "abc"], "argument --compute-budget: expected a number"),
    (["--compute-macs", "0"], "argument --compute-macs: must be > 0"),
    (["--channel-ratio", "0"], "argument --channel-ratio: must be > 0 and <= 1"),
    (["--channel-ratio", "1.5"], "argument --channel-ratio: must be > 0 and <= 1"),
    (["--iterations=-1"], "argument --iterations: must be >= 0 and <= 100000"),
    (["--iterations", "1000000000"], "argument --iterations: must be >= 0 and <= 100000"),
    (["--iterations", "2.5"], "argument --iterations: expected an integer"),
    (["--epochs", "0"], "argument --epochs: must be >= 1 and <= 10000"),
    (["--epochs", "99999999"], "argument --epochs: must be >= 1 and <= 10000"),
    (["--batch-size", "0"], "argument --batch-size: must be >= 1 and <= 1024"),
    (["--batch-size", "100000000"], "argument --batch-size: must be >= 1 and <= 1024"),
    (["--learning-rate", "0"], "argument --learning-rate: must be > 0 and <= 10"),
    (["--learning-rate", "inf"], "argument --learning-rate: must be > 0 and <= 10"),
    (["--learning-rate", "nan"], "argument --learning-rate: must be > 0 and <= 10"),
    (["--seed=-1"], "argument --seed: must be >= 0"),
    (["--seed", str(2**40)], "argument --seed: must be >= 0 and <= 4294967295"),
    (["--policy", "magic"], "argument --policy: unknown policy 'magic'; known policies: none, last_layer"),
    (["--runtime", "magic"], "argument --runtime: invalid choice: 'magic'"),
    (["--on-empty", "maybe"], "argument --on-empty: invalid choice"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
]


@pytest.mark.parametrize("flags, message", PARSE_CASES, ids=[" ".join(c[0]) for c in PARSE_CASES])
def test_refused_while_parsing(earlier_run, capsys, no_training, flags, message):
    support, run = earlier_run
    before = snapshot(run)
    capsys.readouterr()
    assert adapt_cli(support, run / "m.ckpt", *flags) == 2
    err = capsys.readouterr().err
    assert err.startswith("tflite-train adapt: error: " if "unrecognized" not in message else "tflite-train: error: ")
    assert_one_line_error(err, message)
    assert snapshot(run) == before


def test_missing_required_flag(capsys):
    assert run_cli(["adapt", "--support", "x", "--out", "y"]) == 2
    assert_one_line_error(capsys.readouterr().err, "the following arguments are required: --model")


@pytest.mark.parametrize("flags, message", [
    (["--batch-size", "13"], "batch size 13 exceeds the 12 support images"),
    (["--compute-budget", "0.1", "--compute-macs", "1000"], "compute"),
    (["--policy", "sparse_update", "--sparse-update-layers", "nope"], "are not candidate layers"),
], ids=["batch-over-support", "two-compute-budgets", "unknown-layer"])
def test_refused_before_training(earlier_run, capsys, no_training, flags, message):
    support, run = earlier_run
    before = snapshot(run)
    capsys.readouterr()
    assert adapt_cli(support, run / "m.ckpt", *flags) == 2
    assert_one_line_error(capsys.readouterr().err, message)
    assert snapshot(run) == before


def test_too_many_steps_refused_before_training(earlier_run, capsys, no_training, monkeypatch):
    support, run = earlier_run
    monkeypatch.setattr("tflite_train.cli.device_commands.MAX_STEPS", 50)
    before = snapshot(run)
    capsys.readouterr()
    assert adapt_cli(support, run / "m.ckpt", "--epochs", "5") == 2  # 5 x 12 = 60 steps
    assert_one_line_error(capsys.readouterr().err, "60 optimizer steps (5 epochs x 12 images / batch 1) exceed the limit of 50")
    assert snapshot(run) == before


def test_budget_fitting_no_layer_is_one_line(earlier_run, capsys):
    support, run = earlier_run
    before = snapshot(run)
    capsys.readouterr()
    assert adapt_cli(support, run / "m.ckpt", "--mem-budget", "1B") == 2
    assert_one_line_error(capsys.readouterr().err, "budget")
    assert snapshot(run) == before


def test_debug_shows_the_traceback(earlier_run, capsys):
    support, run = earlier_run
    capsys.readouterr()
    assert adapt_cli(support, run / "m.ckpt", "--batch-size", "13", "--debug") == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.splitlines()[-1].startswith("tflite-train adapt: error: batch size 13")
