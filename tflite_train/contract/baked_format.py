"""The baked classifier (CONTRACT.md "Baked classifier"): what ``tflite-train bake`` writes and readers check.

A baked classifier is a plain inference ``.tflite`` made from an exported model and one of its checkpoints:
one signature, :data:`CLASSIFY`, from ``images`` (the export's input, same shape, range and in-graph
normalisation) to ``logits`` f32[N, k] over the checkpoint's k classes (the cosine head with the adapted
weights and the prototypes as constants); no other signature, no variables. Its ``Model.metadata`` has two
entries: :data:`BAKED_METADATA_NAME` (UTF-8 JSON, :data:`BAKED_FIELDS`) and the integrity seal
(``metadata_schema.CHECKSUM_NAME``, as in an export). The version rule is the export's
(``validation.check_format``) with :data:`BAKED_FORMAT` and :data:`BAKED_FORMAT_VERSION`.
"""

from __future__ import annotations

from tflite_train.contract.checkpoint_format import CK_CLASS_NAMES
from tflite_train.contract.metadata_schema import (F_FORMAT, F_FORMAT_VERSION, F_HEAD, F_INPUT, F_MODEL_ID, F_SCALE,
                                                   F_TYPE, HEAD_TYPE, MetadataField)
from tflite_train.contract.signatures import IMAGES, LOGITS, SignatureSpec, TensorSpec

__all__ = ["BAKED_FORMAT", "BAKED_FORMAT_VERSION", "BAKED_METADATA_NAME", "CLASSIFY", "CLASSIFY_SPEC",
           "F_CHECKPOINT_SHA256", "BAKED_FIELDS"]

BAKED_FORMAT = "tflite-train-classifier"
"""Value of the baked metadata's ``format`` field."""
BAKED_FORMAT_VERSION = 1
"""The baked metadata version this code writes and reads (the version rule of the export's metadata)."""
BAKED_METADATA_NAME = "tflite_train_classifier"
"""Name of the ``Model.metadata`` entry holding a baked classifier's metadata JSON (UTF-8)."""
CLASSIFY = "classify"
"""The baked classifier's one signature."""
F_CHECKPOINT_SHA256 = "checkpoint_sha256"

CLASSIFY_SPEC = SignatureSpec(
    CLASSIFY, (TensorSpec(IMAGES, "float32", ("N", "H", "W", "C")),), (TensorSpec(LOGITS, "float32", ("N", "k")),),
    (), (), "Class scores of the adapted model: logits_c = s cos(e, p_c) for the checkpoint's k classes, as "
            "infer's first k logits after restoring the checkpoint; softmax gives the confidences.")
"""The one signature of a baked classifier (k: the number of classes, ``class_names``)."""

BAKED_FIELDS: tuple[MetadataField, ...] = (
    MetadataField(F_FORMAT, "string", f'always "{BAKED_FORMAT}"'),
    MetadataField(F_FORMAT_VERSION, "int", "format version (the version policy of the export's metadata)"),
    MetadataField(CK_CLASS_NAMES, "[string] x k", "the class of each logit, in order (the checkpoint's class names, "
                  "else 0..k-1)"),
    MetadataField(F_INPUT, "object", "the export's input object, unchanged (height, width, channels, dtype, range, "
                  "mean, std, ...): the images take the same range, normalised inside the graph"),
    MetadataField(F_HEAD, "object", f'{{"{F_TYPE}": "{HEAD_TYPE}", "{F_SCALE}": cosine scale s}}: how the logits '
                  "were computed (the prototypes are constants of the graph)"),
    MetadataField(F_MODEL_ID, "string", "the model_id of the export it was baked from"),
    MetadataField(F_CHECKPOINT_SHA256, "string", "sha256 (64 hex digits) of the checkpoint file it was baked from"),
)
"""The fields of the baked metadata JSON, all required (readers ignore unknown fields)."""
