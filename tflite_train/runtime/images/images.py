"""Reading labelled image folders on the device: every image file through Pillow, plus ``.npy`` arrays.

Formats: PNG, JPEG, WebP, BMP, GIF (first frame), TIFF (first page), read by content (a JPEG named
``x.png`` is read as the JPEG it is); no other Pillow plugin is ever asked to parse a file. ``.npy``
files hold one image as uint8 [H, W(, C)] (0..255) or float [H, W(, C)] in [0, 1], read with
``allow_pickle=False``.

Decoding (``decode_image``), in this order:

1. The file must be a regular file (``os.stat`` before opening, ``O_NONBLOCK`` and ``fstat`` after:
   a FIFO, device or directory is refused and can never block) of 1 .. ``max_file_bytes`` bytes.
2. Pillow opens it with ``Image.MAX_IMAGE_PIXELS = max_pixels`` (set for the read, then restored)
   and its ``DecompressionBombWarning`` turned into an error; W * H > ``max_pixels`` is refused
   from the header, before any pixel is decoded.
3. EXIF orientation is applied (``ImageOps.exif_transpose``): pixels come out the way a photo viewer
   shows them.
4. Modes become uint8 grey, RGB or RGBA: "1" -> L (0/255); P and PA -> RGBA when the palette has
   transparency, else RGB; LA / La / RGBa -> RGBA; CMYK, YCbCr, LAB, HSV, RGBX -> RGB (Pillow's
   conversions); 16-bit grey (I;16*, and I with values in 0..65535) -> 8 bit by round(v / 257), i.e.
   (2 v + 257) // 514; 16-bit RGB(A) PNG/TIFF are given by Pillow as 8-bit with the high byte
   (v >> 8); float pixels (mode F) and 32-bit integers outside 0..65535 are refused. Embedded ICC
   colour profiles are not applied: pixel values are taken as stored (as sRGB).

The model input is made by ``tflite_train.runtime.images.model_input``; class folders are listed by
``tflite_train.runtime.images.image_folder``.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import math
import os
import pathlib
import re
import stat
import struct
import warnings

import numpy as np

from tflite_train.runtime.errors import ImageError
from tflite_train.runtime.text import printable

LOG = logging.getLogger(__name__)

PILLOW_FORMATS = ("PNG", "JPEG", "WEBP", "BMP", "GIF", "TIFF")
"""The only Pillow plugins that may parse a file."""
PILLOW_SUFFIXES = (".png", ".jpg", ".jpeg", ".jpe", ".webp", ".bmp", ".gif", ".tif", ".tiff")
IMAGE_SUFFIXES = PILLOW_SUFFIXES + (".npy",)
"""File name endings (case-insensitive) that a folder reader treats as images."""
MAX_IMAGE_PIXELS = 50_000_000
"""Largest accepted W * H (e.g. 8660 x 5773): a 50-megapixel photo. Decoding one as RGB takes 150 MB."""
MAX_FILE_BYTES = 64 * 2**20
"""Largest accepted image file (64 MiB)."""
MAX_SET_BYTES = 2**30
"""Largest float32 array of preprocessed images read at once (1 GiB: 21,845 images at 64 x 64 x 3)."""


@dataclasses.dataclass(frozen=True)
class ImageLimits:
    """Bounds on what ``decode_image`` accepts.

    Attributes:
      max_pixels: Largest W * H; Pillow's ``MAX_IMAGE_PIXELS`` is set to it for every read.
      max_file_bytes: Largest file size in bytes.
      max_set_bytes: Largest float32 array ``load_images`` may allocate (N images at the model input),
        checked before any file is read.
    """

    max_pixels: int = MAX_IMAGE_PIXELS
    max_file_bytes: int = MAX_FILE_BYTES
    max_set_bytes: int = MAX_SET_BYTES

    def __post_init__(self) -> None:
        for name in ("max_pixels", "max_file_bytes", "max_set_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1; got {value!r}")


DEFAULT_LIMITS = ImageLimits()


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The bytes of a regular file of 1..``max_bytes`` bytes, never blocking on a FIFO or device.

    Raises:
      ImageError: missing, not a regular file, empty, too large, or unreadable (names the file).
    """
    shown = printable(os.fspath(path))
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ImageError(f"image {shown} is {_file_kind(info.st_mode)}, not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            info = os.fstat(fd)  # the file opened may differ from the one stat'ed (a swapped name)
            if not stat.S_ISREG(info.st_mode):
                raise ImageError(f"image {shown} is {_file_kind(info.st_mode)}, not a regular file")
            if info.st_size > max_bytes:
                raise ImageError(f"image {shown} has {info.st_size} bytes; the limit is {max_bytes}")
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = handle.read(max_bytes + 1)
        finally:
            os.close(fd)
    except ImageError:
        raise
    except OSError as err:
        raise ImageError(f"cannot read image {shown}: {err.strerror or err}") from err
    if not data:
        raise ImageError(f"image {shown} is empty (0 bytes)")
    if len(data) > max_bytes:
        raise ImageError(f"image {shown} has more than {max_bytes} bytes (the limit)")
    return data


# Exceptions Pillow's decoders raise on malformed input (besides its own DecompressionBombError).
_DECODER_ERRORS = (OSError, ValueError, SyntaxError, EOFError, struct.error, IndexError, KeyError, TypeError,
                   ZeroDivisionError, OverflowError, MemoryError, RecursionError)


def _pillow_to_array(data: bytes, source: str, limits: ImageLimits) -> np.ndarray:
    from PIL import Image

    previous, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, limits.max_pixels  # restored below
    try:
        return _pillow_decode(data, source, limits)
    finally:
        Image.MAX_IMAGE_PIXELS = previous


def _pillow_decode(data: bytes, source: str, limits: ImageLimits) -> np.ndarray:
    from PIL import Image, ImageOps, UnidentifiedImageError

    with warnings.catch_warnings(record=True) as caught:  # Pillow's warnings go to the log, not to stderr
        warnings.simplefilter("always")
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data), formats=PILLOW_FORMATS) as image:
                width, height = image.size
                if width < 1 or height < 1:
                    raise ImageError(f"image {source} has no pixels ({width} x {height})")
                if width * height > limits.max_pixels:
                    raise ImageError(f"image {source} has {width} x {height} = {width * height} pixels; "
                                     f"the limit is {limits.max_pixels}")
                image.load()
                ImageOps.exif_transpose(image, in_place=True)  # no copy when there is nothing to turn
                return _mode_to_uint8(image, source)
        except ImageError:
            raise
        except UnidentifiedImageError as err:
            raise ImageError(f"image {source} is not a {'/'.join(PILLOW_FORMATS)} image, or its header is "
                             "truncated (Pillow cannot identify it)") from err
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
            raise ImageError(f"image {source} is refused as a decompression bomb: {err}") from err
        except _DECODER_ERRORS as err:
            raise ImageError(f"image {source} is corrupt or truncated ({type(err).__name__}: {err})") from err
        finally:
            for warning in caught:
                LOG.info("image %s: %s", source, printable(str(warning.message)))


def _mode_to_uint8(image, source: str) -> np.ndarray:
    """A loaded PIL image -> uint8 [H, W, 1|3|4] (module docstring, step 4)."""
    mode = image.mode
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        values = np.asarray(image).astype(np.int64)
        if values.size and (values.min() < 0 or values.max() > 65535):
            raise ImageError(f"image {source}: 32-bit integer pixels outside 0..65535 are not supported")
        return ((2 * values + 257) // 514).astype(np.uint8)[..., None]
    if mode == "F":
        raise ImageError(f"image {source}: floating-point pixels (mode F) are not supported")
    if mode == "1":
        image = image.convert("L")
    elif mode in ("P", "PA"):
        image = image.convert("RGBA" if mode == "PA" or "transparency" in image.info else "RGB")
    elif mode in ("LA", "La", "RGBa"):
        image = image.convert("RGBA")
    elif mode not in ("L", "RGB", "RGBA"):
        image = image.convert("RGB")
    return _to_numpy(image)


STRIP_ROWS = 256


def _to_numpy(image) -> np.ndarray:
    """uint8 [H, W, bands] copied in strips of rows: ``np.asarray`` (via one ``tobytes``) would hold two
    more full copies of the pixels at its peak, 300 MB for a 50-megapixel RGB photo."""
    width, height = image.size
    bands = len(image.getbands())
    out = np.empty((height, width, bands), np.uint8)
    for top in range(0, height, STRIP_ROWS):
        bottom = min(height, top + STRIP_ROWS)
        strip = image.crop((0, top, width, bottom)).tobytes()
        out[top:bottom] = np.frombuffer(strip, np.uint8).reshape(bottom - top, width, bands)
    return out


_NPY_HEADER = re.compile(r"\{'descr': '([<>|=]?[a-zA-Z]\d*)', 'fortran_order': (?:True|False), "
                         r"'shape': \(((?:\d{1,12}, ?)*\d{0,12})\), ?\} *\n?")
"""The header ``np.save`` writes (keys sorted, a literal dict); anything else is refused before numpy parses it."""


def _check_npy_header(data: bytes, source: str) -> None:
    """Refuses a ``.npy`` file whose header is not the one ``np.save`` writes, or whose data size disagrees
    with its shape, before ``np.load`` sees it (numpy parses the header with ``ast``/``tokenize``, whose
    errors on a damaged header are not ValueErrors, and allocates the whole array before reading it)."""
    if not data.startswith(b"\x93NUMPY") or len(data) < 10:
        raise ImageError(f"image {source} is not a .npy array file (bad magic)")
    major = data[6]
    if major not in (1, 2, 3):
        raise ImageError(f"image {source} is a .npy file of unknown version {major}")
    size_bytes = 2 if major == 1 else 4
    start = 8 + size_bytes
    length = int.from_bytes(data[8:start], "little")
    if start + length > len(data):
        raise ImageError(f"image {source} is a corrupt .npy file (header of {length} bytes beyond the file)")
    try:
        header = data[start:start + length].decode("utf-8" if major == 3 else "latin-1")
    except UnicodeDecodeError as err:
        raise ImageError(f"image {source} is a corrupt .npy file (header is not text)") from err
    match = _NPY_HEADER.fullmatch(header)
    if match is None:
        raise ImageError(f"image {source} is a corrupt .npy file (header {printable(header[:60])!r} is not np.save's)")
    try:
        itemsize = np.dtype(match.group(1)).itemsize
    except TypeError as err:
        raise ImageError(f"image {source} is a .npy file of unknown dtype {match.group(1)!r}") from err
    shape = [int(d) for d in match.group(2).replace(" ", "").split(",") if d]
    expected = itemsize * math.prod(shape)
    if expected != len(data) - start - length:
        raise ImageError(f"image {source} is a corrupt .npy file (shape {tuple(shape)} needs {expected} bytes of "
                         f"data; it has {len(data) - start - length})")


def _npy_to_array(data: bytes, source: str, limits: ImageLimits) -> np.ndarray:
    _check_npy_header(data, source)
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as err:
        raise ImageError(f"image {source} is a corrupt .npy file ({type(err).__name__}: {err})") from err
    if array.ndim == 2:
        array = array[..., None]
    if array.ndim != 3 or array.shape[2] not in (1, 2, 3, 4) or 0 in array.shape:
        raise ImageError(f"image {source}: .npy shape must be [H, W] or [H, W, C<=4]; got {array.shape}")
    if array.shape[0] * array.shape[1] > limits.max_pixels:
        raise ImageError(f"image {source} has {array.shape[0] * array.shape[1]} pixels; the limit is {limits.max_pixels}")
    if array.shape[2] == 2:  # grey + alpha -> RGBA
        array = np.concatenate([array[..., :1].repeat(3, axis=2), array[..., 1:]], axis=2)
    if array.dtype == np.uint8:
        return array
    if not np.issubdtype(array.dtype, np.floating):
        raise ImageError(f"image {source}: .npy dtype must be uint8 or float; got {array.dtype}")
    array = array.astype(np.float32)
    if not np.all(np.isfinite(array)):
        raise ImageError(f"image {source} has NaN or infinite pixel values")
    if array.min() < 0.0 or array.max() > 1.0:
        raise ImageError(f"image {source}: float pixels must lie in [0, 1]; got {array.min()}..{array.max()}")
    return array


def decode_image(path: str | os.PathLike, limits: ImageLimits = DEFAULT_LIMITS) -> np.ndarray:
    """Reads one image file (module docstring, steps 1-4).

    Returns:
      uint8 [H, W, C] (C = 1 grey, 3 RGB, 4 RGBA) for Pillow formats and uint8 ``.npy``; float32
      [H, W, C] in [0, 1] for float ``.npy`` (a 2-channel ``.npy`` is grey + alpha, returned as RGBA).

    Raises:
      ImageError: a non-regular, empty, too large, corrupt, truncated or unsupported file, a
        decompression bomb, or non-finite / out-of-range ``.npy`` values; the message names the file.
    """
    source = printable(os.fspath(path))
    data = read_regular_file(path, limits.max_file_bytes)
    if pathlib.Path(path).suffix.lower() == ".npy" or data.startswith(b"\x93NUMPY"):
        return _npy_to_array(data, source, limits)
    return _pillow_to_array(data, source, limits)


def read_image(path: str | os.PathLike, limits: ImageLimits = DEFAULT_LIMITS) -> np.ndarray:
    """Reads one image as float32 [H, W, C] in [0, 1] (``decode_image`` / 255 for uint8 files)."""
    array = decode_image(path, limits)
    return array.astype(np.float32) / np.float32(255.0) if array.dtype == np.uint8 else array
