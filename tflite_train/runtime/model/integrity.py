"""The integrity seal of an exported model: a sha256 of the whole file, stored inside it.

The exporter adds a metadata entry ``tflite_train_checksum`` of 64 ASCII zeros, hashes the whole
file, and writes the hex digest over those zeros (``seal``). A reader (``check_model_bytes``) checks,
before any interpreter sees the bytes: the size limit, the ``TFL3`` identifier, the flatbuffer
offsets it walks to find the metadata (bounds-checked), the digest of the file with the
checksum field zeroed again, and then the whole flatbuffer's structure and indices
(``flatbuffer_verify.verify_model``), so that a file crafted and re-sealed cannot reach native code
either. A truncated, bit-flipped or spliced file is refused with a one-line
reason; a model without the seal (exported before it existed, or not by this project) is refused
too, since nothing vouches for its bytes.
"""

from __future__ import annotations

import hashlib

from tflite_train.contract import CHECKSUM_NAME
from tflite_train.runtime.model.flatbuffer_verify import FlatbufferError, verify_model
from tflite_train.runtime.model.metadata import metadata_spans

PLACEHOLDER = b"0" * 64
MAX_MODEL_BYTES = 512 * 1024 * 1024
"""Largest model file accepted (a 512 MiB flatbuffer is far beyond any on-device CNN)."""


MAX_VERIFIED = 64
_VERIFIED: set[bytes] = set()
"""Digests of the files that passed ``verify_model`` in this process: the digest matched, so the bytes are
the same ones (sha256 over all of them), and loading a model again (``predict`` after ``adapt``, the
benchmarks) does not verify it again."""


class ModelIntegrityError(ValueError):
    """The model file is not the one the exporter wrote (or not an exported model at all)."""


def _digest(data: bytes, start: int) -> str:
    """sha256 of ``data`` with the checksum field at ``start`` read as ``PLACEHOLDER``, hashed in place
    (no copy of the file: a copy would add its size to the peak memory of every command)."""
    view = memoryview(data)
    digest = hashlib.sha256(view[:start])
    digest.update(PLACEHOLDER)
    digest.update(view[start + len(PLACEHOLDER):])
    return digest.hexdigest()


def seal(data: bytes) -> bytes:
    """Writes the file's digest into its checksum entry (a placeholder, or an older digest: re-sealing
    a model whose other metadata was rewritten, e.g. by a test).

    Raises:
      ValueError: ``data`` has no 64-byte checksum entry to fill.
    """
    start, n = metadata_spans(data).get(CHECKSUM_NAME, (0, 0))
    if n != len(PLACEHOLDER):
        raise ValueError(f"model has no {CHECKSUM_NAME!r} entry of {len(PLACEHOLDER)} bytes to seal")
    digest = _digest(data, start).encode()
    return data[:start] + digest + data[start + n:]


def check_model_bytes(data: bytes, source: str = "model") -> None:
    """Refuses bytes that are not an intact exported model (module docstring), naming ``source``.

    Raises:
      ModelIntegrityError: too large, not a TFLite flatbuffer, truncated, no seal, digest mismatch.
    """
    if len(data) > MAX_MODEL_BYTES:
        raise ModelIntegrityError(f"{source}: {len(data)} bytes exceeds the {MAX_MODEL_BYTES}-byte limit")
    try:
        spans = metadata_spans(data)
    except ValueError as err:
        raise ModelIntegrityError(f"{source}: {err}") from None
    if CHECKSUM_NAME not in spans:
        raise ModelIntegrityError(f"{source}: no integrity checksum (not exported by this version of tflite-train); "
                                  "re-export it")
    start, n = spans[CHECKSUM_NAME]
    stored = data[start:start + n]
    if n != len(PLACEHOLDER) or _digest(data, start).encode() != stored:
        raise ModelIntegrityError(f"{source}: checksum mismatch: the file is corrupted or was modified after export")
    if stored in _VERIFIED:  # these very bytes passed the structural check in this process already
        return
    try:  # a file crafted and re-sealed passes the digest: its structure is checked too
        verify_model(data)
    except FlatbufferError as err:
        raise ModelIntegrityError(f"{source}: malformed model: {err}") from None
    if len(_VERIFIED) >= MAX_VERIFIED:
        _VERIFIED.clear()
    _VERIFIED.add(stored)
