"""The embedded self-test archive as untrusted input: opened safely and checked against the model before use.

``load_selftest_archive(data, source)`` opens the ``np.savez`` archive of the ``tflite_train_selftest``
metadata entry (no pickle) after checking it is a zip whose members are ``.npy`` files of bounded total
size; ``check_selftest_vectors(vectors, model, source)`` checks every array the replay reads: dtype
kind, shape, finiteness and consistency with the model (image shape = the model's input, prototypes
of ``feature_dim`` columns and at most ``class_capacity`` rows, labels among those rows, a channel mask
of the candidates' total channels, a bounded number of steps, finite non-negative tolerances).

A damaged or crafted archive is refused with one line, "<file>: embedded self-test is damaged: <what>"
(``SelftestError``), in every command that reads it; a damaged file is refused earlier, by its
seal (``integrity.check_model_bytes``), in every command.
"""

from __future__ import annotations

import io
import math
import zipfile
from collections.abc import Mapping

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.errors import UserError

__all__ = ["MAX_SELFTEST_BYTES", "MAX_SELFTEST_STEPS", "SelftestError", "check_selftest_vectors", "load_selftest_archive"]

MAX_SELFTEST_BYTES = 256 * 2**20
"""Largest total uncompressed size of the archive's members."""
MAX_SELFTEST_STEPS = 1000
MAX_SELFTEST_IMAGES = 4096


class SelftestError(UserError):
    """The embedded self-test archive is damaged, malformed, or does not fit the model."""


def load_selftest_archive(data: bytes, source: str = "model") -> dict[str, np.ndarray]:
    """The arrays of a self-test archive (``np.savez`` bytes).

    Raises:
      SelftestError: not a zip, a member that is not ``.npy``, too large, or unreadable by ``np.load``
        without pickle.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            total = sum(m.file_size for m in members)
            bad = [m.filename for m in members if not m.filename.endswith(".npy")]
            if bad:
                raise SelftestError(f"{source}: embedded self-test is damaged: member {bad[0][:60]!r} is not an array")
            if total > MAX_SELFTEST_BYTES:
                raise SelftestError(f"{source}: embedded self-test is damaged: {total} bytes uncompressed, over the "
                                    f"{MAX_SELFTEST_BYTES}-byte limit")
            if archive.testzip() is not None:
                raise SelftestError(f"{source}: embedded self-test is damaged: a member fails its CRC")
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            return {k: archive[k] for k in archive.files}
    except SelftestError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, KeyError, NotImplementedError,
            RuntimeError, MemoryError) as err:
        raise SelftestError(f"{source}: embedded self-test is damaged: {type(err).__name__}: {str(err)[:200]}") from None


def _array(vectors: Mapping[str, np.ndarray], key: str, kinds: str, shape: tuple[int | None, ...], source: str) -> np.ndarray:
    if key not in vectors:
        raise SelftestError(f"{source}: embedded self-test is damaged: it has no {key!r} array")
    value = vectors[key]
    if value.dtype.kind not in kinds or value.ndim != len(shape) or any(
            want is not None and got != want for got, want in zip(value.shape, shape)):
        want = "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"
        raise SelftestError(f"{source}: embedded self-test is damaged: {key!r} is {value.dtype} {list(value.shape)}; "
                            f"expected {want} of kind {kinds!r}")
    if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
        raise SelftestError(f"{source}: embedded self-test is damaged: {key!r} holds NaN or Inf")
    return value


def check_selftest_vectors(vectors: Mapping[str, np.ndarray], *, input_shape: tuple[int, int, int], feature_dim: int,
                           capacity: int, mask_length: int, state_names: tuple[str, ...] | None = None,
                           source: str = "model") -> None:
    """Checks the arrays the replay (``selftest.run_procedure``) reads against the model.

    Args:
      vectors: The archive's arrays.
      input_shape: The model's (H, W, C).
      feature_dim, capacity: The head's D and K.
      mask_length: The ``set_selection`` mask length (sum of the candidates' output channels).
      state_names: The model's state variables (``state/<name>`` goldens must name one), or None.

    Raises:
      SelftestError: naming the array and what is wrong.
    """
    prototypes = _array(vectors, C.PROTOTYPES, "f", (None, feature_dim), source)
    k = prototypes.shape[0]
    if not 1 <= k <= capacity:
        raise SelftestError(f"{source}: embedded self-test is damaged: {k} prototypes for a head of 1..{capacity}")
    if C.IMAGES in vectors:
        images = _array(vectors, C.IMAGES, "f", (None, *input_shape), source)
        n = images.shape[0]
    else:
        seed = _array(vectors, "seed", "iu", (), source)
        shape = _array(vectors, "image_shape", "iu", (4,), source)
        value_range = _array(vectors, "image_range", "f", (2,), source)
        if int(seed) < 0:
            raise SelftestError(f"{source}: embedded self-test is damaged: 'seed' is {int(seed)}")
        if tuple(int(s) for s in shape[1:]) != tuple(input_shape) or not 1 <= int(shape[0]) <= MAX_SELFTEST_IMAGES:
            raise SelftestError(f"{source}: embedded self-test is damaged: 'image_shape' is {shape.tolist()}; the model "
                                f"takes [1..{MAX_SELFTEST_IMAGES}, {', '.join(map(str, input_shape))}]")
        if not value_range[0] < value_range[1]:
            raise SelftestError(f"{source}: embedded self-test is damaged: 'image_range' {value_range.tolist()}")
        n = int(shape[0])
    labels = _array(vectors, C.LABELS, "iu", (n,), source)
    if labels.size and (labels.min() < 0 or labels.max() >= k):
        raise SelftestError(f"{source}: embedded self-test is damaged: 'labels' must be in 0..{k - 1}")
    _array(vectors, C.CHANNEL_MASK, "iuf", (mask_length,), source)
    steps = _array(vectors, "steps", "iu", (), source)
    if not 0 <= int(steps) <= MAX_SELFTEST_STEPS:
        raise SelftestError(f"{source}: embedded self-test is damaged: 'steps' is {int(steps)}, not in "
                            f"0..{MAX_SELFTEST_STEPS}")
    for key, value in vectors.items():
        if key.startswith("tolerance/"):
            tol = _array(vectors, key, "f", (), source)
            if not (math.isfinite(float(tol)) and float(tol) >= 0):
                raise SelftestError(f"{source}: embedded self-test is damaged: {key!r} is {float(tol)}")
        elif key.startswith("state/") and state_names is not None and key.split("/", 1)[1] not in state_names:
            raise SelftestError(f"{source}: embedded self-test is damaged: {key!r} names no state variable of the model")
        elif "/" in key and value.dtype.kind not in "iuf":
            raise SelftestError(f"{source}: embedded self-test is damaged: {key!r} is {value.dtype}, not numeric")
