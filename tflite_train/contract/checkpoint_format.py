"""The names of the checkpoint file (CONTRACT.md "Checkpoint format"), which Python and Java both write.

Layout (little-endian, no pickle): :data:`CHECKPOINT_MAGIC`, u32 :data:`CHECKPOINT_FORMAT_VERSION`, u32
header length, the UTF-8 JSON header, the payload, the sha256 of everything before it. The header
holds ``format`` (:data:`CHECKPOINT_FORMAT`), ``format_version``, ``model_id`` (the metadata field),
:data:`CK_SELECTION` (the selection object: format :data:`SELECTION_FORMAT`, its version,
:data:`SEL_POLICY`, :data:`SEL_LAYERS`, :data:`SEL_CHANNELS`), :data:`CK_INCLUDE_OPTIMIZER`,
:data:`CK_CLASS_NAMES`, :data:`CK_ARRAYS` (entries of :data:`CK_NAME`, :data:`CK_DTYPE`,
:data:`CK_SHAPE`, :data:`CK_OFFSET`, :data:`CK_NBYTES`), :data:`CK_PAYLOAD_BYTES` and, optionally,
:data:`CHECKPOINT_CONFIG` and :data:`CHECKPOINT_REPORT` (the ``adapt`` run's config and report), and
:data:`CK_REPLAY` (the replay memory, below). The arrays are named like the state variables
(:mod:`tflite_train.contract.signatures`).

The optional replay section (issue 42: latent replay) is the header object :data:`CK_REPLAY`, versioned on
its own (``format`` :data:`REPLAY_FORMAT`, ``format_version`` :data:`REPLAY_FORMAT_VERSION`), with
:data:`RP_CUT_LAYER` and :data:`RP_CUT_INDEX` (the cached cut of metadata ``cached_cuts`` whose
activations it holds), :data:`RP_ACTIVATION_SHAPE` (one activation, without the batch),
:data:`RP_BUDGET_BYTES` (the byte budget the activations were kept under) and ``rule``
(:data:`REPLAY_RULE`, the rule that chose them); its payload arrays are :data:`REPLAY_ACTIVATIONS`
(float32 [R, *shape]), :data:`REPLAY_LABELS` (int32 [R], class indices of the checkpoint's head) and, from
version 2 on, :data:`REPLAY_IMAGES` (int32 [R], the stored image each row is a view of): rows 0..I-1 are the I
images' plain (un-augmented) views, oldest first (``images[r] == r``), the rows after them further
(augmented) views of those images, grouped by image in ascending order, each row labelled as its image.
Version 1 (:data:`REPLAY_FORMAT_VERSION_ONE_VIEW`) has no such array: every row is its own image's plain view.
A checkpoint without the section has none of the arrays; a reader that predates it refuses a file with it (the
header's unknown field), in one line.
"""

from __future__ import annotations

__all__ = [
    "CHECKPOINT_MAGIC", "CHECKPOINT_FORMAT", "CHECKPOINT_FORMAT_VERSION", "CK_SELECTION", "CK_INCLUDE_OPTIMIZER",
    "CK_CLASS_NAMES", "CK_ARRAYS", "CK_PAYLOAD_BYTES", "CHECKPOINT_CONFIG", "CHECKPOINT_REPORT", "CK_NAME", "CK_DTYPE",
    "CK_SHAPE", "CK_OFFSET", "CK_NBYTES",
    "SELECTION_FORMAT", "SELECTION_FORMAT_VERSION", "SEL_POLICY", "SEL_LAYERS", "SEL_CHANNELS",
    "CK_REPLAY", "REPLAY_FORMAT", "REPLAY_FORMAT_VERSION", "RP_CUT_LAYER", "RP_CUT_INDEX", "RP_ACTIVATION_SHAPE",
    "RP_BUDGET_BYTES", "REPLAY_RULE", "REPLAY_ACTIVATIONS", "REPLAY_LABELS", "REPLAY_IMAGES",
    "REPLAY_FORMAT_VERSION_ONE_VIEW",
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

CK_REPLAY = "replay"
"""Checkpoint header member (optional): the replay memory's description (module docstring)."""
REPLAY_FORMAT = "tflite-train-replay"
"""``format`` of the replay section."""
REPLAY_FORMAT_VERSION = 2
"""The replay-section version this code writes (several views per image: :data:`REPLAY_IMAGES`); it reads this
one and :data:`REPLAY_FORMAT_VERSION_ONE_VIEW`, and refuses any other."""
REPLAY_FORMAT_VERSION_ONE_VIEW = 1
"""The first replay-section version (still read): one row per image, its plain view, no :data:`REPLAY_IMAGES`."""
RP_CUT_LAYER, RP_CUT_INDEX = "cut_layer", "cut_index"
"""The cut's lowest layer and its index (a metadata ``cached_cuts`` entry's ``lowest_layer``/``lowest_index``)."""
RP_ACTIVATION_SHAPE = "activation_shape"
"""The shape of one stored activation, without the batch (the cut's ``shape``)."""
RP_BUDGET_BYTES = "budget_bytes"
"""The byte budget the stored activations were chosen under (their bytes never exceed it)."""
REPLAY_RULE = "class_balanced_recent"
"""The replay section's ``rule`` (the key ``F_RULE``): which examples are kept under the budget (one rule today)."""
REPLAY_ACTIVATIONS = "replay_activations"
"""Payload array: float32 [R, *activation_shape], the stored activations: the images' plain views, oldest first,
then their further views (module docstring)."""
REPLAY_LABELS = "replay_labels"
"""Payload array: int32 [R], each stored activation's class (an index into ``class_names``)."""
REPLAY_IMAGES = "replay_images"
"""Payload array (replay version 2): int32 [R], the stored image each activation is a view of (module docstring)."""
