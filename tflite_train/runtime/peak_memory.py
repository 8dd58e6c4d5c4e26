"""The process's resident memory as the operating system reports it: peak and current resident set size.

Stdlib only. On Linux both come from ``/proc/self/status`` (``VmHWM``: the high-water mark of the
resident set, ``VmRSS``: the resident set now). Not ``getrusage``'s ``ru_maxrss`` where /proc is
readable: Linux carries the high-water mark of a forked parent across ``exec`` into ``ru_maxrss``, so
a process started by a TensorFlow-sized parent would report the parent's peak. Elsewhere the peak is
``ru_maxrss`` (KiB on Linux, bytes on macOS) and the current size is unknown.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys

__all__ = ["ResidentMemory", "parse_proc_status", "resident_memory"]

PROC_STATUS = pathlib.Path("/proc/self/status")


@dataclasses.dataclass(frozen=True)
class ResidentMemory:
    """Resident set size of this process, in bytes: the peak so far and the current one (None = unknown)."""

    peak_bytes: int
    current_bytes: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        """JSON-ready: ``{"peak_bytes": ..., "current_bytes": ...}``."""
        return {"peak_bytes": self.peak_bytes, "current_bytes": self.current_bytes}


def parse_proc_status(text: str) -> ResidentMemory | None:
    """``VmHWM`` and ``VmRSS`` (``"VmHWM:   12345 kB"``) of a ``/proc/<pid>/status`` text; None without ``VmHWM``."""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if key in ("VmHWM", "VmRSS") and len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            fields[key] = int(parts[0]) * 1024
    if "VmHWM" not in fields:
        return None
    return ResidentMemory(fields["VmHWM"], fields.get("VmRSS"))


def resident_memory() -> ResidentMemory:
    """This process's peak and current resident set size (module docstring: where they come from)."""
    try:
        parsed = parse_proc_status(PROC_STATUS.read_text())
    except OSError:
        parsed = None
    if parsed is not None:
        return parsed
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return ResidentMemory(peak if sys.platform == "darwin" else peak * 1024)
