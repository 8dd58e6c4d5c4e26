"""Exports a Keras model (a user's or a built-in backbone) as one trainable, builtins-only ``.tflite`` file (CONTRACT.md v1)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import logging
import pathlib
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import keras
import numpy as np
import tensorflow as tf
from tensorflow.lite.python.convert_phase import ConverterError

from tflite_train import contract as C
from tflite_train.converters.build_module import backbone_model, module_from_keras
from tflite_train.converters.conversion_refusal import ConversionError, capturing_stderr, conversion_refusal
from tflite_train.converters.export_config import ExportConfig
from tflite_train.converters.export_stamp import code_stamp, stamp_path
from tflite_train.converters.flatbuffer_metadata import add_metadata
from tflite_train.converters.flatbuffer_rewrite import read_model, write_model
from tflite_train.converters.int8_weights import store_int8_kernels_in
from tflite_train.converters.saved_model_converter import saved_model_converter
from tflite_train.converters.selftest_vectors import build_selftest, encode_selftest
from tflite_train.converters.subgraph_dedup import dedupe_subgraphs_in
from tflite_train.converters.trainable_module import TrainableModule, train_variant_name
from tflite_train.converters.transposed_initial_values import transpose_initial_values_in
from tflite_train.converters.zero_fill import fill_zero_initial_values_in
from tflite_train.runtime.checkpoint.checkpoint import write_atomic
from tflite_train.runtime.model.integrity import CHECKSUM_NAME, PLACEHOLDER, seal
from tflite_train.sparse.cost_model import layer_cost

LOG = logging.getLogger(__name__)

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """The exported file and what went into it."""

    model: bytes
    metadata: dict
    selftest: dict[str, np.ndarray]
    module: TrainableModule


def convert(module: TrainableModule, alongside: Callable[[], T] | None = None) -> tuple[bytes, T | None]:
    """Converts the module's signatures (via a SavedModel) with builtins only and resource variables,
    then rewrites the flatbuffer once: all-zero initial values are computed at run time
    (``converters.zero_fill``) and the candidate kernels' initial values are transposed at run time
    from the forward's constants (``converters.transposed_initial_values``), so each weight is stored once;
    last, identical control-flow subgraphs reached from the same signatures are merged
    (``converters.subgraph_dedup``). An int8 export (``config.quantize``) is converted with the converter's
    quantization-aware path (``converters.int8_prefix``) and its candidate kernels are then stored int8
    (``converters.int8_weights``).

    Identical IF branches of different sets of signatures are NOT merged: a subgraph shared by two
    signatures is re-prepared by whichever runs at a new batch size, and the other then invokes it
    with stale shapes (measured: wrong fisher outputs, then failures, on tflite-runtime 2.14 with the
    explicit XNNPACK delegate).

    ``alongside`` (e.g. the self-test's TensorFlow goldens) runs in a second thread while the converter
    runs, after the SavedModel is written (so it may change the module's variables): TensorFlow's
    kernels and most of the converter release the GIL, so on two cores the two overlap. Returns the
    flatbuffer and ``alongside()``'s result (None without it); an exception of either is raised.
    """
    with tempfile.TemporaryDirectory() as tmp:
        signatures = module.signatures()
        tf.saved_model.save(module, tmp, signatures=signatures)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(alongside) if alongside is not None else None
            try:
                raw = convert_saved(tmp, list(signatures), quantized=module.int8_prefix is not None)
            except ConverterError as err:
                raise ConversionError(conversion_refusal(module.graph, str(err))) from err
            extra = pending.result() if pending is not None else None
    obj = read_model(raw)
    fill_zero_initial_values_in(obj)
    transpose_initial_values_in(obj)
    if module.int8_kernels:
        LOG.info("int8: %d kernel buffers stored as int8",
                 store_int8_kernels_in(obj, module.int8_kernels))
    dedupe_subgraphs_in(obj)
    return write_model(obj, len(raw)), extra


def convert_saved_module(module: tf.Module, signatures: dict) -> bytes:
    """TFLite flatbuffer of ``module`` saved with ``signatures``: resource variables kept as variables,
    builtin ops only (no Flex ops, so the Pi runtimes can run it)."""
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures=signatures)
        return convert_saved(tmp, list(signatures))


def convert_saved(saved_model_dir: str, signature_keys: Sequence[str], quantized: bool = False) -> bytes:
    """TFLite flatbuffer of the signatures ``signature_keys`` of a SavedModel folder just written
    (``convert_saved_module``'s settings; ``converters.saved_model_converter``: no restore of the
    SavedModel); ``quantized``: the graph holds fake-quant ops (``converters.int8_prefix``), converted
    to int8 kernels."""
    converter = saved_model_converter(saved_model_dir, signature_keys)
    converter.experimental_enable_resource_variables = True
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantized:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return capturing_stderr(converter.convert, logging.INFO)


def model_id(module: TrainableModule) -> str:
    """sha256 of everything that makes two exported models compute different things.

    Covered: the layer table, every node of the graph (op, inputs, shape, attributes) with every
    weight, frozen or trainable, the input spec (range, normalisation and a BGR channel order), the
    head (capacity and cosine scale), the candidate layers, the optimizer and the initial state.
    """
    spec = module.graph.input_spec
    header = {
        "table": module.table.to_list(),
        C.F_INPUT: {"shape": list(spec.shape), C.F_RANGE: list(spec.value_range), C.F_MEAN: list(spec.mean),
                    C.F_STD: list(spec.std), **_channel_order_entry(module)},
        C.F_HEAD: {"capacity": module.config.class_capacity, C.F_SCALE: module.config.cosine_scale},
        C.F_CANDIDATES: module.candidate_names,
        C.F_OPTIMIZER: module.config.optimizer,
        "nodes": [{"name": n.name, "op": n.op, "inputs": list(n.inputs), "shape": list(n.shape),
                   "attrs": repr(sorted((k, v) for k, v in n.attrs.items()))} for n in module.graph.nodes],
    }
    digest = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    for node in module.graph.nodes:
        for weight in node.weights:
            digest.update(np.ascontiguousarray(weight).tobytes())
    for name, value in sorted(module.initial_state.items()):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    if module.int8_prefix is not None:
        digest.update(json.dumps(sorted(module.int8_prefix.ranges.items())).encode())
    return digest.hexdigest()


def _channel_order_entry(module: TrainableModule) -> dict[str, str]:
    """``{input.channel_order: "bgr"}`` for a BGR network, else {}: an RGB export's metadata and model id
    stay as they were before the field existed (absent means RGB)."""
    order = module.config.channel_order
    return {} if order == C.CHANNEL_ORDER_RGB else {C.F_CHANNEL_ORDER: order}


def _feature_layer_entry(module: TrainableModule) -> dict[str, dict[str, str]]:
    """``{feature_layer: {name, rule}}``: the model's layer that is the embedding and why (the graph's
    ``FeatureLayer``), or {} for a graph without one. Not part of the model id: it names, it does not compute."""
    feature = module.graph.feature_layer
    return {} if feature is None else {C.F_FEATURE_LAYER: {C.F_NAME: feature.name, C.F_RULE: feature.rule}}


def build_metadata(module: TrainableModule) -> dict:
    """The ``tflite_train`` metadata JSON (CONTRACT.md)."""
    cfg = module.config
    inp = module.graph.input_spec
    layers = []
    for spec in module.table:
        cost = layer_cost(spec)
        layers.append({**spec.to_dict(), C.F_PARAMS: cost.params, C.F_FORWARD_MACS: cost.forward_macs,
                       C.F_IN_ACTIVATION: cost.in_activation, C.F_OUT_ACTIVATION: cost.out_activation,
                       C.F_CANDIDATE: spec.index in module.candidates})
    cuts = [cut.layer for cut in module.cache_cuts]
    episode_cuts = cuts if module.accumulates else []
    sig = C.signature_io(module.candidate_names, module.names, list(module.train_variants), cuts, episode_cuts)
    variants = [{C.F_SIGNATURE: train_variant_name(module.table, cut), C.F_LOWEST_LAYER: module.table.layers[cut].name,
                 C.F_LOWEST_INDEX: cut} for cut in module.variant_cuts]
    episode = {layer: {C.F_EPISODE_SIGNATURE: C.episode_from_name(layer),
                       C.F_ACCUMULATE_SIGNATURE: C.accumulate_from_name(layer)} for layer in episode_cuts}
    return {
        C.F_FORMAT: C.FORMAT,
        C.F_FORMAT_VERSION: C.FORMAT_VERSION,
        C.F_BACKBONE: cfg.backbone,
        C.F_MODEL_ID: model_id(module),
        C.F_INPUT: {C.F_HEIGHT: inp.shape[0], C.F_WIDTH: inp.shape[1], C.F_CHANNELS: inp.shape[2],
                    C.F_DTYPE: "float32", C.F_RANGE: list(inp.value_range), C.F_MEAN: list(inp.mean),
                    C.F_STD: list(inp.std), C.F_NORMALISATION_SOURCE: inp.source, **_channel_order_entry(module)},
        C.F_FEATURE_DIM: module.feature_dim,
        **_feature_layer_entry(module),
        C.F_CLASS_CAPACITY: cfg.class_capacity,
        C.F_HEAD: {C.F_TYPE: C.HEAD_TYPE, C.F_SCALE: cfg.cosine_scale},
        C.F_OPTIMIZER: {C.F_NAME: cfg.optimizer, C.LEARNING_RATE: cfg.learning_rate, C.F_BETA1: cfg.beta1,
                        C.F_BETA2: cfg.beta2, C.F_EPSILON: cfg.epsilon, C.F_MOMENTUM: cfg.momentum},
        C.F_LAYERS: layers,
        C.F_CANDIDATES: list(module.candidate_names),
        C.F_STATE: module.names,
        C.F_SIGNATURES: sig,
        C.F_TRAIN_VARIANTS: variants,
        C.F_CACHED_CUTS: [{C.F_LOWEST_LAYER: cut.layer, C.F_LOWEST_INDEX: cut.index, C.F_SHAPE: list(cut.shape),
                           C.F_FEATURES_SIGNATURE: C.features_name(cut.layer),
                           C.F_TRAIN_SIGNATURE: C.train_from_name(cut.layer),
                           C.F_INFER_SIGNATURE: C.infer_from_name(cut.layer),
                           C.F_SUFFIX_FORWARD_MACS: cut.suffix_forward_macs, **episode.get(cut.layer, {})}
                          for cut in module.cache_cuts],
        **({C.F_APPLY_ACCUMULATED_SIGNATURE: C.APPLY_ACCUMULATED} if episode_cuts else {}),
        C.F_SELFTEST: {C.F_ENTRY: C.SELFTEST_NAME, C.F_FORMAT: "npz (see tflite_train.runtime.model.selftest)",
                        C.F_FORMAT_VERSION: 2},
        C.F_CONFIG: cfg.to_dict(),
    }


def export_model(config: ExportConfig) -> ExportResult:
    """Builds, converts and annotates the built-in backbone of ``config`` (no files written)."""
    return export_keras(backbone_model(config), config)


def export_keras(model: keras.Model, config: ExportConfig) -> ExportResult:
    """Reads, checks, converts and annotates a Keras model (no files written).

    Raises:
      ValueError: a model (or candidate choice) the exporter refuses, with the layer named; raised
        before anything is converted.
    """
    t0 = time.time()
    module = module_from_keras(model, config)
    LOG.info("converting %s (%d candidate layers)", model.name, len(module.candidates))
    raw, selftest = convert(module, lambda: build_selftest(module, config.seed, config.selftest_batch))
    metadata = build_metadata(module)
    data = seal(add_metadata(raw, {C.METADATA_NAME: json.dumps(metadata).encode(),
                                   C.SELFTEST_NAME: encode_selftest(selftest), CHECKSUM_NAME: PLACEHOLDER}))
    LOG.info("exported %s: %d bytes in %.1f s", config.backbone, len(data), time.time() - t0)
    return ExportResult(data, metadata, selftest, module)


def write_export(config: ExportConfig, out: str | pathlib.Path, model: keras.Model | None = None) -> ExportResult:
    """Exports (``model``, or the built-in backbone of ``config``) and writes ``out`` plus
    ``<out>.config.json`` (the resolved config: default candidates, ``candidates="auto"``, are written as
    the spec chosen, ``converters.candidate_choice``), each atomically; nothing is written on failure."""
    out = pathlib.Path(out)
    result = export_model(config) if model is None else export_keras(model, config)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, result.model)
    write_atomic(out.with_suffix(out.suffix + ".config.json"),
                 json.dumps(result.module.config.to_dict(), indent=2).encode())
    return result


def export_is_current(config: ExportConfig, out: str | pathlib.Path) -> bool:
    """True when ``out`` exists, its ``.config.json`` holds ``config`` and its ``.stamp`` the current code
    stamp (``converters.export_stamp.code_stamp``: exporter sources, TensorFlow/Keras versions, weights
    file). A file made by other code, or one without a stamp, is not current; nor is any file for a
    config with ``candidates="auto"`` (its sidecar holds the spec that was chosen, not "auto")."""
    out = pathlib.Path(out)
    sidecar = out.with_suffix(out.suffix + ".config.json")
    stamp_file = stamp_path(out)
    return (out.exists() and sidecar.exists() and stamp_file.exists()
            and stamp_file.read_text() == code_stamp(config) and json.loads(sidecar.read_text()) == config.to_dict())


def ensure_export(config: ExportConfig, out: str | pathlib.Path, model: keras.Model | None = None) -> bool:
    """Exports ``config`` (``model``, or the built-in backbone of ``config``; ``write_export``) to ``out``
    unless ``out`` is current (``export_is_current``). The stamp is written after the model and its
    config, so an interrupted export is never taken for a current one.

    Returns:
      True when the model was (re-)exported, False when the existing file was reused.
    """
    if export_is_current(config, out):
        LOG.info("reusing %s (same export config and code stamp)", out)
        return False
    LOG.info("exporting %s", out)
    write_export(config, out, model)
    write_atomic(stamp_path(out), code_stamp(config).encode())
    return True
