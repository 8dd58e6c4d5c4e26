"""Category 7, kills: SIGKILL at random points of adapt's real save path (checkpoint + config + report,
``save_checkpoint`` under ``output_lock``) leaves the old or the new unit, complete and consistent; the
temporary files of killed writers are removed by the next writer; SIGTERM and Ctrl-C clean up at once.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import checkout_env, fixture_model
from tflite_train.runtime.atomic_file import temp_files
from tflite_train.runtime.checkpoint.checkpoint import decode_checkpoint, save_checkpoint
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.runtime.output_lock import lock_path, output_lock
from tflite_train.sparse.selection import Selection

pytestmark = pytest.mark.pi
TRIALS = 30
MODEL = "tiny_adam_33"
LOSSES = 20_000  # a ~0.4 MB report: a save writes ~100 chunks of 4 KiB, many points to be killed at

# The child: adapt's save path, alternating two versions of one unit (arrays, config, report), forever;
# argv: out, first version, and a chunk after which it SIGKILLs itself (-1: never, the parent kills it).
SAVER = textwrap.dedent("""
    import os, pathlib, signal, sys
    import numpy as np
    from tflite_train.runtime.checkpoint.checkpoint import save_checkpoint
    from tflite_train.runtime.model.interpreter import TrainableModel
    from tflite_train.runtime.output_lock import output_lock
    from tflite_train.sparse.selection import Selection

    model_path, out, first, kill_at = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    model = TrainableModel(pathlib.Path(model_path))
    layer = model.candidates[-1]
    selection = Selection((layer,), {layer: (0, 1, 2)}, "fixed")
    model.set_selection({layer: [0, 1, 2]})

    def unit(version):
        model.set_head(np.full((3, model.feature_dim), version, np.float32))
        config = {"version": version, "unit": "kill test"}
        report = {"version": version, "losses": [float(version)] * %(losses)d}
        return config, report

    def on_chunk(written, total):
        if kill_at >= 0 and written >= kill_at * 4096:
            os.kill(os.getpid(), signal.SIGKILL)

    with output_lock(out):
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        version = first
        while True:
            config, report = unit(version)
            save_checkpoint(out, model, selection, class_names=("a", "b", "c"), config=config, report=report,
                            chunk_size=4096, on_chunk=on_chunk)
            version = 3 - version
""") % {"losses": LOSSES}


@pytest.fixture(scope="module")
def units(tmp_path_factory):
    """The two complete units (version 1 and 2) as bytes, saved in this process by the same code."""
    root = tmp_path_factory.mktemp("units")
    model = TrainableModel(fixture_model(MODEL))
    layer = model.candidates[-1]
    selection = Selection((layer,), {layer: (0, 1, 2)}, "fixed")
    model.set_selection({layer: [0, 1, 2]})
    blobs = {}
    for version in (1, 2):
        out = root / f"v{version}.ckpt"
        model.set_head(np.full((3, model.feature_dim), version, np.float32))
        save_checkpoint(out, model, selection, class_names=("a", "b", "c"),
                        config={"version": version, "unit": "kill test"},
                        report={"version": version, "losses": [float(version)] * LOSSES})
        blobs[version] = out.read_bytes()
    return model, selection, blobs


def _check_unit(data: bytes, out, blobs) -> int:
    """The version of the complete, consistent unit at ``out`` (assertion error otherwise)."""
    checkpoint = decode_checkpoint(data, str(out))  # complete and verified: digest, header, arrays
    version = checkpoint.config["version"]
    assert checkpoint.report["version"] == version, "report of another save than the config"
    assert np.all(checkpoint.arrays["prototypes"] == version), "arrays of another save than the config"
    assert checkpoint.report["losses"] == [float(version)] * LOSSES
    assert data == blobs[version], "not byte-identical to the unit this process saves"
    return version


def _saver(out, first: int, kill_at: int = -1) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", SAVER, str(fixture_model(MODEL)), str(out), str(first),
                              str(kill_at)], stdout=subprocess.PIPE, text=True)
    return child


def test_sigkill_at_random_points_of_the_save_leaves_old_or_new_unit(units, tmp_path):
    model, selection, blobs = units
    out = tmp_path / "adapted.ckpt"
    rng = random.Random(16)
    seen, stale = set(), 0
    version = 1  # the version the next writer saves first: never the one at out, so old != new
    chunks = len(blobs[1]) // 4096
    for trial in range(TRIALS):
        # even trials: the parent kills at a random moment of the save loop; odd: the writer kills
        # itself after a random chunk, so that every trial in between lands inside a file write
        kill_at = -1 if trial % 2 == 0 else rng.randrange(1, chunks)
        child = _saver(out, version, kill_at)
        if kill_at < 0:
            assert child.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.0, 0.3))
            child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
        child.stdout.close()
        if out.exists():
            on_disk = _check_unit(out.read_bytes(), out, blobs)
            seen.add(on_disk)
            version = 3 - on_disk
        stale += bool(temp_files(out))
        # the only names a killed save may leave: the unit, its lock file, its own temporary files
        allowed = {out.name, lock_path(out).name} | {p.name for p in temp_files(out)}
        assert {p.name for p in tmp_path.iterdir()} <= allowed
    assert seen, "no save ever completed"
    assert stale, "no kill landed inside a file write (the self-kills should have)"
    # the next writer, holding the lock, removes what the killed ones left; its save completes
    with output_lock(out):
        assert not temp_files(out), "stale temporary files survived the next writer's lock"
        model.set_head(np.full((3, model.feature_dim), 2, np.float32))
        save_checkpoint(out, model, selection, class_names=("a", "b", "c"),
                        config={"version": 2, "unit": "kill test"}, report={"version": 2, "losses": [2.0] * LOSSES})
    assert _check_unit(out.read_bytes(), out, blobs) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name], "a temporary or lock file remains"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_during_the_write_removes_the_temp_and_keeps_the_old_unit(units, tmp_path, sig):
    """The command line turns SIGTERM into an exception (``cli.dispatch.sigterm_raises``) and Ctrl-C is
    one: the temporary file is removed and the lock released before the process exits."""
    _, _, blobs = units
    out = tmp_path / "adapted.ckpt"
    out.write_bytes(blobs[1])
    code = textwrap.dedent(f"""
        import os, pathlib, signal, sys, time
        import numpy as np
        from tflite_train.cli.dispatch import Terminated, sigterm_raises
        from tflite_train.runtime.checkpoint.checkpoint import save_checkpoint
        from tflite_train.runtime.model.interpreter import TrainableModel
        from tflite_train.runtime.output_lock import output_lock
        from tflite_train.sparse.selection import Selection

        # A process started in the background by a non-interactive shell inherits SIGINT ignored, and then
        # Python installs no KeyboardInterrupt handler; a terminal's Ctrl-C reaches a foreground process.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        out = pathlib.Path({str(out)!r})
        model = TrainableModel(pathlib.Path({str(fixture_model(MODEL))!r}))
        model.set_head(np.full((3, model.feature_dim), 2, np.float32))
        layer = model.candidates[-1]
        model.set_selection({{layer: [0, 1, 2]}})

        def on_chunk(written, total):
            if written >= total // 2:
                os.kill(os.getpid(), {int(sig)})
                # The Python handler runs at the next check of the eval loop, which a thread of the
                # interpreter receiving the signal can delay past a plain raise; sleep lets it run.
                for _ in range(1000):
                    time.sleep(0.01)
                raise AssertionError("the signal did not interrupt the save")

        try:
            with sigterm_raises(), output_lock(out):
                save_checkpoint(out, model, Selection((layer,), {{layer: (0, 1, 2)}}), config={{}}, report={{"losses": [0.0] * {LOSSES}}},
                                chunk_size=4096, on_chunk=on_chunk)
        except (Terminated, KeyboardInterrupt) as err:
            print(type(err).__name__)
            sys.exit(3)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.strip() == ("Terminated" if sig == signal.SIGTERM else "KeyboardInterrupt")
    assert out.read_bytes() == blobs[1], "the old unit changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name], "a temporary or lock file remains"


def test_sigterm_during_a_cli_adapt_exits_cleanly_and_keeps_the_old_checkpoint(fashion, tmp_path):
    """``tflite-train adapt`` terminated while it trains: exit 143, one line, the old checkpoint as it
    was, no lock or temporary file left."""
    import os

    from tests.runtime.runtime_fixtures import write_episode_folders

    support, _ = write_episode_folders(fashion, tmp_path / "data", ways=3, shots=4, queries=1, seed=0)
    run = tmp_path / "run"
    run.mkdir()
    out = run / "m.ckpt"
    argv = [sys.executable, "-m", "tflite_train.cli", "adapt", "--mem-budget", "unlimited",
            "--model", str(fixture_model(MODEL)), "--support",
            str(support), "--out", str(out), "--quiet"]
    env = checkout_env()
    assert subprocess.run([*argv, "--iterations", "3"], env=env, capture_output=True).returncode == 0
    old = out.read_bytes()
    proc = subprocess.Popen([*argv, "--iterations", "100000"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    while not lock_path(out).exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # into the work that follows the lock
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    lines = [line for line in stderr.splitlines() if not line.startswith("INFO: ")]  # the native XNNPACK note
    assert lines == ["tflite-train adapt: terminated"] and stdout == ""
    assert out.read_bytes() == old
    assert sorted(p.name for p in run.iterdir()) == [out.name], "a temporary or lock file remains"
