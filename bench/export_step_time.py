"""Benchmark (not a test): MCUNet@128 train_step time, full vs TinyTrain-like sparse, vs infer.

One command (exports what is missing into ``build/bench`` first, which needs TensorFlow; run it once
in the main env, then time in the Pi env)::

    .venv/bin/python bench/export_step_time.py --export-only
    TFLITE_TRAIN_PI_ENV=1 .venv-pi/bin/python bench/export_step_time.py

Models: ``mcunet128_full.tflite`` (FullTrain: every layer a candidate, ``--candidate-blocks 14``) for
the full step (everything selected), and ``mcunet128_k6.tflite`` (candidate blocks 6, the export a
TinyTrain user would use) for ``infer`` and the sparse step: the expand and project layers of the
last two blocks (b12, b13), 1/4 of their output channels. Timings: medians over ``--repeats`` calls,
batch 1, ``--threads`` threads, on whatever interpreter is installed (tflite-runtime on the Pi env).
Targets (issue 3): full / sparse >= 5 and sparse / infer <= 2. ``--out-dir`` times other exports
of the same two configurations (e.g. older ones, for a before/after comparison).
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tflite_train.runtime import TrainableModel  # noqa: E402

MODELS = {"full": 14, "k6": 6}
SPARSE_LAYERS = ("b12_expand", "b12_project", "b13_expand", "b13_project")


def model_path(out_dir: pathlib.Path, key: str) -> pathlib.Path:
    return out_dir / f"mcunet128_{key}.tflite"


def export_missing(out_dir: pathlib.Path, force: bool) -> None:
    """Exports the benchmark models that are missing (needs TensorFlow)."""
    todo = [k for k in MODELS if force or not model_path(out_dir, k).exists()]
    if not todo:
        return
    if importlib.util.find_spec("tensorflow") is None:
        raise SystemExit(f"missing {[str(model_path(out_dir, k)) for k in todo]}; run once with .venv (TensorFlow)")
    from tflite_train.converters.export import write_export
    from tflite_train.converters.export_config import ExportConfig

    for key in todo:
        print(f"exporting {model_path(out_dir, key)} ...", flush=True)
        config = ExportConfig(backbone="mcunet", input_size=(128, 128), candidate_blocks=MODELS[key])
        write_export(config, model_path(out_dir, key))


def timed(fn, repeats: int) -> float:
    """Median wall time of ``fn`` in seconds over ``repeats`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--export-only", action="store_true")
    parser.add_argument("--force-export", action="store_true")
    args = parser.parse_args()
    out_dir = pathlib.Path(args.out_dir)
    export_missing(out_dir, args.force_export)
    if args.export_only:
        return
    rng = np.random.default_rng(0)
    opts = {"num_threads": args.threads}
    full = TrainableModel(model_path(out_dir, "full"), **opts)
    sparse = TrainableModel(model_path(out_dir, "k6"), **opts)
    images = rng.uniform(size=(args.batch, *sparse.input_shape)).astype(np.float32)
    labels = np.zeros(args.batch, np.int64)
    protos = rng.normal(size=(2, sparse.feature_dim))
    for model in (full, sparse):
        model.set_head(protos)
    everything = {name: np.arange(c) for name, c in full.candidate_channels.items()}
    selection = {n: np.arange(max(1, sparse.candidate_channels[n] // 4)) for n in SPARSE_LAYERS}
    sparse.set_selection(selection)
    # interleave the measurements so that load changes on a shared machine hit all of them
    t = {"infer": [], "full": [], "sparse": [], "sparse_on_full": []}
    for _ in range(3):
        t["infer"].append(timed(lambda: sparse.infer(images), args.repeats))
        full.set_selection(everything)
        full_signature = full.train_signature()
        t["full"].append(timed(lambda: full.train_step(images, labels), max(5, args.repeats // 3)))
        t["sparse"].append(timed(lambda: sparse.train_step(images, labels), args.repeats))
        full.set_selection(selection)
        t["sparse_on_full"].append(timed(lambda: full.train_step(images, labels), args.repeats))
    t_infer, t_full, t_sparse, t_sparse_full = (min(t[k]) for k in ("infer", "full", "sparse", "sparse_on_full"))
    print(f"runtime {sparse.runtime}, batch {args.batch}, threads {args.threads}, "
          "best of 3 medians")
    print(f"infer        {1e3 * t_infer:8.2f} ms  (mcunet128_k6)")
    print(f"full step    {1e3 * t_full:8.2f} ms  (mcunet128_full, all {len(full.candidates)} layers selected, "
          f"signature {full_signature})")
    print(f"sparse step  {1e3 * t_sparse:8.2f} ms  (mcunet128_k6, {', '.join(SPARSE_LAYERS)} at 1/4 channels, "
          f"signature {sparse.train_signature()})")
    print(f"(same sparse selection on mcunet128_full: {1e3 * t_sparse_full:.2f} ms, signature "
          f"{full.train_signature()})")
    ok_speedup, ok_infer = t_full / t_sparse >= 5.0, t_sparse / t_infer <= 2.0
    print(f"full/sparse  {t_full / t_sparse:8.2f} x  (target >= 5: {'met' if ok_speedup else 'MISSED'})")
    print(f"sparse/infer {t_sparse / t_infer:8.2f} x  (target <= 2: {'met' if ok_infer else 'MISSED'})")


if __name__ == "__main__":
    main()
