"""Crafted or corrupted checkpoints are refused with the reason, before the model's state changes."""

from __future__ import annotations

import hashlib
import struct
import zipfile

import numpy as np
import pytest
from tests.runtime.runtime_fixtures import fixture_model

from tflite_train import contract
from tflite_train.runtime.checkpoint.checkpoint import (
    CHECKPOINT_FORMAT_VERSION,
    CHECKPOINT_MAGIC,
    CheckpointError,
    checkpoint_arrays,
    decode_checkpoint,
    encode_checkpoint,
    restore_checkpoint,
)
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.sparse.selection import Selection

pytestmark = pytest.mark.pi


@pytest.fixture(scope="module")
def setup():
    model = TrainableModel(fixture_model("tiny_adam_33"))
    rng = np.random.default_rng(15)
    model.set_head(rng.normal(size=(3, model.feature_dim)).astype(np.float32))
    layer = model.candidates[-1]
    selection = Selection((layer,), {layer: (0, 3, 5)}, "fixed")
    model.set_selection({layer: [0, 3, 5]})
    return model, selection, layer


def _state(model):
    return {k: v.copy() for k, v in model.get_state().items()}


def _refused(model, data: bytes, match: str):
    before = _state(model)
    with pytest.raises(CheckpointError, match=match):
        restore_checkpoint(model, decode_checkpoint(data))
    after = _state(model)
    assert all(np.array_equal(before[k], after[k]) for k in before), "state changed by a refused checkpoint"


def _encode(model, selection, arrays, model_id=None):
    return encode_checkpoint(model_id or model.metadata[contract.F_MODEL_ID], selection, arrays)


def _resigned_raw(head: bytes, payload: bytes) -> bytes:
    body = struct.pack("<8sII", CHECKPOINT_MAGIC, CHECKPOINT_FORMAT_VERSION, len(head)) + head + payload
    return body + hashlib.sha256(body).digest()


def test_valid_checkpoint_restores(setup):
    model, selection, layer = setup
    data = _encode(model, selection, checkpoint_arrays(model, selection))
    state = _state(model)
    restore_checkpoint(model, decode_checkpoint(data))
    assert np.array_equal(state[f"{layer}_kernel"], model.get_state()[f"{layer}_kernel"])


def test_other_model_id(setup):
    model, selection, _ = setup
    _refused(model, _encode(model, selection, checkpoint_arrays(model, selection), "f" * 64), "is for model")


def test_wrong_shape(setup):
    model, selection, layer = setup
    arrays = checkpoint_arrays(model, selection)
    arrays[f"{layer}_bias"] = np.zeros(1, np.float32)  # would broadcast silently
    _refused(model, _encode(model, selection, arrays), r"'.*_bias' is float32 \[1\]; this model needs float32 \[3\]")


def test_wrong_dtype(setup):
    model, selection, _ = setup
    arrays = checkpoint_arrays(model, selection)
    arrays[contract.PROTOTYPES] = arrays[contract.PROTOTYPES].astype(np.int32)
    _refused(model, _encode(model, selection, arrays), r"arrays\['prototypes'\]: must be float32 of rank 2; got int32")


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite(setup, bad):
    model, selection, layer = setup
    arrays = checkpoint_arrays(model, selection)
    arrays[f"{layer}_kernel"].flat[0] = bad
    _refused(model, _encode(model, selection, arrays), "NaN or Inf")


def test_too_many_classes(setup):
    model, selection, _ = setup
    arrays = checkpoint_arrays(model, selection)
    arrays[contract.NUM_CLASSES] = np.asarray(model.capacity + 1, np.int32)
    _refused(model, _encode(model, selection, arrays), "num_classes")


def test_deep_nesting():
    data = _resigned_raw(b"[" * 100_000 + b"]" * 100_000, b"")
    with pytest.raises(CheckpointError, match="malformed checkpoint header"):
        decode_checkpoint(data)


def test_zip_that_is_not_a_checkpoint(setup, tmp_path):
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("state.npy", b"\x93NUMPY")
    with pytest.raises(CheckpointError, match="not a tflite-train checkpoint"):
        decode_checkpoint(path.read_bytes())


def test_flipped_byte(setup):
    model, selection, _ = setup
    data = bytearray(_encode(model, selection, checkpoint_arrays(model, selection)))
    data[len(data) // 2] ^= 1
    with pytest.raises(CheckpointError, match="sha256 mismatch"):
        decode_checkpoint(bytes(data))
