"""On-device runtime helpers (numpy + a TFLite interpreter; never TensorFlow)."""

from tflite_train.runtime.interpreter import TrainableModel, load_interpreter_class
from tflite_train.runtime.metadata import OperatorCode, read_metadata, read_metadata_buffers, read_operator_codes

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
from tflite_train.runtime.errors import ImageError, ImageFolderError, OutputError, UserError
from tflite_train.runtime.images import (
    ImageFolder,
    ImageLimits,
    decode_image,
    load_image_folder,
    load_images,
    read_image,
    scan_image_folder,
    to_model_input,
)
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
    "ImageError",
    "ImageFolder",
    "ImageFolderError",
    "ImageLimits",
    "OperatorCode",
    "OutputError",
    "PhaseTimer",
    "TrainableModel",
    "UserError",
    "adapt",
    "check_labelled_set",
    "check_metadata",
    "class_prototypes",
    "decode_image",
    "embed",
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
    "restore_checkpoint",
    "save_checkpoint",
    "scan_image_folder",
    "support_fisher",
    "to_model_input",
    "write_atomic",
]
