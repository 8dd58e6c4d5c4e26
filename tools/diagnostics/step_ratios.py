"""Benchmark (not a test): TinyTrain step / infer with and without the cached cut, FullTrain
step / TinyTrain step, the wall time of the default adaptation, and peak RSS of a whole ``adapt`` vs an
infer-only process, on both TFLite runtimes, for built-in and user models.

One command (main env; exports what is missing into ``--model-dir`` first, then times every model on
ai-edge-litert in this env and on tflite-runtime 2.14 in ``.venv-pi``, each in fresh subprocesses)::

    .venv/bin/python -m tools.diagnostics.step_ratios --cache build/data_cache

Models at 128x128: the default export (``lite0_default``: ``tflite-train export`` without flags, the
meta-trained EfficientNet-Lite0, last 6 blocks trainable; no FullTrain export), MCUNet with the shipped weights (``weights/mcunet_64_meta.weights.h5``),
EfficientNet-Lite0 with its ImageNet weights (``tflite_train.models.efficientnet_lite``) and
``keras.applications.MobileNetV2(alpha=0.35, weights=None)`` (random weights, BatchNorm statistics
calibrated: ``tools.example_models.randomize_batchnorm``), each exported twice: with the last
``--candidate-blocks`` blocks as candidates (the export a TinyTrain user runs) and with every layer
(FullTrain). The TinyTrain selection is the project's own policy on a real 5-way 5-shot support set
of Fashion-MNIST (from the data cache; B_mem ``--mem-budget``, B_compute ``--compute-fraction`` of
the full backward MACs, channel ratio 1/4). Timings: batch 1, one thread, median of ``--repeats``
calls after a warm-up, best of 3 interleaved rounds. Peak RSS: ru_maxrss of a process that loads the
model and runs ``infer`` on the support and query sets, vs one that runs the whole ``adapt``
(``--steps`` steps) and then the same inference. Targets (issue 13): step/infer <= 1.3 on
tflite-runtime and <= 1.5 on LiteRT; full/TinyTrain >= 7 on both; RSS adapt/infer <= 1.5.

Cached cuts (issue 26): the same TinyTrain step from the cached activation at the cut below
the selection (``train_step_from_<layer>``), its forward MACs above the cut beside the whole forward,
and the wall time of the whole default adaptation (the paper's protocol: 40 passes at batch 1 over the
25 support images, Fisher and selection included, the budget of ``--mem-budget`` / ``--compute-fraction``)
with the cache and with full steps. Target: cached step <= 0.75 x infer on LiteRT; adaptation <= 4 s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import time

from bench.call_timing import median_seconds
from bench.worker_process import ROOT, peak_rss_kib, worker_command, worker_env

PI_PYTHON = ROOT / ".venv-pi" / "bin" / "python"
MODELS = ("lite0_default", "mcunet", "efficientnet_lite0", "mobilenet_v2_035")
NO_FULL_EXPORT = ("lite0_default",)
"""Models timed without a FullTrain export (the default export is what users run; its full step is in
``bench/results/PEER_ORT_lite0.md``)."""


def model_paths(model_dir: pathlib.Path, name: str) -> dict[str, pathlib.Path]:
    return {kind: model_dir / f"{name}_128_{kind}.tflite" for kind in ("tinytrain", "full")}


def export_missing(model_dir: pathlib.Path, candidate_blocks: int, models=MODELS) -> None:
    """Exports the benchmark models that are missing (needs TensorFlow)."""
    from tflite_train.converters.build_module import backbone_model
    from tools.example_models import mobilenet_v2
    from tflite_train.converters.export import write_export
    from tools.fixtures import MCUNET_WEIGHTS, trained_config

    for name in models:
        for kind, path in model_paths(model_dir, name).items():
            if path.exists() or (kind == "full" and name in NO_FULL_EXPORT):
                continue
            candidates = "all" if kind == "full" else f"blocks:{candidate_blocks}"
            print(f"exporting {path} ...", flush=True)
            if name == "lite0_default":
                from tflite_train.cli import main as cli_main

                if cli_main(["export", "--out", str(path)]) != 0:
                    raise SystemExit(f"exporting the default model to {path} failed")
            elif name == "mcunet":  # FullTrain selects the stem (it reads the image): no cache signatures
                config = trained_config(MCUNET_WEIGHTS, (128, 128), candidates=candidates,
                                        cache_signatures=kind != "full")
                write_export(config, path, backbone_model(config))
            elif name == "efficientnet_lite0":
                from tflite_train.converters.export_config import ExportConfig
                from tflite_train.models.efficientnet_lite import efficientnet_lite0

                config = ExportConfig(backbone="keras", input_size=None, candidates=candidates,
                                      cache_signatures=kind != "full")
                write_export(config, path, efficientnet_lite0(128, include_top=False, weights="imagenet"))
            else:
                from tflite_train.converters.export_config import ExportConfig

                config = ExportConfig(backbone="keras", input_size=None, candidates=candidates,
                                      cache_signatures=kind != "full")
                write_export(config, path, mobilenet_v2(128))


def support_set(model, cache: str, seed: int = 0):
    """A real 5-way 5-shot task (10 queries per class) of Fashion-MNIST (``bench.tasks.dataset_task``), in the
    model's input range: (support images, labels, query images, labels)."""
    from bench.tasks import dataset_task
    from tflite_train.runtime import input_range

    task = dataset_task(cache, "fashion_mnist", 5, 5, 10, seed)
    task = task.for_model(model.input_shape, input_range(model.metadata))
    return task.support, task.support_labels, task.query, task.query_labels


def adapt_config(table, args):
    from tflite_train.runtime import AdaptConfig
    from tflite_train.sparse import scaled_memory_budget
    from tflite_train.sparse.cost_model import full_backward_macs

    memory = scaled_memory_budget(table) if args.mem_budget is None else args.mem_budget
    return AdaptConfig(policy="tinytrain", memory_bytes=memory, compute_fraction=None,
                       compute_macs=args.compute_fraction * full_backward_macs(table), iterations=args.steps,
                       batch_size=1, channel_ratio=0.25)


def worker_timing(args) -> dict:
    """Times infer / TinyTrain step / full step on this interpreter."""
    import numpy as np

    from tflite_train.runtime import TrainableModel, layer_table
    from tflite_train.runtime.adaptation.trainer import adapt
    from tflite_train.sparse.cost_model import total_forward_macs

    paths = model_paths(pathlib.Path(args.model_dir), args.model)
    tiny = TrainableModel(paths["tinytrain"], num_threads=1)
    full = TrainableModel(paths["full"], num_threads=1) if paths["full"].exists() else None
    xs, ys, _, _ = support_set(tiny, args.cache)
    config = dataclasses.replace(adapt_config(layer_table(tiny.metadata), args), iterations=0)
    result = adapt(tiny, xs, ys, config)  # head, Fisher and the selection only
    selection = {name: np.asarray(ch) for name, ch in result.selection.channels.items()}
    if full is not None:
        full.set_head(np.random.default_rng(0).normal(size=(5, full.feature_dim)).astype(np.float32))
        full.set_selection({name: np.arange(c) for name, c in full.candidate_channels.items()})
    image, label = xs[:1], ys[:1]
    top = tiny.candidates[-1]
    rounds = {"infer": [], "tinytrain": [], "tinytrain_cached": [], "full": [], "top_layer": []}
    tiny.set_selection(selection)
    signature = tiny.train_signature()
    cut = tiny.cache_cut()
    activation = tiny.features(cut, image) if cut is not None else None

    def median(fn, repeats: int = args.repeats) -> float:
        return median_seconds(fn, repeats, warm_up=1)[0]

    for _ in range(3):
        rounds["infer"].append(median(lambda: tiny.infer(image)))
        tiny.set_selection(selection)
        rounds["tinytrain"].append(median(lambda: tiny.train_step(image, label)))
        if cut is not None:
            rounds["tinytrain_cached"].append(median(lambda: tiny.train_step_from(cut, activation, label)))
        if full is not None:
            rounds["full"].append(median(lambda: full.train_step(image, label), max(5, args.repeats // 4)))
        # decomposition: the same step with only the top candidate layer at 1/4 of its channels
        tiny.set_selection({top: np.arange(max(1, tiny.candidate_channels[top] // 4))})
        rounds["top_layer"].append(median(lambda: tiny.train_step(image, label)))
    protocol = dataclasses.replace(adapt_config(layer_table(tiny.metadata), args), epochs=40)
    adaptation = {}
    for cache in (True, False):
        start = time.perf_counter()
        run = adapt(tiny, xs, ys, dataclasses.replace(protocol, cache=cache))
        adaptation[f"adapt_{'cached' if cache else 'full_steps'}_s"] = time.perf_counter() - start
        adaptation[f"adapt_{'cached' if cache else 'full_steps'}_phases_s"] = dict(run.seconds)
        adaptation[f"adapt_{'cached' if cache else 'full_steps'}_steps"] = len(run.losses)
    forward = total_forward_macs(layer_table(tiny.metadata))
    return {"runtime": tiny.runtime, "selection": {n: len(c) for n, c in selection.items()},
            "signature": signature, "cache_cut": None if cut is None else cut.layer,
            "cost": {"memory_bytes": result.cost.total_bytes, "backward_macs": result.cost.backward_macs,
                     "forward_macs": forward,
                     "cached_step_forward_macs": None if cut is None else cut.suffix_forward_macs},
            **{f"{k}_ms": 1e3 * min(v) if v else None for k, v in rounds.items()}, **adaptation}


def worker_rss(args) -> dict:
    """Peak RSS (ru_maxrss, KiB) of one workload: infer only, or adapt then infer."""
    from tflite_train.runtime import TrainableModel, layer_table
    from tflite_train.runtime.adaptation.trainer import adapt, class_prototypes, embed

    model = TrainableModel(model_paths(pathlib.Path(args.model_dir), args.model)["tinytrain"], num_threads=1)
    xs, ys, xq, _ = support_set(model, args.cache)
    if args.worker == "rss_adapt":
        adapt(model, xs, ys, adapt_config(layer_table(model.metadata), args))
    else:
        model.set_head(class_prototypes(embed(model, xs), ys))
    embed(model, xq)
    return {"peak_rss_kib": peak_rss_kib()}


def _run_worker(python: pathlib.Path, worker: str, model: str, args) -> dict:
    budget = () if args.mem_budget is None else ("--mem-budget", str(args.mem_budget))
    cmd = worker_command(python, "tools.diagnostics.step_ratios", "--worker", worker, "--model", model, "--cache",
                         args.cache, "--model-dir", args.model_dir, "--repeats", str(args.repeats), "--steps",
                         str(args.steps), "--compute-fraction", str(args.compute_fraction), *budget)
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=worker_env(TF_CPP_MIN_LOG_LEVEL="2"),
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"worker {worker} ({python}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def format_row(model: str, label: str, timing: dict, rss: dict) -> str:
    """One printed line of results (ratios measured side by side in one worker)."""
    infer, step, cached = timing["infer_ms"], timing["tinytrain_ms"], timing["tinytrain_cached_ms"]
    cost = timing["cost"]
    parts = [f"{model:<18} {label:<20} infer {infer:6.2f} ms  TinyTrain step {step:6.2f} ms ({step / infer:4.2f}x infer)"]
    if cached is not None:
        parts.append(f"cached step {cached:6.2f} ms ({cached / infer:4.2f}x infer; forward "
                     f"{cost['cached_step_forward_macs'] / 1e6:.1f}M of {cost['forward_macs'] / 1e6:.1f}M MACs, backward "
                     f"{cost['backward_macs'] / 1e6:.1f}M, from {timing['cache_cut']})")
    if timing["full_ms"] is not None:
        parts.append(f"full step {timing['full_ms']:7.2f} ms (full/step {timing['full_ms'] / step:5.2f})")
    parts.append(f"adaptation {timing['adapt_cached_s']:5.2f} s cached / {timing['adapt_full_steps_s']:5.2f} s full steps "
                 f"({timing['adapt_cached_steps']} steps)")
    parts.append(f"RSS adapt/infer {rss['rss_adapt'] / rss['rss_infer']:4.2f} ({rss['rss_adapt'] / 1024:.0f} / "
                 f"{rss['rss_infer'] / 1024:.0f} MiB)  selection {timing['selection']}")
    return "\n    ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=str(ROOT / "build" / "data_cache"), help="data cache (data prepare)")
    parser.add_argument("--model-dir", default=str(ROOT / "build" / "bench" / "step_ratios"))
    parser.add_argument("--candidate-blocks", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=100, help="timed calls per measurement (default 100)")
    parser.add_argument("--steps", type=int, default=100, help="adapt steps of the RSS workload (default 100)")
    parser.add_argument("--mem-budget", type=float, default=None,
                        help="B_mem in bytes (default: the library's, tflite_train.sparse.scaled_memory_budget)")
    parser.add_argument("--compute-fraction", type=float, default=0.15,
                        help="B_compute as a fraction of the full backward MACs (default 0.15)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS),
                        help="models to export and time (default: all)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "step_ratios.json"))
    parser.add_argument("--worker", choices=("timing", "rss_infer", "rss_adapt"), help=argparse.SUPPRESS)
    parser.add_argument("--model", choices=MODELS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        fn = worker_timing if args.worker == "timing" else worker_rss
        print(json.dumps(fn(args)))
        return 0
    export_missing(pathlib.Path(args.model_dir), args.candidate_blocks, args.models)
    runtimes = {"ai-edge-litert": pathlib.Path(sys.executable), "tflite-runtime 2.14": PI_PYTHON}
    load_start = os.getloadavg()[0]  # the machine's state: absolute times scale with it, ratios much less
    results = {}
    for model in args.models:
        for label, python in runtimes.items():
            timing = _run_worker(python, "timing", model, args)
            rss = {w: _run_worker(python, w, model, args)["peak_rss_kib"] for w in ("rss_infer", "rss_adapt")}
            results[f"{model} / {label}"] = {**timing, **{f"{k}_kib": v for k, v in rss.items()}}
            print(format_row(model, label, timing, rss), flush=True)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"settings": {k: v for k, v in vars(args).items() if k not in ("worker", "model")},
                               "load_average": {"start": load_start, "end": os.getloadavg()[0]},
                               "results": results}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
