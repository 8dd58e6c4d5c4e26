"""Builds the ``TrainableModule`` of a BN-folded Keras backbone."""

from __future__ import annotations

from converters.export_config import ExportConfig
from converters.trainable_module import TrainableModule
from tflite_train.models import Backbone, build_backbone, fold_batchnorm


def folded_backbone(config: ExportConfig) -> Backbone:
    """The BN-folded Keras backbone of ``config`` (weights from ``config.weights`` or seeded init).

    With random initialisation the BatchNorm layers hold their identity statistics, so folding is
    exact; loaded weights (``config.weights``, a Keras ``.weights.h5`` of the BN form) are folded.
    """
    backbone = build_backbone(config.backbone, config.input_size, config.in_channels, seed=config.seed)
    if config.weights:
        backbone.model.load_weights(config.weights)
    return fold_batchnorm(backbone)


def module_from_backbone(config: ExportConfig, folded: Backbone) -> TrainableModule:
    """Wraps the folded backbone's conv weights into a ``TrainableModule``."""
    if folded.batch_norm:
        raise ValueError("module_from_backbone needs a BN-folded backbone (fold_batchnorm)")
    weights = {}
    for spec in folded.table:
        kernel, bias = folded.model.get_layer(spec.name).get_weights()
        weights[spec.name] = (kernel, bias)
    residual = frozenset(b for b, block in enumerate(folded.config.blocks) if block.residual)
    return TrainableModule(config, folded.table, weights, folded.config.feature_dim, residual)
