"""Category 8: names from the user's folders are printed escaped; no name can forge or break a line.

Class folders and image files are named with newlines, terminal escapes, a bidirectional override,
tabs, backslashes and bytes that are not UTF-8. ``adapt`` and ``predict`` must print exactly their
usual number of lines, every name escaped by ``tflite_train.runtime.text.printable``; JSON keeps the
names exactly (its own escapes); CSV rows stay one per image.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import pathlib
import shutil

import pytest

from tests.runtime.runtime_fixtures import assert_one_line_error, fixture_model, run_cli, write_episode_folders
from tflite_train.runtime.text import printable

MODEL = "tiny_adam_33"
EVIL = {
    "class0": "fake\ncheckpoint  written-elsewhere",
    "class1": "\x1b[2J\x1b[31mred\\n\t",
    "class2": "right\u202eto-left",
}
BYTES_NAME = b"caf\xe9-\xff"  # not UTF-8


@pytest.mark.parametrize("text, shown", [
    ("plain name", "plain name"),
    ("a\nb", "a\\nb"),
    ("a\\nb", "a\\\\nb"),
    ("\x1b[31m", "\\x1b[31m"),
    ("tab\there\r", "tab\\there\\r"),
    ("bidi\u202e", "bidi\\u202e"),
    ("line\u2028sep", "line\\u2028sep"),
    ("caf\udce9", "caf\\xe9"),  # the byte 0xE9 of a non-UTF-8 name, as Python decodes it
    ("Ελληνικά 日本", "Ελληνικά 日本"),
    ("\x7f\x85", "\\x7f\\x85"),
])
def test_printable(text, shown):
    assert printable(text) == shown
    assert "\n" not in printable(text) and printable(text).encode("utf-8")


@pytest.fixture()
def evil_support(fashion, tmp_path):
    support, query = write_episode_folders(fashion, tmp_path / "data", ways=4, shots=3, queries=2, seed=0)
    for plain, evil in EVIL.items():
        (support / plain).rename(support / evil)
    os.rename(os.fsencode(support / "class3"), os.path.join(os.fsencode(support), BYTES_NAME))
    return support, query


def _names(support: pathlib.Path) -> list[str]:
    return sorted(p.name for p in support.iterdir())


def test_adapt_summary_escapes_class_names(evil_support, tmp_path, capsys):
    support, _ = evil_support
    out = tmp_path / "m.ckpt"
    assert run_cli(["adapt", "--mem-budget", "unlimited",
                    "--model", str(fixture_model(MODEL)), "--support", str(support), "--out", str(out),
                    "--iterations", "3", "--quiet"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert len(lines) == 12 and text.endswith("\n")
    assert all(line.isprintable() for line in lines), [line for line in lines if not line.isprintable()]
    classes = lines[1]
    for name in _names(support):
        assert printable(name) in classes
    assert "fake\\ncheckpoint" in classes and "\\x1b[2J" in classes and "right\\u202eto-left" in classes
    assert "caf\\xe9-\\xff" in classes
    assert sum(line.lstrip().startswith("checkpoint") for line in lines) == 1


def test_adapt_json_keeps_names_exactly(evil_support, tmp_path, capsys):
    support, _ = evil_support
    assert run_cli(["adapt", "--mem-budget", "unlimited",
                    "--model", str(fixture_model(MODEL)), "--support", str(support), "--out",
                    str(tmp_path / "m.ckpt"), "--iterations", "3", "--json"]) == 0
    text = capsys.readouterr().out
    assert text.isascii()
    assert json.loads(text)["classes"] == _names(support)


def test_predict_escapes_paths_and_names(evil_support, tmp_path, capsys):
    support, query = evil_support
    out = tmp_path / "m.ckpt"
    assert run_cli(["adapt", "--mem-budget", "unlimited",
                    "--model", str(fixture_model(MODEL)), "--support", str(support), "--out", str(out),
                    "--iterations", "3", "--quiet"]) == 0
    evil_files = []
    for n, source in enumerate(sorted((query / "class0").iterdir())):
        target = tmp_path / f"img{n}\n\x1b[1m{n}.png"
        shutil.copy(source, target)
        evil_files.append(str(target))
    base = ["predict", "--model", str(fixture_model(MODEL)), "--checkpoint", str(out), "--quiet"]
    capsys.readouterr()
    assert run_cli([*base, *evil_files]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(evil_files) and all(line.isprintable() for line in lines)
    assert all(line.startswith(printable(f)) for line, f in zip(lines[1:], evil_files))
    assert run_cli([*base, "--csv", *evil_files]) == 0
    text = capsys.readouterr().out
    assert len(text.splitlines()) == 1 + len(evil_files)
    rows = list(csv.reader(io.StringIO(text)))
    assert [r[0] for r in rows[1:]] == [printable(f) for f in evil_files]
    assert all(r[2] in {printable(n) for n in _names(support)} for r in rows[1:])
    assert run_cli([*base, "--json", *evil_files]) == 0
    assert [r["file"] for r in json.loads(capsys.readouterr().out)] == evil_files


def test_errors_and_warnings_stay_on_one_line(evil_support, tmp_path, capsys, caplog):
    support, _ = evil_support
    evil_class = support / EVIL["class0"]
    (evil_class / "x\ny.txt").write_text("not an image")
    (evil_class / "bad\nINFO all good.png").write_bytes(b"junk")
    with caplog.at_level(logging.WARNING):
        assert run_cli(["adapt", "--model", str(fixture_model(MODEL)), "--support", str(support), "--out",
                        str(tmp_path / "m.ckpt"), "--iterations", "3", "--quiet"]) == 2
    assert_one_line_error(capsys.readouterr().err, "bad\\nINFO all good.png")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and all("\n" not in w for w in warnings) and any("x\\ny.txt" in w for w in warnings)
