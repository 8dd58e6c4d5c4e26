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

Preprocessing to the model input (``to_model_input``; the Java ``ImagePreprocessor`` implements the
same algorithm, pinned by a golden file: see ``tests/runtime/test_image_parity.py``). With the source
W x H in 0..255 units (uint8 as is, float [0, 1] times 255), the model's w x h x c and its input range
[low, high]:

* alpha is composited on white, per source pixel: c' = c * a / 255 + (255 - a);
* centre crop to the model's aspect ratio (a window of fractional size): with r = w / h, if W / H > r
  the window is (H r) x H, else W x (W / r), at x0 = (W - cropW) / 2, y0 = (H - cropH) / 2;
* bilinear sampling with pixel centres aligned: x_src = x0 + (x + 0.5) cropW / w - 0.5 (same in y),
  clamped to [0, W - 1]; x_lo = floor(x_src), x_hi = min(x_lo + 1, W - 1), f = x_src - x_lo;
  v = (1 - f_y) ((1 - f_x) p(x_lo, y_lo) + f_x p(x_hi, y_lo)) + f_y ((1 - f_x) p(x_lo, y_hi) + f_x p(x_hi, y_hi))
  (no antialiasing: each output pixel reads 4 source pixels, so a large photo costs the same as a small one);
* grey sources are repeated to RGB; c = 3: v_out = low + (high - low) / 255 * v;
  c = 1: v_out = low + (high - low) / 255 * (0.299 R + 0.587 G + 0.114 B) (ITU-R BT.601 luma).

All of it runs in float64 and is cast to float32 at the end (as the Java code, in double).
"""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import pathlib
import stat
import struct
import warnings
from collections.abc import Sequence

import numpy as np

from tflite_train.runtime.errors import ImageError, ImageFolderError
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
LUMA = (0.299, 0.587, 0.114)


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

    with warnings.catch_warnings():
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


def _npy_to_array(data: bytes, source: str, limits: ImageLimits) -> np.ndarray:
    if not data.startswith(b"\x93NUMPY"):
        raise ImageError(f"image {source} is not a .npy array file (bad magic)")
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise ImageError(f"image {source} is a corrupt .npy file ({err})") from err
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


def to_model_input(image: np.ndarray, shape: Sequence[int], value_range: Sequence[float] = (0.0, 1.0)) -> np.ndarray:
    """An image -> the model's float32 [h, w, c] input (module docstring: alpha on white, centre crop,
    bilinear, luma for c = 1, mapped to ``value_range``).

    Args:
      image: uint8 [H, W(, C)] (0..255) or float [H, W(, C)] in [0, 1]; C = 1 grey, 2 grey + alpha,
        3 RGB, 4 RGBA.
      shape: The model input (h, w, c), c in (1, 3).
      value_range: (low, high) of the model input (metadata ``input.range``).
    """
    h, w, c = (int(s) for s in shape)
    if c not in (1, 3) or h < 1 or w < 1:
        raise ValueError(f"model input must be [h, w, 1|3]; got {tuple(shape)}")
    image = np.asarray(image)
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3 or image.shape[2] not in (1, 2, 3, 4) or 0 in image.shape:
        raise ValueError(f"image must be [H, W] or [H, W, C<=4]; got {image.shape}")
    height, width = image.shape[:2]
    aspect = w / h
    crop_w, crop_h = float(width), float(height)
    if width / height > aspect:
        crop_w = height * aspect
    else:
        crop_h = width / aspect
    x0, y0 = (width - crop_w) / 2, (height - crop_h) / 2
    ylo, yhi, fy = _taps(y0 + (np.arange(h) + 0.5) * crop_h / h - 0.5, height)
    xlo, xhi, fx = _taps(x0 + (np.arange(w) + 0.5) * crop_w / w - 0.5, width)
    fx, fy = fx[None, :, None], fy[:, None, None]

    def pixels(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return _rgb_on_white(image[rows[:, None], cols[None, :]])

    top = (1 - fx) * pixels(ylo, xlo) + fx * pixels(ylo, xhi)
    bottom = (1 - fx) * pixels(yhi, xlo) + fx * pixels(yhi, xhi)
    rgb = (1 - fy) * top + fy * bottom
    low, high = (float(v) for v in value_range)
    scale = (high - low) / 255.0
    if c == 1:
        rgb = (LUMA[0] * rgb[..., 0] + LUMA[1] * rgb[..., 1] + LUMA[2] * rgb[..., 2])[..., None]
    return np.ascontiguousarray(low + scale * rgb, dtype=np.float32)


def _taps(src: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src = np.clip(src, 0, n - 1)
    lo = np.floor(src).astype(np.int64)
    return lo, np.minimum(lo + 1, n - 1), src - lo


def _rgb_on_white(pixels: np.ndarray) -> np.ndarray:
    """[..., C] pixels -> float64 [..., 3] RGB in 0..255 units, alpha composited on white."""
    values = pixels.astype(np.float64)
    if pixels.dtype != np.uint8:
        values = values * 255.0
    channels = values.shape[-1]
    colour = values[..., :1].repeat(3, axis=-1) if channels in (1, 2) else values[..., :3]
    if channels in (2, 4):
        alpha = values[..., -1:]
        colour = colour * alpha / 255.0 + (255.0 - alpha)
    return colour


def load_images(paths: Sequence[str | os.PathLike], shape: Sequence[int], value_range: Sequence[float] = (0.0, 1.0),
                limits: ImageLimits = DEFAULT_LIMITS, progress=None) -> np.ndarray:
    """Reads ``paths`` into float32 [N, *shape] (``decode_image`` then ``to_model_input``), one file at a time.

    ``progress``, if given, is called with no argument after each file (a progress bar's update).
    """
    if not paths:
        raise ImageError("no image paths given")
    shape = tuple(int(s) for s in shape)
    needed = 4 * len(paths) * int(np.prod(shape))
    if needed > limits.max_set_bytes:
        raise ImageError(f"{len(paths)} images need {needed} bytes at the model's input size {shape}; "
                         f"the limit is {limits.max_set_bytes} (use fewer images)")
    out = np.empty((len(paths), *shape), np.float32)
    for i, path in enumerate(paths):
        out[i] = to_model_input(decode_image(path, limits), shape, value_range)
        if progress is not None:
            progress()
    return out


def _is_hidden(name: str) -> bool:
    """Hidden files and folders, including macOS AppleDouble ``._x`` companions and ``.DS_Store``."""
    return name.startswith(".")


def _has_image_suffix(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


def _holds_images(folder: pathlib.Path, depth: int = 3) -> bool:
    """True when ``folder`` or its subfolders (to ``depth`` levels) name an image file."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    for entry in entries:
        if _is_hidden(entry.name):
            continue
        if _has_image_suffix(entry.name) and not entry.is_dir():
            return True
        if depth > 0 and entry.is_dir() and _holds_images(pathlib.Path(entry.path), depth - 1):
            return True
    return False


@dataclasses.dataclass(frozen=True)
class ImageFolder:
    """The files of ``root/<class>/<image>`` a reader uses.

    Attributes:
      root: The folder.
      class_names: Class folder names, sorted (class id = position).
      files: Per class, its image files, sorted by name.
    """

    root: pathlib.Path
    class_names: tuple[str, ...]
    files: tuple[tuple[pathlib.Path, ...], ...]

    @property
    def paths(self) -> list[pathlib.Path]:
        """All image files, class by class."""
        return [p for group in self.files for p in group]

    @property
    def labels(self) -> np.ndarray:
        """i32 [N]: the class id of each of ``paths``."""
        return np.asarray([k for k, group in enumerate(self.files) for _ in group], np.int32)


def scan_image_folder(root: str | os.PathLike) -> ImageFolder:
    """Lists ``root/<class>/<image>``; an image is a file whose name ends in one of ``IMAGE_SUFFIXES``.

    Hidden entries (names starting with "."; AppleDouble ``._x`` files, ``.DS_Store``) are skipped
    silently; other files with other endings are skipped with a logged warning. A class folder never
    disappears silently: one without images of its own is an error, naming the subfolders that hold
    images if there are any; subfolders of a class folder that has images are skipped with a warning.

    Raises:
      ImageFolderError: ``root`` is not a directory, holds images directly instead of class folders,
        holds no class folder, or a class folder has no images.
    """
    root = pathlib.Path(root)
    shown = printable(str(root))
    try:
        if not stat.S_ISDIR(os.stat(root).st_mode):
            raise ImageFolderError(f"image folder {shown} is not a directory")
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError as err:
        raise ImageFolderError(f"image folder {shown} does not exist") from err
    except OSError as err:
        raise ImageFolderError(f"cannot read image folder {shown}: {err.strerror or err}") from err
    classes, loose = [], []
    for entry in entries:
        if _is_hidden(entry.name):
            continue
        if entry.is_dir():
            classes.append(entry.name)
        elif _has_image_suffix(entry.name):
            loose.append(entry.name)
        else:
            LOG.warning("skipping %s: not a class folder", printable(entry.path))
    if loose:
        raise ImageFolderError(
            f"image folder {shown} holds images directly ({printable(loose[0])}{', ...' if len(loose) > 1 else ''}); "
            f"put each class's images in a folder of their own: {shown}/<class>/<image>")
    if not classes:
        raise ImageFolderError(f"image folder {shown} has no class folders (expected {shown}/<class>/<image>)")
    files = []
    for name in classes:
        folder = root / name
        images, subfolders = [], []
        try:
            class_entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as err:
            raise ImageFolderError(f"cannot read class folder {printable(str(folder))}: {err.strerror or err}") from err
        for entry in class_entries:
            if _is_hidden(entry.name):
                continue
            if entry.is_dir():
                subfolders.append(entry.name)
            elif _has_image_suffix(entry.name):
                images.append(pathlib.Path(entry.path))
            else:
                LOG.warning("skipping %s: not an image (known endings: %s)", printable(entry.path), " ".join(IMAGE_SUFFIXES))
        nested = [s for s in subfolders if _holds_images(folder / s)]
        if not images:
            detail = (f"; images are only in its subfolder(s) {', '.join(printable(s) for s in nested)}: "
                      "a class's images must lie directly in its folder") if nested else ""
            raise ImageFolderError(f"class folder {printable(str(folder))} has no images{detail}")
        for sub in subfolders:
            LOG.warning("skipping subfolder %s: a class's images must lie directly in its folder",
                        printable(str(folder / sub)))
        files.append(tuple(images))
    return ImageFolder(root, tuple(classes), tuple(files))


def load_image_folder(
    root: str | os.PathLike, shape: Sequence[int], value_range: Sequence[float] = (0.0, 1.0),
    limits: ImageLimits = DEFAULT_LIMITS, progress=None,
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Reads ``root/<class>/<image>`` -> (images f32 [N, *shape], labels i32 [N], class names).

    Class ids follow the sorted folder names; files within a class are sorted by name (see
    ``scan_image_folder`` for what is skipped and what is an error, ``decode_image`` for the files).

    Raises:
      ImageFolderError, ImageError: as ``scan_image_folder`` and ``decode_image`` (naming the folder or file).
    """
    folder = scan_image_folder(root)
    return load_images(folder.paths, shape, value_range, limits, progress), folder.labels, folder.class_names
