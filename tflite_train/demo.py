"""The README's main job: the end-to-end demo on the embedded default.

1. Export the shipped default -- EfficientNet-Lite0 at 128 px with the weights
   ``tflite_train.default_weights`` ships (ImageNet-only) -- to a trainable builtins-only ``.tflite`` (once; reused while its resolved export
   config is unchanged). The cache's images are mapped to the model's input size and range as a
   device does (``tflite_train.runtime.images.model_input.to_model_input``).
2. Prepare (or confirm) the offline data cache at the model's input size.
3. On the TFLite interpreter (no TensorFlow on this path): sample a task of a cross-domain target,
   classify its query set with prototypes only (the None policy), then adapt with TinyTrain —
   Fisher once, budgeted layer/channel selection, sparse fine-tuning — and classify again.
4. Print accuracy before/after, the selection, its memory and compute against the budgets, and the
   time of each phase; write the resolved config and the report beside the model.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import time
from typing import Any

import numpy as np

from tflite_train.default_weights import DEFAULT_LITE0_WEIGHTS
from tflite_train.runtime.adaptation.protocol import DEFAULT_PROTOCOL
from tflite_train.sparse.budget import Budget

MIB = 2**20


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    """Settings of the end-to-end demo (written to ``<out>/demo_config.json``).

    Attributes:
      weights: ``"imagenet"`` (EfficientNet-Lite0 at 128 px with its ImageNet weights) or shipped weights (their
        ``.json`` sidecar sets backbone, input and head scale, e.g. the meta-trained Lite0
        ``weights/efficientnet_lite0/lite0_128_meta.weights.h5``); default the export's default
        (``tflite_train.default_weights``).
      cache: Data cache folder, built if missing at the exported model's input size (images prepared as the
        device prepares them, never upscaled from a smaller cache).
      out: Output folder for the exported model and the report.
      target: Cross-domain data set of the cache to adapt on.
      candidate_blocks: Trailing blocks whose layers the device may update (Lite0: the 6 meta-trained ones).
      policy: Adaptation policy (``tinytrain`` by default).
      memory_bytes: B_mem, the peak memory of the backward pass in bytes (batch 1; paper appendix A.4);
        None = the library's one default budget, ``tflite_train.sparse.default_budget`` of the model:
        the paper's 1 MiB for MCUNet@128 scaled by the model's LastLayer backward memory (4.005 MiB for
        Lite0@128, which needs 1.8 MB for its largest inference activation alone, so 1 MiB unscaled
        admits no layer), raised only when it admits none of the candidates. The same default as
        ``adapt`` and the benchmark.
      compute_fraction: B_compute as a fraction of the full backward pass (FullTrain's backward MACs);
        the adaptation protocol's (``tflite_train.runtime.adaptation.protocol.DEFAULT_PROTOCOL``), as ``adapt``.
      epochs, batch_size: Passes over the augmented support set and images per step: the adaptation
        protocol's, as ``adapt``: the paper's 40 passes at batch 1 (appendix A.2: "training using all the samples (e.g. 25) for
        ... 40 iterations"), i.e. 1,000 steps for a 5-way 5-shot task.
      ways, shots, queries: Each task (fixed ways-way shots-shot; queries per class).
      tasks: Number of tasks to adapt on (accuracy is reported per task and on average). Each Lite0
        task is 1,000 sparse steps (14 ms each from the cached cut on 2 idle cores) after the
        export (README: a cold ``make demo`` takes 3 min 59 s).
      learning_rate: Step size of the sparse fine-tuning: the adaptation protocol's, as ``adapt``
        (TinyTrain's rate chosen on validation tasks by the powered benchmark, never on the demo's target).
      seed: Seed of the task sampling and of the adaptation.
    """

    weights: str = DEFAULT_LITE0_WEIGHTS
    cache: str = "build/data_cache_128"
    out: str = "build/demo"
    target: str = "fashion_mnist"
    candidate_blocks: int = 6
    policy: str = "tinytrain"
    memory_bytes: float | None = None
    compute_fraction: float = DEFAULT_PROTOCOL.compute_fraction
    epochs: int = DEFAULT_PROTOCOL.epochs
    batch_size: int = DEFAULT_PROTOCOL.batch_size
    ways: int = 5
    shots: int = 5
    queries: int = 10
    tasks: int = 2
    learning_rate: float = DEFAULT_PROTOCOL.learning_rate
    seed: int = 0


def _export(config: DemoConfig) -> pathlib.Path:
    """Exports the shipped weights unless an export with the same resolved config exists."""
    from tflite_train.converters.export import ensure_export
    from tflite_train.converters.weights_spec import resolve_export_config

    export_config = resolve_export_config(config.weights, candidate_blocks=config.candidate_blocks)
    path = pathlib.Path(config.out) / f"{export_config.backbone}_{export_config.input_size[0]}.tflite"
    ensure_export(export_config, path)
    return path


def demo_budget(config: DemoConfig, model: Any) -> Budget:
    """B_mem and B_compute: ``config.memory_bytes`` and ``config.compute_fraction``, or without a B_mem the
    library's default budget for the model and its candidates (``tflite_train.sparse.default_budget``, as
    ``adapt`` and the benchmark: the scaled B_mem, raised on a small model to admit a layer)."""
    from tflite_train import contract as C
    from tflite_train.runtime import AdaptConfig, layer_table
    from tflite_train.sparse import default_budget

    if config.memory_bytes is not None:
        return Budget(float(config.memory_bytes), compute_fraction=config.compute_fraction)
    return default_budget(layer_table(model.metadata), model.metadata[C.F_CANDIDATES],
                          compute_fraction=config.compute_fraction, channel_ratio=AdaptConfig().channel_ratio,
                          optimizer=model.metadata[C.F_OPTIMIZER][C.F_NAME], batch_size=config.batch_size)


def budget_line(config: DemoConfig, memory_bytes: float) -> str:
    """How B_mem was set, in the words of ``adapt --help`` and the benchmark report."""
    if config.memory_bytes is not None:
        return f"B_mem {memory_bytes / MIB:.3f} MiB of backward-pass peak memory (given)"
    return (f"B_mem {memory_bytes / MIB:.3f} MiB of backward-pass peak memory: the paper's 1 MiB for MCUNet at "
            "128 px, scaled by this model's LastLayer backward memory (tflite_train.sparse.default_budget)")


def run_demo(config: DemoConfig = DemoConfig()) -> dict[str, Any]:
    """Runs the demo (see the module docstring) and returns its report."""
    from tflite_train.data import EpisodeConfig, load_split, prepare_cache, sample_episodes
    from tflite_train.runtime import AdaptConfig, TrainableModel, adapt, evaluate, input_range

    out = pathlib.Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo_config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2))
    model_path = _export(config)

    start = time.perf_counter()
    model = TrainableModel(model_path)
    load_seconds = time.perf_counter() - start
    prepare_cache(config.cache, image_size=int(model.input_shape[0]))
    data = load_split(config.cache, config.target, "test")
    episodes = sample_episodes(data.labels, config.tasks, config.seed,
                               EpisodeConfig(ways=config.ways, shots=config.shots, queries=config.queries))

    budget = demo_budget(config, model)

    def run(policy: str, task: int, support, support_labels, query, query_labels):
        adapt_config = AdaptConfig(policy=policy, memory_bytes=budget.memory_bytes, compute_macs=budget.compute_macs,
                                   compute_fraction=budget.compute_fraction, epochs=config.epochs,
                                   batch_size=config.batch_size, learning_rate=config.learning_rate,
                                   seed=config.seed + task, on_empty="empty")
        result = adapt(model, support, support_labels, adapt_config)
        start = time.perf_counter()
        accuracy = evaluate(model, query, query_labels)
        return result, accuracy, time.perf_counter() - start

    from tflite_train.runtime.images.model_input import to_model_input

    value_range = input_range(model.metadata)

    def inputs(indices):
        return np.stack([to_model_input(data.images[i], model.input_shape, value_range) for i in indices])

    tasks = []
    for task, episode in enumerate(episodes):
        support = inputs(episode.support_indices)
        query = inputs(episode.query_indices)
        _, before, _ = run("none", task, support, episode.support_labels, query, episode.query_labels)
        result, after, eval_seconds = run(config.policy, task, support, episode.support_labels, query,
                                          episode.query_labels)
        tasks.append({"classes": [data.class_names[c] for c in episode.classes], "accuracy_none": before,
                      f"accuracy_{config.policy}": after, "adaptation": result.to_dict(),
                      "eval_seconds": eval_seconds})
        print(f"task {task + 1}/{config.tasks}: none {100 * before:5.1f} %  ->  {config.policy} {100 * after:5.1f} %"
              f"  ({', '.join(tasks[-1]['classes'])})")
    report = {
        "model": str(model_path), "runtime": model.runtime, "target": config.target, "load_seconds": load_seconds,
        "memory_budget_bytes": budget.memory_bytes,
        "mean_accuracy_none": float(np.mean([t["accuracy_none"] for t in tasks])),
        f"mean_accuracy_{config.policy}": float(np.mean([t[f"accuracy_{config.policy}"] for t in tasks])),
        "tasks": tasks,
    }
    (out / "demo_report.json").write_text(json.dumps(report, indent=2))
    print(format_report(config, report, result, eval_seconds))
    return report


def format_report(config: DemoConfig, report: dict[str, Any], result: Any, eval_seconds: float) -> str:
    """Human-readable summary of a demo run; selection, budget use and timings of the last task."""
    cost = result.cost
    limit = result.compute_limit_macs
    seconds = dict(result.seconds)
    lines = [
        f"model {report['model']} on {report['runtime']}",
        f"{config.tasks} tasks of {config.target}, {config.ways}-way {config.shots}-shot, "
        f"{config.queries} queries/class; mean query accuracy: none (prototypes only) "
        f"{100 * report['mean_accuracy_none']:.1f} %  ->  {config.policy} "
        f"{100 * report[f'mean_accuracy_{config.policy}']:.1f} %",
        "last task's selection: " + (", ".join(f"{name} ({len(ch)} ch)" for name, ch in result.selection.channels.items())
                         or "none (no update)"),
        budget_line(config, report["memory_budget_bytes"]),
        f"backward memory {cost.total_bytes / MIB:.3f} MiB of {report['memory_budget_bytes'] / MIB:.3f} MiB budget; "
        f"backward compute {cost.backward_macs / 1e6:.2f}M MACs of "
        f"{'unlimited' if math.isinf(limit) else f'{limit / 1e6:.2f}M'} "
        f"({limit / result.full_backward_macs:.0%} of the full backward pass, {result.full_backward_macs / 1e6:.2f}M MACs)",
        f"time: load {report['load_seconds']:.2f} s, head {seconds.get('head', 0):.2f} s, "
        f"fisher+selection {seconds.get('fisher_selection', 0):.2f} s, cached cut {seconds.get('cache', 0):.2f} s, "
        f"{len(result.losses)} steps ({config.epochs} passes) {seconds.get('training', 0):.2f} s, query eval {eval_seconds:.2f} s",
    ]
    if result.cache is not None:
        cache = result.cache
        lines.append(f"steps from the cached cut below {cache.layer}: {cache.cache_bytes / MIB:.2f} MiB "
                     f"(the views as images {cache.image_bytes / MIB:.2f} MiB), forward per step "
                     f"{cache.step_forward_macs / 1e6:.2f}M MACs" if cache.used else f"full steps: {cache.reason}")
    if result.losses:
        # One batch-1 step's loss is noisy (one augmented image); the mean over a pass (epoch) is the curve.
        per_pass = max(1, len(result.losses) // max(1, config.epochs))
        first, last = result.losses[:per_pass], result.losses[-per_pass:]
        lines.append(f"loss, mean over a pass of {per_pass} steps: {float(np.mean(first)):.3f} (first) -> "
                     f"{float(np.mean(last)):.3f} (last); single steps {result.losses[0]:.3f} (step 1) -> "
                     f"{result.losses[-1]:.3f} (step {len(result.losses)})")
    return "\n".join(lines)
