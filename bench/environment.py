"""The machine and software versions a benchmark ran on (recorded in BENCHMARKS.md)."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import sys


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def interpreter_version(interpreter_module: str) -> str | None:
    """The installed version of the distribution that provides ``interpreter_module`` (None = unknown)."""
    distribution = {"ai_edge_litert": "ai-edge-litert", "tflite_runtime": "tflite-runtime",
                    "tensorflow": "tensorflow-cpu"}.get(interpreter_module.split(".")[0])
    version = _version(distribution) if distribution else None
    if version is None and interpreter_module.startswith("tensorflow"):
        version = _version("tensorflow")
    return version


def environment(interpreter_module: str) -> dict[str, str | int | None]:
    """CPU model, usable cores, OS, 1-minute load average, and the versions of python, numpy, TensorFlow,
    the interpreter.

    Args:
      interpreter_module: The TFLite interpreter module the runtime path used
        (``TrainableModel.runtime``), e.g. ``"ai_edge_litert.interpreter"``.
    """
    import numpy

    return {
        "cpu": _cpu_model(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "tensorflow": _version("tensorflow-cpu") or _version("tensorflow"),
        "interpreter_module": interpreter_module,
        "interpreter_version": interpreter_version(interpreter_module),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
