"""(Fisher + selection) time as a share of the whole adaptation, and peak RSS adapting vs inferring.

Runs on the installed interpreter (no TF): ``python bench/adaptation_overhead.py --model M.tflite``.
Each measurement runs in a fresh subprocess so that ru_maxrss (the peak resident set size, KiB on
Linux) belongs to one workload: "infer" = load + prototypes + query inference; "adapt" = load +
the whole ``adapt`` (head, Fisher, selection, training) + query inference. Data: random 4-way
5-shot images in [0, 1] at the model's input size (timing and memory do not depend on the pixels).
Targets (issue 4): share <= 4 %, RSS ratio <= 1.2.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _workload(model_path: str, mode: str, policy: str, iterations: int, batch_size: int, seed: int) -> dict:
    import numpy as np

    from tflite_train.runtime import TrainableModel
    from tflite_train.runtime.trainer import AdaptConfig, adapt, class_prototypes, embed, predict

    model = TrainableModel(model_path)
    rng = np.random.default_rng(seed)
    support = rng.uniform(size=(20, *model.input_shape)).astype(np.float32)
    labels = np.arange(20, dtype=np.int32) % 4
    query = rng.uniform(size=(40, *model.input_shape)).astype(np.float32)
    out: dict = {"mode": mode}
    if mode == "adapt":
        config = AdaptConfig(policy=policy, memory_bytes=float(2**20), compute_fraction=0.15, iterations=iterations,
                             batch_size=batch_size, seed=seed)
        result = adapt(model, support, labels, config)
        out["seconds"] = dict(result.seconds)
        out["selection"] = {n: len(c) for n, c in result.selection.channels.items()}
    else:
        model.set_head(class_prototypes(embed(model, support), labels))
    predict(model, query)
    out["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "build/test-models/mcunet_adam_35.tflite"))
    parser.add_argument("--policy", default="tinytrain")
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", choices=("infer", "adapt"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_workload(args.model, args.worker, args.policy, args.iterations, args.batch_size, args.seed)))
        return 0
    results = {}
    for mode in ("infer", "adapt"):
        cmd = [sys.executable, __file__, "--worker", mode, "--model", args.model, "--policy", args.policy,
               "--iterations", str(args.iterations), "--batch-size", str(args.batch_size), "--seed", str(args.seed)]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    seconds = results["adapt"]["seconds"]
    share = seconds["fisher_selection"] / sum(seconds.values())
    ratio = results["adapt"]["peak_rss_kib"] / results["infer"]["peak_rss_kib"]
    print(f"model {args.model}  policy {args.policy}  iterations {args.iterations}  batch {args.batch_size}")
    print(f"selection {results['adapt']['selection']}")
    print("phase seconds: " + ", ".join(f"{k} {v:.3f}" for k, v in seconds.items()))
    print(f"(fisher + selection) share of adaptation: {100 * share:.2f} %  (target <= 4 %)")
    print(f"peak RSS: adapting {results['adapt']['peak_rss_kib'] / 1024:.1f} MiB, inferring "
          f"{results['infer']['peak_rss_kib'] / 1024:.1f} MiB, ratio {ratio:.3f}  (target <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
