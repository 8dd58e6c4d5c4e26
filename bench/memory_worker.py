"""The worker of ``bench.memory_profile``: runs one command (``adapt``, ``predict``) or the Python API in this
process with probes that record its resident memory after each phase (``PhaseProbe``), and returns the events
as plain data. The profile's driver starts it in a fresh process per runtime (``python -m bench.memory_profile
--worker SPEC``), so that each measurement sees only its own allocations.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from bench.worker_process import resident_kib, resident_kinds_kib

__all__ = ["INFER_CALLS", "PhaseProbe", "worker"]

INFER_CALLS = 30
"""Timed batch-1 ``infer`` calls of the API worker (after the first)."""


class PhaseProbe:
    """Records the process's resident memory after each phase of a command run in this process.

    ``installed()`` wraps, for its duration, ``TrainableModel.__init__`` ("open model"), ``TrainableModel.reopen``
    ("reopen model", where the code has it), ``TrainableModel.call`` ("call <signature>") and the image reading
    and checkpoint saving of ``adapt_job`` ("read images", "save checkpoint"); ``mark(phase)`` records any other
    point. Each event: phase, peak and current RSS (KiB), seconds since the probe was made.
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._start = time.perf_counter()

    def mark(self, phase: str) -> None:
        """Appends an event for ``phase`` (the memory now); the third and later of consecutive calls of one
        signature update the second instead (its ``calls`` counts them), so 1,000 steps are two events."""
        peak, current = resident_kib()
        event = {"phase": phase, "peak_kib": peak, "rss_kib": current, "kinds_kib": resident_kinds_kib(),
                 "seconds": time.perf_counter() - self._start}
        run = [e for e in self.events[-2:] if e["phase"] == phase]
        if phase.startswith("call ") and len(run) == 2:
            self.events[-1].update(event, calls=self.events[-1].get("calls", 1) + 1)
        else:
            self.events.append(event)

    def _after(self, owner: Any, name: str, phase) -> tuple[Any, str, Any]:
        original = getattr(owner, name)

        def probed(*args, **kwargs):
            out = original(*args, **kwargs)
            self.mark(phase(args) if callable(phase) else phase)
            return out

        setattr(owner, name, probed)
        return owner, name, original

    @contextlib.contextmanager
    def installed(self) -> Iterator["PhaseProbe"]:
        """The probes of the class docstring, removed on exit."""
        from tflite_train.runtime import adapt_job
        from tflite_train.runtime.model.interpreter import TrainableModel

        reopen = [self._after(TrainableModel, "reopen", "reopen model")] if hasattr(TrainableModel, "reopen") else []
        patched = [*reopen, self._after(TrainableModel, "__init__", "open model"),
                   self._after(TrainableModel, "call", lambda args: f"call {args[1]}"),
                   self._after(adapt_job, "load_images", "read images"),
                   self._after(adapt_job, "save_checkpoint", "save checkpoint")]
        try:
            yield self
        finally:
            for owner, name, original in reversed(patched):
                setattr(owner, name, original)


def _run_cli(argv: Sequence[str]) -> str:
    """Runs ``tflite-train <argv>`` in this process; returns what it printed (RuntimeError on a non-zero exit)."""
    from tflite_train.cli import main as cli_main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli_main(list(argv))
    if code != 0:
        raise RuntimeError(f"tflite-train {' '.join(argv)} exited with {code}")
    return printed.getvalue()


def worker(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Runs one command (``spec["kind"]``: api, adapt or predict) with a ``PhaseProbe``; returns its events,
    its times, the environment and whether TensorFlow was imported."""
    probe = PhaseProbe()
    from tflite_train.cli import main as _cli  # noqa: F401  (the command's own imports, measured as one phase)
    from tflite_train.runtime import adapt_job  # noqa: F401
    from tflite_train.runtime.model.interpreter import load_interpreter_class
    from tflite_train.runtime.model.runtimes import RUNTIMES

    module = RUNTIMES[spec["runtime"]][0]
    load_interpreter_class(module)
    probe.mark("import")
    out: dict[str, Any] = {}
    with probe.installed():
        if spec["kind"] == "api":
            out.update(_api_run(spec, module, probe))
        elif spec["kind"] == "adapt":
            record = json.loads(_run_cli(["adapt", "--model", spec["model"], "--support", spec["support"], "--query",
                                          spec["query"], "--out", spec["checkpoint"], "--runtime", spec["runtime"],
                                          "--json", "-q"]))
            out["adapt_seconds"] = {"training": record["seconds"].get("training"), "total": record["total_seconds"]}
            out["query_accuracy"] = record.get("query_accuracy")
        else:
            start = time.perf_counter()
            rows = json.loads(_run_cli(["predict", "--model", spec["model"], "--checkpoint", spec["checkpoint"],
                                        "--runtime", spec["runtime"], "--json", "-q", *spec["images"]]))
            out["predict_seconds"] = time.perf_counter() - start
            out["predictions"] = len(rows)
    probe.mark("exit")
    from bench.environment import environment

    return {**out, "events": probe.events, "environment": environment(module),
            "tensorflow_imported": "tensorflow" in sys.modules}


def _api_run(spec: Mapping[str, Any], module: str, probe: PhaseProbe) -> dict[str, Any]:
    """Opens the model, runs one batch-1 ``infer`` on the first query image, then times ``INFER_CALLS`` more."""
    from bench.call_timing import median_seconds
    from tflite_train.runtime.model.interpreter import TrainableModel
    from tflite_train.runtime.model.model_contract import input_range
    from tflite_train.runtime.images.model_input import load_images

    model = TrainableModel(spec["model"], runtime=module, weight_cache=True)
    image = load_images(spec["images"][:1], model.input_shape, input_range(model.metadata))
    model.infer(image)
    probe.mark("first infer")
    seconds, calls = median_seconds(lambda: model.infer(image), INFER_CALLS, 60.0, warm_up=0)
    return {"infer_ms": 1e3 * seconds, "infer_calls": calls}
