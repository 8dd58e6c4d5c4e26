"""Golden vectors that pin the Java checkpoint reader and writer (``org.tflitetrain.core.adapt.Checkpoint``,
``CheckpointHeader``, ``ReplayMemory``) to Python's ``tflite_train.runtime.checkpoint.checkpoint`` for a checkpoint WITH a
replay memory (issue 42), and the replay rule's pure parts to ``tflite_train.runtime.adaptation.replay_memory``'s
``keep_rows`` and ``keep_views``.

One file, ``checkpoint_replay.json`` (numpy only; no interpreter is opened):

* ``checkpoint_base64``: the bytes Python writes (``encode_checkpoint``) for the golden metadata
  (``java_vectors.metadata_example``, whose ``model_id`` it names): a 3-class head, 2 channels of ``final``
  selected, and a replay memory (section version 2) of 3 images in 5 activations at the cut ``final`` (index 12,
  shape [4, 4, 16]: the cut ``ModelMetadataTest.goldenWithCuts`` adds) under a 5 KiB budget: the images' plain
  views, then a further view of images 0 and 2 (``replay_images`` [0, 1, 2, 0, 2]). The activations are a seeded
  normal sample
  with -0.0, the smallest subnormal, the largest float32 and 1.0 + 1 ulp written in, so that a reader or writer
  that loses bits fails. Java decodes it, compares it with ``expected`` and encodes it again: the same bytes.
* ``expected``: what the file holds (class names, selection, replay section, labels, images, the activations'
  float32 bit patterns as unsigned ints, the state arrays' shapes).
* ``one_view_base64``: the bytes of a checkpoint with a replay section of version 1 (one plain view per row, no
  ``replay_images``), as the writers before version 2 wrote it (``one_view_checkpoint``): its 3 rows are the
  golden memory's plain views (its first 3 activations), labelled [2, 0, 1]. Readers still load it.
* ``keep_rows``: pool labels and a capacity -> the kept rows (``keep_rows``).
* ``keep_views``: kept images' labels, their available further views and a capacity -> the views each keeps
  (``keep_views``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from typing import Any

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adaptation.replay_memory import ReplayMemory, keep_rows, keep_views
from tflite_train.runtime.checkpoint.checkpoint import decode_checkpoint, encode_checkpoint
from tflite_train.sparse.selection import Selection

CHECKPOINT_FILE = "checkpoint_replay.json"
CUT = ("final", 12, (4, 4, 16))
"""The golden cut (layer, index, activation shape)."""
CLASS_NAMES = ("cat", "dog", "owl")
KEEP_CASES = (
    ([0, 0, 0, 1, 1, 2, 2, 2, 2], 5),
    ([0, 0, 0, 1, 1, 2, 2, 2, 2], 8),
    ([0, 0, 0, 1, 1, 2, 2, 2, 2], 100),
    ([0, 1, 2, 0], 0),
    ([3, 3, 1], 2),
    ([2, 2, 2, 0, 1, 0, 1, 2, 0, 0, 1], 7),
)
"""(pool labels oldest first, capacity) of the ``keep_rows`` cases."""
KEEP_VIEW_CASES = (
    ([0, 1, 2, 0, 1], [4, 4, 4, 4, 4], 7),
    ([0, 1, 2, 0, 1], [4, 4, 4, 4, 4], 100),
    ([0, 0, 1], [1, 3, 0], 3),
    ([0, 0, 1], [1, 3, 0], 2),
    ([2, 2, 2, 0], [2, 0, 1, 2], 4),
    ([0, 1], [0, 0], 5),
    ([0, 1, 1], [3, 3, 3], 0),
)
"""(kept images' labels oldest first, their available further views, capacity) of the ``keep_views`` cases."""


def golden_checkpoint(metadata: dict[str, Any]) -> bytes:
    """The golden checkpoint's bytes for ``metadata`` (the golden metadata; module docstring)."""
    rng = np.random.default_rng(42)
    layer = next(entry for entry in metadata[C.F_LAYERS] if entry[C.F_NAME] == CUT[0])
    in_channels = int(layer["in_channels"])
    channels = (1, 4)
    arrays = {
        C.PROTOTYPES: rng.normal(size=(3, int(metadata[C.F_FEATURE_DIM]))).astype(np.float32),
        C.NUM_CLASSES: np.asarray(3, np.int32),
        C.LEARNING_RATE: np.asarray(3e-4, np.float32),
        CUT[0] + C.KERNEL_SUFFIX: rng.normal(size=(1, 1, in_channels, len(channels))).astype(np.float32),
        CUT[0] + C.BIAS_SUFFIX: rng.normal(size=len(channels)).astype(np.float32),
    }
    activations = rng.normal(size=(5, *CUT[2])).astype(np.float32)
    flat = activations.reshape(-1)
    flat[:4] = [-0.0, np.float32(1e-45), np.finfo(np.float32).max, np.nextafter(np.float32(1), np.float32(2))]
    memory = ReplayMemory(CUT[0], CUT[1], CUT[2], 5 * 1024, activations, np.asarray([2, 0, 1, 2, 1], np.int32),
                          np.asarray([0, 1, 2, 0, 2], np.int32))
    selection = Selection((CUT[0],), {CUT[0]: channels}, "tinytrain")
    return encode_checkpoint(str(metadata[C.F_MODEL_ID]), selection, arrays, False, CLASS_NAMES, replay=memory)


def one_view_checkpoint(data: bytes, rows: int | None = None) -> bytes:
    """The checkpoint ``data`` (with a replay section of version 2 whose first ``rows`` rows, default all, are
    plain views) rewritten as the writers of replay version 1 wrote it: the memory cut to those rows,
    ``replay_images`` dropped, the section's ``format_version`` 1, the offsets packed again (arrays by name),
    the header's keys sorted, the digest recomputed.

    Raises:
      ValueError: ``data`` has no replay section, or a kept row is not its own image's plain view.
    """
    prefix = struct.Struct("<8sII")
    magic, version, length = prefix.unpack_from(data)
    header = json.loads(data[prefix.size:prefix.size + length])
    payload = data[prefix.size + length:-32]
    if C.CK_REPLAY not in header:
        raise ValueError("the checkpoint has no replay section")
    entries = {e[C.CK_NAME]: e for e in header[C.CK_ARRAYS]}
    raw = {name: payload[e[C.CK_OFFSET]:e[C.CK_OFFSET] + e[C.CK_NBYTES]] for name, e in entries.items()}
    images = np.frombuffer(raw.pop(C.REPLAY_IMAGES), "<i4")
    entries.pop(C.REPLAY_IMAGES)
    rows = images.size if rows is None else rows
    if not np.array_equal(images[:rows], np.arange(rows)):
        raise ValueError(f"rows 0..{rows - 1} are not each their own image's plain view")
    for name in (C.REPLAY_ACTIVATIONS, C.REPLAY_LABELS):
        entry = entries[name]
        row = entry[C.CK_NBYTES] // entry[C.CK_SHAPE][0]
        entry[C.CK_SHAPE] = [rows, *entry[C.CK_SHAPE][1:]]
        entry[C.CK_NBYTES] = rows * row
        raw[name] = raw[name][:rows * row]
    offset, chunks = 0, []
    for name in sorted(entries):
        entries[name][C.CK_OFFSET] = offset
        chunks.append(raw[name])
        offset += len(raw[name])
    header[C.CK_ARRAYS] = [entries[name] for name in sorted(entries)]
    header[C.CK_PAYLOAD_BYTES] = offset
    header[C.CK_REPLAY][C.F_FORMAT_VERSION] = C.REPLAY_FORMAT_VERSION_ONE_VIEW
    text = json.dumps(header, sort_keys=True, allow_nan=False).encode()
    body = prefix.pack(magic, version, len(text)) + text + b"".join(chunks)
    return body + hashlib.sha256(body).digest()


def checkpoint_vectors(metadata: dict[str, Any]) -> dict[str, Any]:
    """The content of ``checkpoint_replay.json`` (module docstring)."""
    data = golden_checkpoint(metadata)
    checkpoint = decode_checkpoint(data, "golden")
    memory = checkpoint.replay
    expected = {
        C.F_MODEL_ID: checkpoint.model_id,
        C.CK_CLASS_NAMES: list(checkpoint.class_names),
        C.CK_SELECTION: {k: list(v) for k, v in checkpoint.selection.channels.items()},
        C.CK_REPLAY: memory.section(),
        "replay_rows": len(memory),
        C.REPLAY_LABELS: memory.labels.tolist(),
        C.REPLAY_IMAGES: memory.images.tolist(),
        "replay_activation_bits": memory.activations.reshape(-1).view(np.uint32).tolist(),
        "array_shapes": {name: list(value.shape) for name, value in sorted(checkpoint.arrays.items())},
        "size": len(data),
    }
    keep = [{"labels": labels, "capacity": capacity, "kept": keep_rows(np.asarray(labels), capacity).tolist()}
            for labels, capacity in KEEP_CASES]
    views = [{"labels": labels, "available": available, "capacity": capacity,
              "kept": keep_views(np.asarray(labels), np.asarray(available), capacity).tolist()}
             for labels, available, capacity in KEEP_VIEW_CASES]
    return {"checkpoint_base64": base64.b64encode(data).decode("ascii"), "expected": expected, "keep_rows": keep,
            "keep_views": views,
            "one_view_base64": base64.b64encode(one_view_checkpoint(data, 3)).decode("ascii")}


def render_checkpoint_vectors(metadata: dict[str, Any]) -> dict[str, str]:
    """File name -> text of the checkpoint golden file (pure)."""
    return {CHECKPOINT_FILE: json.dumps(checkpoint_vectors(metadata), indent=1, sort_keys=True) + "\n"}
