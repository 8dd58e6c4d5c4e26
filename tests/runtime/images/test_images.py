"""Image files through Pillow: formats, EXIF orientation, modes, crop + bilinear resize, folders, byte sizes."""

from __future__ import annotations

import logging
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from tflite_train.runtime.byte_size import parse_byte_size
from tflite_train.runtime.errors import ImageError, ImageFolderError
from tflite_train.runtime.images.image_folder import load_image_folder, scan_image_folder
from tflite_train.runtime.images.images import decode_image, read_image
from tflite_train.runtime.images.model_input import to_model_input


def _gradient(h=12, w=10):
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x * 200 // w, y * 200 // h, (x + y) * 100 // (h + w)], axis=-1).astype(np.uint8)


@pytest.mark.parametrize("suffix, kwargs", [(".png", {}), (".bmp", {}), (".tiff", {}), (".webp", {"lossless": True}),
                                            (".gif", {})])
def test_lossless_formats_round_trip(tmp_path, suffix, kwargs):
    image = _gradient()
    path = tmp_path / f"x{suffix}"
    if suffix == ".gif":  # GIF is palette-based: a grey image survives exactly
        image = image[..., :1].repeat(3, axis=2)
    Image.fromarray(image).save(path, **kwargs)
    np.testing.assert_array_equal(decode_image(path), image)


def test_jpeg_is_close(tmp_path):
    image = _gradient(32, 32)
    Image.fromarray(image).save(tmp_path / "x.jpg", quality=95)
    assert np.abs(decode_image(tmp_path / "x.jpg").astype(int) - image).max() <= 8


def test_gif_first_frame(tmp_path):
    frames = [Image.new("L", (4, 4), v).convert("P") for v in (10, 200)]
    frames[0].save(tmp_path / "a.gif", save_all=True, append_images=frames[1:])
    assert Image.open(tmp_path / "a.gif").n_frames == 2
    assert np.all(decode_image(tmp_path / "a.gif") == 10)


def test_exif_orientation_is_applied(tmp_path):
    image = np.zeros((2, 3, 3), np.uint8)
    image[0, 0] = 255  # top-left marker of a 3-wide, 2-high image
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation 6: the viewer rotates 90 degrees clockwise
    Image.fromarray(image).save(tmp_path / "r.png", exif=exif)
    out = decode_image(tmp_path / "r.png")
    assert out.shape == (3, 2, 3)  # rotated: 2 wide, 3 high
    np.testing.assert_array_equal(out, np.rot90(image, k=-1))


def test_modes(tmp_path):
    Image.fromarray(np.array([[0, 1]], bool)).save(tmp_path / "bw.png")
    np.testing.assert_array_equal(decode_image(tmp_path / "bw.png")[..., 0], [[0, 255]])
    sixteen = np.array([[0, 257 * 100, 65535, 128]], np.uint16)
    Image.fromarray(sixteen).save(tmp_path / "deep.png")
    # round(v / 257): 0, 100, 255, round(0.498) = 0
    np.testing.assert_array_equal(decode_image(tmp_path / "deep.png")[..., 0], [[0, 100, 255, 0]])
    rgba = np.dstack([_gradient(), np.full((12, 10), 128, np.uint8)])
    Image.fromarray(rgba).save(tmp_path / "a.png")
    np.testing.assert_array_equal(decode_image(tmp_path / "a.png"), rgba)
    palette = Image.fromarray(_gradient()).convert("P")
    palette.save(tmp_path / "p.png", transparency=0)
    assert decode_image(tmp_path / "p.png").shape == (12, 10, 4)
    Image.new("CMYK", (3, 3), (0, 0, 0, 0)).save(tmp_path / "c.tiff")
    np.testing.assert_array_equal(decode_image(tmp_path / "c.tiff"), np.full((3, 3, 3), 255))
    Image.new("F", (3, 3), 0.5).save(tmp_path / "f.tiff")
    with pytest.raises(ImageError, match="mode F"):
        decode_image(tmp_path / "f.tiff")


def test_16_bit_rgb_keeps_the_high_byte(tmp_path):
    pixels = np.array([[[0x1234, 0xFF00, 0x00FF], [0xFFFF, 0x8080, 0x0101]]], ">u2")
    raw = b"".join(b"\0" + row.tobytes() for row in pixels)

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    (tmp_path / "rgb16.png").write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 1, 16, 2, 0, 0, 0))
                                        + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    np.testing.assert_array_equal(decode_image(tmp_path / "rgb16.png"), pixels >> 8)


def test_alpha_is_composited_on_white():
    rgba = np.zeros((2, 2, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = [[0, 255], [51, 255]]
    out = to_model_input(rgba, (2, 2, 3)) * 255
    # c' = c a / 255 + (255 - a): a=0 -> white; a=255 -> the colour; a=51 -> R = 40 + 204, G = B = 204
    np.testing.assert_allclose(out[0, 0], [255, 255, 255], atol=1e-4)
    np.testing.assert_allclose(out[0, 1], [200, 0, 0], atol=1e-4)
    np.testing.assert_allclose(out[1, 0], [244, 204, 204], atol=1e-4)


def test_centre_crop_and_bilinear():
    wide = np.zeros((32, 96, 3), np.uint8)
    wide[:, 32:64] = 255  # the square centre crop is the white middle third
    np.testing.assert_allclose(to_model_input(wide, (8, 8, 3)), 1.0)
    ramp = np.arange(4, dtype=np.uint8).reshape(2, 2, 1) * 50
    np.testing.assert_allclose(to_model_input(ramp, (2, 2, 1)) * 255, ramp, atol=1e-4)
    up = to_model_input(ramp, (4, 4, 3))[..., 0] * 255
    # x_src = (x + 0.5) / 2 - 0.5 -> -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1)
    np.testing.assert_allclose(up[0], [0, 12.5, 37.5, 50], atol=1e-4)
    colour = np.zeros((1, 1, 3), np.uint8) + np.array([255, 0, 0], np.uint8)
    np.testing.assert_allclose(to_model_input(colour, (1, 1, 1)), [[[0.299]]], atol=1e-6)
    np.testing.assert_allclose(to_model_input(colour, (1, 1, 3), value_range=(-1, 1)), [[[1, -1, -1]]], atol=1e-6)


def test_npy_images(tmp_path):
    np.save(tmp_path / "f.npy", np.full((4, 4, 3), 0.5, np.float32))
    np.testing.assert_allclose(read_image(tmp_path / "f.npy"), 0.5)
    np.save(tmp_path / "u.npy", np.full((4, 4), 51, np.uint8))
    np.testing.assert_allclose(read_image(tmp_path / "u.npy"), 0.2, rtol=1e-6)
    np.save(tmp_path / "nan.npy", np.full((4, 4), np.nan, np.float32))
    with pytest.raises(ImageError, match="NaN"):
        read_image(tmp_path / "nan.npy")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], object), allow_pickle=True)
    with pytest.raises(ImageError, match="corrupt .npy"):
        read_image(tmp_path / "obj.npy")


def test_image_folder(tmp_path, caplog):
    for k, name in enumerate(["cat", "ant"]):
        (tmp_path / name).mkdir()
        for i in range(k + 1):
            Image.new("L", (4, 4), 60 * (k + 1)).save(tmp_path / name / f"{i}.png")
    np.save(tmp_path / "ant" / "z.npy", np.full((4, 4, 3), 0.5, np.float32))
    (tmp_path / "ant" / "._0.png").write_bytes(b"\x00\x05\x16\x07 AppleDouble")
    (tmp_path / "ant" / ".hidden.png").write_bytes(b"junk")
    (tmp_path / ".git").mkdir()
    (tmp_path / "cat" / "notes.txt").write_text("hello")
    with caplog.at_level(logging.WARNING):
        images, labels, names = load_image_folder(tmp_path, (8, 8, 3))
    assert names == ("ant", "cat") and labels.tolist() == [0, 0, 0, 1] and images.shape == (4, 8, 8, 3)
    np.testing.assert_allclose(images[0], 120 / 255, rtol=1e-6)
    np.testing.assert_allclose(images[2], 0.5)
    assert "notes.txt" in caplog.text and "AppleDouble" not in caplog.text and "._0" not in caplog.text


def test_folder_errors(tmp_path):
    with pytest.raises(ImageFolderError, match="nope does not exist"):
        scan_image_folder(tmp_path / "nope")
    (tmp_path / "f").write_text("x")
    with pytest.raises(ImageFolderError, match="f is not a directory"):
        scan_image_folder(tmp_path / "f")
    (tmp_path / "f").unlink()
    (tmp_path / "a").mkdir()
    with pytest.raises(ImageFolderError, match="a has no images$"):
        scan_image_folder(tmp_path)
    (tmp_path / "a" / "deep").mkdir()
    Image.new("L", (4, 4)).save(tmp_path / "a" / "deep" / "x.png")
    with pytest.raises(ImageFolderError, match="only in its subfolder\\(s\\) deep"):
        scan_image_folder(tmp_path)
    Image.new("L", (4, 4)).save(tmp_path / "loose.png")
    with pytest.raises(ImageFolderError, match="holds images directly"):
        scan_image_folder(tmp_path)


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
