"""ProtoNet accuracy without fine-tuning (the "None" policy) over sampled episodes, mean +- 95 % CI."""

from __future__ import annotations

import dataclasses

import keras
import numpy as np

from tflite_train.data.dataset import LabeledImages
from tflite_train.data.episodes import Episode, EpisodeConfig, sample_episodes
from tflite_train.meta.run_io import to_model_input


@dataclasses.dataclass(frozen=True)
class EpisodeAccuracy:
    """Accuracy over episodes: mean, 95 % CI half-width 1.96 * std / sqrt(n) (std with ddof=1), and n."""

    mean: float
    ci95: float
    num_episodes: int

    def __str__(self) -> str:
        return f"{100 * self.mean:.2f} +- {100 * self.ci95:.2f} % ({self.num_episodes} episodes)"


def summarize(accuracies) -> EpisodeAccuracy:
    a = np.asarray(accuracies, np.float64)
    if a.size == 0:
        raise ValueError("accuracies must be non-empty")
    ci = 1.96 * a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else 0.0
    return EpisodeAccuracy(mean=float(a.mean()), ci95=float(ci), num_episodes=int(a.size))


def embed(model: keras.Model, images: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Embeddings (N, D) of uint8 images (scaled to [0, 1]) in inference mode."""
    out = [np.asarray(model(to_model_input(images[i:i + batch_size]), training=False)) for i in range(0, len(images), batch_size)]
    return np.concatenate(out).astype(np.float32)


def protonet_episode_accuracy(embeddings: np.ndarray, episode: Episode) -> float:
    """Query accuracy of the nearest prototype by cosine similarity (argmax of s (cos + b) for any s > 0)."""
    support, query = embeddings[episode.support_indices], embeddings[episode.query_indices]
    protos = np.zeros((episode.ways, embeddings.shape[1]), np.float64)
    np.add.at(protos, episode.support_labels, support)
    protos /= np.bincount(episode.support_labels, minlength=episode.ways)[:, None]
    protos /= np.maximum(np.linalg.norm(protos, axis=1, keepdims=True), 1e-12)
    q = query / np.maximum(np.linalg.norm(query, axis=1, keepdims=True), 1e-12)
    return float(np.mean(np.argmax(q @ protos.T, axis=1) == episode.query_labels))


def evaluate_none_policy(
    model: keras.Model,
    data: LabeledImages,
    *,
    num_episodes: int = 100,
    seed: int = 0,
    episode_config: EpisodeConfig = EpisodeConfig(),
) -> EpisodeAccuracy:
    """Embeds every image of ``data`` once, then scores ``num_episodes`` seeded episodes."""
    return summarize(episode_accuracies(model, data, num_episodes=num_episodes, seed=seed, episode_config=episode_config))


def episode_accuracies(
    model: keras.Model,
    data: LabeledImages,
    *,
    num_episodes: int = 100,
    seed: int = 0,
    episode_config: EpisodeConfig = EpisodeConfig(),
) -> np.ndarray:
    """Per-episode None-policy accuracies (num_episodes,), the episodes fixed by ``seed`` (same for any model)."""
    embeddings = embed(model, data.images)
    episodes = sample_episodes(data.labels, num_episodes, seed, episode_config)
    return np.asarray([protonet_episode_accuracy(embeddings, e) for e in episodes], np.float64)


def paired_delta(after, before) -> EpisodeAccuracy:
    """Mean and 95 % CI of the per-episode difference ``after - before`` (same episodes for both models).

    delta_i = a_i - b_i; CI half-width 1.96 * std(delta, ddof=1) / sqrt(n). Pairing removes the
    episode-to-episode variance that both models share, so this CI is much tighter than the CIs of
    the two means.
    """
    after, before = np.asarray(after, np.float64), np.asarray(before, np.float64)
    if after.shape != before.shape or after.ndim != 1:
        raise ValueError(f"after and before must be 1-D of the same length, got {after.shape} and {before.shape}")
    return summarize(after - before)
