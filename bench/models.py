"""The exported models a benchmark needs, written once into ``BenchConfig.model_dir`` and reused.

Per backbone run of the paired accuracy section (``BenchConfig.backbones``), keys ``<run>/<model>``:
``sparse`` (the last ``candidate_blocks`` blocks are candidates: LastLayer, SparseUpdate, TinyTrain,
None), ``full`` (every block and the stem: FullTrain; without depth variants and cache signatures, which
FullTrain never uses, or the ``sparse`` file itself when that already has every block), both from the
meta-trained weights, and
``baseline`` and ``baseline_full`` (as ``sparse`` and ``full``, from the weights without meta-training) when
the run has both, and with the
``int8`` section ``int8`` (as ``sparse``, exported with ``BenchConfig.int8_mode``). The other
sections use ``sparse`` and ``full`` of ``BenchConfig.backbone``/``weights`` (keys without a run).
Keys with identical export configs share one file. A model is re-exported only when its file or its
``<file>.config.json`` is missing or that config differs from the wanted one.

EfficientNet-Lite0 is not a built-in backbone of the exporter: it is built by
``tflite_train.models`` (ImageNet weights from the package file, or a ``.weights.h5`` of
``build_efficientnet_lite0``) and exported through the Keras path (``converters.export.write_export``
with the model), which absorbs its ``Rescaling`` input layer: the device feeds [0, 255] pixels.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib

from bench.config import IMAGENET, LITE0, BackboneRun, BenchConfig
from tflite_train.architectures import get_config

LOG = logging.getLogger(__name__)
SPARSE, FULL, BASELINE, BASELINE_FULL, INT8 = "sparse", "full", "baseline", "baseline_full", "int8"


def model_key(run: BackboneRun | None, model: str) -> str:
    """``"<run.key>/<model>"`` (or ``model`` for the single-backbone sections)."""
    return model if run is None else f"{run.key}/{model}"


def _builtin_configs(backbone: str, input_size: int, weights: str | None, candidate_blocks: int,
                     train_variants: int) -> dict[str, object]:
    from tflite_train.converters.weights_spec import resolve_export_config

    blocks = len(get_config(backbone).blocks)
    common = dict(backbone=backbone, input_size=input_size, optimizer="adam")
    # Trained weights are exported with their sidecar's input normalisation and cosine scale; every
    # training run here fed unnormalised [0, 1] images, hence the identity normalisation.
    identity = dict(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0)) if weights else {}
    sparse = resolve_export_config(weights, **common, **identity, candidate_blocks=min(candidate_blocks, blocks),
                                   train_variants=train_variants, episode_signatures=True)
    if candidate_blocks >= blocks:  # the sparse export already trains every layer: FullTrain runs on it
        return {SPARSE: sparse, FULL: sparse}
    return {SPARSE: sparse, FULL: resolve_export_config(weights, **common, **identity, candidate_blocks=blocks,
                                                        **FULL_TRAIN_ONLY)}


FULL_TRAIN_ONLY = dict(train_variants=0, cache_signatures=False, episode_signatures=False)
"""Export fields of the ``full`` model, which only FullTrain uses: its selection reaches the stem, so it
always runs the general ``train_step`` (no depth-specific variant, no frozen prefix to cache)."""


BENCH_CACHE_CUTS = 8
"""Cuts with cache signatures in the bench's Lite0 exports, pinned so that a change of the exporter's default
does not change the models (and so invalidate the stored cells) of a run in progress."""


def _lite0_config(weights: str, input_size: int, candidates: str, train_variants: int, **fields):
    from tflite_train.converters.export_config import ExportConfig
    from tflite_train.converters.weights_spec import sidecar_path

    scale = {}
    if weights != IMAGENET:
        sidecar = sidecar_path(weights)
        if sidecar.exists():  # a meta-trained cosine head's learned scale
            spec = json.loads(sidecar.read_text())
            if "cosine_head" in spec:
                scale = dict(cosine_scale=float(spec["cosine_head"]["scale"]))
    return ExportConfig(backbone="keras", input_size=(input_size, input_size), candidates=candidates,
                        optimizer="adam", weights=weights,
                        **{**dict(train_variants=train_variants, cache_cuts=BENCH_CACHE_CUTS, episode_signatures=True),
                           **scale, **fields})


def lite0_model(weights: str, input_size: int):
    """EfficientNet-Lite0 (raw [0, 255] input) with ``"imagenet"``, a meta weights file of
    ``tflite_train.models.lite0_meta`` (the shipped default: meta-trained upper blocks over the ImageNet
    weights), or a ``.weights.h5`` of ``build_efficientnet_lite0`` (with or without its ImageNet
    classifier; the exporter drops it).

    Raises:
      ValueError: a weights file that fits none of these forms.
    """
    from tflite_train.models import build_efficientnet_lite0, efficientnet_lite0
    from tflite_train.models.efficientnet_lite import WeightsError
    from tflite_train.models.lite0_meta import efficientnet_lite0_meta, read_meta_attributes

    if weights == IMAGENET:
        return efficientnet_lite0(input_size, include_top=True, weights="imagenet")
    try:
        read_meta_attributes(weights)  # the format only: efficientnet_lite0_meta reads the tensors
    except WeightsError as err:
        errors = [str(err)]
    else:
        return efficientnet_lite0_meta(input_size, weights)
    for top in (False, True):
        model = build_efficientnet_lite0(input_size, include_top=top)
        try:
            model.load_weights(weights)
            return model
        except ValueError as err:
            errors.append(str(err).splitlines()[0])
    raise ValueError(f"{weights}: not EfficientNet-Lite0 weights (meta, or with or without the classifier): {errors}")


def run_export_configs(run: BackboneRun, train_variants: int) -> dict[str, object]:
    """Model name (sparse, full, baseline) -> ``ExportConfig`` of one backbone run.

    Raises:
      ValueError: the run's (meta-trained) weights file does not exist.
    """
    if run.weights not in (None, IMAGENET) and not pathlib.Path(run.weights).is_file():
        raise ValueError(f"backbone run {run.key}: weights file {run.weights!r} not found")
    main = run.weights if run.weights is not None else run.baseline_weights
    if run.backbone == LITE0:
        out = {SPARSE: _lite0_config(main, run.input_size, f"blocks:{run.candidate_blocks}", train_variants),
               FULL: _lite0_config(main, run.input_size, "all", **FULL_TRAIN_ONLY)}
        if run.meta_trained and run.baseline_weights is not None:
            out[BASELINE] = _lite0_config(run.baseline_weights, run.input_size, f"blocks:{run.candidate_blocks}",
                                          train_variants)
            out[BASELINE_FULL] = _lite0_config(run.baseline_weights, run.input_size, "all", **FULL_TRAIN_ONLY)
        return out
    out = _builtin_configs(run.backbone, run.input_size, main, run.candidate_blocks, train_variants)
    if run.meta_trained and run.baseline_weights is not None:
        if pathlib.Path(run.baseline_weights).exists():
            baseline = _builtin_configs(run.backbone, run.input_size, run.baseline_weights, run.candidate_blocks,
                                        train_variants)
            out[BASELINE], out[BASELINE_FULL] = baseline[SPARSE], baseline[FULL]
        else:
            LOG.warning("%s: weights without meta-training %s not found: no 'without meta-training' row",
                        run.key, run.baseline_weights)
    return out


def export_configs(config: BenchConfig) -> dict[str, object]:
    """Model key -> ``converters.ExportConfig`` of every model of the run (imports TF-free ``export_config`` only)."""
    out = dict(_builtin_configs(config.backbone, config.input_size, config.weights, config.candidate_blocks,
                                config.train_variants))
    if any(s in config.sections for s in ("procedure", "accuracy", "int8", "continual")):
        for run in config.backbones:
            models = run_export_configs(run, config.train_variants)
            if "int8" in config.sections:  # the sparse model with int8 storage/kernels (``bench.int8_section``)
                models[INT8] = dataclasses.replace(models[SPARSE], quantize=config.int8_mode,
                                                   calibration=config.int8_calibration)
            out.update({model_key(run, k): v for k, v in models.items()})
    return out


def _file_name(key: str, export_config) -> str:
    name = key.replace("/", "_")
    tag = export_config.candidates.replace(":", "") if export_config.candidates else f"k{export_config.candidate_blocks}"
    if "/" not in key:
        size = export_config.input_size[0]
        name = f"{export_config.backbone}_{size}_{key}"
    return f"{name}_{tag}.tflite"


def _ensure(export_config, path: pathlib.Path) -> None:
    """``converters.export.ensure_export``, also for a Keras-path (Lite0) config."""
    from tflite_train.converters.export import ensure_export, write_export

    if export_config.backbone != "keras":
        ensure_export(export_config, path)
        return
    sidecar = path.with_suffix(path.suffix + ".config.json")
    if path.exists() and sidecar.exists() and json.loads(sidecar.read_text()) == export_config.to_dict():
        LOG.info("reusing %s (same export config)", path)
        return
    LOG.info("exporting %s", path)
    write_export(export_config, path, lite0_model(export_config.weights, export_config.input_size[0]))


def ensure_models(config: BenchConfig, keys: tuple[str, ...] | None = None) -> dict[str, pathlib.Path]:
    """Exports (or reuses) the models; returns model key -> ``.tflite`` path.

    Args:
      config: The benchmark config (``model_dir``, backbones, weights, ...).
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
        path = model_dir / _file_name(key, export_config)
        _ensure(export_config, path)
        paths[key] = done[export_config] = path
    return paths
