"""TensorFlow's own logging, silenced for the CLI commands that import it (unless -v / --debug)."""

from __future__ import annotations

import importlib
import logging
import os
import sys

from tflite_train.native_stderr import capturing_stderr

__all__ = ["TF_LOGGERS", "quiet_tensorflow"]

TF_LOGGERS = ("tensorflow", "absl")
"""Python loggers TensorFlow writes its INFO/WARNING lines to (e.g. the SavedModel's renamed inputs)."""
LOG = logging.getLogger(__name__)


def quiet_tensorflow(verbose: bool) -> None:
    """Silences TensorFlow for a command that imports it, unless ``verbose`` (-v/--debug): its C++ logs
    (``TF_CPP_MIN_LOG_LEVEL=3``, unless the user set it), its Python loggers below ERROR, and the lines its
    import writes to the terminal whatever that level (absl's "All log messages before
    absl::InitializeLog() ..." and the oneDNN notice of TensorFlow 2.21): TensorFlow is imported here with
    file descriptor 2 captured, the lines logged at DEBUG, so that a one-line error or summary is all a
    command prints. Call it before TensorFlow is imported; only the CLI does (the library leaves global
    logging alone)."""
    if verbose:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in TF_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    if "tensorflow" not in sys.modules:
        capturing_stderr(lambda: importlib.import_module("tensorflow"), logging.DEBUG, LOG,
                         "TensorFlow's start-up")
