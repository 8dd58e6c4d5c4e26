"""On-device runtime helpers (numpy + a TFLite interpreter; never TensorFlow)."""

from tflite_train.runtime.model.cached_cut import CachedCut
from tflite_train.runtime.model.interpreter import TrainableModel, load_interpreter_class
from tflite_train.runtime.model.metadata import (
    OperatorCode,
    read_metadata,
    read_metadata_buffers,
    read_operator_codes,
    read_signature_defs,
)

# The on-device trainer (issue 4): adaptation, checkpoints, image folders, byte sizes.
from tflite_train.runtime.atomic_file import remove_stale_temps, temp_files, write_atomic
from tflite_train.runtime.byte_size import parse_byte_size
from tflite_train.runtime.checkpoint.checkpoint import (
    CHECKPOINT_FORMAT_VERSION,
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from tflite_train.runtime.checkpoint.checkpoint_schema import check_checkpoint_header
from tflite_train.runtime.errors import ImageError, ImageFolderError, OutputError, UserError
from tflite_train.runtime.model.header_schema import SchemaError, check_header
from tflite_train.runtime.model.model_metadata_schema import check_model_metadata
from tflite_train.runtime.output_names import check_output_name, sibling_stem
from tflite_train.runtime.model.selftest_schema import SelftestError, check_selftest_vectors
from tflite_train.runtime.model.flatbuffer_verify import FlatbufferError, verify_model
from tflite_train.runtime.images.image_folder import ImageFolder, load_image_folder, scan_image_folder
from tflite_train.runtime.images.images import ImageLimits, decode_image, read_image
from tflite_train.runtime.images.model_input import load_images, to_model_input
from tflite_train.runtime.model.model_contract import check_metadata, input_range, layer_table
from tflite_train.runtime.output_lock import OutputLockedError, output_lock
from tflite_train.runtime.output_path import check_output_file
from tflite_train.runtime.peak_memory import ResidentMemory, resident_memory
from tflite_train.runtime.adaptation.plots import plot_adaptation
from tflite_train.runtime.adaptation.progress import Progress, no_progress, terminal_progress
from tflite_train.runtime.report_schema import check_run_report
from tflite_train.runtime.model.runtimes import RUNTIMES, resolve_runtime
from tflite_train.runtime.adaptation.summary import adapt_record, format_adapt_summary, format_predictions
from tflite_train.runtime.text import printable
from tflite_train.runtime.adaptation.timing import PhaseTimer
from tflite_train.runtime.adaptation.protocol import DEFAULT_PROTOCOL, Protocol
from tflite_train.runtime.adaptation.adapt_config import AdaptConfig
from tflite_train.runtime.adaptation.prediction import class_logits, evaluate, predict
from tflite_train.runtime.adaptation.trainer import (
    AdaptResult,
    adapt,
    check_labelled_set,
    class_prototypes,
    embed,
    fisher_subset,
    support_fisher,
)
from tflite_train.runtime.adaptation.pseudo_queries import draw_views, pseudo_query_batches
from tflite_train.runtime.adaptation.augmentation import AugmentConfig, augment
from tflite_train.runtime.adaptation.cache_plan import CachePlan, plan_cache

# Shipping what was learned (issue 42): a plain classifier baked from an export and a checkpoint.
from tflite_train.runtime.baked.baked_classifier import BakedClassifier, BakedModelError, read_baked_metadata
from tflite_train.runtime.baked.bake_job import BakeResult, run_bake
from tflite_train.runtime.baked.baked_model import BakeError, bake_classifier
# Continued adaptation (issue 42): a run from a checkpoint, and the replay memory it keeps.
from tflite_train.runtime.adaptation.replay_memory import DEFAULT_REPLAY_BUDGET_BYTES, ReplayMemory, keep_rows
from tflite_train.runtime.adaptation.continual import AdaptStart, checkpoint_after, continue_from, saved_selection

__all__ = [
    "AdaptConfig",
    "AugmentConfig",
    "AdaptResult",
    "BakeError",
    "BakeResult",
    "BakedClassifier",
    "BakedModelError",
    "AdaptStart",
    "CachePlan",
    "CachedCut",
    "DEFAULT_PROTOCOL",
    "DEFAULT_REPLAY_BUDGET_BYTES",
    "CHECKPOINT_FORMAT_VERSION",
    "Checkpoint",
    "CheckpointError",
    "FlatbufferError",
    "ImageError",
    "ImageFolder",
    "ImageFolderError",
    "ImageLimits",
    "OperatorCode",
    "OutputError",
    "OutputLockedError",
    "PhaseTimer",
    "Progress",
    "Protocol",
    "RUNTIMES",
    "ReplayMemory",
    "ResidentMemory",
    "SchemaError",
    "SelftestError",
    "TrainableModel",
    "UserError",
    "adapt",
    "augment",
    "adapt_record",
    "bake_classifier",
    "check_labelled_set",
    "checkpoint_after",
    "check_checkpoint_header",
    "check_header",
    "check_metadata",
    "check_model_metadata",
    "check_output_name",
    "check_run_report",
    "check_selftest_vectors",
    "check_output_file",
    "class_logits",
    "class_prototypes",
    "continue_from",
    "decode_image",
    "draw_views",
    "embed",
    "evaluate",
    "fisher_subset",
    "format_adapt_summary",
    "format_predictions",
    "input_range",
    "keep_rows",
    "layer_table",
    "plan_cache",
    "load_checkpoint",
    "load_image_folder",
    "load_images",
    "load_interpreter_class",
    "no_progress",
    "output_lock",
    "parse_byte_size",
    "plot_adaptation",
    "predict",
    "printable",
    "pseudo_query_batches",
    "read_baked_metadata",
    "read_image",
    "read_metadata",
    "read_metadata_buffers",
    "read_operator_codes",
    "resident_memory",
    "resolve_runtime",
    "read_signature_defs",
    "remove_stale_temps",
    "restore_checkpoint",
    "run_bake",
    "save_checkpoint",
    "saved_selection",
    "scan_image_folder",
    "sibling_stem",
    "support_fisher",
    "temp_files",
    "terminal_progress",
    "to_model_input",
    "verify_model",
    "write_atomic",
]
