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


RESIDENT_KINDS = {"RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem"}
"""``/proc/<pid>/status`` fields of the resident set by kind -> short names: anonymous memory (heaps, arenas,
copies), file-backed pages (mapped libraries and files) and shared memory (e.g. XNNPACK's in-memory weight
cache, a memfd)."""


def parse_resident_kinds(text: str) -> dict[str, int] | None:
    """``{"anon": KiB, "file": KiB, "shmem": KiB}`` of a ``/proc/<pid>/status`` text (``RESIDENT_KINDS``); None
    when one is missing (not Linux, or an old kernel)."""
    kinds = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if key in RESIDENT_KINDS and len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            kinds[RESIDENT_KINDS[key]] = int(parts[0])
    return kinds if len(kinds) == len(RESIDENT_KINDS) else None


def resident_kinds_kib() -> dict[str, int] | None:
    """This process's resident set by kind now (``parse_resident_kinds``), or None where /proc cannot tell."""
    try:
        return parse_resident_kinds(pathlib.Path("/proc/self/status").read_text())
    except OSError:
        return None


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
