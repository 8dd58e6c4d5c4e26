"""Why ``infer`` was slower on tflite-runtime 2.14 than on ai-edge-litert for the same file, and the fix.

Findings (evidence: the table this script writes; minimal repro models in the session notes):

1. Cause of the gap: tflite-runtime 2.14's pip wheel never applies its default XNNPACK delegate
   (``infer`` times the same with ``experimental_op_resolver_type`` AUTO and
   BUILTIN_WITHOUT_DEFAULT_DELEGATES, and the "Created TensorFlow Lite XNNPACK delegate" line is
   never logged), although its native library contains XNNPACK and exports
   ``TfLiteXNNPackDelegateCreate``. ai-edge-litert applies it by default.
2. Fix, runtime side: ``TrainableModel(..., xnnpack=True)`` creates that delegate explicitly on
   tflite-runtime (``tflite_train.runtime.xnnpack``; a warning and the builtin kernels when it
   cannot). Opt-in: with the delegate, a ``train_step`` whose batch size changed since the last call
   goes wrong (``adapt`` runs ``fisher`` and ``train_step`` at different batch sizes): with the
   former data-dependent update branches a BATCH_MATMUL prepare error; with the static ones of
   finding 4, the first step at a smaller batch writes NaN into the state (fixtures ``tiny_adam_33``,
   batch 5 then 1); not isolated further. At a fixed batch size the delegate matches the builtin
   kernels (``tests/runtime/test_xnnpack_delegate.py``).
3. Fix, export side: 2.14's XNNPACK delegate supports static shapes only, and
   ``ModifyGraphWithDelegate`` refuses the WHOLE model (``kTfLiteApplicationError``: a RuntimeError
   without a message) when any subgraph holds a dynamic-sized tensor after ``Prepare``. Two triggers,
   found by extracting each subgraph (with the subgraphs it calls) into its own model and then
   bisecting operator prefixes of the failing ones:
   * a rank-0 resource variable that is assigned (``num_classes``, ``step``, ``learning_rate``): its
     READ_VARIABLE output is dynamic. The exporter now holds them as shape [1] (the signatures keep
     their scalar inputs and outputs);
   * ``WHERE`` (the selected channels' indices, data-dependent length) in the per-layer update
     branches, which made each branch dynamic, and through ``if.cc`` (an IF's outputs are dynamic
     when a branch has dynamic tensors) every train signature. The update IFs now have no outputs,
     and the exporter named those branch subgraphs ``VALIDATION:<name>``, which the interpreter skips
     when applying delegates; they ran on the builtin kernels (their shapes were only known at
     ``Invoke``).
   With both, the whole contract takes the delegate on 2.14 and the self-test passes on it.
4. Since then the update branches have static shapes (``converters.trainable_module``: every
   channel's weight gradient, the optimizer step written through SELECT by the mask; no WHERE,
   GATHER or SCATTER_ND), so every export takes 2.14's delegate and the marking (the exporter's
   former ``skip_dynamic_subgraphs`` option) is gone.

Run (needs TensorFlow for the export; times in fresh processes on both runtimes)::

    PYTHONPATH=$PWD .venv/bin/python -m bench.tflite_runtime_fastpath --cpu 1
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

import numpy as np

from bench.call_timing import median_seconds
from bench.worker_process import worker_command
from tflite_train import contract as C

ROOT = pathlib.Path(__file__).resolve().parents[1]
RUNS = (("ai-edge-litert (default XNNPACK)", "main", True),
        ("tflite-runtime 2.14, builtin kernels", "pi", False),
        ("tflite-runtime 2.14, explicit XNNPACK", "pi", True))


def worker(spec: dict) -> dict:
    """Loads one file (with or without the explicit delegate), replays the self-test, times infer and
    a train step of the given selection."""
    if spec.get("cpu") is not None:
        os.sched_setaffinity(0, {spec["cpu"]})
    sys.path.insert(0, str(ROOT))
    from tflite_train.runtime import TrainableModel, input_range
    from tflite_train.runtime.selftest import verify

    model = TrainableModel(spec["model"], num_threads=1, xnnpack=spec["xnnpack"])
    passed = verify(spec["model"], xnnpack=True).passed if spec["xnnpack"] else None
    x = np.random.default_rng(0).uniform(*input_range(model.metadata), size=(1, *model.input_shape))
    x = x.astype(np.float32)
    model.set_head(np.random.default_rng(1).normal(size=(5, model.feature_dim)))
    model.set_selection({n: np.asarray(c) for n, c in spec["selection"].items()})
    return {"runtime": model.runtime, "explicit_xnnpack": model.explicit_xnnpack, "selftest_passed": passed,
            "infer": 1e3 * median_seconds(lambda: model.infer(x), spec["repeats"], spec["max_seconds"])[0],
            C.TRAIN_STEP: 1e3 * median_seconds(lambda: model.train_step(x, np.zeros(1, np.int64)), spec["repeats"],
                                               spec["max_seconds"])[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=[str(ROOT / "build/bench/step_ratios/mcunet_128_tinytrain.tflite"),
                                                        str(ROOT / "build/bench/step_ratios/efficientnet_lite0_128_tinytrain.tflite")],
                        help="exported files (default: the step_ratios TinyTrain exports)")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--max-seconds", type=float, default=10.0)
    parser.add_argument("--cpu", type=int, default=None)
    parser.add_argument("--pi-python", default=str(ROOT / ".venv-pi/bin/python"))
    parser.add_argument("--out", default="bench/results/TFLITE_RUNTIME_FASTPATH.md")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    from tflite_train.runtime import read_metadata

    pythons = {"main": sys.executable, "pi": args.pi_python}
    header = f"{'model':<40} {'runtime':<40} {'infer ms':>9} {'step ms':>9}  self-test"
    table, notes = [header], []
    print(header)
    load = os.getloadavg()[0]
    for path in args.models:
        meta = read_metadata(path)
        channels = {layer[C.F_NAME]: layer[C.F_OUT_CHANNELS] for layer in meta[C.F_LAYERS]}
        top = meta[C.F_CANDIDATES][-1]
        chosen = {top: list(range(channels[top] // 4))}
        notes.append(f"{pathlib.Path(path).name}: train step = {top} ({len(chosen[top])} channels)")
        for label, env, xnnpack in RUNS:
            spec = {"model": str(path), "xnnpack": xnnpack, "selection": chosen, "repeats": args.repeats,
                    "max_seconds": args.max_seconds, "cpu": args.cpu}
            done = subprocess.run(worker_command(pythons[env], "bench.tflite_runtime_fastpath", "--worker", json.dumps(spec)),
                                  cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)})
            if done.returncode:
                raise RuntimeError(done.stderr[-3000:])
            r = json.loads(done.stdout.strip().splitlines()[-1])
            check = {True: "PASSED", False: "FAILED", None: "-"}[r["selftest_passed"]]
            line = f"{pathlib.Path(path).name:<40} {label:<40} {r['infer']:9.2f} {r[C.TRAIN_STEP]:9.2f}  {check}"
            print(line, flush=True)
            table.append(line)
    findings = __doc__.split("Run (needs")[0].split("session notes):")[1]
    text = "\n".join([
        "# tflite-runtime 2.14 vs ai-edge-litert: the XNNPACK fast path", "",
        "Command: `python -m bench.tflite_runtime_fastpath " + " ".join(argv if argv is not None else sys.argv[1:]) + "`",
        "", f"Batch 1, one thread, medians of up to {args.repeats} calls per row (fresh process per row); "
        f"load average at start {load:.2f} (a shared 2-core machine: compare rows of one run); "
        + "; ".join(notes) + ". Self-test: `verify` with the delegate applied.", "",
        "```", *table, "```", "", "## Findings", findings.rstrip(), ""])
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
