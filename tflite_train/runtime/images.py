"""Reading labelled image folders on the device: a numpy + zlib PNG codec and ``.npy`` images.

The Pi environment has no Pillow, so PNG (8-bit greyscale, grey+alpha, RGB, RGBA; non-interlaced;
all five scanline filters of the PNG spec, section 9) is decoded here with ``zlib`` and numpy.
Other formats (JPEG) are read through Pillow when it is installed, and ``.npy`` files hold one
image as uint8 [H, W] / [H, W, C] (0..255) or float [H, W(, C)] in [0, 1].

Images become float32 [H, W, C] in [0, 1] at the model's input size: the channel count is matched
(grey -> repeated to RGB, alpha dropped, RGB -> grey by the mean) and the size by bilinear
interpolation with half-pixel centres, x_src = (x + 0.5) * W_in / W_out - 0.5.
"""

from __future__ import annotations

import os
import pathlib
import struct
import zlib
from collections.abc import Sequence

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel (8-bit only)
IMAGE_SUFFIXES = (".png", ".npy", ".jpg", ".jpeg")


def decode_png(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """Decodes an 8-bit non-interlaced PNG to uint8 [H, W, C] (C = 1, 2, 3 or 4).

    Scanline filters (PNG spec 9.2), with a = left, b = up, c = up-left byte, x = filtered byte:
    None: x; Sub: x + a; Up: x + b; Average: x + floor((a + b) / 2);
    Paeth: x + the one of a, b, c closest to p = a + b - c (ties a, then b); all mod 256.

    Raises:
      ValueError: not a PNG, a bad CRC, truncated data, or an unsupported bit depth/colour type/interlace.
    """
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError(f"{source}: not a PNG file (bad signature)")
    pos, header, idat = len(PNG_SIGNATURE), None, []
    while True:
        if pos + 8 > len(data):
            raise ValueError(f"{source}: truncated PNG (no IEND chunk)")
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length or pos + 12 + length > len(data):
            raise ValueError(f"{source}: truncated PNG chunk {kind!r}")
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"{source}: corrupt PNG (CRC mismatch in chunk {kind!r})")
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError(f"{source}: PNG has no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in PNG_CHANNELS or interlace != 0:
        raise ValueError(
            f"{source}: unsupported PNG (bit depth {depth}, colour type {colour}, interlace {interlace}); "
            "only 8-bit non-interlaced grey/grey+alpha/RGB/RGBA is supported"
        )
    channels = PNG_CHANNELS[colour]
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as err:
        raise ValueError(f"{source}: corrupt PNG image data ({err})") from err
    stride = width * channels
    if len(raw) != height * (stride + 1):
        raise ValueError(f"{source}: PNG image data has {len(raw)} bytes, expected {height * (stride + 1)}")
    rows = np.frombuffer(raw, np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), np.uint8)
    previous = np.zeros(stride, np.int32)
    for y in range(height):
        kind, line = int(rows[y, 0]), rows[y, 1:].astype(np.int32)
        out[y] = _unfilter(kind, line, previous, channels, source)
        previous = out[y].astype(np.int32)
    return out.reshape(height, width, channels)


def _unfilter(kind: int, line: np.ndarray, up: np.ndarray, bpp: int, source: str) -> np.ndarray:
    if kind == 0:
        return line.astype(np.uint8)
    if kind == 2:
        return ((line + up) & 255).astype(np.uint8)
    if kind == 1:  # Sub: a running sum per byte position within a pixel
        return (np.cumsum(line.reshape(-1, bpp), axis=0) & 255).astype(np.uint8).reshape(-1)
    if kind not in (3, 4):
        raise ValueError(f"{source}: corrupt PNG (unknown filter type {kind})")
    recon = [0] * len(line)
    values, above = line.tolist(), up.tolist()
    for i, x in enumerate(values):
        a = recon[i - bpp] if i >= bpp else 0
        b = above[i]
        if kind == 3:
            recon[i] = (x + (a + b) // 2) & 255
        else:
            c = above[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            recon[i] = (x + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return np.asarray(recon, np.uint8)


def encode_png(image: np.ndarray) -> bytes:
    """Encodes uint8 [H, W] or [H, W, C] (C in 1..4) as a PNG with filter type 0 (None)."""
    image = np.asarray(image)
    if image.dtype != np.uint8:
        raise TypeError(f"image must be uint8; got {image.dtype}")
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3 or image.shape[2] not in (1, 2, 3, 4) or 0 in image.shape:
        raise ValueError(f"image must have shape [H, W] or [H, W, C<=4]; got {image.shape}")
    height, width, channels = image.shape
    colour = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    raw = np.concatenate([np.zeros((height, 1), np.uint8), image.reshape(height, -1)], axis=1).tobytes()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    return PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def read_image(path: str | os.PathLike) -> np.ndarray:
    """Reads one image file as float32 [H, W, C] in [0, 1] (PNG, .npy, or JPEG via Pillow).

    Raises:
      ValueError: unreadable, corrupt or unsupported file, or non-finite / out-of-range values.
    """
    path = pathlib.Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            array = np.load(path, allow_pickle=False)
        else:
            data = path.read_bytes()
            if data.startswith(PNG_SIGNATURE):
                array = decode_png(data, str(path))
            else:
                array = _read_with_pillow(path)
    except (OSError, EOFError) as err:
        raise ValueError(f"cannot read image {path}: {err}") from err
    except ValueError as err:
        raise ValueError(f"cannot read image {path}: {err}") from err
    return _to_unit_float(array, str(path))


def _read_with_pillow(path: pathlib.Path) -> np.ndarray:
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError as err:
        raise ValueError(f"{path.suffix} images need Pillow, which is not installed (use PNG or .npy)") from err
    try:
        with Image.open(path) as image:
            return np.asarray(image.convert("RGBA" if "A" in image.getbands() else "RGB"))
    except UnidentifiedImageError as err:
        raise ValueError(f"not a readable image ({err})") from err


def _to_unit_float(array: np.ndarray, source: str) -> np.ndarray:
    if array.ndim == 2:
        array = array[..., None]
    if array.ndim != 3 or array.shape[2] not in (1, 2, 3, 4) or 0 in array.shape:
        raise ValueError(f"cannot read image {source}: shape must be [H, W] or [H, W, C<=4]; got {array.shape}")
    if array.dtype == np.uint8:
        return array.astype(np.float32) / 255.0
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"cannot read image {source}: dtype must be uint8 or float; got {array.dtype}")
    array = array.astype(np.float32)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"image {source} has NaN or infinite pixel values")
    if array.min() < 0.0 or array.max() > 1.0:
        raise ValueError(f"image {source}: float pixels must lie in [0, 1]; got {array.min()}..{array.max()}")
    return array


def to_model_input(image: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """float32 [H, W, C] in [0, 1] -> [h, w, c] = ``shape``: channels matched, bilinear resize."""
    h, w, c = (int(s) for s in shape)
    image = np.asarray(image, np.float32)
    if image.shape[2] in (2, 4):  # drop alpha
        image = image[..., :-1]
    if image.shape[2] != c:
        if c == 3 and image.shape[2] == 1:
            image = np.repeat(image, 3, axis=2)
        elif c == 1:
            image = image.mean(axis=2, keepdims=True)
        else:
            raise ValueError(f"cannot convert an image with {image.shape[2]} channels to {c}")
    if image.shape[:2] != (h, w):
        image = resize_bilinear(image, h, w)
    return np.ascontiguousarray(image, np.float32)


def resize_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize of [H, W, C] with half-pixel centres (edge-clamped)."""
    def axis(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        src = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, (src - lo).astype(np.float32)

    y0, y1, fy = axis(image.shape[0], height)
    x0, x1, fx = axis(image.shape[1], width)
    top = image[y0][:, x0] * (1 - fx)[None, :, None] + image[y0][:, x1] * fx[None, :, None]
    bottom = image[y1][:, x0] * (1 - fx)[None, :, None] + image[y1][:, x1] * fx[None, :, None]
    return (top * (1 - fy)[:, None, None] + bottom * fy[:, None, None]).astype(np.float32)


def load_images(paths: Sequence[str | os.PathLike], shape: Sequence[int]) -> np.ndarray:
    """Reads ``paths`` into float32 [N, *shape] (see ``read_image`` and ``to_model_input``)."""
    if not paths:
        raise ValueError("no image paths given")
    return np.stack([to_model_input(read_image(p), shape) for p in paths])


def load_image_folder(
    root: str | os.PathLike, shape: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Reads ``root/<class>/*.png|npy|jpg`` -> (images f32[N, *shape], labels i32[N], class names).

    Class ids follow the sorted folder names; files within a class are sorted by name.

    Raises:
      ValueError: ``root`` is not a directory, or holds no class folder with images, or an image is
        unreadable (the message names the file).
    """
    root = pathlib.Path(root)
    if not root.is_dir():
        raise ValueError(f"image folder {root} is not a directory")
    classes = sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    paths, labels, names = [], [], []
    for name in classes:
        files = sorted(f for f in (root / name).iterdir() if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file())
        if not files:
            continue
        names.append(name)
        paths += files
        labels += [len(names) - 1] * len(files)
    if not paths:
        raise ValueError(f"image folder {root} has no images (expected {root}/<class>/*{'|'.join(IMAGE_SUFFIXES)})")
    return load_images(paths, shape), np.asarray(labels, np.int32), tuple(names)
