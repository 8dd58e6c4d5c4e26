"""TensorFlow's own logging, silenced for the CLI commands that import it (unless -v / --debug)."""

from __future__ import annotations

import logging
import os

__all__ = ["TF_LOGGERS", "quiet_tensorflow"]

TF_LOGGERS = ("tensorflow", "absl")
"""Python loggers TensorFlow writes its INFO/WARNING lines to (e.g. the SavedModel's renamed inputs)."""


def quiet_tensorflow(verbose: bool) -> None:
    """Silences TensorFlow for a command that imports it, unless ``verbose`` (-v/--debug): its C++ logs
    (``TF_CPP_MIN_LOG_LEVEL=3``, unless the user set it) and its Python loggers below ERROR. Call it
    before TensorFlow is imported; only the CLI does (the library leaves global logging alone)."""
    if verbose:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in TF_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
