"""Benchmark (not a test): what one adaptation costs, in batch-1 ``infer`` calls of the same model (issue 39).

One command (main env; every procedure is timed in one fresh process per runtime: ai-edge-litert in this env,
tflite-runtime 2.14 in ``.venv-pi``)::

    .venv/bin/python -m bench.adaptation_cost --model build/bench/adaptation_cost/lite0.tflite \\
        --cache build/data_cache_128 --out bench/results/ADAPTATION_COST.md

The unit is the model's own batch-1 ``infer`` (median of ``--calls`` warm calls, one thread), measured in the
same process, before and after the adaptations (their mean), so that the ratio holds on a noisy machine.
Each procedure of ``bench.procedures`` given by ``--procedures`` adapts to the same support set (the bench's
timing task of the cache's first target: 5-way, ``--support`` images) under the model's default budget
(``tflite_train.sparse.default_budget``, as ``adapt`` without flags): the whole adaptation (head, Fisher,
selection, cache, every update and the per-task choice), ``--repeats`` times, median reported, per phase.
The goal of issue 39: the default adaptation <= 500 ``infer`` calls on both runtimes.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time

from bench.call_timing import median_seconds
from bench.table_output import emit, markdown_table
from bench.worker_process import ROOT, worker_command, worker_env

LOG = logging.getLogger(__name__)
PI_PYTHON = ROOT / ".venv-pi" / "bin" / "python"
GOAL_CALLS = 500
"""Issue 39's cost goal: the default adaptation in at most this many batch-1 ``infer`` calls."""


def _infer_seconds(model, one, calls: int) -> float:
    """Median seconds of ``calls`` batch-1 ``infer`` calls after one warm-up call."""
    return median_seconds(lambda: model.infer(one), calls, float("inf"), warm_up=1, min_calls=calls)[0]


def measure(model_path: str, support_path: str, procedures: list[str], calls: int, repeats: int) -> dict:
    """The worker: infer's median seconds and each procedure's adaptation seconds (median of ``repeats``)."""
    import numpy as np

    from bench.procedures import procedure
    from tflite_train.runtime import DEFAULT_PROTOCOL, AdaptConfig, TrainableModel, adapt, layer_table
    from tflite_train.sparse import default_budget

    data = np.load(support_path)
    images, labels = data["images"], data["labels"]
    model = TrainableModel(model_path, num_threads=1)
    budget = default_budget(layer_table(model.metadata), model.candidates, compute_fraction=DEFAULT_PROTOCOL.compute_fraction,
                            channel_ratio=AdaptConfig().channel_ratio)
    base = AdaptConfig(memory_bytes=budget.memory_bytes, compute_fraction=budget.compute_fraction,
                       compute_macs=budget.compute_macs)
    one = images[:1]
    model.reset_state()
    adapt(model, images, labels, AdaptConfig(policy="none"))
    before = _infer_seconds(model, one, calls)
    rows = {}
    for name in procedures:
        config = procedure(name).apply(base)
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = adapt(model, images, labels, config)
            runs.append((time.perf_counter() - t0, result))
        seconds, result = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
        rows[name] = {"seconds": seconds, "phases": dict(result.seconds), "updates": len(result.losses),
                      "rate": None if result.rate_choice is None else result.rate_choice.rate,
                      "layers": list(result.selection.layers)}
    after = _infer_seconds(model, one, calls)
    return {"runtime": model.runtime, "infer_seconds": (before + after) / 2, "infer_before": before,
            "infer_after": after, "rows": rows}


def render(results: list[dict], command: str, support: int) -> str:
    """The Markdown table: per runtime and procedure, seconds and infer calls, whole and per phase."""
    lines = ["# Cost of one adaptation in batch-1 `infer` calls (generated; do not edit)", "",
             f"Command: `{command}`. {support} support images (5-way), the model's default budget; one thread; "
             "median of the repeats; the unit is the same model's batch-1 `infer` in the same process (the mean of "
             f"its median before and after the adaptations). Goal (issue 39): the default adaptation <= {GOAL_CALLS} "
             "`infer` calls.", ""]
    table = []
    for r in results:
        unit = r["infer_seconds"]
        for name, row in r["rows"].items():
            phases = ", ".join(f"{k} {v / unit:.0f}" for k, v in row["phases"].items())
            rate = "-" if row["rate"] is None else f"{row['rate']:g}"
            table.append([r["runtime"], name, f"{1e3 * unit:.2f}", f"{row['seconds']:.2f}",
                          f"**{row['seconds'] / unit:.0f}**", phases, str(row["updates"]), rate])
    lines += markdown_table(("runtime", "procedure", "infer (ms)", "adaptation (s)", "= infer calls",
                             "per phase (infer calls)", "updates", "rate"), table)
    return "\n".join(lines) + "\n"


def first_task(cache: str, support: int):
    """The benchmark's timing task of the cache's first target: 5-way, ``support`` support images
    (``bench.tasks.timing_task``)."""
    from bench.config import BenchConfig
    from bench.tasks import cache_targets, timing_task

    config = BenchConfig(cache_dir=cache, size_caches=(), timing_support=support)
    return timing_task(config, cache_targets(config)[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the exported .tflite")
    parser.add_argument("--cache", default="build/data_cache_128", help="data cache (its first target's first task)")
    parser.add_argument("--support", type=int, default=25, help="support images")
    parser.add_argument("--procedures", default="previous,pmf", help="comma-separated bench.procedures names")
    parser.add_argument("--calls", type=int, default=200, help="infer calls per median")
    parser.add_argument("--repeats", type=int, default=3, help="adaptations per procedure (median)")
    parser.add_argument("--runtimes", default="litert,tflite-runtime", help="litert and/or tflite-runtime")
    parser.add_argument("--out", help="Markdown file (a .json beside it); default: print")
    parser.add_argument("--worker", nargs=2, metavar=("SUPPORT_NPZ", "JSON_OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    procedures = [p for p in args.procedures.split(",") if p]
    if args.worker:
        result = measure(args.model, args.worker[0], procedures, args.calls, args.repeats)
        with open(args.worker[1], "w") as f:
            json.dump(result, f)
        return 0
    import tempfile

    import numpy as np

    from tflite_train.runtime import TrainableModel, input_range

    probe = TrainableModel(args.model)
    task = first_task(args.cache, args.support).for_model(probe.input_shape, input_range(probe.metadata))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        support = f"{tmp}/support.npz"
        np.savez(support, images=task.support, labels=task.support_labels)
        for runtime in args.runtimes.split(","):
            python = {"litert": sys.executable, "tflite-runtime": str(PI_PYTHON)}[runtime]
            out = f"{tmp}/{runtime}.json"
            cmd = worker_command(python, "bench.adaptation_cost", "--model", args.model, "--procedures",
                                 args.procedures, "--calls", str(args.calls), "--repeats", str(args.repeats),
                                 "--worker", support, out)
            LOG.info("%s: %s", runtime, " ".join(cmd[-8:]))
            subprocess.run(cmd, check=True, env=worker_env())
            with open(out) as f:
                results.append(json.load(f))
    command = "python -m bench.adaptation_cost " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(results, command, int(task.support.shape[0]))
    emit(text, args.out)
    if args.out:
        with open(args.out.rsplit(".", 1)[0] + ".json", "w") as f:
            json.dump({"command": command, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
