"""A baked classifier against the export it came from (issue 42, item 5): ``infer`` speed side by side, and size.

``python -m tools.diagnostics.baked_timing --model M --checkpoint C [--out figures.json]`` bakes ``C`` into ``M``
(``tflite_train.runtime.baked.baked_model.bake_classifier``) and times, in one process, batch-1 calls of:

* ``clean``: the export as exported (``TrainableModel``, the prototypes of ``C`` set as the head, no trained
  weights): the speed goal;
* ``restored``: the whole export with ``C`` restored through the contract (``restore_checkpoint``: the
  trained layers run their variable path, the case the issue measured 1.24x slower);
* ``predict``: ``predict``'s inference-only model (``adapt_job.open_adapted``: ``infer`` and ``set_head``
  opened, the trained weights written into the constants);
* ``baked``: the baked file's ``classify`` on the interpreter's standard signature runner
  (``BakedClassifier``).

The four alternate call by call (clean, restored, predict, baked, clean, ...; after ``WARM_UP`` untimed calls
each), so a change of the machine's load falls on all alike; each figure is the median over ``--calls`` calls
of the wall time and of the calling thread's CPU time (``time.thread_time``: one interpreter thread runs the
call in it, and the time other processes take the cores is not counted, which the wall time on a shared machine
is). Sizes: the baked file, and the export's inference part (``baked_model.inference_part_bytes``: ``infer``'s
constants and tables) plus the head's k prototypes.
Stdlib, numpy and an interpreter only: it runs in the Pi env too (``--runtime tflite-runtime``).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.adapt_job import open_adapted
from tflite_train.runtime.baked.baked_classifier import BakedClassifier
from tflite_train.runtime.baked.baked_model import bake_classifier, inference_part_bytes
from tflite_train.runtime.checkpoint.checkpoint import load_checkpoint, restore_checkpoint
from tflite_train.runtime.model.interpreter import TrainableModel
from tflite_train.runtime.model.runtimes import resolve_runtime

__all__ = ["baked_timing"]

WARM_UP = 5
"""Untimed calls of each model first."""


def baked_timing(model_path: pathlib.Path, checkpoint_path: pathlib.Path, runtime: str | None, calls: int,
                 threads: int = 1) -> dict:
    """The figures of the module docstring: {"runtime", "threads", "calls", "wall_seconds" and "cpu_seconds":
    {name: median s per call}, "cpu_ratio_to_clean" and "wall_ratio_to_clean": {name: x}, "bytes": {...},
    "max_abs_logit_difference"}."""
    module = resolve_runtime(runtime)
    model_data, checkpoint_data = model_path.read_bytes(), checkpoint_path.read_bytes()
    baked_data = bake_classifier(model_data, checkpoint_data, str(model_path), str(checkpoint_path))
    checkpoint = load_checkpoint(checkpoint_path)
    k = int(checkpoint.arrays[C.NUM_CLASSES])
    clean = TrainableModel(model_path, runtime=module, num_threads=threads)
    clean.set_head(checkpoint.arrays[C.PROTOTYPES])
    restored = TrainableModel(model_path, runtime=module, num_threads=threads)
    restore_checkpoint(restored, checkpoint)
    lean, _ = open_adapted(model_path, checkpoint, runtime)
    baked = BakedClassifier(baked_data, runtime=module, num_threads=threads)
    image = np.random.default_rng(0).random((1, *baked.input_shape), dtype=np.float32)
    low, high = baked.input_range
    image = (low + (high - low) * image).astype(np.float32)
    run = {"clean": lambda: clean.infer(image), "restored": lambda: restored.infer(image),
           "predict": lambda: lean.infer(image), "baked": lambda: baked.logits(image)}
    wall: dict[str, list[float]] = {name: [] for name in run}
    cpu: dict[str, list[float]] = {name: [] for name in run}
    for call in run.values():
        for _ in range(WARM_UP):
            call()
    for _ in range(calls):
        for name, call in run.items():
            start, start_cpu = time.perf_counter(), time.thread_time()
            call()
            cpu[name].append(time.thread_time() - start_cpu)
            wall[name].append(time.perf_counter() - start)
    wall_seconds = {name: statistics.median(values) for name, values in wall.items()}
    cpu_seconds = {name: statistics.median(values) for name, values in cpu.items()}
    constants, tables = inference_part_bytes(model_data)
    head = 4 * k * int(clean.feature_dim)
    want = lean.infer(image)[C.LOGITS][:, :k]
    return {
        "model": str(model_path), "runtime": clean.runtime, "threads": threads, "calls": calls, "classes": k,
        "selected_layers": list(checkpoint.selection.layers), "wall_seconds": wall_seconds, "cpu_seconds": cpu_seconds,
        "cpu_ratio_to_clean": {name: value / cpu_seconds["clean"] for name, value in cpu_seconds.items()},
        "wall_ratio_to_clean": {name: value / wall_seconds["clean"] for name, value in wall_seconds.items()},
        "bytes": {"baked": len(baked_data), "export": len(model_data), "inference_constants": constants,
                  "inference_tables": tables, "head": head, "inference_part": constants + tables + head},
        "max_abs_logit_difference": float(np.max(np.abs(baked.logits(image) - want))),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.diagnostics.baked_timing", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=pathlib.Path, help="an exported model")
    parser.add_argument("--checkpoint", required=True, type=pathlib.Path, help="a checkpoint of it (adapt --out)")
    parser.add_argument("--runtime", choices=("litert", "tflite-runtime", "tensorflow"), help="TFLite interpreter")
    parser.add_argument("--calls", type=int, default=300, help="timed calls of each model (the figure: their median)")
    parser.add_argument("--threads", type=int, default=1, help="interpreter threads")
    parser.add_argument("--out", type=pathlib.Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    figures = baked_timing(args.model, args.checkpoint, args.runtime, args.calls, args.threads)
    text = json.dumps(figures, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
