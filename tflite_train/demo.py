"""The README's main job. For now: build the three paper backbones in Keras, check each against
its layer table, fold BatchNorm, and print the layer tables, cost summaries and the paper
comparison. Later stages (export, adaptation) extend this into the end-to-end demo."""

from __future__ import annotations

import logging
import time

import numpy as np

from tflite_train.architectures import PAPER_BACKBONES
from tflite_train.cost_report import backbone_summary, backward_report, format_backward_report

logger = logging.getLogger(__name__)


def run_demo(input_size: int = 128) -> int:
    """Builds, checks and summarises each paper backbone; returns a process exit code."""
    from tflite_train.models import build_backbone, conv_layers, fold_batchnorm

    rng = np.random.default_rng(0)
    for name in PAPER_BACKBONES:
        start = time.perf_counter()
        backbone = build_backbone(name, input_size, seed=0)
        keras_weights = sum(int(np.prod(layer.get_weights()[0].shape)) for layer in conv_layers(backbone))
        folded = fold_batchnorm(backbone)
        images = rng.uniform(0.0, 1.0, (2, *backbone.input_shape)).astype(np.float32)
        diff = float(np.abs(backbone.model(images, training=False) - folded.model(images)).max())
        logger.info(
            "%s: Keras model built and BN folded in %.1fs (%d conv weights in Keras; folded max |diff| %.2e)",
            name, time.perf_counter() - start, keras_weights, diff,
        )
        print(backbone_summary(name, input_size))
        print()
    print(format_backward_report(backward_report(input_size), input_size))
    return 0
