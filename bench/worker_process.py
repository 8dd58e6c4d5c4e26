"""Benchmark workers in fresh processes: the command that starts one in any env, and its peak RSS.

Stdlib only: the workers run in the Pi env too (tflite-runtime 2.14, no TensorFlow, no scipy).
"""

from __future__ import annotations

import pathlib
import resource

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKER_BOOTSTRAP = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
                    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")
"""Runs a ``bench`` module as ``__main__`` with this checkout first on the path, whatever the working
directory (the ``bench`` package imports its heavy modules lazily, so this works in the Pi env too)."""


def worker_command(python: str | pathlib.Path, module: str, *args: str) -> list[str]:
    """The argv that runs ``python -m <module> <args>`` with ``WORKER_BOOTSTRAP`` (works in the Pi env)."""
    return [str(python), "-c", WORKER_BOOTSTRAP, str(ROOT), module, *args]


def peak_rss_kib() -> int:
    """This process's peak resident set size (KiB): ``VmHWM`` of /proc/self/status.

    Not ``getrusage``'s ru_maxrss: Linux carries the forked parent's high-water mark across exec into
    ru_maxrss, so a worker started by a TensorFlow-sized parent would report the parent's peak.
    """
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
