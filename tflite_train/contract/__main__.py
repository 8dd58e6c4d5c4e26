"""``python -m tflite_train.contract --java|--markdown``: prints the generated Contract.java or the
CONTRACT.md tables (tflite_train.contract.rendering)."""

from __future__ import annotations

import argparse
import sys

from tflite_train.contract.rendering import java_source, markdown_tables


def main(argv: list[str] | None = None) -> int:
    """Writes the requested rendering to stdout."""
    parser = argparse.ArgumentParser(prog="python -m tflite_train.contract", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--java", action="store_true", help="print android_demo's generated Contract.java")
    group.add_argument("--markdown", action="store_true", help="print the tables of CONTRACT.md")
    args = parser.parse_args(argv)
    sys.stdout.write(java_source() if args.java else markdown_tables())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
