"""Where the interpreter's time goes inside one signature call, from CPU samples of the native code.

TFLite's Python interpreters expose no per-op profiler, and single-op models (``tools.diagnostics.train_step_profile``)
time each part alone, with its tensors hot in the cache: their sum fell well short of the whole cached
TinyTrain step (``bench/results/CACHED_STEP_OVERHEAD.md``). This script samples the whole call instead:
a child process runs one signature ``--calls`` times under Linux ``perf record`` (call graphs from DWARF
unwinding), and each sample's stack is attributed to what it was doing (``CATEGORIES``, first match
wins, read from the innermost frame outward):

* copies: the ``memcpy`` of a ``READ_VARIABLE`` (TFLite copies the whole variable into its output), of an
  ``ASSIGN_VARIABLE`` (copies the new value in), inside an XNNPACK operator (a reshape or copy node
  moves the tensor), of an ``IF`` handing its inputs to a branch, or inlined into an op kernel whose own
  frame the unwinder lost (the copy's caller is then ``Subgraph::InvokeImpl``: in the runs looked at,
  ``READ_VARIABLE``'s copy, which other runs attribute to it);
* XNNPACK weight packing run at every call (a matmul whose weights are not constants);
* matmul and convolution kernels (GEMM), depthwise convolution, elementwise and reduction kernels;
* the ``IF`` kernel's own work (branch set-up) and everything else inside ``Subgraph::Invoke``.

Each category is split by where the sample lies: inside an ``IF`` branch (the copy-on-write forward and
the per-layer update branches of ``converters.backward_pass``) or in the signature's own graph.

    python -m tools.diagnostics.step_perf_profile --model M.tflite [--calls 2500] [--out bench/results/STEP_PERF_PROFILE.md]

Workloads: ``infer``; the step from the cached cut with nothing selected; the same step with the
TinyTrain policy's selection (``tools.diagnostics.cached_step_overhead.policy_selection``). ai-edge-litert, one thread,
pinned to CPU 0. Needs ``perf`` (Debian ``linux-perf``) and ``perf_event_paranoid`` <= 2; the parsing and
attribution are pure functions of ``perf script -F ip,sym`` text.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence

import numpy as np

from bench.table_output import emit, markdown_table
from bench.worker_process import worker_command, worker_env
from tools.diagnostics.cached_step_overhead import add_model_arguments, cached_step

__all__ = ["CATEGORIES", "Profile", "attribute", "main", "parse_perf_script", "render"]

LOG = logging.getLogger(__name__)

WORKLOADS = ("infer", "cached step, nothing selected", "cached step, the policy's selection")

INVOKE = "tflite::Subgraph::Invoke"
"""A frame every sample of the interpreter's own work has (the signature's graph and the branches it calls)."""

IF_FRAME = "if_kernel::Eval"


def _op(frame: str) -> str | None:
    """The TFLite builtin op whose kernel a frame belongs to (``read_variable``...), or None."""
    match = re.search(r"tflite::ops::builtin::([a-z_0-9]+)::", frame)
    return match.group(1) if match else None


def _is_copy(leaf: str) -> bool:
    return any(name in leaf for name in ("memcpy", "memmove", "memset"))


def _nearest_op(stack: Sequence[str]) -> str | None:
    """The innermost builtin op on the stack (XNNPACK's delegate kernel counts as ``xnnpack``)."""
    for frame in stack:
        if "xnnpack" in frame or frame.startswith("xnn_"):
            return "xnnpack"
        op = _op(frame)
        if op is not None:
            return op
    return None


def _copy_by(stack: Sequence[str], *names: str) -> bool:
    """A copy routine whose caller (the next frame) or innermost builtin op is one of ``names``."""
    if not _is_copy(stack[0]):
        return False
    caller = stack[1] if len(stack) > 1 else ""
    return any(name in caller for name in names) or _nearest_op(stack) in names


CATEGORIES: tuple[tuple[str, object], ...] = (
    ("copy: variable reads (READ_VARIABLE)", lambda s: _copy_by(s, "read_variable")),
    ("copy: variable writes (ASSIGN_VARIABLE)", lambda s: _copy_by(s, "assign_variable", "AssignFrom")),
    ("copy: inside XNNPACK (reshape and copy nodes)", lambda s: _copy_by(s, "xnnpack", "xnn_", "pthreadpool")),
    ("copy: an op kernel whose frame was not unwound (inlined memcpy)",
     lambda s: _is_copy(s[0]) and len(s) > 1 and "Subgraph::InvokeImpl" in s[1]),
    ("copy: IF inputs and outputs", lambda s: _copy_by(s, "if_kernel", "DeepOrShallowCopy")),
    ("weight packing at every call (XNNPACK)", lambda s: "packw" in s[0]),
    ("depthwise convolution", lambda s: "dwconv" in s[0] or "DepthwiseConv" in s[0]),
    ("matmul and convolution (GEMM)", lambda s: "gemm" in s[0] or "FullyConnected" in s[0] or "Conv<" in s[0]),
    ("elementwise and reductions", lambda s: s[0].startswith(("xnn_f32_v", "xnn_f32_r"))),
    ("IF kernel: branch set-up", lambda s: _nearest_op(s) == "if_kernel"),
    ("other", lambda s: True),
)
"""(label, predicate on a stack, innermost frame first); the first match names a sample."""


def parse_perf_script(lines: Iterable[str]) -> list[tuple[str, ...]]:
    """Stacks (innermost frame first, symbol names only) of ``perf script -F ip,sym`` output: one frame per
    line as ``<hex ip> <symbol>``, samples separated by blank lines; an unresolved frame is ``[unknown]``."""
    stacks, frames = [], []
    for line in lines:
        text = line.strip()
        if not text:
            if frames:
                stacks.append(tuple(frames))
                frames = []
            continue
        parts = text.split(None, 1)
        frames.append(parts[1] if len(parts) > 1 else "[unknown]")
    if frames:
        stacks.append(tuple(frames))
    return stacks


@dataclasses.dataclass(frozen=True)
class Profile:
    """The attributed samples of one workload.

    Attributes:
      samples: Every sample of the process.
      invoke: The samples inside ``Subgraph::Invoke`` (the interpreter's work).
      shares: label -> (samples inside IF branches, samples in the signature's own graph).
    """

    samples: int
    invoke: int
    shares: dict[str, tuple[int, int]]


def attribute(stacks: Sequence[Sequence[str]]) -> Profile:
    """Counts each stack inside the interpreter under its first matching category (pure)."""
    counts: dict[str, list[int]] = {label: [0, 0] for label, _ in CATEGORIES}
    invoke = 0
    for stack in stacks:
        if not any(INVOKE in frame for frame in stack):
            continue
        invoke += 1
        label = next(label for label, matches in CATEGORIES if matches(stack))
        counts[label][0 if any(IF_FRAME in frame for frame in stack) else 1] += 1
    return Profile(len(stacks), invoke, {label: (c[0], c[1]) for label, c in counts.items()})


def render(model: str, profiles: dict[str, Profile], ms_per_call: dict[str, float], command: str = "",
           load: str = "") -> str:
    """A Markdown table per workload: each category's share of the interpreter's samples, split into IF
    branches and the signature's graph, and its share of the measured ms per call (pure)."""
    lines = ["# Where a signature call spends its time: CPU samples of the native code (`tools/diagnostics/step_perf_profile.py`)",
             "", f"Model: `{model}`." + (f" Command: `{command}`." if command else "") + (f" {load}" if load else ""),
             ""]
    for workload, profile in profiles.items():
        ms = ms_per_call.get(workload)
        lines += [f"## {workload}" + (f": {ms:.2f} ms per call" if ms is not None else ""), "",
                  f"{profile.invoke} of {profile.samples} samples inside the interpreter's invoke.", ""]
        total = max(profile.invoke, 1)
        rows = []
        for label, (in_if, main) in sorted(profile.shares.items(), key=lambda kv: -sum(kv[1])):
            if in_if + main == 0:
                continue
            share = (in_if + main) / total
            rows.append([label, f"{100 * share:.1f} %", f"{100 * in_if / total:.1f} %", f"{100 * main / total:.1f} %",
                         f"{share * ms:.2f}" if ms is not None else ""])
        lines += [*markdown_table(("category", "share", "in IF branches", "in the signature's graph", "ms per call"),
                                  rows), ""]
    return "\n".join(lines)


# ------------------------------------------------------------------ side effects: the child and perf
def _loop(model_path: str, workload: str, calls: int, cache: str) -> float:
    """Runs ``workload`` ``calls`` times after its set-up; returns the ms per call of the loop."""
    setup = cached_step(model_path, cache)
    model = setup.model
    if workload == WORKLOADS[1]:
        model.set_selection(np.zeros_like(model.selection_mask(setup.selection)))

    def call():
        if workload == WORKLOADS[0]:
            model.infer(setup.image)
        else:
            model.train_step_from(setup.cut, setup.activation, setup.label)

    call()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e3


def profile_workload(model_path: str, workload: str, calls: int, cache: str, frequency: int) -> tuple[Profile, float]:
    """Samples a child process running ``workload`` under ``perf record``; returns its profile and ms per call."""
    with tempfile.TemporaryDirectory() as tmp:
        data, result = os.path.join(tmp, "perf.data"), os.path.join(tmp, "result.json")
        child = worker_command(sys.executable, "tools.diagnostics.step_perf_profile", "--worker", workload, "--model",
                               model_path, "--calls", str(calls), "--cache", cache, "--result", result)
        subprocess.run(["perf", "record", "-q", "-F", str(frequency), "--call-graph", "dwarf,32768", "-o", data,
                        "taskset", "-c", "0", *child], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, **worker_env()})
        with subprocess.Popen(["perf", "script", "-i", data, "-F", "ip,sym"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) as script:
            stacks = parse_perf_script(script.stdout)
        with open(result) as f:
            ms = json.load(f)["ms_per_call"]
    return attribute(stacks), ms


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CPU-sample profile of infer and the cached TinyTrain step")
    add_model_arguments(parser)
    parser.add_argument("--calls", type=int, default=2500, help="calls per workload (default 2500)")
    parser.add_argument("--frequency", type=int, default=1500, help="perf sampling frequency in Hz (default 1500)")
    parser.add_argument("--out", help="write the Markdown report here (default: print it)")
    parser.add_argument("--worker", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.calls < 1 or args.frequency < 1:
        parser.error("--calls and --frequency must be >= 1")
    if args.worker:
        ms = _loop(args.model, args.worker, args.calls, args.cache)
        with open(args.result, "w") as f:
            json.dump({"ms_per_call": ms}, f)
        return 0
    if not os.path.isfile(args.model):
        parser.error(f"--model {args.model}: no such file")
    if shutil.which("perf") is None:
        parser.error("perf not found: install Linux perf (Debian package linux-perf)")
    start = os.getloadavg()[0]
    profiles, ms = {}, {}
    for workload in WORKLOADS:
        LOG.info("profiling %s (%d calls)", workload, args.calls)
        try:
            profiles[workload], ms[workload] = profile_workload(args.model, workload, args.calls, args.cache,
                                                                args.frequency)
        except subprocess.CalledProcessError as err:
            print(f"step_perf_profile: {workload}: {' '.join(err.cmd[:2])} failed with exit status {err.returncode} "
                  "(is /proc/sys/kernel/perf_event_paranoid above 2?)", file=sys.stderr)
            return 1
    load = (f"ai-edge-litert, one interpreter thread, pinned to CPU 0; {args.calls} calls per workload sampled at "
            f"{args.frequency} Hz; ms per call of the sampled loop (perf's unwinding slows it); load average "
            f"{start:.2f} (start) / {os.getloadavg()[0]:.2f} (end).")
    command = "python -m tools.diagnostics.step_perf_profile " + " ".join(argv if argv is not None else sys.argv[1:])
    emit(render(args.model, profiles, ms, command, load), args.out)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    raise SystemExit(main())
