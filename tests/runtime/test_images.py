"""The numpy/zlib PNG codec, image folders, resizing, byte sizes."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest

from tflite_train.runtime.byte_size import parse_byte_size
from tflite_train.runtime.images import (
    decode_png,
    encode_png,
    load_image_folder,
    read_image,
    resize_bilinear,
    to_model_input,
)


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_png_round_trip(channels):
    image = np.random.default_rng(channels).integers(0, 256, size=(7, 5, channels), dtype=np.uint8)
    np.testing.assert_array_equal(decode_png(encode_png(image)), image)


def _png_with_filter(image: np.ndarray, kind: int) -> bytes:
    """Encodes ``image`` [H, W, 3] with one filter type on every row (PNG spec 9.2), by hand."""
    h, w, c = image.shape
    rows = image.reshape(h, w * c).astype(np.int32)
    out = []
    for y in range(h):
        up = rows[y - 1] if y else np.zeros(w * c, np.int32)
        filtered = []
        for i, x in enumerate(rows[y]):
            a = rows[y][i - c] if i >= c else 0
            b, cc = up[i], (up[i - c] if i >= c else 0)
            p = a + b - cc
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - cc)
            predictor = [0, a, b, (a + b) // 2, a if pa <= pb and pa <= pc else b if pb <= pc else cc][kind]
            filtered.append((x - predictor) & 255)
        out.append(bytes([kind]) + bytes(filtered))

    def chunk(tag, body):
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"".join(out))) + chunk(b"IEND", b""))


@pytest.mark.parametrize("kind", [0, 1, 2, 3, 4], ids=["none", "sub", "up", "average", "paeth"])
def test_png_filters(kind):
    image = np.random.default_rng(kind).integers(0, 256, size=(6, 5, 3), dtype=np.uint8)
    np.testing.assert_array_equal(decode_png(_png_with_filter(image, kind)), image)


def test_png_matches_pillow_when_installed():
    pil = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    image = (np.linspace(0, 255, 40 * 30 * 3).reshape(40, 30, 3) + rng.integers(0, 20, (40, 30, 3))).astype(np.uint8)
    for mode, array in (("RGB", image), ("L", image[..., 0]), ("RGBA", np.dstack([image, image[..., :1]]))):
        buffer = io.BytesIO()
        pil.fromarray(array, mode).save(buffer, format="PNG", optimize=True)
        decoded = decode_png(buffer.getvalue())
        np.testing.assert_array_equal(decoded.reshape(array.shape), array)


def test_png_errors():
    good = encode_png(np.zeros((3, 3), np.uint8))
    with pytest.raises(ValueError, match="not a PNG"):
        decode_png(b"GIF89a....")
    with pytest.raises(ValueError, match="truncated"):
        decode_png(good[:30])
    bad = bytearray(good)
    bad[-20] ^= 1
    with pytest.raises(ValueError, match="CRC|corrupt"):
        decode_png(bytes(bad))
    sixteen = bytearray(good)
    ihdr = good.index(b"IHDR")
    sixteen[ihdr + 12] = 16
    sixteen[ihdr + 17:ihdr + 21] = struct.pack(">I", zlib.crc32(bytes(sixteen[ihdr:ihdr + 17])))
    with pytest.raises(ValueError, match="unsupported PNG"):
        decode_png(bytes(sixteen))


def test_image_folder(tmp_path):
    for k, name in enumerate(["cat", "ant"]):
        (tmp_path / name).mkdir()
        for i in range(k + 1):
            (tmp_path / name / f"{i}.png").write_bytes(encode_png(np.full((4, 4), 60 * (k + 1), np.uint8)))
    np.save(tmp_path / "ant" / "z.npy", np.full((4, 4, 3), 0.5, np.float32))
    images, labels, names = load_image_folder(tmp_path, (8, 8, 3))
    assert names == ("ant", "cat") and labels.tolist() == [0, 0, 0, 1] and images.shape == (4, 8, 8, 3)
    np.testing.assert_allclose(images[0], 120 / 255, rtol=1e-6)
    np.testing.assert_allclose(images[2], 0.5)


def test_unreadable_and_nan_images(tmp_path):
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(ValueError, match="bad.png"):
        read_image(tmp_path / "bad.png")
    np.save(tmp_path / "nan.npy", np.full((4, 4), np.nan, np.float32))
    with pytest.raises(ValueError, match="NaN"):
        read_image(tmp_path / "nan.npy")
    with pytest.raises(ValueError, match="not a directory"):
        load_image_folder(tmp_path / "nope", (4, 4, 3))
    (tmp_path / "empty" / "a").mkdir(parents=True)
    with pytest.raises(ValueError, match="no images"):
        load_image_folder(tmp_path / "empty", (4, 4, 3))


def test_resize_and_channels():
    image = np.arange(4, dtype=np.float32).reshape(2, 2, 1)
    np.testing.assert_array_equal(resize_bilinear(image, 2, 2), image)
    up = resize_bilinear(image, 4, 4)[..., 0]
    # half-pixel centres: x_src = (x + 0.5) / 2 - 0.5 -> -0.25 (clamped 0), 0.25, 0.75, 1.25 (clamped 1)
    np.testing.assert_allclose(up[0], [0.0, 0.25, 0.75, 1.0])
    assert to_model_input(image, (2, 2, 3)).shape == (2, 2, 3)
    rgba = np.ones((2, 2, 4), np.float32)
    assert to_model_input(rgba, (2, 2, 3)).shape == (2, 2, 3)


@pytest.mark.parametrize("text, expected", [
    ("1MiB", 2**20), ("512KiB", 512 * 1024), ("1.5MB", 1_500_000), ("2048", 2048), ("3 kB", 3000), ("1G", 2**30),
    ("0", 0),
])
def test_byte_sizes(text, expected):
    assert parse_byte_size(text) == expected


@pytest.mark.parametrize("text, match", [("-1MiB", "negative"), ("1XB", "unknown byte unit"), ("", "cannot parse"),
                                         ("MiB", "cannot parse"), ("1.2.3MB", "cannot parse")])
def test_bad_byte_sizes(text, match):
    with pytest.raises(ValueError, match=match):
        parse_byte_size(text)
