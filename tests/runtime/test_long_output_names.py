"""Issue 25: a valid long ``--out`` name works; one over the file system's limit is refused before any work.

An output's temporaries (``.<name>.<8 chars>.tmp``), its free-space probe and its lock (``<name>.lock``)
add up to 16 bytes to its name: a 240-character name was refused because those exceeded the 255-byte
limit. They now use a stem that fits (``output_names.sibling_stem``), and leave nothing behind.
"""

from __future__ import annotations

import os

import pytest

from tests.runtime.runtime_fixtures import adapt_cli, assert_one_line_error, snapshot
from tflite_train.runtime.atomic_file import temp_files, write_atomic
from tflite_train.runtime.errors import OutputError
from tflite_train.runtime.output_lock import lock_path, output_lock
from tflite_train.runtime.output_names import NAME_MAX, check_output_name, sibling_stem
from tflite_train.runtime.output_path import check_output_file

pytestmark = pytest.mark.pi


@pytest.mark.parametrize("name", ["c" * 240, "c" * 255, "é" * 127, "a.ckpt"])
def test_adapt_writes_a_long_out_name(earlier_run, capsys, name):
    support, run = earlier_run
    out = run / name
    capsys.readouterr()
    assert adapt_cli(support, out) == 0
    assert out.is_file() and out.stat().st_size > 0
    assert sorted(os.listdir(run)) == sorted(["m.ckpt", name]), "a temporary or a lock was left behind"


def test_name_over_the_limit_is_refused_before_any_work(earlier_run, capsys, no_training):
    support, run = earlier_run
    before = snapshot(run)
    capsys.readouterr()
    assert adapt_cli(support, run / ("c" * 256)) == 2
    assert_one_line_error(capsys.readouterr().err, "the file name is 256 bytes; this file system allows at most 255")
    assert snapshot(run) == before


@pytest.mark.parametrize("name", ["short.ckpt", "x" * 239, "x" * 240, "x" * 255, "é" * 127 + "x", "€" * 85])
def test_siblings_fit_and_are_found(tmp_path, name):
    path = tmp_path / name
    stem = sibling_stem(name)
    assert len(os.fsencode(f".{stem}.abcdefgh.probe")) <= NAME_MAX
    assert stem == name or len(os.fsencode(name)) + 16 > NAME_MAX
    assert len(os.fsencode(lock_path(path).name)) <= NAME_MAX
    write_atomic(path, b"data")
    assert path.read_bytes() == b"data"
    check_output_file(path, reserve_bytes=10)
    with output_lock(path):
        assert lock_path(path).exists()
    assert sorted(os.listdir(tmp_path)) == [name]
    stale = tmp_path / f".{stem}.abcdefgh.tmp"
    stale.write_bytes(b"left by a killed writer")
    assert temp_files(path) == [stale]


def test_stems_of_long_names_differ():
    a, b = "x" * 250 + "1", "x" * 250 + "2"
    assert sibling_stem(a) != sibling_stem(b)
    assert sibling_stem(a).startswith("x" * 200)


def test_check_output_name(tmp_path):
    check_output_name(tmp_path / ("n" * 255))
    with pytest.raises(OutputError, match="the file name is 300 bytes"):
        check_output_name(tmp_path / ("n" * 300))
