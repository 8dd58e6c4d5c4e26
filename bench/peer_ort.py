"""Peer bench: ONNX Runtime on-device training beside the project's TFLite signatures, same model.

One command (in the bench venv, ``make bench-peer``: requirements/main.txt + requirements/bench.txt)::

    PYTHONPATH=$PWD .venv-bench/bin/python -m bench.peer_ort --backbone mcunet --input-size 128

What it does, in one run (ratios are between figures of that run):

1. exports (or reuses, ``--model-dir``) the project's TinyTrain export (last ``--candidate-blocks``
   blocks candidates) and its FullTrain export (every layer a candidate) of ``--backbone`` at
   ``--input-size`` (``--weights``: Keras BN-form weights; default the shipped MCUNet weights for
   mcunet, seeded init otherwise);
2. picks the selection with the project's own TinyTrain policy (``tflite_train.runtime.adapt``, the
   library's budgets as in ``tflite-train adapt``, the demo and the accuracy bench: B_mem the paper's
   1 MiB for MCUNet@128 scaled by the model's LastLayer memory (``sparse.scaled_memory_budget``),
   B_compute 15 % of the full backward pass) on a
   real ``--ways``-way ``--shots``-shot support set of ``--dataset`` (``bench.tasks.dataset_task``: the
   diagnostics' episode for the same seed); the class prototypes are the support set's class means;
3. builds the ONNX twin of the same BN-folded Keras model and head (``bench.onnx_graph``), checks its
   forward against Keras (max relative difference of embeddings and logits, printed), and generates
   ORT training artifacts (CrossEntropyLoss, AdamW) for three trainable sets: the TinyTrain layers
   (whole layers: ORT has no channel-level selection), every layer (full), the last layer;
4. times, each in a fresh process (so that ru_maxrss is that workload's peak RSS), at batch 1 on one
   thread (``--cpu`` pins the process to one core; peak RSS = VmHWM): ORT inference and the three train steps
   (forward + backward + optimizer step + gradient reset), and the project's ``infer``, TinyTrain
   ``train_step`` (channel selection), the same step from the cached cut
   (``train_step_from_<layer>`` on the activation below the selection; ORT's column repeats its
   TinyTrain step, since its trainable set is fixed at export and it has no such cache), last-layer and
   full ``train_step`` on ai-edge-litert (this
   interpreter) and tflite-runtime 2.14 (``--pi-python``, the Pi env's interpreter, no TensorFlow);
   medians over ``--repeats`` calls after warm-up, the lowest of ``--rounds`` interleaved rounds;
5. prints the table and writes ``--out`` (Markdown) and ``<out>.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import types

import numpy as np

from bench.call_timing import median_seconds
from bench.peer_report import ENGINES, WORKLOADS, render
from bench.worker_process import ROOT, peak_rss_kib, worker_command, worker_env
from tflite_train import contract as C


def import_ort_training():
    """``onnxruntime.training``'s ``api`` and ``artifacts`` without its package ``__init__`` (which
    imports torch): a namespace stub with the package's path stands in for the package."""
    name = "onnxruntime.training"
    if name not in sys.modules or not hasattr(sys.modules[name], "api"):
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise ImportError("onnxruntime-training is not installed (make bench-peer)")
        stub = types.ModuleType(name)
        stub.__path__ = list(spec.submodule_search_locations)
        stub.__spec__ = spec
        sys.modules[name] = stub
    from onnxruntime.training import api, artifacts

    return api, artifacts


# --------------------------------------------------------------------------------------------- workers
def _pin(cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def _ort_worker(spec: dict) -> dict:
    import onnxruntime as ort

    inputs = np.load(spec["inputs"])
    images, labels = inputs["image"], inputs["label"].astype(np.int64)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    if spec["workload"] == "infer":
        session = ort.InferenceSession(spec["onnx"], options, providers=["CPUExecutionProvider"])

        def fn():
            session.run(None, {"images": images})
    else:
        api, _ = import_ort_training()
        folder = pathlib.Path(spec["artifacts"])
        state = api.CheckpointState.load_checkpoint(str(folder / "checkpoint"))
        module = api.Module(str(folder / "training_model.onnx"), state, str(folder / "eval_model.onnx"),
                            session_options=options)
        optimizer = api.Optimizer(str(folder / "optimizer_model.onnx"), module)
        module.train()

        def fn():
            module(images, labels)
            optimizer.step()
            module.lazy_reset_grad()
    seconds, calls = median_seconds(fn, spec["repeats"], spec["max_seconds"])
    return {"runtime": f"onnxruntime {ort.__version__}", "seconds": seconds, "calls": calls}


def _tflite_worker(spec: dict) -> dict:
    from tflite_train.runtime import TrainableModel

    inputs = np.load(spec["inputs"])
    model = TrainableModel(spec["model"], num_threads=1, xnnpack=True)
    images, labels = inputs["image"], inputs["label"].astype(np.int64)
    model.set_head(inputs[C.PROTOTYPES])
    if spec["workload"] == "infer":
        def fn():
            model.infer(images)
    else:
        selection = {name: np.asarray(idx) for name, idx in spec["selection"].items()}
        model.set_selection(selection)
        signature = model.train_signature()
        cut = model.cache_cut() if spec["workload"] == "tinytrain_cached" else None
        if cut is not None:  # the activation below the cut, computed once as adapt does per view
            activation = model.features(cut, images)
            signature = cut.train_step

            def fn():
                model.train_step_from(cut, activation, labels)
        else:
            def fn():
                model.train_step(images, labels)
    seconds, calls = median_seconds(fn, spec["repeats"], spec["max_seconds"])
    return {"runtime": model.runtime, "seconds": seconds, "calls": calls,
            **({} if spec["workload"] == "infer" else {"signature": signature})}


def worker(spec: dict) -> dict:
    """Runs one timed workload (a fresh process per call; see ``run_worker``)."""
    _pin(spec.get("cpu"))
    out = _ort_worker(spec) if spec["engine"] == "ort" else _tflite_worker(spec)
    out["peak_rss_kib"] = peak_rss_kib()
    return out


def run_worker(python: str, spec: dict) -> dict:
    """Runs ``worker(spec)`` in a fresh ``python`` process; returns its JSON result."""
    done = subprocess.run(worker_command(python, "bench.peer_ort", "--worker", json.dumps(spec)), cwd=ROOT,
                          capture_output=True, text=True, env=worker_env())
    if done.returncode != 0:
        raise RuntimeError(f"worker {spec['engine']}/{spec['workload']} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------ set-up
KERAS_BACKBONES = ("efficientnet_lite0",)
"""Backbones built as Keras models with their own weights (not from a backbone config)."""


def keras_backbone(args: argparse.Namespace):
    """The Keras model of a ``KERAS_BACKBONES`` entry (EfficientNet-Lite0 with its ImageNet weights)."""
    from tflite_train.models.efficientnet_lite import efficientnet_lite0

    return efficientnet_lite0(args.input_size, include_top=False, weights="imagenet")


def export_configs(args: argparse.Namespace) -> dict:
    """{"sparse": ExportConfig, "full": ExportConfig} of the project's two exports."""
    from tflite_train.converters.export_config import ExportConfig
    from tools.fixtures import trained_config
    from tflite_train.architectures import get_config

    if args.backbone in KERAS_BACKBONES:
        return {key: ExportConfig(backbone="keras", input_size=None, candidates=cand, train_variants=4,
                                  candidate_blocks=args.candidate_blocks, cache_signatures=key == "sparse")
                for key, cand in (("sparse", f"blocks:{args.candidate_blocks}"), ("full", "all"))}

    blocks = len(get_config(args.backbone).blocks)
    size = (args.input_size, args.input_size)
    out = {}
    for key, k in (("sparse", min(args.candidate_blocks, blocks)), ("full", blocks)):
        # FullTrain selects the stem, which reads the image: the full export needs no cached cut
        cache = key == "sparse"
        if args.weights:
            out[key] = trained_config(pathlib.Path(args.weights), size, candidate_blocks=k, train_variants=4,
                                      cache_signatures=cache)
        else:
            out[key] = ExportConfig(backbone=args.backbone, input_size=size, candidate_blocks=k, train_variants=4,
                                    cache_signatures=cache)
    return out


def policy_selection(model_path: pathlib.Path, args: argparse.Namespace):
    """(support images, labels, prototypes, {layer: channels}) of the TinyTrain policy on one task."""
    from bench.tasks import dataset_task
    from tflite_train.runtime import (AdaptConfig, TrainableModel, adapt, class_prototypes, embed, input_range,
                                      layer_table)
    from tflite_train.sparse import scaled_memory_budget

    model = TrainableModel(model_path)
    task = dataset_task(args.cache, args.dataset, args.ways, args.shots, args.queries, args.seed)
    task = task.for_model(model.input_shape, input_range(model.metadata))
    xs, ys = task.support, task.support_labels
    memory = scaled_memory_budget(layer_table(model.metadata), args.mem_budget_mib * 2**20)
    config = AdaptConfig(policy="tinytrain", memory_bytes=memory, compute_fraction=args.compute_budget,
                         iterations=0, seed=args.seed)
    result = adapt(model, xs, ys, config)
    model.reset_state()
    protos = class_prototypes(embed(model, xs), ys).astype(np.float32)
    channels = {name: np.asarray(idx).tolist() for name, idx in result.selection.channels.items()}
    return xs, ys, protos, channels, result


def forward_parity(keras_model, onnx_path: pathlib.Path, images: np.ndarray, protos: np.ndarray,
                   scale: float, mean, std) -> dict[str, float]:
    """Max relative difference (max |ort - keras| / max |keras|) of embeddings and logits."""
    import onnxruntime as ort

    x = (images - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    emb = np.asarray(keras_model(x, training=False), np.float64)
    e_hat = emb / np.sqrt((emb**2).sum(1, keepdims=True) + 1e-12)
    p = protos.astype(np.float64)
    logits = scale * e_hat @ (p / np.sqrt((p**2).sum(1, keepdims=True) + 1e-12)).T
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got_emb, got_logits = session.run([C.EMBEDDINGS, C.LOGITS], {C.IMAGES: images})
    rel = lambda a, b: float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-12))  # noqa: E731
    return {C.EMBEDDINGS: rel(got_emb, emb), C.LOGITS: rel(got_logits, logits)}


def generate(onnx_model, folder: pathlib.Path, trainable: list[str]) -> None:
    """ORT training artifacts with the ``trainable`` layers' weights and biases requiring grad."""
    from bench.onnx_graph import parameter_names

    _, artifacts = import_ort_training()
    params = [i.name for i in onnx_model.graph.initializer if i.name.endswith((".weight", ".bias"))]
    grad = [n for layer in trainable for n in parameter_names(layer)]
    folder.mkdir(parents=True, exist_ok=True)
    artifacts.generate_artifacts(onnx_model, requires_grad=grad, frozen_params=[p for p in params if p not in grad],
                                 loss=artifacts.LossType.CrossEntropyLoss, optimizer=artifacts.OptimType.AdamW,
                                 artifact_directory=str(folder), loss_input_names=["logits"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="mcunet")
    parser.add_argument("--input-size", type=int, default=128)
    parser.add_argument("--weights", default=None, help="Keras BN-form weights (default: shipped MCUNet weights for mcunet)")
    parser.add_argument("--candidate-blocks", type=int, default=6, help="k of the TinyTrain export (the demo's)")
    parser.add_argument("--model-dir", default="build/peer/models")
    parser.add_argument("--models", nargs=2, metavar=("SPARSE", "FULL"), default=None,
                        help="use these exported files (TinyTrain export, FullTrain export of --backbone at "
                             "--input-size, e.g. tools/diagnostics/step_ratios.py's exports) instead of exporting "
                             "into --model-dir")
    parser.add_argument("--work-dir", default="build/peer")
    parser.add_argument("--cache", default="build/data_cache")
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--ways", type=int, default=5)
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mem-budget-mib", type=float, default=1.0,
                        help="B_mem for MCUNet@128 (the paper's 1 MiB), scaled to the model by its LastLayer "
                        "memory (tflite_train.sparse.scaled_memory_budget)")
    parser.add_argument("--queries", type=int, default=10, help="queries per class of the sampled task (only the "
                        "support set is used; the same episode as tools/diagnostics/step_ratios.py)")
    parser.add_argument("--compute-budget", type=float, default=0.15,
                        help="B_compute as a fraction of the full backward pass (the library's definition)")
    parser.add_argument("--repeats", type=int, default=400)
    parser.add_argument("--max-seconds", type=float, default=20.0, help="per workload")
    parser.add_argument("--rounds", type=int, default=3,
                        help="fresh-process rounds per cell; the lowest median is reported (shared machines)")
    parser.add_argument("--cpu", type=int, default=None, help="pin every timed process to this core")
    parser.add_argument("--pi-python", default=str(ROOT / ".venv-pi/bin/python"))
    parser.add_argument("--out", default="bench/results/PEER_ORT.md")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if args.weights is None and args.backbone == "mcunet":
        args.weights = str(ROOT / "weights/mcunet_64_meta.weights.h5")
    import platform

    import onnx
    import onnxruntime

    from bench.onnx_graph import graph_to_onnx, keras_to_onnx
    from tflite_train.converters.build_module import folded_backbone, prepare_model
    from tflite_train.converters.export import ensure_export

    work = pathlib.Path(args.work_dir) / f"{args.backbone}_{args.input_size}"
    work.mkdir(parents=True, exist_ok=True)
    configs = export_configs(args)
    paths = {}
    keras_model = keras_backbone(args) if args.backbone in KERAS_BACKBONES else None
    for key, config in configs.items():
        paths[key] = pathlib.Path(args.model_dir) / f"{args.backbone}_{args.input_size}_{key}_k{config.candidate_blocks}.tflite"
        if args.models:
            paths[key] = pathlib.Path(args.models[0 if key == "sparse" else 1])
        else:
            ensure_export(config, paths[key], keras_model)
    xs, ys, protos, selection, result = policy_selection(paths["sparse"], args)
    sparse_cfg = configs["sparse"]
    onnx_path = work / "forward.onnx"
    if keras_model is None:
        folded = folded_backbone(sparse_cfg)
        onnx_model = keras_to_onnx(folded.model, sparse_cfg.mean, sparse_cfg.std, protos, sparse_cfg.cosine_scale)
        onnx.save(onnx_model, str(onnx_path))
        parity = forward_parity(folded.model, onnx_path, xs, protos, sparse_cfg.cosine_scale, sparse_cfg.mean,
                                sparse_cfg.std)
        train_graph = keras_to_onnx(folded.model, sparse_cfg.mean, sparse_cfg.std, protos, sparse_cfg.cosine_scale,
                                    with_embeddings=False)
        all_layers = [spec.name for spec in folded.table]
    else:  # the exporter's own graph IR (BN folded, normalisation absorbed); Keras takes raw pixels
        prepared = prepare_model(keras_model, sparse_cfg)
        onnx_model = graph_to_onnx(prepared.graph, protos, sparse_cfg.cosine_scale)
        onnx.save(onnx_model, str(onnx_path))
        parity = forward_parity(keras_model, onnx_path, xs, protos, sparse_cfg.cosine_scale, [0.0] * 3, [1.0] * 3)
        train_graph = graph_to_onnx(prepared.graph, protos, sparse_cfg.cosine_scale, with_embeddings=False)
        all_layers = [spec.name for spec in prepared.table]
    print(f"ONNX vs Keras forward: max relative difference {parity[C.EMBEDDINGS]:.2e} (embeddings), "
          f"{parity['logits']:.2e} (logits)", flush=True)
    from tflite_train.runtime import read_metadata

    sparse_meta, full_meta = read_metadata(paths["sparse"]), read_metadata(paths["full"])
    last = sparse_meta[C.F_CANDIDATES][-1]
    channels = {layer["name"]: layer["out_channels"] for layer in sparse_meta[C.F_LAYERS]}
    trainable = {"tinytrain": sorted(selection, key=all_layers.index), "full": all_layers, "last_layer": [last]}
    for key, layers in trainable.items():
        generate(train_graph, work / f"artifacts_{key}", layers)
    inputs = work / "inputs.npz"
    np.savez(inputs, image=xs[:1], label=np.asarray(ys[:1], np.int64), prototypes=protos)
    common = {"inputs": str(inputs), "repeats": args.repeats, "max_seconds": args.max_seconds, "cpu": args.cpu}
    tflite_specs = {
        "infer": {"model": str(paths["sparse"]), "selection": {}},
        "tinytrain": {"model": str(paths["sparse"]), "selection": selection},
        "tinytrain_cached": {"model": str(paths["sparse"]), "selection": selection},
        "last_layer": {"model": str(paths["sparse"]), "selection": {last: list(range(channels[last]))}},
        "full": {"model": str(paths["full"]),
                 "selection": {layer["name"]: list(range(layer["out_channels"])) for layer in full_meta[C.F_LAYERS]
                               if layer["name"] in full_meta[C.F_CANDIDATES]}},
    }
    results: dict[str, dict[str, dict]] = {e: {} for e in ENGINES}
    load_start = os.getloadavg()[0]
    for r in range(args.rounds):  # rounds x workloads x engines, interleaved so load changes hit all three
        for w in WORKLOADS:
            ort_workload = "tinytrain" if w == "tinytrain_cached" else w  # ORT cannot start from a cache
            spec = {**common, "engine": "ort", "workload": ort_workload, "onnx": str(onnx_path),
                    "artifacts": str(work / f"artifacts_{ort_workload}")}
            runs = {"ort": run_worker(sys.executable, spec)}
            for engine, python in (("litert", sys.executable), ("tflite_runtime", args.pi_python)):
                runs[engine] = run_worker(python, {**common, **tflite_specs[w], "engine": engine, "workload": w})
            for engine, got in runs.items():  # keep the round with the lowest median (least disturbed)
                if w not in results[engine] or got["seconds"] < results[engine][w]["seconds"]:
                    results[engine][w] = got
            print(f"round {r + 1} {w:<11} " + "  ".join(f"{e} {1e3 * runs[e]['seconds']:.2f} ms" for e in ENGINES),
                  flush=True)
    report = {
        "backbone": args.backbone, "input_size": args.input_size, "dataset": args.dataset, "ways": args.ways,
        "shots": args.shots, "seed": args.seed, "cpu": args.cpu, "repeats": args.repeats, "rounds": args.rounds,
        "load_average": [load_start, os.getloadavg()[0]],
        "budget": {"memory_mib": result.budget.memory_bytes / 2**20, "compute": args.compute_budget},
        "command": "python -m bench.peer_ort " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": f"{platform.machine()}, {platform.processor() or platform.system()}, "
                   f"{len(os.sched_getaffinity(0))} usable cores",
        "versions": {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__,
                     "litert": results["litert"]["infer"]["runtime"],
                     "tflite-runtime env": results["tflite_runtime"]["infer"]["runtime"], "numpy": np.__version__},
        "selection": selection, "channels": {n: channels[n] for n in selection}, "last_layer": last,
        "full_layers": len(all_layers), "parity": parity,
        "times_ms": {e: {w: 1e3 * results[e][w]["seconds"] for w in WORKLOADS} for e in ENGINES},
        "peak_rss_mib": {e: {w: results[e][w]["peak_rss_kib"] / 1024 for w in WORKLOADS} for e in ENGINES},
        "calls": {e: {w: results[e][w]["calls"] for w in WORKLOADS} for e in ENGINES},
        "signatures": {w: results["litert"][w].get("signature") for w in WORKLOADS if w != "infer"},
        "artifacts_trainable": trainable,
    }
    text = render(report)
    print(text)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
