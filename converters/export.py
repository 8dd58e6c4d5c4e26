"""Exports a BN-folded backbone as one trainable, builtins-only ``.tflite`` file (CONTRACT.md v1)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import pathlib
import tempfile
import time

import numpy as np
import tensorflow as tf

from converters.build_module import folded_backbone, module_from_backbone
from converters.export_config import ExportConfig
from converters.flatbuffer_metadata import add_metadata
from converters.selftest_vectors import build_selftest, encode_selftest
from converters.trainable_module import TrainableModule, train_variant_name
from tflite_train.runtime.metadata import METADATA_NAME, SELFTEST_NAME
from tflite_train.sparse.cost_model import layer_cost

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """The exported file and what went into it."""

    model: bytes
    metadata: dict
    selftest: dict[str, np.ndarray]
    module: TrainableModule


def convert(module: TrainableModule) -> bytes:
    """Converts the module's signatures (via a SavedModel) with builtins only and resource variables."""
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures=module.signatures())
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp)
        converter.experimental_enable_resource_variables = True
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        return converter.convert()


def model_id(module: TrainableModule) -> str:
    """sha256 of the layer table JSON and the initial state arrays (sorted by name)."""
    digest = hashlib.sha256(json.dumps(module.table.to_list(), sort_keys=True).encode())
    for name, value in sorted(module.initial_state.items()):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()


def build_metadata(module: TrainableModule) -> dict:
    """The ``tflite_train`` metadata JSON (CONTRACT.md)."""
    cfg = module.config
    layers = []
    for spec in module.table:
        cost = layer_cost(spec)
        layers.append({**spec.to_dict(), "params": cost.params, "forward_macs": cost.forward_macs,
                       "in_activation": cost.in_activation, "out_activation": cost.out_activation,
                       "candidate": spec.index in module.candidates})
    sig = {
        "infer": {"inputs": ["images"], "outputs": ["embeddings", "logits"]},
        "fisher": {"inputs": ["images", "labels"], "outputs": [module.table.layers[i].name for i in module.candidates]},
        "train_step": {"inputs": ["images", "labels"], "outputs": ["loss", "accuracy"]},
        "set_head": {"inputs": ["prototypes", "num_classes"], "outputs": ["ok"]},
        "set_selection": {"inputs": ["channel_mask"], "outputs": ["ok"]},
        "set_hparams": {"inputs": ["learning_rate"], "outputs": ["ok"]},
        "get_state": {"inputs": [], "outputs": module.names},
        "set_state": {"inputs": module.names, "outputs": ["ok"]},
        "reset_state": {"inputs": [], "outputs": ["ok"]},
        **{name: {"inputs": ["images", "labels"], "outputs": ["loss", "accuracy"]} for name in module.train_variants},
    }
    variants = [{"signature": train_variant_name(module.table, cut), "lowest_layer": module.table.layers[cut].name,
                 "lowest_index": cut} for cut in module.train_cuts]
    return {
        "format": "tflite-train",
        "format_version": 1,
        "backbone": cfg.backbone,
        "model_id": model_id(module),
        "input": {"height": cfg.input_size[0], "width": cfg.input_size[1], "channels": cfg.in_channels,
                  "dtype": "float32", "range": [0.0, 1.0], "mean": list(cfg.mean), "std": list(cfg.std)},
        "feature_dim": module.feature_dim,
        "class_capacity": cfg.class_capacity,
        "head": {"type": "cosine_prototype", "scale": cfg.cosine_scale},
        "optimizer": {"name": cfg.optimizer, "learning_rate": cfg.learning_rate, "beta1": cfg.beta1,
                      "beta2": cfg.beta2, "epsilon": cfg.epsilon, "momentum": cfg.momentum},
        "layers": layers,
        "candidates": [module.table.layers[i].name for i in module.candidates],
        "state": module.names,
        "signatures": sig,
        "train_variants": variants,
        "selftest": {"entry": SELFTEST_NAME, "format": "npz (see tflite_train.runtime.selftest)", "format_version": 2},
        "config": cfg.to_dict(),
    }


def export_model(config: ExportConfig) -> ExportResult:
    """Builds, converts and annotates the model of ``config`` (no files written)."""
    t0 = time.time()
    module = module_from_backbone(config, folded_backbone(config))
    selftest = build_selftest(module, config.seed, config.selftest_batch)
    LOG.info("converting %s (%d candidate layers)", config.backbone, len(module.candidates))
    raw = convert(module)
    metadata = build_metadata(module)
    model = add_metadata(raw, {METADATA_NAME: json.dumps(metadata).encode(), SELFTEST_NAME: encode_selftest(selftest)})
    LOG.info("exported %s: %d bytes in %.1f s", config.backbone, len(model), time.time() - t0)
    return ExportResult(model, metadata, selftest, module)


def write_export(config: ExportConfig, out: str | pathlib.Path) -> ExportResult:
    """Exports and writes ``out`` plus ``<out>.config.json`` (the resolved config)."""
    out = pathlib.Path(out)
    result = export_model(config)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(result.model)
    out.with_suffix(out.suffix + ".config.json").write_text(json.dumps(config.to_dict(), indent=2))
    return result


def ensure_export(config: ExportConfig, out: str | pathlib.Path) -> bool:
    """Exports ``config`` to ``out`` unless ``out`` and its ``.config.json`` already hold this config.

    Returns:
      True when the model was (re-)exported, False when the existing file was reused.
    """
    out = pathlib.Path(out)
    sidecar = out.with_suffix(out.suffix + ".config.json")
    if out.exists() and sidecar.exists() and json.loads(sidecar.read_text()) == config.to_dict():
        LOG.info("reusing %s (same export config)", out)
        return False
    LOG.info("exporting %s", out)
    write_export(config, out)
    return True
