"""Choosing the TFLite interpreter by name: an unknown or missing runtime is an error, never a fallback."""

from __future__ import annotations

import importlib.util

from tflite_train.runtime.errors import UserError

RUNTIMES = {
    "litert": ("ai_edge_litert.interpreter", "pip install ai-edge-litert"),
    "tflite-runtime": ("tflite_runtime.interpreter", "pip install tflite-runtime"),
    "tensorflow": ("tensorflow.lite.python.interpreter", "pip install tensorflow-cpu"),
}
"""Runtime name -> (interpreter module, how to install it)."""


def resolve_runtime(name: str | None) -> str | None:
    """The interpreter module for a runtime name (or module name); None -> None (the first installed).

    Raises:
      UserError: an unknown name (the message lists the known ones) or a runtime that is not installed.
    """
    if name is None:
        return None
    by_module = {module: key for key, (module, _) in RUNTIMES.items()}
    key = by_module.get(name, name)
    if key not in RUNTIMES:
        raise UserError(f"unknown runtime {name!r}; known: {', '.join(RUNTIMES)}")
    module, install = RUNTIMES[key]
    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:  # the parent package is missing
        found = False
    if not found:
        raise UserError(f"runtime {key!r} ({module}) is not installed; install it with `{install}` or choose another "
                        f"--runtime")
    return module
