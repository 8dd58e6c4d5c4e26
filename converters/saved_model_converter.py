"""The TFLite converter over a SavedModel this package has just written, without the public entry's
extra work.

``tf.lite.TFLiteConverter.from_saved_model(dir)`` restores the whole SavedModel -- every function
re-traced from its ``FunctionDef`` -- only to list its signature keys; ``convert()`` restores it a
second time only to attach Python source locations ("debug info") to converter messages; after the
conversion it unpacks the flatbuffer into Python objects and packs it again to append conversion
metadata (the converter's options and environment). Profiled on the Lite0 @128 export (83 functions,
``make demo``): 37 s + 38 s of restores and 16 s of metadata round trip around 81 s of conversion
proper.

An export knows its signature keys (it saved them), reports converter failures through its own
refusals (``converters.conversion_refusal``, which read the converter's message, not Python source
locations) and writes its own metadata (``converters.flatbuffer_metadata``), so ``saved_model_converter``
builds the converter the public entry would build for those keys -- the same class, flags and MLIR
pass pipeline -- and skips the two restores and the conversion metadata. A test converts the same
SavedModel both ways and compares the flatbuffers byte for byte.

The class is TensorFlow's (``tensorflow.lite.python.lite.TFLiteSavedModelConverterV2``); where a
TensorFlow release lacks a piece used here, the public entry is used instead (with a log line), so a
TensorFlow upgrade costs time, never a wrong file.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import tensorflow as tf

LOG = logging.getLogger(__name__)

__all__ = ["saved_model_converter"]


def _fast_class() -> type | None:
    """A ``TFLiteSavedModelConverterV2`` whose ``convert`` loads only the GraphDef (None if this
    TensorFlow lacks what it needs)."""
    try:
        from tensorflow.lite.python import lite
    except ImportError:
        return None
    base = getattr(lite, "TFLiteSavedModelConverterV2", None)
    metrics = getattr(lite, "_export_metrics", None)
    if base is None or metrics is None or not all(
            hasattr(base, name) for name in ("_load_saved_model", "_convert_from_saved_model")):
        return None

    class KnownSignaturesConverter(base):
        """``convert`` without the debug-info restore (``_debug_info`` stays None, its initial value)."""

        @metrics
        def convert(self):
            graph_def, _, _ = self._load_saved_model(self.saved_model_dir, self._saved_model_tags)
            return self._convert_from_saved_model(graph_def)

    return KnownSignaturesConverter


_FAST = _fast_class()


def saved_model_converter(saved_model_dir: str, signature_keys: Sequence[str]) -> tf.lite.TFLiteConverter:
    """A converter of the signatures ``signature_keys`` of the SavedModel at ``saved_model_dir`` (serving
    tag), without restoring the SavedModel and without conversion metadata (module docstring).

    Args:
      saved_model_dir: A SavedModel folder written by ``tf.saved_model.save``.
      signature_keys: Its signature keys, the ones to convert (non-empty).

    Raises:
      ValueError: no signature key.
    """
    keys = list(signature_keys)
    if not keys:
        raise ValueError("signature_keys must name at least one signature")
    converter = None
    if _FAST is not None:
        converter = _FAST(saved_model_dir, {tf.saved_model.SERVING}, keys)
        if not converter.saved_model_dir:  # the SavedModel importer declined: the public path decides
            converter = None
    if converter is None:
        LOG.info("converting through tf.lite.TFLiteConverter.from_saved_model (restores the SavedModel)")
        converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir, signature_keys=keys)
    converter.exclude_conversion_metadata = True
    return converter
