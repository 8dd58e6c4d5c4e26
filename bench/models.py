"""The exported models a benchmark needs, written once into ``BenchConfig.model_dir`` and reused.

``sparse``: the last ``candidate_blocks`` blocks are candidates (LastLayer, SparseUpdate, TinyTrain);
``full``: every block (and the stem) is a candidate (FullTrain); ``pretrained`` and ``meta_pair``:
as ``sparse`` from the two weights of ``BenchConfig.meta_ablation_weights`` (meta-training ablation). Keys with identical export configs share one
file (e.g. ``candidate_blocks`` = the number of blocks). A model is re-exported only when its file or
its ``<file>.config.json`` is missing or that config differs from the wanted one.
"""

from __future__ import annotations

import logging
import pathlib

from bench.config import BenchConfig
from tflite_train.architectures import get_config

LOG = logging.getLogger(__name__)


def export_configs(config: BenchConfig) -> dict[str, object]:
    """Model key -> ``converters.ExportConfig`` (imports TensorFlow-free ``export_config`` only)."""
    from converters.weights_spec import resolve_export_config

    blocks = len(get_config(config.backbone).blocks)
    common = dict(backbone=config.backbone, input_size=config.input_size, optimizer="adam",
                  train_variants=config.train_variants)
    # Trained weights are exported with their sidecar's input normalisation and cosine scale; every
    # training run here fed unnormalised [0, 1] images, hence the identity normalisation.
    identity = dict(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0)) if config.weights else {}
    out = {
        "sparse": resolve_export_config(config.weights, **common, **identity,
                                        candidate_blocks=min(config.candidate_blocks, blocks)),
        "full": resolve_export_config(config.weights, **common, **identity, candidate_blocks=blocks),
    }
    pair = config.meta_ablation_weights
    missing = [p for p in pair or () if not pathlib.Path(p).exists()]
    if pair and not missing:
        # Both stages of train-weights fed unnormalised [0, 1] images; the pre-training stage writes
        # no sidecar (default cosine scale), the meta-training stage does (its learned scale).
        for key, path in zip(("pretrained", "meta_pair"), pair):
            out[key] = resolve_export_config(path, **common, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0),
                                             candidate_blocks=min(config.candidate_blocks, blocks))
    elif pair:
        LOG.warning("meta-training ablation weights %s not found: the ablation is skipped", missing)
    return out


def ensure_models(config: BenchConfig, keys: tuple[str, ...] | None = None) -> dict[str, pathlib.Path]:
    """Exports (or reuses) the models; returns model key -> ``.tflite`` path.

    Args:
      config: The benchmark config (``model_dir``, backbone, weights, ...).
      keys: Which models (default: all of ``export_configs``).
    """
    wanted = export_configs(config)
    if keys is not None:
        wanted = {k: v for k, v in wanted.items() if k in keys}
    model_dir = pathlib.Path(config.model_dir)
    paths: dict[str, pathlib.Path] = {}
    done: dict[object, pathlib.Path] = {}
    for key, export_config in wanted.items():
        if export_config in done:
            paths[key] = done[export_config]
            continue
        blocks = export_config.candidate_blocks
        path = model_dir / f"{config.backbone}_{config.input_size}_{key}_k{blocks}.tflite"
        from converters.export import ensure_export

        ensure_export(export_config, path)
        paths[key] = done[export_config] = path
    return paths
