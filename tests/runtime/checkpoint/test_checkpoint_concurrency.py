"""Category 7, concurrency: two processes adapting into the same output never produce a mixed result.

The first takes ``<out>.lock`` before any work; the second stops at once with exit 2 and one line
naming the output, having written nothing; the result is the first one's complete unit.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.runtime.runtime_fixtures import (
    assert_one_line_error, checkout_env, fixture_model, run_cli, snapshot, write_episode_folders,
)
from tflite_train.runtime.checkpoint.checkpoint import load_checkpoint
from tflite_train.runtime.output_lock import lock_path, output_lock

pytestmark = pytest.mark.pi
MODEL = "tiny_adam_33"
LOCKED = "is being written by another process"


@pytest.fixture()
def support(fashion, tmp_path):
    return write_episode_folders(fashion, tmp_path / "data", ways=3, shots=4, queries=1, seed=0)[0]


def _argv(support, out, seed: int, iterations: int) -> list[str]:
    return ["adapt", "--mem-budget", "unlimited",
            "--model", str(fixture_model(MODEL)), "--support", str(support), "--out", str(out),
            "--iterations", str(iterations), "--seed", str(seed), "--quiet"]


def test_adapt_into_an_output_another_process_writes_stops_before_any_work(support, tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    out = run / "m.ckpt"
    assert run_cli(_argv(support, out, 0, 3)) == 0  # an earlier result, which must survive
    before = snapshot(run)

    def refuse(*args, **kwargs):
        raise AssertionError("the model was opened although another process holds the output")

    monkeypatch.setattr("tflite_train.runtime.adapt_job.load_model", refuse)
    capsys.readouterr()
    with output_lock(out):  # another writer of the same output (a separate open file description)
        assert run_cli(_argv(support, out, 1, 3)) == 2
        assert_one_line_error(capsys.readouterr().err, "adapt: error: output", str(out), LOCKED)
        assert {p.name for p in run.iterdir()} == {out.name, lock_path(out).name}
    assert snapshot(run) == before, "the refused run wrote or changed something"
    assert sorted(p.name for p in run.iterdir()) == [out.name]


def test_two_adapts_into_one_output_at_once(support, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    out = run / "m.ckpt"
    env = checkout_env()

    def start(seed: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "tflite_train.cli", *_argv(support, out, seed, 3000)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    first = start(1)
    deadline = time.monotonic() + 60
    while not lock_path(out).exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    second = start(2)  # while the first holds the lock (it trains ~3000 steps after taking it)
    results = {}
    for seed, proc in ((1, first), (2, second)):
        stdout, stderr = proc.communicate(timeout=300)
        results[seed] = (proc.returncode, stdout, stderr)
    codes = sorted(code for code, _, _ in results.values())
    assert codes == [0, 2], results
    winner = next(seed for seed, (code, _, _) in results.items() if code == 0)
    loser_code, loser_out, loser_err = results[3 - winner]
    assert loser_out == ""
    assert_one_line_error(loser_err, "adapt: error: output", str(out), LOCKED)
    # the result is the winner's complete unit: arrays, config and report of one run
    checkpoint = load_checkpoint(out)
    assert checkpoint.config["adapt"]["seed"] == winner
    assert checkpoint.config["model_id"] == checkpoint.model_id
    assert checkpoint.report["selection"] == checkpoint.selection.to_dict()
    assert len(checkpoint.report["losses"]) == 3000
    assert sorted(p.name for p in run.iterdir()) == [out.name], "a temporary or lock file remains"
