"""On-device runtime helpers (numpy + a TFLite interpreter; never TensorFlow)."""

from tflite_train.runtime.interpreter import TrainableModel, load_interpreter_class
from tflite_train.runtime.metadata import (
    OperatorCode,
    read_metadata,
    read_metadata_buffers,
    read_operator_codes,
    read_signature_defs,
)

# The on-device trainer (issue 4): adaptation, checkpoints, image folders, byte sizes.
from tflite_train.runtime.byte_size import parse_byte_size
from tflite_train.runtime.checkpoint import (
    CHECKPOINT_FORMAT_VERSION,
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
    write_atomic,
)
from tflite_train.runtime.images import decode_png, encode_png, load_image_folder, load_images, read_image
from tflite_train.runtime.model_contract import check_metadata, layer_table
from tflite_train.runtime.timing import PhaseTimer
from tflite_train.runtime.trainer import (
    AdaptConfig,
    AdaptResult,
    adapt,
    check_labelled_set,
    class_prototypes,
    embed,
    evaluate,
    fisher_subset,
    predict,
    pseudo_query_batches,
    support_fisher,
)

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "AdaptConfig",
    "AdaptResult",
    "Checkpoint",
    "CheckpointError",
    "OperatorCode",
    "PhaseTimer",
    "TrainableModel",
    "adapt",
    "check_labelled_set",
    "check_metadata",
    "class_prototypes",
    "decode_png",
    "embed",
    "encode_png",
    "evaluate",
    "fisher_subset",
    "layer_table",
    "load_checkpoint",
    "load_image_folder",
    "load_images",
    "load_interpreter_class",
    "parse_byte_size",
    "predict",
    "pseudo_query_batches",
    "read_image",
    "read_metadata",
    "read_metadata_buffers",
    "read_operator_codes",
    "read_signature_defs",
    "restore_checkpoint",
    "save_checkpoint",
    "support_fisher",
    "write_atomic",
]
