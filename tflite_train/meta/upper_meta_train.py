"""ProtoNet meta-training of a backbone's upper blocks on cached prefix features (paper §4.1, Eq. 1).

The prefix below ``first_block`` is frozen, so its feature maps come from ``feature_cache`` and a
step runs only the upper model (the blocks from the cache's block, then the head conv and the
pooling). Trained (``trained``), in blocks ``first_block``.. and the head conv: ``"kernels_bn"``
the conv kernels and BatchNorm scale/shift (gamma, beta); ``"bn"`` only gamma and beta, a FiLM-like
per-channel affine modulation of fixed ImageNet features (Perez et al. 2018; few parameters, little
drift). BatchNorm runs in inference mode with the ImageNet moving statistics (episodes of 50 images
give noisy batch statistics, and the exported model folds the moving statistics anyway), so the
moving statistics are not changed. Blocks between the cache's block and ``first_block`` run frozen.

Episodes (``sample_feature_episode``): ``ways`` classes of one source; per class its source images
are split into support images and query images (disjoint: for emoji, the query shows a vendor
style the support does not), then ``shots`` support rows and ``queries`` query rows are drawn from
the views of those images (with replacement only when there are fewer rows than needed). Each
step t takes ``episodes_per_step`` = E episodes, episode e from source (t E + e) mod (number of sources)
(rotating, so every source is drawn equally often even when E is not a multiple of the number of sources);
loss = (1/E) sum_e CE_e (cosine logits s (cos(f(q), c_k) + b), learnable s and b) +
weight_decay / 2 * ||W - W_0||^2 over the trained kernels (a pull towards the ImageNet weights
W_0; none in ``"bn"`` mode). Optimizer: Adam, learning rate warm-up then cosine (``WarmupCosine``)
over ``steps``; ``stop_step`` > 0 ends the run after that many steps on the same schedule (the final
run of a leave-one-domain-out selection, ``domain_selection``, repeats the held-out runs' schedule).

Distribution: under a ``tf.distribute`` strategy with R replicas (E a multiple of R), replica r
runs episodes r E/R .. (r+1) E/R - 1 and the optimizer sums the replicas' gradients of loss / R,
so the update equals the single-device one up to float summation order.

Validation: every ``val_every`` steps, the prototype classifier's accuracy on ``val_tasks``
fixed 5-way 5-shot episodes of each validation source (same sampler, fixed seed); the mean over
sources is the record's ``val_acc``. The weights validated, and written back at the end, are
theta(alpha) = (1 - alpha) theta_0 + alpha theta (WiSE-FT, ``weight_interpolation``; theta_0 = the
weights the run started from, ``alpha`` = 1: the trained weights as they are); each extra alpha of
``val_alphas`` is validated too (``by_alpha`` of the record). With ``keep_best`` training stops
after ``patience`` validations without improvement and the best weights are kept; without it the
last step's weights are returned.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import time

import keras
import numpy as np
import tensorflow as tf

from tflite_train.meta.config import ScheduleConfig
from tflite_train.meta.feature_cache import FeatureSet
from tflite_train.meta.protonet import CosineHead, prototypes, protonet_loss
from tflite_train.meta.run_io import make_strategy
from tflite_train.meta.schedule import WarmupCosine
from tflite_train.meta.weight_interpolation import interpolate_weights

log = logging.getLogger(__name__)

TRAINED_MODES = ("kernels_bn", "bn")
"""What meta-training updates in the trained layers (module docstring)."""


@dataclasses.dataclass(frozen=True)
class UpperMetaConfig:
    """Meta-training of the upper blocks on cached features (module docstring).

    Attributes:
      first_block: First trained block (>= the feature cache's block).
      steps: Maximum optimizer steps.
      ways, shots, queries: Training episodes (fixed shape).
      episodes_per_step: E, split over the strategy's replicas.
      learning_rate: Peak of the warm-up / cosine schedule (Adam).
      warmup_fraction: Fraction of ``steps`` spent warming up.
      weight_decay: Pull of the trained kernels towards their ImageNet values.
      val_every, val_tasks: Validation cadence and number of 5-way 5-shot tasks per source.
      val_shots, val_queries: Shots and queries of a validation task (5-way).
      patience: Validations without improvement before stopping.
      keep_best: Keep the best-validating weights (else the last step's).
      init_scale, init_bias: Initial cosine scale s and bias b.
      seed: Seed of the training episodes (the validation tasks use seed + 1).
      trained: One of ``TRAINED_MODES``: kernels and BatchNorm gamma/beta, or gamma/beta only.
      stop_step: Stop after this many steps of the ``steps`` schedule (0: run all ``steps``).
      alpha: Weight of the trained weights in the validated / returned interpolation (1: as trained).
      val_alphas: Further interpolation weights validated at every validation (recorded only).
    """

    first_block: int = 10
    steps: int = 300
    ways: int = 5
    shots: int = 5
    queries: int = 5
    episodes_per_step: int = 2
    learning_rate: float = 1e-3
    warmup_fraction: float = 0.05
    weight_decay: float = 1e-3
    val_every: int = 25
    val_tasks: int = 200
    val_shots: int = 5
    val_queries: int = 5
    patience: int = 4
    keep_best: bool = True
    init_scale: float = 10.0
    init_bias: float = 0.0
    seed: int = 0
    trained: str = "kernels_bn"
    stop_step: int = 0
    alpha: float = 1.0
    val_alphas: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("steps", "ways", "shots", "queries", "episodes_per_step", "val_every", "val_tasks", "patience"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1; got {value!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive; got {self.learning_rate!r}")
        if self.trained not in TRAINED_MODES:
            raise ValueError(f"trained must be one of {', '.join(TRAINED_MODES)}; got {self.trained!r}")
        if isinstance(self.stop_step, bool) or not isinstance(self.stop_step, int) or not 0 <= self.stop_step <= self.steps:
            raise ValueError(f"stop_step must be an int in 0..steps ({self.steps}); got {self.stop_step!r}")
        for a in (self.alpha, *self.val_alphas):
            if not 0.0 <= a <= 1.0:
                raise ValueError(f"alpha and val_alphas must be in [0, 1]; got {a!r}")


def sample_feature_episode(data: FeatureSet, rng: np.random.Generator, ways: int, shots: int, queries: int):
    """(support rows, support labels, query rows, query labels) of one episode (module docstring).

    Raises:
      ValueError: fewer than ``ways`` classes with at least 2 source images.
    """
    by_class: dict[int, dict[int, list[int]]] = {}
    for row, (label, image) in enumerate(zip(data.labels.tolist(), data.image_index.tolist())):
        by_class.setdefault(label, {}).setdefault(image, []).append(row)
    return _episode(by_class, rng, ways, shots, queries)


def _episode(by_class, rng, ways, shots, queries):
    eligible = sorted(c for c, images in by_class.items() if len(images) >= 2)
    if len(eligible) < ways:
        raise ValueError(f"{ways}-way episodes need {ways} classes with >= 2 source images; the set has {len(eligible)}")
    classes = rng.choice(eligible, size=ways, replace=False)
    s_rows, q_rows = [], []
    for c in classes:
        images = list(by_class[int(c)].values())
        order = rng.permutation(len(images))
        n_query = min(len(images) - 1, max(1, int(round(len(images) * queries / (shots + queries)))))
        query_pool = [r for i in order[:n_query] for r in images[i]]
        support_pool = [r for i in order[n_query:] for r in images[i]]
        s_rows.append(rng.choice(support_pool, size=shots, replace=len(support_pool) < shots))
        q_rows.append(rng.choice(query_pool, size=queries, replace=len(query_pool) < queries))
    labels = np.arange(ways, dtype=np.int32)
    return (np.concatenate(s_rows), np.repeat(labels, shots), np.concatenate(q_rows), np.repeat(labels, queries))


class _Sampler:
    """Episodes of one FeatureSet, with the class/image index built once."""

    def __init__(self, data: FeatureSet) -> None:
        self.data = data
        self.by_class: dict[int, dict[int, list[int]]] = {}
        for row, (label, image) in enumerate(zip(data.labels.tolist(), data.image_index.tolist())):
            self.by_class.setdefault(label, {}).setdefault(image, []).append(row)

    def __call__(self, rng, ways, shots, queries):
        return _episode(self.by_class, rng, ways, shots, queries)


def trained_layers(upper: keras.Model, first_block: int) -> list[keras.layers.Layer]:
    """Layers with weights of blocks >= ``first_block`` and of the head conv (``final``, ``final_bn``)."""
    out = []
    for layer in upper.layers:
        if not layer.weights:
            continue
        name = layer.name
        if name.startswith("final") or (name[0] == "b" and name[1:3].isdigit() and int(name[1:3]) >= first_block):
            out.append(layer)
    return out


def embed_features(upper: keras.Model, features: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """Embeddings (N, D) float32 of cached feature rows, inference mode."""
    fn = _inference_fn(upper)
    out = [fn(tf.constant(features[i:i + batch_size], tf.float32)).numpy() for i in range(0, len(features), batch_size)]
    return np.concatenate(out).astype(np.float32)


_FNS: dict[int, object] = {}


def _inference_fn(upper: keras.Model):
    key = id(upper)
    if key not in _FNS:
        _FNS[key] = tf.function(lambda x: upper(x, training=False), reduce_retracing=True)
    return _FNS[key]


def prototype_accuracy(embeddings: np.ndarray, s_rows, s_labels, q_rows, q_labels, ways: int) -> float:
    """Query accuracy of the nearest class mean by cosine similarity."""
    protos = np.zeros((ways, embeddings.shape[1]), np.float64)
    np.add.at(protos, s_labels, embeddings[s_rows])
    protos /= np.maximum(np.linalg.norm(protos, axis=1, keepdims=True), 1e-12)
    q = embeddings[q_rows]
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    return float(np.mean(np.argmax(q @ protos.T, axis=1) == q_labels))


def validation_accuracy(upper: keras.Model, val_sets: dict[str, FeatureSet], config: UpperMetaConfig) -> dict[str, np.ndarray]:
    """Per-task accuracies on each validation set (the same tasks for every model: seed + 1)."""
    out = {}
    for name, data in val_sets.items():
        emb = embed_features(upper, data.features)
        sampler = _Sampler(data)
        rng = np.random.default_rng((config.seed + 1, len(name)))
        out[name] = np.asarray([prototype_accuracy(emb, *sampler(rng, 5, config.val_shots, config.val_queries), 5)
                                for _ in range(config.val_tasks)])
    return out


def episode_sources(step: int, episodes_per_step: int, num_sources: int) -> list[int]:
    """The source of each episode of step t: episode e comes from source (t E + e) mod n (module docstring).

    With E a multiple of n this is e mod n at every step; otherwise the sources rotate, so over n steps
    each source gives E episodes (E = 2, n = 3: steps 0, 1, 2 take sources [0, 1], [2, 0], [1, 2]).
    """
    if num_sources < 1 or episodes_per_step < 1 or step < 0:
        raise ValueError(f"need step >= 0, episodes_per_step >= 1, num_sources >= 1; got {step}, {episodes_per_step}, "
                         f"{num_sources}")
    return [(step * episodes_per_step + e) % num_sources for e in range(episodes_per_step)]


def meta_train_upper(
    upper: keras.Model,
    train_sets: list[FeatureSet],
    val_sets: dict[str, FeatureSet],
    config: UpperMetaConfig,
    out_dir: str | pathlib.Path,
    *,
    strategy: tf.distribute.Strategy | None = None,
) -> tuple[list[dict], dict]:
    """Meta-trains ``upper`` (module docstring): a copy made under ``strategy`` trains, and the
    best-validating weights are written back into ``upper``.

    Writes ``log.jsonl`` (one record per log/validation) in ``out_dir``. Returns (records, best), best =
    {"step", "val_acc" (mean over sources, at ``config.alpha``), "per_source", "scale", "bias"}; the
    weights written back are the best (or last) step's, interpolated with ``config.alpha``.
    """
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    strategy = strategy or make_strategy("default")
    replicas = strategy.num_replicas_in_sync
    if config.episodes_per_step % replicas:
        raise ValueError(f"episodes_per_step ({config.episodes_per_step}) must be a multiple of the {replicas} replicas")
    per_replica = config.episodes_per_step // replicas
    given = upper
    with strategy.scope():  # the trained copy's variables belong to the strategy (mirrored over its replicas)
        upper = keras.models.clone_model(given)
        upper.set_weights(given.get_weights())
    layers = trained_layers(upper, config.first_block)
    for layer in upper.layers:
        layer.trainable = layer in layers and (config.trained == "kernels_bn" or isinstance(layer, keras.layers.BatchNormalization))
    with strategy.scope():
        head = CosineHead(config.init_scale, config.init_bias, name="cosine_head")
        schedule = WarmupCosine(config.steps, ScheduleConfig(peak_lr=config.learning_rate,
                                                             min_lr=min(1e-6, config.learning_rate),
                                                             warmup_fraction=config.warmup_fraction))
        optimizer = keras.optimizers.Adam(schedule)
        variables = upper.trainable_variables + head.trainable_variables
        optimizer.build(variables)
    kernels = [v for v in upper.trainable_variables if v.path.endswith("kernel")]
    anchors = [tf.constant(v.numpy()) for v in kernels]
    ways, shots, queries = config.ways, config.shots, config.queries

    @tf.function(reduce_retracing=True)
    def step_fn(sx, qx):
        sy = tf.repeat(tf.range(ways, dtype=tf.int32), shots)
        qy = tf.repeat(tf.range(ways, dtype=tf.int32), queries)

        def replica(sx, qx):
            with tf.GradientTape() as tape:
                losses, accs = [], []
                for i in range(per_replica):
                    emb = upper(tf.concat([sx[i], qx[i]], 0), training=False)
                    protos = prototypes(emb[:ways * shots], sy, ways)
                    loss, acc = protonet_loss(head(emb[ways * shots:], protos), qy)
                    losses.append(loss)
                    accs.append(acc)
                loss, acc = tf.add_n(losses) / per_replica, tf.add_n(accs) / per_replica
                pull = tf.add_n([tf.constant(0.0)] + [tf.reduce_sum(tf.square(v - a)) for v, a in zip(kernels, anchors)])
                scaled = (loss + pull * (config.weight_decay / 2)) / replicas
            grads = tape.gradient(scaled, variables)
            optimizer.apply_gradients(zip(grads, variables))
            return loss, acc

        loss, acc = strategy.run(replica, args=(sx, qx))
        return strategy.reduce("MEAN", loss, axis=None), strategy.reduce("MEAN", acc, axis=None)

    samplers = [_Sampler(d) for d in train_sets]

    def step_tensors(step: int):
        rng = np.random.default_rng((config.seed, step))
        parts = []
        for source in episode_sources(step, config.episodes_per_step, len(samplers)):
            sampler = samplers[source]
            s_rows, _, q_rows, _ = sampler(rng, ways, shots, queries)
            parts.append((sampler.data.features[s_rows], sampler.data.features[q_rows]))
        stacked = [np.stack([p[k] for p in parts]).astype(np.float32) for k in range(2)]
        if replicas == 1:
            return tuple(tf.constant(a) for a in stacked)

        def shard(ctx, k):
            r = ctx.replica_id_in_sync_group
            return tf.constant(stacked[k][r * per_replica:(r + 1) * per_replica])

        return tuple(strategy.experimental_distribute_values_from_function(lambda ctx, k=k: shard(ctx, k))
                     for k in range(2))

    start_weights = [layer.get_weights() for layer in layers]
    alphas = sorted({config.alpha, *config.val_alphas})

    def set_layers(weights: list[list[np.ndarray]]) -> None:
        for layer, w in zip(layers, weights):
            layer.set_weights(w)

    def interpolated(trained: list[list[np.ndarray]], alpha: float) -> list[list[np.ndarray]]:
        return trained if alpha == 1.0 else [interpolate_weights(s, t, alpha) for s, t in zip(start_weights, trained)]

    def validate(step: int) -> dict:
        current = [layer.get_weights() for layer in layers]
        by_alpha = {}
        for alpha in alphas:
            if step > 0 or not by_alpha:  # at step 0 every alpha gives the start weights
                if alphas != [1.0]:
                    set_layers(interpolated(current, alpha))
                per = validation_accuracy(upper, val_sets, config)
                means = {k: float(v.mean()) for k, v in per.items()}
            by_alpha[alpha] = {"val_acc": float(np.mean(list(means.values()))), "per_source": means}
        if alphas != [1.0]:
            set_layers(current)
        return {"step": step, **by_alpha[config.alpha], "by_alpha": {f"{a:g}": v for a, v in by_alpha.items()}}

    records: list[dict] = []
    log_path = out_dir / "log.jsonl"
    log_path.write_text("")

    def write(record: dict) -> None:
        records.append(record)
        with open(log_path, "a") as f:
            f.write(json.dumps(record) + "\n")
        log.info("upper meta-train %s", json.dumps(record))

    best = {**validate(0), "scale": float(head.scale.numpy()), "bias": float(head.bias.numpy())}
    best_weights = [layer.get_weights() for layer in layers]
    write({**best, "seconds": 0.0})
    t0, running, since_best = time.time(), [], 0
    for step in range(config.stop_step or config.steps):
        loss, acc = step_fn(*step_tensors(step))
        running.append((float(loss), float(acc)))
        if (step + 1) % config.val_every == 0 or step + 1 == (config.stop_step or config.steps):
            record = validate(step + 1)
            m = np.mean(running, axis=0)
            running = []
            record.update(loss=float(m[0]), acc=float(m[1]), lr=float(schedule(step)), scale=float(head.scale.numpy()),
                          bias=float(head.bias.numpy()), seconds=round(time.time() - t0, 1))
            write(record)
            if record["val_acc"] > best["val_acc"] or not config.keep_best:
                best = {k: record[k] for k in ("step", "val_acc", "per_source", "scale", "bias")}
                best_weights = [layer.get_weights() for layer in layers]
                since_best = 0
            else:
                since_best += 1
                if since_best >= config.patience and config.keep_best:
                    log.info("early stop at step %d (best step %d)", step + 1, best["step"])
                    break
    for layer, weights in zip(layers, interpolated(best_weights, config.alpha)):
        given.get_layer(layer.name).set_weights(weights)
    return records, best
