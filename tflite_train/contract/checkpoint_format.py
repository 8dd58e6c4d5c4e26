"""The names of the checkpoint file (CONTRACT.md "Checkpoint format"), which Python and Java both write.

Layout (little-endian, no pickle): :data:`CHECKPOINT_MAGIC`, u32 :data:`CHECKPOINT_FORMAT_VERSION`, u32
header length, the UTF-8 JSON header, the payload, the sha256 of everything before it. The header
holds ``format`` (:data:`CHECKPOINT_FORMAT`), ``format_version``, ``model_id`` (the metadata field),
:data:`CK_SELECTION` (the selection object: format :data:`SELECTION_FORMAT`, its version,
:data:`SEL_POLICY`, :data:`SEL_LAYERS`, :data:`SEL_CHANNELS`), :data:`CK_INCLUDE_OPTIMIZER`,
:data:`CK_CLASS_NAMES`, :data:`CK_ARRAYS` (entries of :data:`CK_NAME`, :data:`CK_DTYPE`,
:data:`CK_SHAPE`, :data:`CK_OFFSET`, :data:`CK_NBYTES`), :data:`CK_PAYLOAD_BYTES` and, optionally,
:data:`CHECKPOINT_CONFIG` and :data:`CHECKPOINT_REPORT` (the ``adapt`` run's config and report). The arrays are
named like the state variables (:mod:`tflite_train.contract.signatures`).
"""

from __future__ import annotations

__all__ = [
    "CHECKPOINT_MAGIC", "CHECKPOINT_FORMAT", "CHECKPOINT_FORMAT_VERSION", "CK_SELECTION", "CK_INCLUDE_OPTIMIZER",
    "CK_CLASS_NAMES", "CK_ARRAYS", "CK_PAYLOAD_BYTES", "CHECKPOINT_CONFIG", "CHECKPOINT_REPORT", "CK_NAME", "CK_DTYPE",
    "CK_SHAPE", "CK_OFFSET", "CK_NBYTES",
    "SELECTION_FORMAT", "SELECTION_FORMAT_VERSION", "SEL_POLICY", "SEL_LAYERS", "SEL_CHANNELS",
]

CHECKPOINT_MAGIC = "TFLTCKPT"
"""The first 8 bytes of a checkpoint (ASCII)."""
CHECKPOINT_FORMAT = "tflite-train-checkpoint"
CHECKPOINT_FORMAT_VERSION = 1
"""The checkpoint version this code writes and reads; any other is refused."""

CK_SELECTION = "selection"
CK_INCLUDE_OPTIMIZER = "include_optimizer"
CK_CLASS_NAMES = "class_names"
CK_ARRAYS = "arrays"
CK_PAYLOAD_BYTES = "payload_bytes"
CHECKPOINT_CONFIG = "config"
"""Checkpoint header member (optional): the resolved config of the run that wrote it, a JSON object."""
CHECKPOINT_REPORT = "report"
"""Checkpoint header member (optional): that run's report (selection, cost, losses, accuracy), a JSON object."""
# keys of one ``arrays`` entry
CK_NAME, CK_DTYPE, CK_SHAPE, CK_OFFSET, CK_NBYTES = "name", "dtype", "shape", "offset", "nbytes"

SELECTION_FORMAT = "tflite-train-selection"
"""``format`` of a selection object (``tflite_train.sparse.Selection.to_dict``), also inside a checkpoint."""
SELECTION_FORMAT_VERSION = 1
SEL_POLICY, SEL_LAYERS, SEL_CHANNELS = "policy", "layers", "channels"
