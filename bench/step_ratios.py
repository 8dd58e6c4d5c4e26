"""Benchmark (not a test): TinyTrain step / infer, FullTrain step / TinyTrain step, and peak RSS of a
whole ``adapt`` vs an infer-only process, on both TFLite runtimes, for built-in and user models.

One command (main env; exports what is missing into ``--model-dir`` first, then times every model on
ai-edge-litert in this env and on tflite-runtime 2.14 in ``.venv-pi``, each in fresh subprocesses)::

    .venv/bin/python -m bench.step_ratios --cache build/data_cache

Models at 128x128: MCUNet with the shipped weights (``weights/mcunet_64_meta.weights.h5``),
EfficientNet-Lite0 with its ImageNet weights (``tflite_train.models.efficientnet_lite``) and
``keras.applications.MobileNetV2(alpha=0.35, weights=None)`` (random weights, BatchNorm statistics
calibrated: ``converters.example_models.randomize_batchnorm``), each exported twice: with the last
``--candidate-blocks`` blocks as candidates (the export a TinyTrain user runs) and with every layer
(FullTrain). The TinyTrain selection is the project's own policy on a real 5-way 5-shot support set
of Fashion-MNIST (from the data cache; B_mem ``--mem-budget``, B_compute ``--compute-fraction`` of
the full backward MACs, channel ratio 1/4). Timings: batch 1, one thread, median of ``--repeats``
calls after a warm-up, best of 3 interleaved rounds. Peak RSS: ru_maxrss of a process that loads the
model and runs ``infer`` on the support and query sets, vs one that runs the whole ``adapt``
(``--steps`` steps) and then the same inference. Targets (issue 13): step/infer <= 1.3 on
tflite-runtime and <= 1.5 on LiteRT; full/TinyTrain >= 7 on both; RSS adapt/infer <= 1.5.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import subprocess
import sys

from bench.worker_process import peak_rss_kib, worker_command

ROOT = pathlib.Path(__file__).resolve().parents[1]
PI_PYTHON = ROOT / ".venv-pi" / "bin" / "python"
MODELS = ("mcunet", "efficientnet_lite0", "mobilenet_v2_035")


def model_paths(model_dir: pathlib.Path, name: str) -> dict[str, pathlib.Path]:
    return {kind: model_dir / f"{name}_128_{kind}.tflite" for kind in ("tinytrain", "full")}


def export_missing(model_dir: pathlib.Path, candidate_blocks: int, models=MODELS) -> None:
    """Exports the benchmark models that are missing (needs TensorFlow)."""
    from converters.build_module import backbone_model
    from converters.example_models import mobilenet_v2
    from converters.export import write_export
    from converters.fixtures import MCUNET_WEIGHTS, trained_config

    for name in models:
        for kind, path in model_paths(model_dir, name).items():
            if path.exists():
                continue
            candidates = "all" if kind == "full" else f"blocks:{candidate_blocks}"
            print(f"exporting {path} ...", flush=True)
            if name == "mcunet":
                config = trained_config(MCUNET_WEIGHTS, (128, 128), candidates=candidates)
                write_export(config, path, backbone_model(config))
            elif name == "efficientnet_lite0":
                from converters.export_config import ExportConfig
                from tflite_train.models.efficientnet_lite import efficientnet_lite0

                config = ExportConfig(backbone="keras", input_size=None, candidates=candidates)
                write_export(config, path, efficientnet_lite0(128, include_top=False, weights="imagenet"))
            else:
                from converters.export_config import ExportConfig

                config = ExportConfig(backbone="keras", input_size=None, candidates=candidates)
                write_export(config, path, mobilenet_v2(128))


def support_set(model, cache: str, seed: int = 0):
    """A real 5-way 5-shot task (10 queries per class) of Fashion-MNIST, in the model's input range."""
    import numpy as np

    from bench.adaptation_overhead import _task

    xs, ys, xq, yq = _task(model, cache, "fashion_mnist", 5, 5, 10, seed)
    return xs, ys.astype(np.int32), xq, yq


def adapt_config(table, args):
    from tflite_train.runtime import AdaptConfig
    from tflite_train.sparse.cost_model import full_backward_macs

    return AdaptConfig(policy="tinytrain", memory_bytes=args.mem_budget,
                       compute_macs=args.compute_fraction * full_backward_macs(table), iterations=args.steps,
                       batch_size=1, channel_ratio=0.25)


def worker_timing(args) -> dict:
    """Times infer / TinyTrain step / full step on this interpreter."""
    import numpy as np

    from bench.export_step_time import timed
    from tflite_train.runtime import TrainableModel, layer_table
    from tflite_train.runtime.trainer import adapt

    paths = model_paths(pathlib.Path(args.model_dir), args.model)
    tiny = TrainableModel(paths["tinytrain"], num_threads=1)
    full = TrainableModel(paths["full"], num_threads=1)
    xs, ys, _, _ = support_set(tiny, args.cache)
    config = dataclasses.replace(adapt_config(layer_table(tiny.metadata), args), iterations=0)
    result = adapt(tiny, xs, ys, config)  # head, Fisher and the selection only
    selection = {name: np.asarray(ch) for name, ch in result.selection.channels.items()}
    full.set_head(np.random.default_rng(0).normal(size=(5, full.feature_dim)).astype(np.float32))
    full.set_selection({name: np.arange(c) for name, c in full.candidate_channels.items()})
    image, label = xs[:1], ys[:1]
    top = tiny.candidates[-1]
    rounds = {"infer": [], "tinytrain": [], "full": [], "top_layer": []}
    tiny.set_selection(selection)
    signature = tiny.train_signature()
    for _ in range(3):
        rounds["infer"].append(timed(lambda: tiny.infer(image), args.repeats))
        tiny.set_selection(selection)
        rounds["tinytrain"].append(timed(lambda: tiny.train_step(image, label), args.repeats))
        rounds["full"].append(timed(lambda: full.train_step(image, label), max(5, args.repeats // 4)))
        # decomposition: the same step with only the top candidate layer at 1/4 of its channels
        tiny.set_selection({top: np.arange(max(1, tiny.candidate_channels[top] // 4))})
        rounds["top_layer"].append(timed(lambda: tiny.train_step(image, label), args.repeats))
    return {"runtime": tiny.runtime, "selection": {n: len(c) for n, c in selection.items()},
            "signature": signature, "cost": {"memory_bytes": result.cost.total_bytes,
                                                          "backward_macs": result.cost.backward_macs},
            **{f"{k}_ms": 1e3 * min(v) for k, v in rounds.items()}}


def worker_rss(args) -> dict:
    """Peak RSS (ru_maxrss, KiB) of one workload: infer only, or adapt then infer."""
    from tflite_train.runtime import TrainableModel, layer_table
    from tflite_train.runtime.trainer import adapt, class_prototypes, embed

    model = TrainableModel(model_paths(pathlib.Path(args.model_dir), args.model)["tinytrain"], num_threads=1)
    xs, ys, xq, _ = support_set(model, args.cache)
    if args.worker == "rss_adapt":
        adapt(model, xs, ys, adapt_config(layer_table(model.metadata), args))
    else:
        model.set_head(class_prototypes(embed(model, xs), ys))
    embed(model, xq)
    return {"peak_rss_kib": peak_rss_kib()}


def _run_worker(python: pathlib.Path, worker: str, model: str, args) -> dict:
    cmd = worker_command(python, "bench.step_ratios", "--worker", worker, "--model", model, "--cache", args.cache,
           "--model-dir", args.model_dir, "--repeats", str(args.repeats), "--steps", str(args.steps),
           "--mem-budget", str(args.mem_budget), "--compute-fraction", str(args.compute_fraction))
    env = {"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"worker {worker} ({python}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=str(ROOT / "build" / "data_cache"), help="data cache (data prepare)")
    parser.add_argument("--model-dir", default=str(ROOT / "build" / "bench" / "step_ratios"))
    parser.add_argument("--candidate-blocks", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=100, help="timed calls per measurement (default 100)")
    parser.add_argument("--steps", type=int, default=100, help="adapt steps of the RSS workload (default 100)")
    parser.add_argument("--mem-budget", type=float, default=2.0**20, help="B_mem in bytes (default 1 MiB)")
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
    results = {}
    for model in args.models:
        for label, python in runtimes.items():
            timing = _run_worker(python, "timing", model, args)
            rss = {w: _run_worker(python, w, model, args)["peak_rss_kib"] for w in ("rss_infer", "rss_adapt")}
            results[f"{model} / {label}"] = {**timing, **{f"{k}_kib": v for k, v in rss.items()}}
            print(f"{model:<18} {label:<20} infer {timing['infer_ms']:6.2f} ms  TinyTrain step "
                  f"{timing['tinytrain_ms']:6.2f} ms  (top layer only {timing['top_layer_ms']:6.2f} ms)  full step "
                  f"{timing['full_ms']:7.2f} ms  "
                  f"step/infer {timing['tinytrain_ms'] / timing['infer_ms']:5.2f}  full/step "
                  f"{timing['full_ms'] / timing['tinytrain_ms']:5.2f}  RSS adapt/infer "
                  f"{rss['rss_adapt'] / rss['rss_infer']:4.2f} ({rss['rss_adapt'] / 1024:.0f} / "
                  f"{rss['rss_infer'] / 1024:.0f} MiB)  selection {timing['selection']}", flush=True)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"settings": {k: v for k, v in vars(args).items() if k not in ("worker", "model")},
                               "results": results}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
