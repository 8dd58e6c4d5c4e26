"""Issue 25: every numeric flag is finite and in range before any arithmetic (``cli/flag_types``), in one line.

Byte sizes at the edge of float range (``1e308GiB`` overflowed to infinity and ended in an
OverflowError traceback), NaN and infinities, and numbers thousands of digits long are refused while
parsing. ``export --std nan`` (with a mean) wrote a NaN-normalised model with exit 0: a non-finite or
non-positive std and a non-finite mean are refused at parse time, before TensorFlow is imported (so
this runs in the Pi env too).
"""

from __future__ import annotations

import argparse
import math

import pytest

from tests.runtime.runtime_fixtures import assert_one_line_error, run_cli
from tflite_train.cli.flag_types import MAX_BYTES, byte_budget, finite_float, positive_float, ranged
from tflite_train.runtime.byte_size import parse_byte_size

pytestmark = pytest.mark.pi


@pytest.mark.parametrize("text, message", [
    ("1e308GiB", "byte size must be finite"),
    ("1e400", "byte size must be finite"),
    ("9" * 60, "must be at most 1152921504606846976 bytes"),
    ("2EiB", "unknown byte unit"),
    ("1e30", "must be at most 1152921504606846976 bytes"),
    ("1" * 100, "at most 64 characters"),
])
def test_byte_budget_edges(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        byte_budget(text)


def test_byte_budget_in_range():
    assert byte_budget("1MiB") == 2**20
    assert byte_budget("unlimited") == math.inf
    assert byte_budget("1GiB") == 2**30
    assert byte_budget(str(MAX_BYTES)) == MAX_BYTES


def test_parse_byte_size_never_overflows():
    with pytest.raises(ValueError, match="finite"):
        parse_byte_size("1.7e308G")


@pytest.mark.parametrize("parse, text, message", [
    (ranged(float, 0, 1), "nan", r"must be >= 0 and <= 1; got 'nan'"),
    (ranged(float, 0, 1), "-inf", r"must be >= 0"),
    (ranged(float, 0, math.inf), "inf", "must be a finite number; got 'inf'"),
    (ranged(float, -math.inf, math.inf), "1e999", "must be a finite number"),
    (ranged(int, 0, 10), "1" * 5000, "expected an integer of at most 64 characters"),
    (ranged(int, 0, 10), "0x10", "expected an integer; got '0x10'"),
    (finite_float, "nan", "must be a finite number; got 'nan'"),
    (finite_float, "-Infinity", "must be a finite number"),
    (positive_float, "0", r"must be > 0; got '0'"),
    (positive_float, "-1e-300", r"must be > 0"),
    (positive_float, "nan", r"must be > 0; got 'nan'"),
    (positive_float, "inf", "must be a finite number"),
])
def test_numeric_edges(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse(text)


def test_numbers_in_range_parse():
    assert ranged(int, 0, 10)("10") == 10
    assert finite_float("-1e300") == -1e300
    assert positive_float("5e-324") == 5e-324


@pytest.mark.parametrize("flags, message", [
    (["--mean", "0.5", "--std", "nan"], "argument --std: must be > 0; got 'nan'"),
    (["--mean", "0.5", "--std", "inf"], "argument --std: must be a finite number; got 'inf'"),
    (["--mean", "0.5", "--std", "0"], "argument --std: must be > 0; got '0'"),
    (["--mean", "nan", "--std", "1"], "argument --mean: must be a finite number; got 'nan'"),
    (["--mean", "0", "1e999", "--std", "1"], "argument --mean: must be a finite number"),
    (["--learning-rate", "inf"], "argument --learning-rate: must be > 0 and <= 10"),
    (["--capacity", "0"], "argument --capacity: must be >= 2"),
    (["--input-size", "99999"], "argument --input-size: must be >= 1 and <= 4096"),
    (["--cosine-scale", "nan"], "argument --cosine-scale: must be > 0"),
    (["--seed", "-1"], "argument --seed: must be >= 0"),
])
def test_export_refuses_while_parsing(tmp_path, capsys, flags, message):
    out = tmp_path / "m.tflite"
    capsys.readouterr()
    assert run_cli(["export", "--out", str(out), *flags]) == 2
    assert_one_line_error(capsys.readouterr().err, "tflite-train export: error: " + message)
    assert not out.exists()


@pytest.mark.parametrize("flags, message", [
    (["--mem-budget", "1e308GiB"], "argument --mem-budget: byte size must be finite"),
    (["--cache-memory", "1e400"], "argument --cache-memory: byte size must be finite"),
    (["--replay-budget", "2GiB"], "argument --replay-budget: must be at most 1073741824 bytes (1 GiB)"),
    (["--replay-budget", "-1"], "argument --replay-budget: byte size must not be negative"),
    (["--replay-budget", "unlimited"], "argument --replay-budget: cannot parse byte size"),
    (["--compute-macs", "inf"], "argument --compute-macs: must be > 0 and <= 1e+18"),
    (["--iterations", "9" * 70], "argument --iterations: expected an integer of at most 64 characters"),
])
def test_adapt_refuses_while_parsing(tmp_path, capsys, flags, message):
    capsys.readouterr()
    assert run_cli(["adapt", "--model", "m.tflite", "--support", "s", "--out", str(tmp_path / "c.ckpt"), *flags]) == 2
    assert_one_line_error(capsys.readouterr().err, message)
