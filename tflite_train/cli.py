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


def _cmd_golden(args: argparse.Namespace) -> int:
    """Writes the Java golden vectors (TensorFlow-free)."""
    from tflite_train.golden import write_vectors

    paths = write_vectors(args.out)
    print(f"wrote {len(paths)} golden files to {args.out}")
    return 0


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

    p = sub.add_parser("golden", help="write the golden vectors that pin the Java core to the Python cost model")
    p.add_argument("--out", default="android_demo/core/src/test/resources/golden", help="output folder")
    p.set_defaults(func=_cmd_golden)
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
