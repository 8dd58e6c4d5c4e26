"""Category 5: output paths that cannot receive the results are refused BEFORE training; a write that
still fails leaves the earlier checkpoint and its files intact, with a one-line error.

Read-only folders and full disks are simulated portably (a failing ``mkstemp`` / ``statvfs`` / ``fsync``)
and, where this process may mount file systems (root in a container), also for real on a tiny tmpfs.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.runtime.runtime_fixtures import CLI_MODEL, adapt_cli, assert_one_line_error, fixture_model, run_cli, snapshot


def _refused(support, run, out, capsys, *fragments, extra=()):
    before = snapshot(run)
    capsys.readouterr()
    assert adapt_cli(support, out, *extra) == 2
    assert_one_line_error(capsys.readouterr().err, *fragments)
    assert snapshot(run) == before


def test_out_is_a_directory(earlier_run, capsys, no_training):
    support, run = earlier_run
    (run / "dir.ckpt").mkdir()
    _refused(support, run, run / "dir.ckpt", capsys, "dir.ckpt is a directory; give a file path")
    _refused(support, run, str(run) + "/", capsys, "is a directory")


def test_out_folder_missing(earlier_run, capsys, no_training):
    support, run = earlier_run
    _refused(support, run, run / "nope" / "m.ckpt", capsys, "output folder", "nope does not exist")


def test_out_is_a_fifo(earlier_run, capsys, no_training):
    support, run = earlier_run
    os.mkfifo(run / "pipe.ckpt")
    _refused(support, run, run / "pipe.ckpt", capsys, "pipe.ckpt exists and is not a regular file")


def test_lock_file_is_a_directory(earlier_run, capsys, no_training):
    support, run = earlier_run
    (run / "n.ckpt.lock").mkdir()
    _refused(support, run, run / "n.ckpt", capsys, "n.ckpt.lock: Is a directory")


def test_read_only_folder(earlier_run, capsys, monkeypatch, no_training):
    support, run = earlier_run

    def read_only(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("tflite_train.runtime.output_path.tempfile.mkstemp", read_only)
    _refused(support, run, run / "m.ckpt", capsys, "cannot write to output folder", "Permission denied")


def test_full_disk_is_refused_up_front(earlier_run, capsys, monkeypatch, no_training):
    support, run = earlier_run
    real = os.statvfs

    def full(path):
        stats = real(path)
        return SimpleNamespace(f_bavail=0, f_frsize=stats.f_frsize)

    monkeypatch.setattr("tflite_train.runtime.output_path.os.statvfs", full)
    _refused(support, run, run / "m.ckpt", capsys, "has 0 bytes free; writing", "m.ckpt needs up to")


def test_disk_full_while_saving_keeps_the_old_checkpoint(earlier_run, capsys, monkeypatch):
    """The disk fills after training: the save fails cleanly, the earlier files and no temp files remain."""
    support, run = earlier_run
    from tflite_train.runtime import adapt_job

    real_adapt, real_fsync = adapt_job.adapt, os.fsync
    state = {"trained": False}

    def adapt_then_fill_disk(*args, **kwargs):
        result = real_adapt(*args, **kwargs)
        state["trained"] = True
        return result

    def fsync(fd):
        if state["trained"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(adapt_job, "adapt", adapt_then_fill_disk)
    monkeypatch.setattr(os, "fsync", fsync)
    _refused(support, run, run / "m.ckpt", capsys, "No space left on device", extra=("--seed", "7"))
    assert state["trained"]


def test_plot_path_is_checked_before_training(earlier_run, capsys, monkeypatch, no_training):
    support, run = earlier_run
    monkeypatch.setattr("tflite_train.runtime.adaptation.plots.require_matplotlib", lambda: None)  # also where it is missing
    (run / "p.png").mkdir()
    _refused(support, run, run / "m.ckpt", capsys, "p.png is a directory", extra=("--plot", str(run / "p.png")))


def test_plot_without_matplotlib_is_refused_before_training(earlier_run, capsys, monkeypatch, no_training):
    support, run = earlier_run
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    _refused(support, run, run / "m.ckpt", capsys, "--plot needs matplotlib, which is not installed",
             extra=("--plot", str(run / "p.png")))


def test_plot_is_written(earlier_run, capsys):
    pytest.importorskip("matplotlib")  # the plot extra, not part of the Pi env
    support, run = earlier_run
    assert adapt_cli(support, run / "m.ckpt", "--plot", str(run / "p.png")) == 0
    assert (run / "p.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert f"plot        {run / 'p.png'}" in capsys.readouterr().out


@pytest.fixture()
def tiny_tmpfs(tmp_path):
    """A real 64 KiB tmpfs (only where this process may mount: root in a container)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); the monkeypatched tests above cover the logic")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_real_small_disk_and_read_only_mount(earlier_run, capsys, tiny_tmpfs, no_training):
    support, run = earlier_run
    (tiny_tmpfs / "old.ckpt").write_bytes(b"earlier checkpoint")
    _refused(support, tiny_tmpfs, tiny_tmpfs / "old.ckpt", capsys, "bytes free; writing", "old.ckpt needs up to")
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_tmpfs)], check=True)
    _refused(support, tiny_tmpfs, tiny_tmpfs / "new.ckpt", capsys, "cannot write to output folder",
             "Read-only file system")
    assert (tiny_tmpfs / "old.ckpt").read_bytes() == b"earlier checkpoint"


def test_out_would_overwrite_the_model(earlier_run, tmp_path, capsys, no_training):
    support, run = earlier_run
    model = run / "model.tflite"
    model.write_bytes(fixture_model(CLI_MODEL).read_bytes())
    before = snapshot(run)
    capsys.readouterr()
    assert run_cli(["adapt", "--model", str(model), "--support", str(support), "--out", str(model), "--quiet"]) == 2
    assert_one_line_error(capsys.readouterr().err, "model.tflite would overwrite the input")
    assert snapshot(run) == before


def test_plot_would_overwrite_the_checkpoint(earlier_run, capsys, monkeypatch, no_training):
    support, run = earlier_run
    monkeypatch.setattr("tflite_train.runtime.adaptation.plots.require_matplotlib", lambda: None)
    _refused(support, run, run / "m.ckpt", capsys, "is also given as", extra=("--plot", str(run / "m.ckpt")))
