"""Benchmark workers in fresh processes: the command that starts one in any env, and its peak RSS.

No TensorFlow and no scipy: the workers run in the Pi env too (tflite-runtime 2.14).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def worker_command(python: str | pathlib.Path, module: str, *args: str) -> list[str]:
    """The argv ``python -m <module> <args>`` of a worker; run it with ``worker_env`` (works in the Pi env:
    the ``bench`` package imports its heavy modules lazily)."""
    return [str(python), "-m", module, *args]


def worker_env(library: str | os.PathLike | None = None, **variables: str) -> dict[str, str]:
    """The environment of a ``worker_command``: ``PATH``, this checkout on ``PYTHONPATH`` (after ``library``),
    ``PYTHONSAFEPATH`` (Python >= 3.11: the working directory is not put first on the path), and ``variables``.

    ``library``: a directory put before this checkout on the path, e.g. one holding only an older
    ``tflite_train`` package (the worker then measures that code with this checkout's ``bench``).
    """
    path = os.pathsep.join(([os.fspath(library)] if library else []) + [str(ROOT)])
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": path, "PYTHONSAFEPATH": "1", **variables}


def resident_kib() -> tuple[int, int | None]:
    """(peak, current) resident set size of this process (KiB; current None = unknown), read by this
    checkout's ``tflite_train/runtime/peak_memory.py`` (``VmHWM``, not ru_maxrss: its docstring says why),
    loaded from its file: stdlib only, and the same reader when a worker measures an older ``tflite_train``
    placed first on the path (``worker_env(library=...)``)."""
    name = "bench_peak_memory"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tflite_train" / "runtime" / "peak_memory.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before exec: dataclasses looks the module up by name
        spec.loader.exec_module(module)
    memory = module.resident_memory()
    return memory.peak_bytes // 1024, None if memory.current_bytes is None else memory.current_bytes // 1024


def peak_rss_kib() -> int:
    """This process's peak resident set size (KiB; ``resident_kib``)."""
    return resident_kib()[0]
