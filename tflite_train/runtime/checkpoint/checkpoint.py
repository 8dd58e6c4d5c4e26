"""Small, atomic, checksummed checkpoints of an adapted model: only what adaptation changed.

File layout (little-endian; no pickle):

    magic    8 bytes  b"TFLTCKPT"
    version  u32      CHECKPOINT_FORMAT_VERSION
    hlen     u32      length of the header
    header   hlen     UTF-8 JSON: format, format_version, model_id, selection (Selection.to_dict()),
                      include_optimizer, class_names, arrays: [{name, dtype, shape, offset, nbytes}],
                      payload_bytes; optionally config and report (contract.CHECKPOINT_CONFIG,
                      CHECKPOINT_REPORT): the resolved config and the report of the run that wrote
                      it, JSON objects (non-finite numbers stored as null); optionally replay
                      (contract.CK_REPLAY): the replay memory's section (``replay_memory``)
    payload           the arrays' C-order bytes, at their offsets
    digest   32 bytes sha256 of everything above

Arrays: ``prototypes`` [K, D] and ``num_classes``; per selected layer l with channels C_l the slices
``{l}_kernel[..., C_l]`` (depthwise kernels [k, k, C, 1]: axis 2) and ``{l}_bias[C_l]``; with
``include_optimizer`` also the same slices of the optimizer slots (``{l}_kernel_m`` ...) and ``step``;
and ``learning_rate``. Restoring = ``reset_state`` (the exported state) + writing these slices and the
selection mask, so a checkpoint is only valid for the model whose metadata ``model_id`` it names. With a
replay section, also ``replay_activations``, ``replay_labels`` and (its version 2) ``replay_images``
(``replay_memory.ReplayMemory``; read into ``Checkpoint.replay``, never written into the state).

Saving writes a temporary file in the target's directory, fsyncs it, ``os.replace``s it over the
target and fsyncs the directory (``atomic_file.write_atomic``): a crash at any point leaves either
the old or the new file. The config and report travel inside the file, under its digest, so a
checkpoint and the record of how it was made are one unit: they cannot be separated or mixed by a
kill or by two writers (``tflite-train show`` prints them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pathlib
import struct
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adaptation.replay_memory import ReplayMemory
from tflite_train.runtime.atomic_file import write_atomic
from tflite_train.runtime.checkpoint.checkpoint_schema import (ALLOWED_DTYPES, REPLAY_ARRAYS, check_checkpoint_arrays,
                                                               check_checkpoint_fits, check_checkpoint_header,
                                                               check_replay_fits)
from tflite_train.runtime.errors import CheckpointError
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.runtime.model.model_contract import layer_table
from tflite_train.sparse.selection import Selection

CHECKPOINT_MAGIC = C.CHECKPOINT_MAGIC.encode("ascii")
CHECKPOINT_FORMAT = C.CHECKPOINT_FORMAT
CHECKPOINT_FORMAT_VERSION = C.CHECKPOINT_FORMAT_VERSION
_PREFIX = struct.Struct("<8sII")
_DIGEST_BYTES = 32
_MAX_HEADER_BYTES = 64 * 2**20
"""Largest header read (the config and report are a few KiB; 64 MiB is far beyond any real one)."""


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A parsed checkpoint: the model it belongs to, the selection, the stored state arrays and, optionally,
    its replay memory (its arrays are not in ``arrays``)."""

    model_id: str
    selection: Selection
    include_optimizer: bool
    arrays: Mapping[str, np.ndarray]
    class_names: tuple[str, ...] = ()
    config: Mapping[str, Any] | None = None
    report: Mapping[str, Any] | None = None
    replay: ReplayMemory | None = None


def _channel_axis(model: TrainableModel, layer: str, shape: tuple[int, ...]) -> int:
    """Output-channel axis of a state tensor of ``shape``: 0 for biases, 2 for depthwise kernels [k, k, C, 1],
    else the last."""
    if len(shape) == 1:
        return 0
    channels = model.candidate_channels[layer]
    if len(shape) == 4 and shape[-1] == 1 and shape[2] == channels and channels != 1:
        return 2
    return len(shape) - 1


def _layer_keys(state: Mapping[str, Any], layer: str, include_optimizer: bool) -> list[str]:
    keys = [layer + C.KERNEL_SUFFIX, layer + C.BIAS_SUFFIX]
    if include_optimizer:
        keys += sorted(k for k in state if k.startswith((f"{layer}{C.KERNEL_SUFFIX}_", f"{layer}{C.BIAS_SUFFIX}_")))
    return keys


def checkpoint_state_names(state_specs: Mapping[str, Any], selection: Selection,
                           include_optimizer: bool = False) -> list[str]:
    """The state variables (``get_state`` outputs; ``state_specs``: ``TrainableModel.state_specs``) that a
    checkpoint under ``selection`` is read from: the head, the learning rate and the selected layers' kernels
    and biases, with ``include_optimizer`` their optimizer slots and the step too."""
    keys = [key for layer in selection.layers for key in _layer_keys(state_specs, layer, include_optimizer)]
    return [C.NUM_CLASSES, C.PROTOTYPES, C.LEARNING_RATE, *keys, *([C.STEP] if include_optimizer else [])]


def checkpoint_arrays(model: TrainableModel, selection: Selection, include_optimizer: bool = False) -> dict[str, np.ndarray]:
    """The arrays a checkpoint of ``model``'s current state under ``selection`` holds (module docstring), read
    by one ``get_state`` run that copies out only the variables they come from (``TrainableModel.get_state``)."""
    state = model.get_state(checkpoint_state_names(model.state_specs, selection, include_optimizer))
    k = int(state[C.NUM_CLASSES])
    if k < 1:
        raise ValueError("the model has no head (num_classes is 0): adapt it before saving a checkpoint")
    arrays = {C.PROTOTYPES: state[C.PROTOTYPES][:k], C.NUM_CLASSES: np.asarray(k, np.int32),
              C.LEARNING_RATE: np.asarray(state[C.LEARNING_RATE], np.float32)}
    for layer in selection.layers:
        idx = np.asarray(selection.channels[layer], np.int64)
        for key in _layer_keys(state, layer, include_optimizer):
            arrays[key] = np.take(state[key], idx, axis=_channel_axis(model, layer, state[key].shape))
    if include_optimizer:
        arrays[C.STEP] = np.asarray(state[C.STEP])
    return {name: np.array(value, order="C") for name, value in arrays.items()}


def _json_document(value: Any, name: str) -> Any:
    """``value`` as strict JSON data (what Java's parser accepts): non-finite floats become None."""
    if isinstance(value, Mapping):
        return {str(k): _json_document(v, name) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_document(v, name) for v in value]
    if isinstance(value, (np.generic, np.ndarray)):
        return _json_document(value.tolist(), name)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"checkpoint {name} holds a {type(value).__name__}, which JSON cannot store")


def encode_checkpoint(model_id: str, selection: Selection, arrays: Mapping[str, np.ndarray],
                      include_optimizer: bool = False, class_names: tuple[str, ...] = (), *,
                      config: Mapping[str, Any] | None = None, report: Mapping[str, Any] | None = None,
                      replay: ReplayMemory | None = None) -> bytes:
    """The checkpoint file's bytes (layout in the module docstring); ``config``/``report``/``replay`` are stored
    if given."""
    stray = [name for name in REPLAY_ARRAYS if name in arrays]
    if stray:
        raise ValueError(f"array {stray[0]!r} is replay data: pass the memory as replay=")
    arrays = {**arrays, **(replay.arrays() if replay is not None else {})}
    entries, payload, offset = [], [], 0
    for name in sorted(arrays):
        value = np.array(arrays[name], order="C")
        if value.dtype.name not in ALLOWED_DTYPES:
            raise ValueError(f"array {name!r} has dtype {value.dtype}; allowed: {ALLOWED_DTYPES}")
        data = value.astype(value.dtype.newbyteorder("<")).tobytes()
        entries.append({C.CK_NAME: name, C.CK_DTYPE: value.dtype.name, C.CK_SHAPE: list(value.shape),
                        C.CK_OFFSET: offset, C.CK_NBYTES: len(data)})
        payload.append(data)
        offset += len(data)
    fields = {
        C.F_FORMAT: CHECKPOINT_FORMAT, C.F_FORMAT_VERSION: CHECKPOINT_FORMAT_VERSION, C.F_MODEL_ID: model_id,
        C.CK_SELECTION: selection.to_dict(), C.CK_INCLUDE_OPTIMIZER: include_optimizer, C.CK_ARRAYS: entries,
        C.CK_CLASS_NAMES: [str(n) for n in class_names],
        C.CK_PAYLOAD_BYTES: offset,
    }
    if replay is not None:
        fields[C.CK_REPLAY] = replay.section()
    fields = json.loads(json.dumps(fields, sort_keys=True))  # the fixed fields with sorted keys, at every level
    for key, document in ((C.CHECKPOINT_CONFIG, config), (C.CHECKPOINT_REPORT, report)):
        if document is not None:  # in its own key order (e.g. layers in forward order)
            fields[key] = _json_document(dict(document), key)
    header = json.dumps(dict(sorted(fields.items())), allow_nan=False).encode()
    body = _PREFIX.pack(CHECKPOINT_MAGIC, CHECKPOINT_FORMAT_VERSION, len(header)) + header + b"".join(payload)
    return body + hashlib.sha256(body).digest()


def decode_checkpoint(data: bytes, source: str = "<bytes>") -> Checkpoint:
    """Parses and verifies checkpoint bytes: the digest, then every header field against the declared
    schema (``checkpoint_schema``) before any value is used, then the payload's own rules.

    Raises:
      CheckpointError: wrong magic/format/version, truncated, checksum mismatch, a header that is not strict
        JSON (``contract.loads_strict``: a duplicate key or a NaN, as the Java core refuses them), or a
        header field of the wrong type, out of range or inconsistent (one line naming the key or field).
    """
    if len(data) < _PREFIX.size + _DIGEST_BYTES:
        raise CheckpointError(f"{source}: truncated checkpoint ({len(data)} bytes)")
    magic, version, header_len = _PREFIX.unpack_from(data)
    if magic != CHECKPOINT_MAGIC:
        raise CheckpointError(f"{source}: not a tflite-train checkpoint (magic {magic!r})")
    if version != CHECKPOINT_FORMAT_VERSION:
        raise CheckpointError(f"{source}: checkpoint format version {version}; this reader supports {CHECKPOINT_FORMAT_VERSION}")
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise CheckpointError(f"{source}: checkpoint is corrupt or truncated (sha256 mismatch)")
    if header_len > min(len(body) - _PREFIX.size, _MAX_HEADER_BYTES):
        raise CheckpointError(f"{source}: header length {header_len} exceeds the file's {len(body) - _PREFIX.size} "
                              "bytes after the prefix")
    try:
        parsed = C.loads_strict(body[_PREFIX.size:_PREFIX.size + header_len].decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise CheckpointError(f"{source}: malformed checkpoint header ({type(err).__name__}: {str(err)[:200]})") from None
    header = check_checkpoint_header(parsed, source)
    payload = body[_PREFIX.size + header_len:]
    if len(payload) != header[C.CK_PAYLOAD_BYTES]:
        raise CheckpointError(f"{source}: payload has {len(payload)} bytes, header says {header[C.CK_PAYLOAD_BYTES]}")
    arrays = {}
    for entry in header[C.CK_ARRAYS]:  # offsets, sizes and shapes agree (checked by the schema)
        chunk = payload[entry[C.CK_OFFSET]:entry[C.CK_OFFSET] + entry[C.CK_NBYTES]]
        dtype = np.dtype(entry[C.CK_DTYPE]).newbyteorder("<")
        arrays[entry[C.CK_NAME]] = np.frombuffer(chunk, dtype).reshape(entry[C.CK_SHAPE]).astype(entry[C.CK_DTYPE])
    check_checkpoint_arrays(header, arrays, source)
    replay = None
    if C.CK_REPLAY in header:
        replay = ReplayMemory.from_checkpoint(header[C.CK_REPLAY], {n: arrays.pop(n) for n in REPLAY_ARRAYS
                                                                            if n in arrays})
    selection_fields = header[C.CK_SELECTION]
    try:
        selection = Selection(tuple(selection_fields[C.SEL_LAYERS]),
                              {k: tuple(v) for k, v in selection_fields[C.SEL_CHANNELS].items()},
                              selection_fields[C.SEL_POLICY])
    except (TypeError, ValueError) as err:  # the schema admits only valid selections; kept as a guard
        raise CheckpointError(f"{source}: checkpoint header field {C.CK_SELECTION}: {err}") from None
    return Checkpoint(header[C.F_MODEL_ID], selection, header[C.CK_INCLUDE_OPTIMIZER], arrays,
                      tuple(header[C.CK_CLASS_NAMES]), config=header.get(C.CHECKPOINT_CONFIG),
                      report=header.get(C.CHECKPOINT_REPORT), replay=replay)


def save_checkpoint(path: str | os.PathLike, model: TrainableModel, selection: Selection, *,
                    include_optimizer: bool = False, class_names: tuple[str, ...] = (),
                    config: Mapping[str, Any] | None = None, report: Mapping[str, Any] | None = None,
                    chunk_size: int = 1 << 16, on_chunk: Callable[[int, int], None] | None = None,
                    arrays: Mapping[str, np.ndarray] | None = None, replay: ReplayMemory | None = None) -> int:
    """Saves ``model``'s adapted state under ``selection`` to ``path`` atomically; returns the file size.

    ``class_names`` (optional, one per head class) are stored for ``predict``; ``config`` and
    ``report`` (optional JSON objects) are stored in the same file, so they are replaced with it, and so is
    ``replay`` (optional: the replay memory; its labels must be classes of the head).
    ``arrays``: ``checkpoint_arrays(model, selection, include_optimizer)`` when the caller has them already.
    Two processes saving to one path: hold ``output_lock.output_lock(path)`` around the whole run.
    """
    if not isinstance(selection, Selection):
        raise TypeError(f"selection must be a Selection; got {type(selection).__name__}")
    selection = selection.ordered(layer_table(model.metadata))
    if arrays is None:
        arrays = checkpoint_arrays(model, selection, include_optimizer)
    if class_names and len(class_names) != int(arrays[C.NUM_CLASSES]):
        raise ValueError(f"class_names must name {int(arrays[C.NUM_CLASSES])} classes; got {len(class_names)}")
    if replay is not None and (replay.labels.min() < 0 or replay.labels.max() >= int(arrays[C.NUM_CLASSES])):
        raise ValueError(f"replay labels must be classes 0..{int(arrays[C.NUM_CLASSES]) - 1} of the head")
    data = encode_checkpoint(str(model.metadata[C.F_MODEL_ID]), selection, arrays, include_optimizer, tuple(class_names),
                             config=config, report=report, replay=replay)
    write_atomic(path, data, chunk_size=chunk_size, on_chunk=on_chunk)
    return len(data)


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Reads and verifies a checkpoint file (CheckpointError on any defect, ValueError if unreadable)."""
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read checkpoint {path}: {err}") from err
    return decode_checkpoint(data, str(path))


@dataclasses.dataclass(frozen=True)
class StateWrite:
    """One write of a checkpoint into the exported state: ``state[name]`` at ``index`` along ``axis`` (the
    output-channel axis; ``()`` for a scalar) becomes ``value``; ``layer`` names the candidate it belongs to."""

    name: str
    index: Any
    axis: int
    value: np.ndarray
    layer: str | None = None


def checkpoint_writes(model: TrainableModel, checkpoint: Checkpoint) -> list[StateWrite]:
    """What restoring ``checkpoint`` writes into ``model``'s exported state, every array checked against the
    model first (its ``model_id``, candidates, class capacity and ``state_specs``; the model is not called).

    Raises:
      CheckpointError: the checkpoint belongs to another model or does not fit it (one line naming the array).
    """
    if C.NUM_CLASSES not in checkpoint.arrays or checkpoint.arrays[C.NUM_CLASSES].shape != ():
        raise CheckpointError(f"checkpoint has no scalar {C.NUM_CLASSES!r} array")
    check_checkpoint_fits(checkpoint.model_id, checkpoint.selection.layers, checkpoint.selection.channels,
                          int(checkpoint.arrays[C.NUM_CLASSES]), model_model_id=str(model.metadata[C.F_MODEL_ID]),
                          candidate_channels=model.candidate_channels, capacity=model.capacity)
    if checkpoint.class_names and len(checkpoint.class_names) != int(checkpoint.arrays[C.NUM_CLASSES]):
        raise CheckpointError(f"checkpoint names {len(checkpoint.class_names)} classes; its head has "
                              f"{int(checkpoint.arrays[C.NUM_CLASSES])}")
    if checkpoint.replay is not None:
        check_replay_fits(checkpoint.replay.section(), model.cached_cuts)
    for name, value in checkpoint.arrays.items():
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise CheckpointError(f"checkpoint array {name!r} holds NaN or Inf")
    specs = model.state_specs
    arrays = dict(checkpoint.arrays)

    def fitted(name: str, value: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        if value.shape != tuple(shape) or value.dtype != dtype:
            raise CheckpointError(f"checkpoint array {name!r} is {value.dtype} {list(value.shape)}; "
                                  f"this model needs {np.dtype(dtype).name} {list(shape)}")
        return value

    writes: list[StateWrite] = []
    try:
        k = int(fitted(C.NUM_CLASSES, arrays.pop(C.NUM_CLASSES), (), np.dtype(np.int32)))
        if not 1 <= k <= model.capacity:
            raise CheckpointError(f"checkpoint num_classes {k} is outside 1..{model.capacity}")
        proto_shape, proto_dtype = specs[C.PROTOTYPES]
        writes.append(StateWrite(C.PROTOTYPES, slice(0, k), 0, fitted(C.PROTOTYPES, arrays.pop(C.PROTOTYPES),
                                                                        (k, proto_shape[1]), np.dtype(proto_dtype))))
        writes.append(StateWrite(C.NUM_CLASSES, (), 0, np.asarray(k, np.int32)))
        writes.append(StateWrite(C.LEARNING_RATE, (), 0, fitted(C.LEARNING_RATE, arrays.pop(C.LEARNING_RATE), (),
                                                                  np.dtype(np.float32))))
        if C.STEP in arrays:
            writes.append(StateWrite(C.STEP, (), 0, arrays.pop(C.STEP).astype(specs[C.STEP][1])))
        for layer in checkpoint.selection.layers:
            idx = np.asarray(checkpoint.selection.channels[layer], np.int64)
            for key in _layer_keys(specs, layer, checkpoint.include_optimizer):
                shape, dtype = specs[key]
                axis = _channel_axis(model, layer, shape)
                sliced = list(shape)
                sliced[axis] = len(idx)
                writes.append(StateWrite(key, idx, axis, fitted(key, arrays.pop(key), tuple(sliced), np.dtype(dtype)),
                                         layer))
            mask = layer + C.MASK_SUFFIX
            writes.append(StateWrite(mask, idx, 0, np.ones(len(idx), specs[mask][1]), layer))
    except CheckpointError:
        raise
    except (KeyError, ValueError, IndexError, TypeError) as err:
        raise CheckpointError(f"checkpoint does not fit this model: {err!r}") from err
    if arrays:
        raise CheckpointError(f"checkpoint has unexpected arrays {sorted(arrays)}")
    return writes


def restore_checkpoint(model: TrainableModel, checkpoint: Checkpoint | str | os.PathLike) -> Checkpoint:
    """Resets ``model`` to its exported state and applies the checkpoint (slices, head, selection mask):
    ``reset_state``, one ``get_state``, the checkpoint's arrays written into it, one ``set_state``. Nothing
    is called before every array has been checked (``checkpoint_writes``).

    Raises:
      CheckpointError: the checkpoint belongs to another model (``model_id`` differs) or does not fit it.
    """
    if not isinstance(checkpoint, Checkpoint):
        checkpoint = load_checkpoint(checkpoint)
    writes = checkpoint_writes(model, checkpoint)
    model.reset_state()
    state = model.get_state()  # the exported state, written in place
    for write in writes:
        target = state[write.name]
        if target.ndim == 0:
            state[write.name] = np.asarray(write.value, target.dtype)
        else:
            np.moveaxis(target, write.axis, 0)[write.index] = np.moveaxis(write.value, write.axis, 0)
    model.set_state(state)
    return checkpoint
