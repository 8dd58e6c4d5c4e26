"""Benchmark (not a test): MCUNet@128 train_step time, full vs TinyTrain-like sparse, vs infer.

Usage: ``python bench/export_step_time.py --model m.tflite [--batch 1] [--repeats 10]`` where the
model was exported with every block a candidate, e.g.
``python -m tflite_train.cli export --backbone mcunet --candidate-blocks 14 --out build/bench/mcunet_full.tflite``.
Runs on whatever interpreter is installed (tflite-runtime on the Pi env).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tflite_train.runtime import TrainableModel


def timed(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    model = TrainableModel(args.model, num_threads=args.threads)
    rng = np.random.default_rng(0)
    images = rng.uniform(size=(args.batch, *model.input_shape)).astype(np.float32)
    labels = np.zeros(args.batch, np.int64)
    model.set_head(rng.normal(size=(2, model.feature_dim)))
    t_infer = timed(lambda: model.infer(images), args.repeats)
    model.set_selection({name: np.arange(c) for name, c in model.candidate_channels.items()})
    t_full = timed(lambda: model.train_step(images, labels), args.repeats)
    # TinyTrain-like: a few layers of the last blocks, 1/4 of their channels
    chosen = [n for n in model.candidates if n.endswith(("_expand", "_project"))][-4:]
    model.set_selection({n: np.arange(max(1, model.candidate_channels[n] // 4)) for n in chosen})
    t_sparse = timed(lambda: model.train_step(images, labels), args.repeats)
    print(f"runtime {model.runtime}, batch {args.batch}, threads {args.threads}")
    print(f"infer        {1e3 * t_infer:8.2f} ms")
    print(f"full step    {1e3 * t_full:8.2f} ms")
    print(f"sparse step  {1e3 * t_sparse:8.2f} ms  ({', '.join(chosen)}, 1/4 channels)")
    print(f"full/sparse = {t_full / t_sparse:.1f}x, sparse/infer = {t_sparse / t_infer:.2f}x")


if __name__ == "__main__":
    main()
