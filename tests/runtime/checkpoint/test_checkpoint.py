"""Checkpoints: round trip, identity check, corruption, atomicity (incl. SIGKILL mid-save)."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import checkout_env, episode_arrays, fixture_model
from tflite_train.runtime import TrainableModel
from tflite_train.runtime import AdaptConfig, adapt, predict
from tflite_train.runtime.checkpoint.checkpoint import (
    CheckpointError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
    write_atomic,
)

CONFIG = AdaptConfig(policy="tinytrain", memory_bytes=float(2**20), compute_fraction=0.3, iterations=5)


@pytest.fixture(scope="module")
def adapted(fashion):
    model = TrainableModel(fixture_model("tiny_adam_33"))
    xs, ys, xq, _ = episode_arrays(fashion, model.input_shape, ways=3, shots=3, queries=4, seed=11)
    result = adapt(model, xs, ys, CONFIG)
    return model, result, xq


@pytest.mark.parametrize("include_optimizer", [False, True])
def test_round_trip(adapted, tmp_path, include_optimizer):
    model, result, xq = adapted
    path = tmp_path / "a.ckpt"
    size = save_checkpoint(path, model, result.selection, include_optimizer=include_optimizer,
                           class_names=("x", "y", "z"))
    assert size == path.stat().st_size < 64 * 1024
    fresh = TrainableModel(fixture_model("tiny_adam_33"))
    checkpoint = restore_checkpoint(fresh, path)
    assert checkpoint.selection == result.selection and checkpoint.class_names == ("x", "y", "z")
    want, got = model.get_state(), fresh.get_state()
    slots = {k for k in want if k.endswith(("_m", "_v")) or k == "step"}
    for key in want:
        if include_optimizer or key not in slots:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    np.testing.assert_array_equal(predict(fresh, xq), predict(model, xq))
    np.testing.assert_array_equal(fresh.infer(xq)["logits"], model.infer(xq)["logits"])


def test_only_changes_are_stored(adapted, tmp_path):
    model, result, _ = adapted
    path = tmp_path / "a.ckpt"
    save_checkpoint(path, model, result.selection)
    arrays = load_checkpoint(path).arrays
    for layer, channels in result.selection.channels.items():
        assert arrays[f"{layer}_bias"].shape == (len(channels),)
    stored = sum(a.size for a in arrays.values())
    total = sum(v.size for k, v in model.get_state().items())
    assert stored < total / 3


def test_other_model_refused(adapted, tmp_path):
    model, result, _ = adapted
    path = tmp_path / "a.ckpt"
    save_checkpoint(path, model, result.selection)
    other = TrainableModel(fixture_model("tiny_sgd_full_17"))
    with pytest.raises(CheckpointError, match="not this model"):
        restore_checkpoint(other, path)


def test_corrupt_truncated_foreign(adapted, tmp_path):
    model, result, _ = adapted
    path = tmp_path / "a.ckpt"
    save_checkpoint(path, model, result.selection)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "flip.ckpt").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="sha256"):
        load_checkpoint(tmp_path / "flip.ckpt")
    (tmp_path / "cut.ckpt").write_bytes(path.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(tmp_path / "cut.ckpt")
    (tmp_path / "tiny.ckpt").write_bytes(b"TFLT")
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(tmp_path / "tiny.ckpt")
    (tmp_path / "foreign.ckpt").write_bytes(fixture_model("tiny_adam_33").read_bytes()[:4096])
    with pytest.raises(CheckpointError, match="not a tflite-train checkpoint"):
        load_checkpoint(tmp_path / "foreign.ckpt")
    with pytest.raises(ValueError, match="cannot read"):
        load_checkpoint(tmp_path / "missing.ckpt")


def test_failed_write_keeps_previous_file(tmp_path):
    path = tmp_path / "f.bin"
    write_atomic(path, b"old contents")

    def boom(done, total):
        raise OSError("disk full (simulated)")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, b"x" * 1000, chunk_size=100, on_chunk=boom)
    assert path.read_bytes() == b"old contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


KILL_CHILD = textwrap.dedent("""
    import pathlib, sys, time
    import numpy as np
    from tflite_train.runtime import TrainableModel
    from tflite_train.runtime.checkpoint.checkpoint import save_checkpoint
    from tflite_train.sparse import Selection

    model_path, target, ready = sys.argv[1:4]
    model = TrainableModel(model_path)
    model.set_head(np.full((2, model.feature_dim), 0.5, np.float32))
    layer = model.candidates[-1]
    selection = Selection((layer,), {layer: tuple(range(model.candidate_channels[layer]))})

    def pause(done, total):  # test hook: the temp file is half written; wait to be killed
        if done >= total // 2:
            pathlib.Path(ready).write_text(str(done))
            time.sleep(60)

    save_checkpoint(target, model, selection, include_optimizer=True, chunk_size=256, on_chunk=pause)
""")


def test_sigkill_mid_save_leaves_previous_checkpoint(adapted, tmp_path):
    model, result, xq = adapted
    target = tmp_path / "model.ckpt"
    save_checkpoint(target, model, result.selection)
    before = target.read_bytes()
    ready = tmp_path / "ready"
    env = checkout_env()
    child = subprocess.Popen([sys.executable, "-c", KILL_CHILD, str(fixture_model("tiny_adam_33")), str(target),
                              str(ready)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert child.poll() is None, "the child exited before reaching the save"
            assert time.monotonic() < deadline, "the child never reached the middle of the save"
            time.sleep(0.05)
        temps = [p for p in tmp_path.iterdir() if p.name.startswith(".model.ckpt.")]
        assert len(temps) == 1 and temps[0].stat().st_size >= int(ready.read_text())
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    assert target.read_bytes() == before
    fresh = TrainableModel(fixture_model("tiny_adam_33"))
    restore_checkpoint(fresh, target)
    np.testing.assert_array_equal(predict(fresh, xq), predict(model, xq))
