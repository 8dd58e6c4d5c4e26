"""(Fisher + selection) time as a share of the whole adaptation, and peak RSS adapting vs inferring.

Runs on the installed interpreter (no TF)::

    python bench/adaptation_overhead.py --model build/models/mcunet_64_meta.tflite --cache build/data_cache

(the model: ``tflite-train export --weights weights/mcunet_64_meta.weights.h5 --out build/models/mcunet_64_meta.tflite``;
the cache: ``tflite-train data prepare --out build/data_cache``). The task: one fixed ``--ways``-way
``--shots``-shot episode (``--queries`` per class) of the cross-domain target ``--dataset`` (seeded).
Each measurement runs in a fresh subprocess so that ru_maxrss (the peak resident set size, KiB on
Linux) belongs to one workload: "infer" = load + prototypes + query inference (the None policy);
"adapt" = load + the whole ``adapt`` (head, Fisher, selection, training) + query inference.
Both load the same data, so the ratio isolates what adapting adds. ``--repeats`` runs each
workload several times and keeps the median phase times. Targets (issue 4): share <= 4 %, RSS
ratio <= 1.2. Writes ``--out`` JSON (figures + resolved settings) when given.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _task(model, cache: str, dataset: str, ways: int, shots: int, queries: int, seed: int):
    import numpy as np

    from tflite_train.data.cache import load_split
    from tflite_train.data.episodes import EpisodeConfig, sample_episode
    from tflite_train.runtime.model_contract import input_range
    from tflite_train.runtime.model_input import to_model_input

    data = load_split(cache, dataset, "test")
    episode = sample_episode(data.labels, np.random.default_rng(seed),
                             EpisodeConfig(ways=ways, shots=shots, queries=queries))
    xs, ys, xq, yq = episode.gather(data.images)

    value_range = input_range(model.metadata)  # raw-pixel models take [0, 255]

    def prepare(images):
        return np.stack([to_model_input(im, model.input_shape, value_range) for im in images])

    return prepare(xs), ys, prepare(xq), yq


def _workload(args: argparse.Namespace) -> dict:
    import time

    from tflite_train.runtime import TrainableModel
    from tflite_train.runtime import AdaptConfig, adapt, class_prototypes, embed, evaluate

    model = TrainableModel(args.model)
    xs, ys, xq, yq = _task(model, args.cache, args.dataset, args.ways, args.shots, args.queries, args.seed)
    out: dict = {"mode": args.worker, "runs": []}
    for _ in range(args.repeats):
        if args.worker == "adapt":
            config = AdaptConfig(policy=args.policy, memory_bytes=args.mem_budget, compute_fraction=args.compute_budget,
                                 iterations=args.iterations, batch_size=args.batch_size, seed=args.seed,
                                 chunk_size=args.chunk_size, fisher_chunk_size=args.fisher_chunk_size,
                                 fisher_samples=args.fisher_samples)
            result = adapt(model, xs, ys, config)
            run = {"seconds": dict(result.seconds), "within_budget": result.within_budget,
                   "memory_bytes": result.cost.total_bytes, "backward_macs": result.cost.backward_macs,
                   "selection": {n: len(c) for n, c in result.selection.channels.items()}}
        else:
            t0 = time.perf_counter()
            model.reset_state()
            model.set_head(class_prototypes(embed(model, xs, args.chunk_size), ys))
            run = {"seconds": {"head": time.perf_counter() - t0}}
        run["query_accuracy"] = evaluate(model, xq, yq)
        out["runs"].append(run)
    out["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return out


def main(argv: list[str] | None = None) -> int:
    import statistics

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "build/models/mcunet_64_meta.tflite"))
    parser.add_argument("--cache", default=str(ROOT / "build/data_cache"))
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--ways", type=int, default=5)
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--policy", default="tinytrain")
    parser.add_argument("--mem-budget", type=float, default=float(2**20), help="bytes (default 1 MiB)")
    parser.add_argument("--compute-budget", type=float, default=0.15, help="fraction of the full backward pass (FullTrain backward MACs)")
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk-size", type=int, default=32, help="images per infer/fisher call")
    parser.add_argument("--fisher-chunk-size", type=int, default=4, help="images per fisher call")
    parser.add_argument("--fisher-samples", type=int, default=None, help="Fisher over a class-balanced subset")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    parser.add_argument("--worker", choices=("infer", "adapt"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_workload(args)))
        return 0
    results = {}
    for mode in ("infer", "adapt"):
        cmd = [sys.executable, __file__, "--worker", mode, *(argv if argv is not None else sys.argv[1:])]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    runs = results["adapt"]["runs"]
    seconds = {k: statistics.median(r["seconds"][k] for r in runs) for k in runs[0]["seconds"]}
    share = seconds["fisher_selection"] / sum(seconds.values())
    ratio = results["adapt"]["peak_rss_kib"] / results["infer"]["peak_rss_kib"]
    from tflite_train.runtime.interpreter import load_interpreter_class

    runtime = load_interpreter_class()[1]
    print(f"model {args.model}  runtime {runtime}  policy {args.policy}  iterations {args.iterations}  "
          f"batch {args.batch_size}  task {args.dataset} {args.ways}-way {args.shots}-shot (seed {args.seed})")
    print(f"selection {runs[0]['selection']}  memory {runs[0]['memory_bytes']} B  backward MACs "
          f"{runs[0]['backward_macs']}  within budget {runs[0]['within_budget']}")
    print("phase seconds (median of %d): " % len(runs) + ", ".join(f"{k} {v:.3f}" for k, v in seconds.items()))
    print(f"(fisher + selection) share of adaptation: {100 * share:.2f} %  (target <= 4 %)")
    print(f"peak RSS: adapting {results['adapt']['peak_rss_kib'] / 1024:.1f} MiB, inferring "
          f"{results['infer']['peak_rss_kib'] / 1024:.1f} MiB, ratio {ratio:.3f}  (target <= 1.2)")
    print(f"query accuracy: none {results['infer']['runs'][0]['query_accuracy']:.4f}, "
          f"{args.policy} {runs[0]['query_accuracy']:.4f}")
    if args.out:
        report = {"settings": {k: v for k, v in vars(args).items() if k != "worker"}, "runtime": runtime,
                  "seconds": seconds, "share": share, "rss_ratio": ratio, "results": results}
        pathlib.Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
