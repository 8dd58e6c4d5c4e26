"""Which interpreter runs an exported model, and how: the choice ``TrainableModel`` opens a file with.

The runtime is ``ai_edge_litert.interpreter``, ``tflite_runtime.interpreter`` or, as a last fallback,
``tensorflow.lite.python.interpreter`` (whichever imports first; ``load_interpreter_class``). On LiteRT the
signatures run on its CompiledModel API with XNNPACK's in-memory weight cache (``compiled_signatures``) when
every tensor shape of the file follows from its input shapes (``static_shapes``); else on its Interpreter.

On tflite-runtime, whose wheel does not apply its default XNNPACK delegate, ``xnnpack=True`` creates the
delegate explicitly (``tflite_train.runtime.model.xnnpack``); when that fails the model runs on the builtin kernels,
with a warning. It is opt-in: with it, 2.14 goes wrong once a train step has run (measured on the fixtures):
a step at another batch size writes NaN into the state, and a larger batch, or a ``fisher`` followed by a step,
can crash the process (rebuilding the interpreter at each such change was tried and still crashed in one
repeated-``adapt`` sequence); ``infer`` at any batch and ``fisher`` before the first step are fine. At a fixed
batch size it runs the whole contract, matches the builtin kernels and passes the self-test.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from tflite_train.runtime.model.compiled_signatures import CompiledSignatures, compiled_model_available
from tflite_train.runtime.model.flatbuffer_graph import read_graph
from tflite_train.runtime.model.static_shapes import value_shaped_operators
from tflite_train.runtime.model.xnnpack import XnnpackDelegate

__all__ = ["CACHE_UNSAFE_XNNPACK", "EXPLICIT_XNNPACK_MODULES", "INTERPRETER_MODULES", "WEIGHT_CACHE_MODULES",
           "load_interpreter_class", "open_interpreter"]

LOG = logging.getLogger(__name__)
INTERPRETER_MODULES = ("ai_edge_litert.interpreter", "tflite_runtime.interpreter", "tensorflow.lite.python.interpreter")
"""The runtimes, in the order they are tried."""
EXPLICIT_XNNPACK_MODULES = {"tflite_runtime.interpreter": "tflite_runtime"}
"""Interpreter modules whose default XNNPACK delegate is not applied -> the package holding XNNPACK."""
CACHE_UNSAFE_XNNPACK = "tflite-runtime 2.14's explicit XNNPACK delegate breaks on the cache's signature sequence"
"""Why a model on the explicit delegate never steps from the cached cut (``TrainableModel.cache_unsafe``)."""
WEIGHT_CACHE_MODULES = ("ai_edge_litert.interpreter",)
"""Interpreter modules whose package runs the model with XNNPACK's weight cache (``compiled_signatures``)."""


def load_interpreter_class(preferred: str | None = None) -> tuple[type, str]:
    """(Interpreter class, module name) of the first importable runtime (``preferred`` first).

    Raises:
      ImportError: when no runtime is installed.
    """
    names = ((preferred,) if preferred else ()) + INTERPRETER_MODULES
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return module.Interpreter, name
    raise ImportError(f"no TFLite interpreter found; tried {names}")


def open_interpreter(interpreter_cls: type, runtime: str, content: bytes, num_threads: int, *, xnnpack: bool,
                     weight_cache: bool, quantized: str = "") -> tuple[Any, bool]:
    """(What runs the signatures of ``content``, whether an explicit XNNPACK delegate was applied).

    In order: the CompiledModel with XNNPACK's weight cache (``CompiledSignatures``) when ``weight_cache``, the
    runtime is in ``WEIGHT_CACHE_MODULES``, its CompiledModel API exists and no operator's output shape depends
    on tensor values (``value_shaped_operators``); an Interpreter with an explicitly created XNNPACK delegate
    when ``xnnpack`` and the runtime is in ``EXPLICIT_XNNPACK_MODULES`` (not for a ``--quantize`` export:
    ``quantized``); else the plain Interpreter. A path that fails falls back to the next with a warning.

    Args:
      interpreter_cls: The runtime's ``Interpreter`` class (``load_interpreter_class``).
      runtime: Its module name.
      content: The model file's bytes (checked by the caller).
      num_threads: Interpreter threads.
      xnnpack: Create the XNNPACK delegate explicitly where the runtime does not apply it (opt-in: module
        docstring).
      weight_cache: Allow the CompiledModel with XNNPACK's weight cache.
      quantized: The export's ``--quantize`` mode (metadata ``config.quantize``), "" for a float export.
    """
    explicit = xnnpack and runtime in EXPLICIT_XNNPACK_MODULES
    if weight_cache and not explicit and runtime in WEIGHT_CACHE_MODULES and compiled_model_available():
        value_shaped = value_shaped_operators(read_graph(content))
        if value_shaped:
            LOG.info("%s: running on its Interpreter, not on the CompiledModel with XNNPACK's weight cache (more "
                     "memory): output shapes of %s depend on tensor values", runtime,
                     ", ".join(value_shaped[:3]) + (", ..." if len(value_shaped) > 3 else ""))
        else:
            try:
                return CompiledSignatures(content, num_threads), False
            except (RuntimeError, ValueError) as err:
                LOG.warning("%s: the CompiledModel API with XNNPACK's weight cache failed (%s: %s); running on "
                            "its Interpreter (more memory)", runtime, type(err).__name__, err)
    package = EXPLICIT_XNNPACK_MODULES.get(runtime)
    if xnnpack and package and quantized:
        LOG.warning("%s: no explicit XNNPACK delegate for a --quantize %s file (tflite-runtime 2.14's delegate "
                    "corrupts the heap once reset_state follows train_step: a crash when the interpreter is "
                    "freed; docs/int8.md); running on the builtin kernels", runtime, quantized)
    elif xnnpack and package:
        try:
            delegate = XnnpackDelegate(num_threads, package)
            interpreter = interpreter_cls(model_content=content, num_threads=num_threads,
                                          experimental_delegates=[delegate])
            delegate.finalize()
        except (ImportError, OSError, RuntimeError, ValueError) as err:
            LOG.warning("%s: the XNNPACK delegate could not be applied (%s: %s); running on the builtin "
                        "kernels (slower)", runtime, type(err).__name__, err)
        else:
            return interpreter, True
    return interpreter_cls(model_content=content, num_threads=num_threads), False
