"""The model input from a decoded image: the one preprocessing Python and Java share.

Preprocessing to the model input (``to_model_input``; the Java ``ImagePreprocessor`` implements the
same algorithm, pinned by a golden file: see ``tests/runtime/images/test_image_parity.py``). With the source
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

import os
from collections.abc import Sequence

import numpy as np

from tflite_train.runtime.errors import ImageError
from tflite_train.runtime.images.images import DEFAULT_LIMITS, ImageLimits, decode_image

LUMA = (0.299, 0.587, 0.114)
"""ITU-R BT.601 luma weights of R, G, B (one-channel models)."""

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
