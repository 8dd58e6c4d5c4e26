"""The ``tflite-train`` command line: parses flags and calls the library, nothing else.

Subcommands import what they need lazily, so the on-device ones run without TensorFlow.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tflite_train.architectures import BACKBONES, PAPER_BACKBONES


def _cmd_backbones(args: argparse.Namespace) -> int:
    from tflite_train.cost_report import backbone_summary

    for name in args.backbone or PAPER_BACKBONES:
        print(backbone_summary(name, args.input_size, args.in_channels, layers=not args.totals_only))
        print()
    return 0


def _cmd_cost_report(args: argparse.Namespace) -> int:
    from tflite_train.cost_report import backward_report, format_backward_report

    print(format_backward_report(backward_report(args.input_size), args.input_size))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    """The embedded default job: build each paper backbone in Keras, check it, print its costs."""
    from tflite_train.demo import run_demo

    return run_demo(args.input_size)


def _cmd_export(args: argparse.Namespace) -> int:
    """Exports a trainable .tflite (needs TensorFlow: the converters package)."""
    from converters.export import write_export
    from converters.export_config import ExportConfig

    config = ExportConfig(
        backbone=args.backbone, input_size=args.input_size, in_channels=args.in_channels,
        candidate_blocks=args.candidate_blocks, class_capacity=args.capacity, optimizer=args.optimizer,
        learning_rate=args.learning_rate, cosine_scale=args.cosine_scale, seed=args.seed, weights=args.weights,
    )
    result = write_export(config, args.out)
    print(f"wrote {args.out} ({len(result.model)} bytes, candidates: {', '.join(result.metadata['candidates'])})")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """Replays the embedded self-test on the installed interpreter (TF-free)."""
    from tflite_train.runtime.selftest import verify

    result = verify(args.model, runtime=args.runtime)
    print(result.format())
    return 0 if result.passed else 1


def _cmd_ops(args: argparse.Namespace) -> int:
    """Lists the operators of a .tflite file; exit 1 on any custom/Flex op (TF-free)."""
    from tflite_train.runtime.metadata import read_operator_codes

    ops = read_operator_codes(args.model)
    bad = [op for op in ops if op.is_custom]
    for op in sorted(ops, key=lambda o: o.name):
        kind = f"CUSTOM {op.custom_code}" if op.is_custom else "builtin"
        print(f"{op.name:<24} v{op.version:<3} {kind}")
    print(f"{len(ops)} operator codes, {len(bad)} custom/Flex")
    return 1 if bad else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tflite-train", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("backbones", help="print layer tables and cost summaries")
    p.add_argument("--backbone", action="append", choices=sorted(BACKBONES), help="repeatable; default: the paper's three")
    p.add_argument("--input-size", type=int, default=128)
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--totals-only", action="store_true")
    p.set_defaults(func=_cmd_backbones)

    p = sub.add_parser("cost-report", help="MCUNet backward-pass costs beside the paper's Tables 2 and 6")
    p.add_argument("--input-size", type=int, default=128)
    p.set_defaults(func=_cmd_cost_report)

    p = sub.add_parser("demo", help="the README's main job on the embedded default")
    p.add_argument("--input-size", type=int, default=128)
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("export", help="export a trainable builtins-only .tflite (needs TensorFlow)")
    p.add_argument("--backbone", choices=sorted(BACKBONES), default="mcunet")
    p.add_argument("--weights", default=None, help="Keras .weights.h5 of the BN form (default: seeded init)")
    p.add_argument("--out", required=True)
    p.add_argument("--input-size", type=int, default=128)
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--candidate-blocks", type=int, default=4)
    p.add_argument("--capacity", type=int, default=64)
    p.add_argument("--optimizer", choices=("adam", "sgd_momentum"), default="adam")
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--cosine-scale", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("verify", help="replay the self-test vectors embedded in a model")
    p.add_argument("model")
    p.add_argument("--runtime", default=None, help="interpreter module, e.g. tflite_runtime.interpreter")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("ops", help="list operators; fail on Flex/custom ops")
    p.add_argument("model")
    p.set_defaults(func=_cmd_ops)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except ValueError as err:
        print(f"tflite-train {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
