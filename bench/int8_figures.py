"""Figures of an int8 export against the float export of the same model (issue 27, ``docs/int8.md``).

Numpy and an interpreter only (runs in the Pi env too): file sizes; ``infer`` latency of both files side by
side in one process (one thread, batch 1, interleaved rounds, medians); embedding cosine of the int8 file
to the float file on real images of the data cache; and a short adaptation on the int8 file (prototypes
from a support set, every candidate channel selected, a few ``train_step`` calls on it: loss before and
after, the dtypes of the state).

    python -m bench.int8_figures --float F.tflite --int8 Q.tflite [--runtime litert|tflite-runtime] [--no-xnnpack] --out R.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import statistics
import time

import numpy as np

from tflite_train import contract as C
from tflite_train.runtime.model.interpreter import TrainableModel

LOG = logging.getLogger(__name__)

__all__ = ["adaptation_check", "cosines", "infer_latency", "main", "real_images"]

RUNTIME_MODULES = {"litert": "ai_edge_litert.interpreter", "tflite-runtime": "tflite_runtime.interpreter"}


def real_images(cache: pathlib.Path, dataset: str, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 images, labels) of ``count`` seeded test-split images of a cached data set."""
    from tflite_train.data import load_split

    data = load_split(cache, dataset, "test")
    pick = np.sort(np.random.default_rng(seed).choice(len(data.images), size=min(count, len(data.images)),
                                                      replace=False))
    return data.images[pick], data.labels[pick]


def _scaled(model: TrainableModel, images: np.ndarray) -> np.ndarray:
    low, high = model.metadata[C.F_INPUT][C.F_RANGE]
    return (low + (high - low) * images.astype(np.float32) / 255.0).astype(np.float32)


def infer_latency(models: dict[str, TrainableModel], image: np.ndarray, rounds: int = 40,
                  calls: int = 3) -> dict[str, float]:
    """Median ms of one batch-1 ``infer`` per model; the models alternate within each round (same load)."""
    times: dict[str, list[float]] = {name: [] for name in models}
    for model in models.values():
        for _ in range(3):
            model.infer(image)
    for _ in range(rounds):
        for name, model in models.items():
            start = time.perf_counter()
            for _ in range(calls):
                model.infer(image)
            times[name].append((time.perf_counter() - start) / calls * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two embedding matrices."""
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-30)


def adaptation_check(model: TrainableModel, images: np.ndarray, labels: np.ndarray, steps: int) -> dict:
    """Prototypes from ``images``, every candidate channel selected, ``steps`` train steps on the same batch
    (the model is opened without the explicit delegate: the batch changes)."""
    model.reset_state()
    classes = np.unique(labels)
    relabel = np.searchsorted(classes, labels).astype(np.int32)
    emb = model.infer(images)[C.EMBEDDINGS]
    prototypes = np.stack([emb[relabel == c].mean(0) for c in range(len(classes))])
    model.set_head(prototypes)
    model.set_selection({name: list(range(c)) for name, c in model.candidate_channels.items()})
    model.set_learning_rate(1e-4)
    losses = [float(model.train_step(images, relabel)["loss"]) for _ in range(steps)]
    state = model.get_state()
    return {"losses": losses, "classes": int(len(classes)), "images": int(len(images)),
            "state_dtypes": sorted({str(v.dtype) for v in state.values()}),
            "non_float32_state": sorted(k for k, v in state.items() if v.dtype != np.float32)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--float", dest="float_model", required=True)
    parser.add_argument("--int8", dest="int8_model", required=True)
    parser.add_argument("--runtime", choices=sorted(RUNTIME_MODULES), default=None)
    parser.add_argument("--cache", type=pathlib.Path, default=pathlib.Path("build/data_cache_128"))
    parser.add_argument("--dataset", default="tuxpaint", help="cached data set of the real images (a target)")
    parser.add_argument("--images", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--no-xnnpack", dest="xnnpack", action="store_false",
                        help="builtin kernels for both files (default: the explicit XNNPACK delegate where the runtime "
                             "needs one; tflite-runtime 2.14 refuses it for int8 files, docs/int8.md)")
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runtime = RUNTIME_MODULES.get(args.runtime) if args.runtime else None
    paths = {"float": args.float_model, "int8": args.int8_model}
    models = {name: TrainableModel(path, runtime=runtime, num_threads=1, xnnpack=args.xnnpack)
              for name, path in paths.items()}
    report: dict = {"runtime": models["float"].runtime, "xnnpack_requested": args.xnnpack,
                    "delegated": {name: m.delegated for name, m in models.items()},
                    "bytes": {name: os.path.getsize(path) for name, path in paths.items()}}
    report["size_ratio"] = report["bytes"]["int8"] / report["bytes"]["float"]
    raw, labels = real_images(args.cache, args.dataset, args.images)
    images = _scaled(models["float"], raw)
    report["infer_ms"] = infer_latency(models, images[:1], args.rounds)
    report["infer_speedup"] = report["infer_ms"]["float"] / report["infer_ms"]["int8"]
    # batch 1 throughout on the timed (explicit XNNPACK) models: tflite-runtime 2.14's delegate does not
    # follow batch-size changes (TrainableModel.infer)
    emb = {name: np.concatenate([m.infer(images[i:i + 1])[C.EMBEDDINGS] for i in range(len(images))])
           for name, m in models.items()}
    cos = cosines(emb["float"], emb["int8"])
    report["embedding_cosine"] = {"images": int(len(cos)), "dataset": args.dataset, "mean": float(cos.mean()),
                                  "min": float(cos.min()), "median": float(np.median(cos))}
    support = np.concatenate([np.flatnonzero(labels == c)[:2] for c in np.unique(labels)])[:10]
    report["adaptation"] = {name: adaptation_check(TrainableModel(paths[name], runtime=runtime), images[support],
                                                   labels[support], args.steps) for name in models}
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    LOG.info("%s", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
