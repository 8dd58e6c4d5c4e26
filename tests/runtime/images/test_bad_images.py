"""Category 3: bad image files and folders never crash, hang or lie.

Each case damages a support folder of real images, runs ``tflite-train adapt`` over an earlier run's
outputs, and asserts the exit code, the one-line message naming the file or folder, and that the
earlier outputs are byte-for-byte intact (nothing written, nothing lost).
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest
from PIL import Image

from tests.runtime.runtime_fixtures import (
    CLI_MODEL, adapt_cli, assert_one_line_error, checkout_env, fixture_model, run_cli, snapshot,
)


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares ``width`` x ``height`` 8-bit grey pixels and carries a few rows of data."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = zlib.compress(b"\0" * (width + 1) * 4)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", rows) + chunk(b"IEND", b""))


def _real_png(support) -> bytes:
    return next((support / "class0").iterdir()).read_bytes()


def _jpeg_bytes(support) -> bytes:
    buffer = io.BytesIO()
    Image.open(next((support / "class0").iterdir())).save(buffer, format="JPEG")
    return buffer.getvalue()


def _write(name, data):
    def damage(support, tmp):
        (support / "class1" / name).write_bytes(data(support) if callable(data) else data)
    return damage


def _truncated_png(support, tmp):
    data = _real_png(support)
    (support / "class1" / "cut.png").write_bytes(data[:len(data) // 2])


def _truncated_jpeg(support, tmp):
    data = _jpeg_bytes(support)
    (support / "class1" / "cut.jpg").write_bytes(data[:len(data) // 2])


def _truncated_gif(support, tmp):
    buffer = io.BytesIO()
    Image.open(next((support / "class0").iterdir())).save(buffer, format="GIF")
    (support / "class1" / "cut.gif").write_bytes(buffer.getvalue()[:len(buffer.getvalue()) // 2])


def _bit_flipped_png(support, tmp):
    data = bytearray(_real_png(support))
    data[len(data) // 2] ^= 0xFF
    (support / "class1" / "flip.png").write_bytes(bytes(data))


def _dev_zero(support, tmp):
    os.symlink("/dev/zero", support / "class1" / "zero.png")


def _dangling(support, tmp):
    os.symlink(tmp / "gone.png", support / "class1" / "gone.png")


def _empty_class(support, tmp):
    (support / "empty").mkdir()


def _hidden_only_class(support, tmp):
    (support / "ghost").mkdir()
    (support / "ghost" / "._a.png").write_bytes(b"\x00\x05\x16\x07")
    (support / "ghost" / ".DS_Store").write_bytes(b"\0" * 8)


def _nested_class(support, tmp):
    (support / "nested" / "deeper").mkdir(parents=True)
    shutil.copy(next((support / "class0").iterdir()), support / "nested" / "deeper" / "a.png")


def _single_class(support, tmp):
    for name in ("class1", "class2"):
        shutil.rmtree(support / name)


def _loose_images(support, tmp):
    shutil.copy(next((support / "class0").iterdir()), support / "stray.png")


def _no_classes(support, tmp):
    for name in ("class0", "class1", "class2"):
        shutil.rmtree(support / name)


def _nan_npy(support, tmp):
    np.save(support / "class1" / "nan.npy", np.full((28, 28), np.nan, np.float32))


def _out_of_range_npy(support, tmp):
    np.save(support / "class1" / "big.npy", np.full((28, 28), 7.0, np.float32))


def _pickled_npy(support, tmp):
    np.save(support / "class1" / "obj.npy", np.array([{"x": 1}], object), allow_pickle=True)


def _corrupt_with_newline_name(support, tmp):
    (support / "class1" / "a\nb.png").write_bytes(b"garbage")


def _corrupt_with_bytes_name(support, tmp):
    with open(os.path.join(os.fsencode(support / "class1"), b"caf\xe9.png"), "wb") as handle:
        handle.write(b"garbage")


def _missing_folder(support, tmp):
    return tmp / "nowhere"


def _folder_is_file(support, tmp):
    (tmp / "file").write_text("x")
    return tmp / "file"


CASES = [
    (_write("junk.png", b"this is not an image at all"), ["junk.png", "is not a PNG/JPEG/WEBP/BMP/GIF/TIFF image"]),
    (_write("zero.png", b""), ["zero.png", "is empty (0 bytes)"]),
    (_truncated_png, ["cut.png", "corrupt or truncated"]),
    (_truncated_jpeg, ["cut.jpg", "corrupt or truncated"]),
    (_bit_flipped_png, ["flip.png", "corrupt or truncated"]),
    (_write("huge.png", _png_header(100_000, 100_000)), ["huge.png", "decompression bomb"]),
    (_write("large.png", _png_header(8_000, 7_000)), ["large.png", "decompression bomb", "56000000 pixels", "limit of 50000000"]),
    (_write("text.jpg", b"GIF89a but then nothing"), ["text.jpg", "is not a PNG/JPEG"]),
    (_truncated_gif, ["cut.gif", "or its header is truncated"]),
    (_write("eps.png", b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n"), ["eps.png", "is not a PNG/JPEG"]),
    (_dev_zero, ["zero.png", "is a character device, not a regular file"]),
    (_dangling, ["gone.png", "No such file or directory"]),
    (_empty_class, ["class folder", "empty has no images"]),
    (_hidden_only_class, ["ghost has no images"]),
    (_nested_class, ["nested has no images; images are only in its subfolder(s) deeper"]),
    (_single_class, ["has 1 class folder (class0); adaptation needs at least 2 classes"]),
    (_loose_images, ["holds images directly (stray.png)"]),
    (_no_classes, ["has no class folders"]),
    (_nan_npy, ["nan.npy", "NaN"]),
    (_out_of_range_npy, ["big.npy", "must lie in [0, 1]"]),
    (_pickled_npy, ["obj.npy", "corrupt .npy"]),
    (_corrupt_with_newline_name, ["a\\nb.png", "is not a PNG"]),
    (_corrupt_with_bytes_name, ["caf\\xe9.png", "is not a PNG"]),
    (_missing_folder, ["nowhere does not exist"]),
    (_folder_is_file, ["file is not a directory"]),
]


@pytest.mark.parametrize("damage, fragments", CASES, ids=[c[0].__name__ if c[0].__name__ != "damage" else
                                                          c[1][0] for c in CASES])
def test_bad_images_are_refused(earlier_run, tmp_path, capsys, damage, fragments):
    support, run = earlier_run
    before = snapshot(run)
    capsys.readouterr()
    target = damage(support, tmp_path) or support
    assert adapt_cli(target, run / "m.ckpt") == 2
    assert_one_line_error(capsys.readouterr().err, *fragments)
    assert snapshot(run) == before


def test_fifo_is_refused_without_hanging(earlier_run, tmp_path):
    """A FIFO named like an image must be refused, never opened for reading (which would block)."""
    support, run = earlier_run
    os.mkfifo(support / "class1" / "pipe.png")
    before = snapshot(run)
    env = checkout_env()
    done = subprocess.run(
        [sys.executable, "-m", "tflite_train.cli", "adapt", "--model", str(fixture_model(CLI_MODEL)), "--support",
         str(support), "--out", str(run / "m.ckpt"), "--iterations", "3"],
        capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2
    assert_one_line_error(done.stderr, "pipe.png is a FIFO, not a regular file")
    assert snapshot(run) == before


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_wrong_extension_is_read_by_content(earlier_run, capsys, caplog):
    """A JPEG named .png is read as the JPEG it is; a PNG named .txt is skipped with a stated warning."""
    support, run = earlier_run
    (support / "class1" / "photo.png").write_bytes(_jpeg_bytes(support))
    (support / "class1" / "image.txt").write_bytes(_real_png(support))
    with caplog.at_level(logging.WARNING):
        assert adapt_cli(support, run / "m.ckpt", "--json") == 0
    assert json.loads(capsys.readouterr().out)["shots"] == [4, 5, 4]
    (warning,) = _warnings(caplog)
    assert "skipping" in warning and "image.txt: not an image" in warning


def test_every_format_and_mode_is_accepted(earlier_run, capsys):
    support, run = earlier_run
    grey = Image.open(next((support / "class2").iterdir()))
    grey.save(support / "class2" / "a.webp", lossless=True)
    grey.save(support / "class2" / "b.bmp")
    grey.save(support / "class2" / "c.gif")
    grey.convert("RGB").save(support / "class2" / "d.tiff")
    Image.fromarray(np.asarray(grey).astype(np.uint16) * 257).save(support / "class2" / "e16.png")
    grey.convert("RGBA").save(support / "class2" / "f.png")
    grey.convert("P").save(support / "class2" / "g.png", transparency=0)
    assert adapt_cli(support, run / "m.ckpt", "--json") == 0
    assert '"support_size": 19' in capsys.readouterr().out


def test_subfolders_beside_images_are_skipped_with_a_warning(earlier_run, caplog):
    support, run = earlier_run
    (support / "class0" / "more").mkdir()
    shutil.copy(next((support / "class0").iterdir()), support / "class0" / "more" / "x.png")
    with caplog.at_level(logging.WARNING):
        assert adapt_cli(support, run / "m.ckpt") == 0
    (warning,) = _warnings(caplog)
    assert "skipping subfolder" in warning and "class0/more" in warning


@pytest.mark.parametrize("name", ["a_directory", "fifo.png", "/dev/null", "missing.png", "empty.png"])
def test_predict_refuses_non_images(earlier_run, tmp_path, capsys, name):
    support, run = earlier_run
    (tmp_path / "a_directory").mkdir()
    os.mkfifo(tmp_path / "fifo.png")  # refused from os.stat: never opened, so it cannot block
    (tmp_path / "empty.png").write_bytes(b"")
    path = name if name.startswith("/") else str(tmp_path / name)
    good = str(next((support / "class0").iterdir()))
    capsys.readouterr()
    assert run_cli(["predict", "--model", str(fixture_model(CLI_MODEL)), "--checkpoint", str(run / "m.ckpt"), good,
                    path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no partial table
    reason = {"a_directory": "is a directory", "fifo.png": "is a FIFO", "/dev/null": "is a character device",
              "missing.png": "No such file or directory", "empty.png": "is empty (0 bytes)"}[name]
    assert_one_line_error(captured.err, path, reason)


@pytest.mark.parametrize("flag", ["--model", "--checkpoint"])
def test_predict_refuses_a_fifo_model_or_checkpoint(earlier_run, tmp_path, capsys, flag):
    support, run = earlier_run
    os.mkfifo(tmp_path / "pipe")  # reading it would block forever; it must never be opened
    args = {"--model": str(fixture_model(CLI_MODEL)), "--checkpoint": str(run / "m.ckpt"), flag: str(tmp_path / "pipe")}
    capsys.readouterr()
    assert run_cli(["predict", "--model", args["--model"], "--checkpoint", args["--checkpoint"],
                    str(next((support / "class0").iterdir()))]) == 2
    assert_one_line_error(capsys.readouterr().err, "pipe is not a regular file")
