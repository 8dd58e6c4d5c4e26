"""Why a TFLite conversion failed, in one line a user can act on (never Flex / Select TF ops, which the
device runtimes do not have), and the converter's C++ diagnostics routed to the log."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import tensorflow as tf
from tensorflow.lite.python.convert_phase import ConverterError

from tflite_train import native_stderr
from tflite_train.converters.graph.ir import Graph, Node
from tflite_train.converters.ops import registry

LOG = logging.getLogger("tflite_train.converters.export")

__all__ = ["RNN_CLASSES", "ConversionError", "capturing_stderr", "conversion_refusal", "unconverted_ops"]

RNN_CLASSES = ("LSTM", "GRU", "SimpleRNN", "RNN", "Bidirectional", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D")
"""Keras recurrent layers: their loops convert to builtin ops when unrolled (``unroll=True``)."""


class ConversionError(ValueError):
    """The TFLite converter cannot express the model with builtin ops (names the Keras layer when one is to blame)."""


def capturing_stderr(run: Callable[[], bytes], level: int) -> bytes:
    """``run()`` with file descriptor 2 captured: the converter's C++ diagnostics (written straight to
    stderr, whatever the logging settings) are logged at ``level`` instead (logger ``converters.export``)."""
    return native_stderr.capturing_stderr(run, level, LOG, "TFLite converter")


def unconverted_ops(report: str) -> list[str]:
    """The TensorFlow ops a converter error ``report`` names as not legalised to builtins
    (e.g. ``tf.TensorListReserve``)."""
    return sorted(set(re.findall(r"'(tf\.\w+)' (?:op\b|that was)", report)) |
                  set(re.findall(r"failed to legalize operation '(tf\.\w+)'", report)))


def _converts_alone(node: Node, graph: Graph) -> bool:
    """True when the frozen ``node`` alone (its Keras call, any batch size as in the export) converts with builtin
    ops only."""
    by_name = graph.by_name
    specs = [tf.TensorSpec((None, *by_name[i].shape), tf.float32) for i in node.inputs]
    function = tf.function(lambda *xs: node.call(list(xs)), input_signature=specs)
    holder = tf.Module()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()], holder)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    try:
        capturing_stderr(converter.convert, logging.DEBUG)
    except ConverterError as err:
        LOG.debug("frozen layer %r does not convert alone: %s", node.name, err)
        return False
    return True


def conversion_refusal(graph: Graph, report: str) -> str:
    """One line for a failed conversion: the first frozen (``opaque``) layer of ``graph`` that does not
    convert to builtin ops on its own, what it needs, and what the user can do -- never Flex / Select TF ops,
    which the device runtimes do not have.

    Args:
      graph: The prepared graph whose module failed to convert.
      report: The converter's error text.
    """
    ops = unconverted_ops(report)
    needs = f" (it needs {', '.join(ops)})" if ops else ""
    for node in graph.nodes:
        if not registry.is_opaque(node) or _converts_alone(node, graph):
            continue
        fix = ("rebuild it with unroll=True (an unrolled recurrent layer converts)" if node.keras_class in RNN_CLASSES
               else "replace it by built-in Keras layers that TFLite converts")
        return (f"layer {node.name!r} ({node.keras_class}) does not convert to TFLite builtin ops{needs}, the only "
                f"ops the device runtimes have: {fix}, or give --feature-layer below it")
    return (f"the TFLite converter cannot express the model with builtin ops{needs}, the only ops the device runtimes "
            "have; no single layer is to blame (run with --debug for the converter's report)")
