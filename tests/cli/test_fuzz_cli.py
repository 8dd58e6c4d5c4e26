"""Issue 25, property-based: generated flag values and image bytes never crash the command line.

Flag values (numbers at and beyond float range, NaN/inf spellings, thousands of digits, any text) go
through the real parser of ``adapt`` and ``export``: every value it accepts is finite and within the
flag's range, every refusal is exit 2 with one line. Image bytes (random, and real PNG/JPEG/GIF/BMP/
``.npy`` files with bytes flipped, cut or spliced) go through ``decode_image`` / ``load_images`` and
``tflite-train predict``: a result, or the project's own error type / exit 2 with one line — never
another exception, never a signal. Example counts: ``fuzz_profiles``.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from PIL import Image

from tests.runtime.crafted_files import MODEL, adapted_checkpoint
from tests.runtime.fuzz_profiles import PROJECT_ERRORS, examples
from tests.runtime.runtime_fixtures import fixture_model, run_cli
from tflite_train.cli import build_parser
from tflite_train.runtime.images.images import decode_image
from tflite_train.runtime.images.model_input import load_images
from tflite_train.runtime.model.interpreter import TrainableModel

pytestmark = pytest.mark.pi

NUMBER_TEXT = st.one_of(
    st.floats().map(repr), st.floats().map(str), st.integers().map(str),
    st.integers(-10**400, 10**400).map(str),
    st.sampled_from(["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e308", "1e309", "-1e309", "1e-400", "0x10",
                     "1_000", " 5 ", "", "-0", "+1", "1e400GiB", "1.7e308G", "2EiB", "unlimited", "UNLIMITED",
                     "9" * 500, "1" * 4301, "\u0661\u0662", "5\x00", "١e1"]),
    st.text(max_size=20),
    st.tuples(st.floats(allow_nan=False), st.sampled_from(["", "B", "k", "KiB", "MiB", "GiB", "MB", "G", "xB"]))
    .map(lambda t: f"{t[0]!r}{t[1]}"),
)
"""Texts a user (or an attacker) could give a numeric flag."""

# flag -> (low, high) every accepted value must lie in (inf = "unlimited" where the flag allows it)
ADAPT_FLAGS = {
    "--mem-budget": (1, math.inf), "--cache-memory": (1, math.inf), "--compute-budget": (0, 100),
    "--compute-macs": (0, 1e18), "--channel-ratio": (0, 1), "--iterations": (0, 100_000), "--epochs": (1, 10_000),
    "--batch-size": (1, 1024), "--learning-rate": (0, 10), "--seed": (0, 2**32 - 1), "--augment-views": (1, 10_000),
    "--replay-budget": (0, 2**30),
}
EXPORT_FLAGS = {
    "--mean": (-math.inf, math.inf), "--std": (0, math.inf), "--learning-rate": (0, 10), "--cosine-scale": (0, 1e6),
    "--capacity": (2, 100_000), "--input-size": (1, 4096), "--in-channels": (1, 4), "--candidate-blocks": (1, 10_000),
    "--seed": (0, 2**32 - 1), "--input-range": (-math.inf, math.inf),
}
UNLIMITED = ("--mem-budget", "--cache-memory")


def _parse(argv: list[str]):
    """(namespace, None) or (None, exit code) of the real parser; its stderr is captured by the caller."""
    try:
        return build_parser().parse_args(argv), None
    except SystemExit as exit_info:
        return None, exit_info.code


def _check_accepted(value, low, high, flag):
    values = value if isinstance(value, list) else [value]
    for v in values:
        if flag in UNLIMITED and v == math.inf:
            continue
        assert isinstance(v, (int, float)) and not isinstance(v, bool), (flag, v)
        assert math.isfinite(v) and low <= v <= high, (flag, v)


def _flag_property(capsys, argv: list[str], flag: str, bounds: tuple[float, float]) -> None:
    """The parser refuses ``argv`` with exit 2 and one line, or accepts a finite value of ``flag`` within ``bounds``."""
    capsys.readouterr()
    args, code = _parse(argv)
    err = capsys.readouterr().err
    if args is None:
        assert code == 2 and err.count("\n") == 1 and ": error: " in err, err
    else:
        _check_accepted(getattr(args, flag[2:].replace("-", "_")), *bounds, flag)


@examples(200)
@given(flag=st.sampled_from(sorted(ADAPT_FLAGS)), text=NUMBER_TEXT)
def test_fuzz_adapt_numeric_flags(capsys, flag, text):
    argv = ["adapt", "--model", "m.tflite", "--support", "s", "--out", "o.ckpt", f"{flag}={text}"]
    _flag_property(capsys, argv, flag, ADAPT_FLAGS[flag])


@examples(200)
@given(flag=st.sampled_from(sorted(EXPORT_FLAGS)), texts=st.lists(NUMBER_TEXT, min_size=1, max_size=3))
def test_fuzz_export_numeric_flags(capsys, flag, texts):
    argv = ["export", "--out", "m.tflite", *[f"{flag}={t}" for t in texts[:1]], *texts[1:]]
    _flag_property(capsys, argv, flag, EXPORT_FLAGS[flag])


@examples(40)
@given(flag=st.sampled_from(sorted(ADAPT_FLAGS)), text=NUMBER_TEXT)
def test_fuzz_adapt_flags_through_main(tmp_path_factory, capsys, flag, text):
    """The whole command: a parse refusal, or the run's own refusal (here: no such model), both one line."""
    out = tmp_path_factory.mktemp("flags") / "o.ckpt"
    capsys.readouterr()
    code = run_cli(["adapt", "--model", str(out.parent / "missing.tflite"), "--support", str(out.parent),
                    "--out", str(out), "--quiet", f"{flag}={text}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("tflite-train"), (code, err)
    assert not out.exists()


def _encoded(kind: str, pixels: np.ndarray) -> bytes:
    if kind == "npy":
        buffer = io.BytesIO()
        np.save(buffer, pixels)
        return buffer.getvalue()
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=kind)
    return buffer.getvalue()


@st.composite
def image_bytes(draw) -> tuple[str, bytes]:
    """(suffix, bytes): random bytes, or a real image with a few bytes changed, a cut or a splice."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.sampled_from([".png", ".jpg", ".npy", ".bin"])), draw(st.binary(max_size=400))
    kind = draw(st.sampled_from(["PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP", "npy"]))
    h, w = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    channels = draw(st.sampled_from([1, 3, 4])) if kind in ("PNG", "TIFF", "npy") else 3
    pixels = np.asarray(draw(st.lists(st.integers(0, 255), min_size=h * w * channels, max_size=h * w * channels)),
                        np.uint8).reshape(h, w, channels)
    if channels == 1:
        pixels = pixels[..., 0]
    data = bytearray(_encoded(kind, pixels))
    for _ in range(draw(st.integers(0, 4))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[:draw(st.integers(0, len(data)))]
    if draw(st.integers(0, 3)) == 0:
        data += draw(st.binary(max_size=50))
    return "." + kind.lower().replace("jpeg", "jpg"), bytes(data)


_NPY_DAMAGED = (b"\x93NUMPY\x01\x00v\x00{'descr'[ '|u1', 'fortran_order': False, 'shape': (2, 3), }" + b" " * 58
                + b"\n" + bytes(6))
"""Found by the long run: a .npy header with one byte changed made numpy raise tokenize.TokenError."""
TIFF_CORRUPT_EXIF = (".tiff", b"II*\x00\x08\x00\x00\x00")
"""Found by the long run: Pillow printed a UserWarning to stderr beside predict's one-line error."""


@examples(200)
@given(image=image_bytes())
@example(image=(".npy", _NPY_DAMAGED))
@example(image=(".npy", _NPY_DAMAGED.replace(b"'descr'[", b"'descr':").replace(b"(2, 3)", b"(99999, 99999)")))
@example(image=TIFF_CORRUPT_EXIF)
def test_fuzz_image_bytes_api(tmp_path_factory, image):
    suffix, data = image
    path = tmp_path_factory.mktemp("img") / ("x" + suffix)
    path.write_bytes(data)
    try:
        pixels = decode_image(path)
    except PROJECT_ERRORS as err:
        assert "\n" not in str(err), str(err)
        return
    assert pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[2] in (1, 3, 4) and pixels.size > 0
    batch = load_images([path], (9, 9, 3), (0.0, 1.0))
    assert batch.shape == (1, 9, 9, 3) and np.all(np.isfinite(batch))


@pytest.fixture(scope="module")
def checkpoint_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "m.ckpt"
    path.write_bytes(adapted_checkpoint(TrainableModel(fixture_model(MODEL))))
    return path


@examples(25)
@given(images=st.lists(image_bytes(), min_size=1, max_size=3))
@example(images=[TIFF_CORRUPT_EXIF])
@example(images=[(".npy", _NPY_DAMAGED)])
def test_fuzz_image_bytes_predict_cli(tmp_path_factory, capsys, checkpoint_file, images):
    folder = tmp_path_factory.mktemp("predict")
    paths = []
    for i, (suffix, data) in enumerate(images):
        paths.append(folder / f"{i}{suffix}")
        paths[-1].write_bytes(data)
    capsys.readouterr()
    code = run_cli(["predict", "--model", str(fixture_model(MODEL)), "--checkpoint", str(checkpoint_file), "--csv",
                    "--quiet", *map(str, paths)])
    captured = capsys.readouterr()
    assert code in (0, 2), (code, captured.err)
    if code == 2:
        assert captured.err.count("\n") == 1 and captured.err.startswith("tflite-train predict: error: "), captured.err
    else:
        assert captured.out.count("\n") == len(paths) + 1 and captured.err == ""
