"""Commands on a model file: export (TensorFlow), verify and ops (no TensorFlow)."""

from __future__ import annotations

import argparse
import pathlib

from tflite_train import contract as C
from tflite_train.architectures import BACKBONES, PRETRAINED_BACKBONES
from tflite_train.cli.flag_types import MAX_SEED, finite_float, positive_float, ranged
from tflite_train.cli.parser import Command
from tflite_train.cli.tf_logging import quiet_tensorflow
from tflite_train.default_weights import DEFAULT_LITE0_WEIGHTS, DEFAULT_WEIGHTS_PROVENANCE, IMAGENET, LITE0_META_WEIGHTS

__all__ = ["PREPROCESSING_PRESETS", "register"]

PREPROCESSING_PRESETS = ("caffe", "tf", "torch")
"""``export --preprocessing`` choices: the keys of ``converters.preprocessing.PRESETS`` (spelled here so that
building the parser imports no TensorFlow; a test keeps the two equal)."""
RANGE_LIMIT = 1e6
"""Largest magnitude of an ``--input-range`` bound (what the runtime's metadata schema accepts)."""


def _preprocessing_fields(args: argparse.Namespace) -> dict:
    """The ``ExportConfig`` preprocessing fields of the export flags: ``--preprocessing``'s preset, or the
    explicit --mean/--std, --input-range and --channel-order (only those given).

    Raises:
      ValueError: a preset combined with an explicit preprocessing flag, --mean without --std (or the
        reverse), or an --input-range with LOW >= HIGH; one line naming the flags.
    """
    explicit = {"--mean": args.mean, "--std": args.std, "--input-range": args.input_range,
                "--channel-order": args.channel_order}
    given = [flag for flag, value in explicit.items() if value is not None]
    if args.preprocessing:
        if given:
            raise ValueError(f"--preprocessing {args.preprocessing} sets the input range, mean, std and channel order; "
                             f"it cannot be combined with {given[0]}")
        from tflite_train.converters.preprocessing import preset_fields

        return preset_fields(args.preprocessing)
    if (args.mean is None) != (args.std is None):
        raise ValueError("--mean and --std go together; give both (or --preprocessing)")
    fields: dict = dict(mean=tuple(args.mean) if args.mean else None, std=tuple(args.std) if args.std else None)
    if args.input_range is not None:
        low, high = args.input_range
        if not low < high:
            raise ValueError(f"--input-range LOW HIGH needs LOW < HIGH; got {low:g} {high:g}")
        fields["input_range"] = (low, high)
    if args.channel_order is not None:
        fields.update(channel_order=args.channel_order)
    return fields


def _cmd_export(args: argparse.Namespace) -> int:
    """Exports a trainable .tflite (needs TensorFlow: the converters package)."""
    quiet_tensorflow(args.verbose or args.debug)
    from tflite_train.converters.candidate_choice import AUTO
    from tflite_train.converters.export import write_export
    from tflite_train.converters.export_config import (DEFAULT_BACKBONE, DEFAULT_CANDIDATE_BLOCKS, DEFAULT_INPUT_SIZE,
                                                       ExportConfig)
    from tflite_train.converters.keras_io import load_keras_model
    from tflite_train.converters.weights_spec import export_fields_from_sidecar, resolve_export_config

    size = None if args.input_size is None else tuple(args.input_size) * (2 if len(args.input_size) == 1 else 1)
    if size is not None and len(size) != 2:
        raise ValueError(f"--input-size takes H or H W; got {args.input_size}")
    optimizer = {"sgd": "sgd_momentum"}.get(args.optimizer, args.optimizer)
    common = dict(class_capacity=args.capacity, optimizer=optimizer, learning_rate=args.learning_rate,
                  seed=args.seed, candidates=args.candidates or "", feature_layer=args.feature_layer,
                  **({"model_output": args.model_output} if args.model_output else {}),
                  quantize=args.quantize or "", calibration=args.calibration or "",
                  episode_signatures=args.episode_signatures, **_preprocessing_fields(args))
    if args.model_output and not args.keras_model:
        raise ValueError("--model-output picks an output of a --keras-model; the built-in backbones have one")
    if args.calibration and args.quantize != "int8":
        raise ValueError("--calibration calibrates --quantize int8; give both")
    if args.weights not in (None, IMAGENET) and not pathlib.Path(args.weights).is_file():
        raise ValueError(f"--weights {args.weights}: no such file (the repository's weights/ folder holds the trained "
                         f"weights, e.g. {LITE0_META_WEIGHTS}; the installed package does not: pass their path)")
    if args.keras_model:
        if args.backbone or args.weights:
            raise ValueError("--keras-model cannot be combined with --backbone or --weights")
        model = load_keras_model(args.keras_model)
        if not args.candidates and not args.candidate_blocks:  # the exporter chooses and says what it chose
            common.update(candidates=AUTO)
        config = ExportConfig(backbone="keras", input_size=size, keras_model=str(args.keras_model),
                              candidate_blocks=args.candidate_blocks or 2,
                              cosine_scale=args.cosine_scale or 10.0,
                              **common)
    else:
        model = None
        backbone = args.backbone or (None if args.weights not in (None, IMAGENET) else DEFAULT_BACKBONE)
        weights = args.weights or (DEFAULT_LITE0_WEIGHTS if backbone == "lite0" else None)
        if weights is None:  # a paper backbone without weights: seeded initialisation at 128
            size = size or (DEFAULT_INPUT_SIZE,) * 2
        sidecar_backbone = export_fields_from_sidecar(weights).get("backbone") if weights not in (None, IMAGENET) \
            else None
        config = resolve_export_config(
            weights, backbone=backbone, input_size=size, in_channels=args.in_channels,
            candidate_blocks=args.candidate_blocks or DEFAULT_CANDIDATE_BLOCKS.get(backbone or sidecar_backbone, 4),
            cosine_scale=args.cosine_scale, **common,
        )
    result = write_export(config, args.out, model)
    names = result.metadata[C.F_CANDIDATES]
    feature = result.module.graph.feature_layer
    embedding = "" if feature is None or model is None else (
        f"embedding {feature.name} ({feature.rule}, {result.metadata[C.F_FEATURE_DIM]} values; --feature-layer "
        "changes it); ")
    print(f"wrote {args.out} ({len(result.model)} bytes; {embedding}candidates {result.module.config.candidate_spec}: "
          f"{', '.join(names)}; --candidates changes them)")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """Replays the embedded self-test on the installed interpreter (TF-free)."""
    from tflite_train.runtime.model.selftest import verify

    from tflite_train.runtime.model.runtimes import resolve_runtime

    result = verify(args.model, runtime=resolve_runtime(args.runtime))
    print(result.format())
    return 0 if result.passed else 1


def _cmd_ops(args: argparse.Namespace) -> int:
    """Lists the operators of a .tflite file; exit 1 on any custom/Flex op (TF-free). A file that carries
    the project's seal is checked against it first (any other .tflite is listed as it is)."""
    from tflite_train.runtime.model.integrity import check_model_bytes
    from tflite_train.runtime.model.metadata import metadata_spans, read_operator_codes

    with open(args.model, "rb") as handle:
        data = handle.read()
    if C.CHECKSUM_NAME in metadata_spans(data):  # an exported model: a damaged one is refused as everywhere
        check_model_bytes(data, args.model)
    ops = read_operator_codes(data)
    bad = [op for op in ops if op.is_custom]
    for op in sorted(ops, key=lambda o: o.name):
        kind = f"CUSTOM {op.custom_code}" if op.is_custom else "builtin"
        print(f"{op.name:<24} v{op.version:<3} {kind}")
    print(f"{len(ops)} operator codes, {len(bad)} custom/Flex")
    return 1 if bad else 0


def register(command: Command) -> None:
    """Adds export, verify and ops."""
    p = command("export", "export a trainable builtins-only .tflite from a built-in backbone or your own Keras "
                "model (needs TensorFlow)")
    p.add_argument("--keras-model", help="your Keras model (.keras or legacy .h5): its classifier head is dropped "
                   "and replaced by the cosine head; Rescaling/Normalization at its input become the input spec")
    p.add_argument("--backbone", choices=sorted(set(BACKBONES) | set(PRETRAINED_BACKBONES)),
                   help="a built-in backbone (default: the weights' sidecar, else lite0 = EfficientNet-Lite0 at 128 px "
                   "with ImageNet weights; mcunet, mbv2, proxyless: the paper's)")
    p.add_argument("--weights", default=None,
                   help="Keras X.weights.h5 of a built-in backbone; X.json beside it sets backbone, input, head scale "
                   f"(lite0: default {DEFAULT_LITE0_WEIGHTS!r}, because "
                   + DEFAULT_WEIGHTS_PROVENANCE.replace("%", "%%") + f"; the meta-trained ones: {LITE0_META_WEIGHTS})")
    p.add_argument("--out", required=True, help="the .tflite file to write (its resolved config goes beside it)")
    p.add_argument("--input-size", type=ranged(int, 1, 4096), nargs="+", metavar="H [W]",
                   help="input height and width in pixels (default: the Keras model's, the weights' sidecar, or 128)")
    p.add_argument("--in-channels", type=ranged(int, 1, 4), help="image channels of a built-in backbone (default 3)")
    p.add_argument("--mean", type=finite_float, nargs="+", help="input normalisation (x - mean) / std, per channel or one "
                   "value; default: the model's own preprocessing layers, else 0 (identity)")
    p.add_argument("--std", type=positive_float, nargs="+", help="see --mean; > 0; default 1")
    p.add_argument("--input-range", type=ranged(float, -RANGE_LIMIT, RANGE_LIMIT), nargs=2, metavar=("LOW", "HIGH"),
                   help="pixel range the device feeds, before the in-graph (x - mean) / std (default: 0 255 when the "
                   "model normalises its input itself, else 0 1)")
    p.add_argument("--channel-order", choices=C.CHANNEL_ORDERS, help=f"channel order the network reads (default "
                   f"{C.CHANNEL_ORDER_RGB}); {C.CHANNEL_ORDER_BGR}: the graph reverses the RGB images the device feeds "
                   "before normalising, and --mean/--std are in BGR order")
    p.add_argument("--preprocessing", choices=PREPROCESSING_PRESETS, help="keras.applications preprocess_input mode "
                   "the model expects, as input range, mean, std and channel order: caffe (ResNet, VGG: BGR, "
                   "mean-subtracted 0..255), tf (MobileNet(V2), Xception, Inception, NASNet, ResNetV2: 0..255 to "
                   "[-1, 1]), torch (DenseNet: 0..255 to [0, 1], then ImageNet mean/std); not with --mean, --std, "
                   "--input-range or --channel-order")
    p.add_argument("--candidates", help="layers the device may train: blocks:K (last K blocks), layers:K (last K "
                   "layers with weights), from:LAYER (LAYER and everything after it) or all (default for a Keras "
                   "model: chosen and printed, blocks:2 or fewer blocks, else the trailing layers that export and "
                   "that adapt's default budget can train)")
    p.add_argument("--candidate-blocks", type=ranged(int, 1, 10_000), help="shorthand for --candidates blocks:K (default 6 for lite0, "
                   "4 for the other built-in backbones)")
    p.add_argument("--feature-layer", help="layer whose output is the embedding (default: the global pooling, "
                   "average or max, or Flatten that feeds the model's classifier, else the input of its final Dense "
                   "layers; the export prints which); the layers above it are dropped")
    p.add_argument("--model-output", metavar="LAYER", help="a Keras model with several outputs: the one whose path "
                   "holds the embedding (its classifier is dropped, the other outputs are not exported)")
    p.add_argument("--capacity", type=ranged(int, 2, 100_000), default=64, help="most classes the on-device head holds (default 64)")
    p.add_argument("--optimizer", choices=("adam", "sgd", "sgd_momentum"), default="adam",
                   help="on-device optimizer (sgd = SGD with momentum; default adam)")
    p.add_argument("--learning-rate", type=ranged(float, 0, 10, low_open=True), default=1e-3, help="default on-device learning rate (1e-3)")
    p.add_argument("--cosine-scale", type=ranged(float, 0, 1e6, low_open=True), help="scale s of the cosine logits (default: the weights' "
                   "meta-trained scale, else 10)")
    p.add_argument("--seed", type=ranged(int, 0, MAX_SEED), default=0, help="seed of a built-in backbone's initialisation and of the "
                   "self-test inputs")
    p.add_argument("--episode-signatures", action="store_true",
                   help="also add, per cached cut, an episode step (prototypes computed from support rows "
                        "inside the step, trained through) and gradient accumulation (a batch's update with one "
                        "image's backward memory), for adapt --prototypes episode / --batch-mode accumulate; on "
                        "the default Lite0@128 export: +11 %% file size, about twice the export time")
    p.add_argument("--quantize", choices=("int8-candidates", "int8-weights", "int8"), help="store weights int8; "
                   "training and all state stay float32 (default: all float32). int8-candidates (recommended): the "
                   "candidate layers' kernels stored int8 per channel, dequantized into the float32 variables, "
                   "float arithmetic (Lite0@128: 48%% of the float file, infer as fast as float, embedding cosine "
                   ">= 0.998, benchmark accuracy within 0.2 pp of float); int8-weights: every kernel stored int8, "
                   "float arithmetic (39%%); int8: int8-candidates plus a frozen prefix that runs int8 kernels (needs "
                   "calibration images; 40%%, cosine down to 0.97). Not the default: smaller files, no faster "
                   "(README, docs/int8.md)")
    p.add_argument("--calibration", metavar="SOURCE", help="images that calibrate --quantize int8: an image folder, or "
                   "synthetic:N (default: the data cache's meta-training sources, build/data_cache_128)")
    p.set_defaults(func=_cmd_export)

    p = command("verify", "check that this device's interpreter computes what the exporter recorded (self-test)")
    p.add_argument("model", help="the exported model, a .tflite file")
    p.add_argument("--runtime", choices=("litert", "tflite-runtime", "tensorflow"),
                   help="TFLite interpreter (default: the first installed)")
    p.set_defaults(func=_cmd_verify)

    p = command("ops", "list a model's operators; exit 1 on Flex/custom ops")
    p.add_argument("model", help="a .tflite file")
    p.set_defaults(func=_cmd_ops)
