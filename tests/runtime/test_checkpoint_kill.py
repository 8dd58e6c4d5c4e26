"""SIGKILL at random points of repeated saves: the checkpoint is always the old or the new one, complete."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tflite_train.runtime.checkpoint import decode_checkpoint, encode_checkpoint, write_atomic
from tflite_train.sparse.selection import Selection

pytestmark = pytest.mark.pi
TRIALS = 30


def _checkpoint(value: float) -> bytes:
    arrays = {"prototypes": np.full((3, 64), value, np.float32), "num_classes": np.asarray(3, np.int32),
              "learning_rate": np.asarray(0.01, np.float32), "l_kernel": np.full((1, 1, 64, 2), value, np.float32),
              "l_bias": np.full((2,), value, np.float32)}
    arrays["padding"] = np.full((400_000,), value, np.float32)  # ~1.6 MB: many chunks to be killed in
    return encode_checkpoint("model-x", Selection(("l",), {"l": (0, 1)}), arrays, False, ("a", "b", "c"))


def test_sigkill_at_random_points_leaves_old_or_new(tmp_path):
    old, new = _checkpoint(1.0), _checkpoint(2.0)
    target = tmp_path / "adapted.ckpt"
    (tmp_path / "old.bin").write_bytes(old)
    (tmp_path / "new.bin").write_bytes(new)
    child_code = textwrap.dedent(f"""
        import pathlib, sys
        from tflite_train.runtime.checkpoint import write_atomic
        root = pathlib.Path({str(tmp_path)!r})
        blobs = [(root / "old.bin").read_bytes(), (root / "new.bin").read_bytes()]
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        i = 0
        while True:
            write_atomic(root / "adapted.ckpt", blobs[i % 2], chunk_size=4096)
            i += 1
    """)
    write_atomic(target, old)
    rng = random.Random(15)
    for _ in range(TRIALS):
        child = subprocess.Popen([sys.executable, "-c", child_code], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.05))
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
        child.stdout.close()
        data = target.read_bytes()
        assert data in (old, new), f"mixed or partial checkpoint of {len(data)} bytes"
        decode_checkpoint(data, str(target))  # complete and verified (digest, header, arrays)
    assert len(list(tmp_path.glob("adapted.ckpt"))) == 1
