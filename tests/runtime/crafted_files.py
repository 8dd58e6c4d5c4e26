"""Crafted files for the hostile-input tests: checkpoints with a rewritten header and a valid digest,
models with rewritten metadata or self-test and a valid seal (TF-free; Pi env too)."""

from __future__ import annotations

import hashlib
import json
import pathlib
import struct
from typing import Any

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train import contract as C
from tflite_train.runtime.checkpoint.checkpoint import CHECKPOINT_FORMAT_VERSION, CHECKPOINT_MAGIC, checkpoint_arrays, encode_checkpoint
from tflite_train.runtime.model.integrity import seal
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.runtime.model.metadata import metadata_spans, read_metadata
from tflite_train.sparse.selection import Selection

PREFIX = struct.Struct("<8sII")
MODEL = "tiny_adam_33"
CLASS_NAMES = ("cat", "dog", "owl")


def adapted_checkpoint(model: TrainableModel, names: tuple[str, ...] = CLASS_NAMES) -> bytes:
    """A valid checkpoint of ``model`` with a 3-class head and 3 channels of its last candidate selected."""
    rng = np.random.default_rng(25)
    model.reset_state()
    model.set_head(rng.normal(size=(len(names), model.feature_dim)).astype(np.float32))
    layer = model.candidates[-1]
    selection = Selection((layer,), {layer: (0, 3, 5)}, "fixed")
    model.set_selection({layer: [0, 3, 5]})
    data = encode_checkpoint(model.metadata[C.F_MODEL_ID], selection, checkpoint_arrays(model, selection), False, names)
    model.reset_state()
    return data


def replay_checkpoint(model: TrainableModel, rows: int = 5, names: tuple[str, ...] = CLASS_NAMES,
                      images: tuple[int, ...] | None = None) -> bytes:
    """``adapted_checkpoint`` with a replay memory: ``rows`` seeded activations at the model's first cut, the
    images' labels cycling over the classes, under a budget of exactly their bytes; ``images``: each row's image
    (None: one plain view per row)."""
    from tflite_train.runtime.checkpoint.checkpoint import decode_checkpoint
    from tflite_train.runtime.adaptation.replay_memory import ReplayMemory

    rng = np.random.default_rng(42)
    cut = model.cached_cuts[0]
    index = np.arange(rows, dtype=np.int32) if images is None else np.asarray(images, np.int32)
    memory = ReplayMemory(cut.layer, cut.index, cut.shape, rows * cut.bytes_per_image,
                          rng.normal(size=(rows, *cut.shape)).astype(np.float32),
                          (index % len(names)).astype(np.int32), index)
    plain = decode_checkpoint(adapted_checkpoint(model, names))
    return encode_checkpoint(plain.model_id, plain.selection, plain.arrays, False, names, replay=memory)


def split_checkpoint(data: bytes) -> tuple[dict[str, Any], bytes]:
    """(parsed header, payload) of checkpoint bytes."""
    _, _, length = PREFIX.unpack_from(data)
    return json.loads(data[PREFIX.size:PREFIX.size + length]), data[PREFIX.size + length:-32]


def resealed_checkpoint(header: Any, payload: bytes, *, raw: bytes | None = None) -> bytes:
    """A checkpoint of ``header`` (JSON-encoded; or the ``raw`` header bytes) and ``payload`` with a valid digest."""
    head = raw if raw is not None else json.dumps(header).encode()
    body = PREFIX.pack(CHECKPOINT_MAGIC, CHECKPOINT_FORMAT_VERSION, len(head)) + head + payload
    return body + hashlib.sha256(body).digest()


def model_bytes(name: str = MODEL) -> bytes:
    return fixture_model(name).read_bytes()


def with_metadata_text(data: bytes, text: bytes) -> bytes:
    """``data`` with its metadata entry's bytes replaced in place by ``text`` (space-padded; ValueError if
    longer) and re-sealed: the seal is valid, the metadata is whatever ``text`` says."""
    start, n = metadata_spans(data)[C.METADATA_NAME]
    if len(text) > n:
        raise ValueError(f"metadata text of {len(text)} bytes does not fit the {n}-byte entry")
    return seal(data[:start] + text.ljust(n) + data[start + n:])


def with_metadata(data: bytes, meta: Any) -> bytes:
    """``data`` with its metadata replaced by ``meta`` (JSON, without the informative ``config``), re-sealed."""
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k != C.F_CONFIG}
    return with_metadata_text(data, json.dumps(meta).encode())


def with_selftest(data: bytes, archive: bytes, *, reseal: bool = True) -> bytes:
    """``data`` with its self-test entry's bytes replaced in place by ``archive`` (zero-padded), optionally re-sealed."""
    start, n = metadata_spans(data)[C.SELFTEST_NAME]
    if len(archive) > n:
        raise ValueError(f"self-test of {len(archive)} bytes does not fit the {n}-byte entry")
    out = data[:start] + archive.ljust(n, b"\0") + data[start + n:]
    return seal(out) if reseal else out


def metadata_of(data: bytes) -> dict[str, Any]:
    return read_metadata(data)


def write(path: pathlib.Path, data: bytes) -> pathlib.Path:
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def model() -> TrainableModel:
    """The tiny fixture model (import this fixture into a test module to use it)."""
    return TrainableModel(fixture_model(MODEL))


@pytest.fixture(scope="module")
def parts(model: TrainableModel) -> tuple[dict[str, Any], bytes]:
    """(header, payload) of a valid checkpoint of ``model`` (``adapted_checkpoint``)."""
    return split_checkpoint(adapted_checkpoint(model))


@pytest.fixture(scope="module")
def replay_parts(model: TrainableModel) -> tuple[dict[str, Any], bytes]:
    """(header, payload) of a valid checkpoint of ``model`` with a replay memory (``replay_checkpoint``)."""
    return split_checkpoint(replay_checkpoint(model))
