"""Exports the test models (with embedded golden self-tests) that ``tests/runtime`` replays.

Run from the main environment: ``python -m converters.fixtures --out build/test-models``. The Pi
environment has no TensorFlow, so it can only replay these files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import pathlib

from converters.export import write_export
from converters.export_config import ExportConfig

FIXTURES: dict[str, ExportConfig] = {
    # odd input, stride-2 depthwise layers among the candidates, Adam
    "tiny_adam_33": ExportConfig(backbone="tiny", input_size=(33, 33), candidate_blocks=2, class_capacity=8),
    # every layer a candidate (FullTrain incl. the stem), SGD with momentum
    "tiny_sgd_full_17": ExportConfig(backbone="tiny", input_size=(17, 17), candidate_blocks=4, class_capacity=6,
                                     optimizer="sgd_momentum", learning_rate=0.05),
    "mcunet_adam_35": ExportConfig(backbone="mcunet", input_size=(35, 35), candidate_blocks=2, class_capacity=8),
}


def code_stamp() -> str:
    """sha256 over the exporter and backbone sources: a fixture is stale when they change."""
    root = pathlib.Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for file in sorted([*root.glob("converters/*.py"), *root.glob("tflite_train/models/*.py"),
                        *root.glob("tflite_train/architectures.py")]):
        digest.update(file.read_bytes())
    return digest.hexdigest()


def write_fixtures(out: pathlib.Path, names: list[str] | None = None) -> list[pathlib.Path]:
    """Exports the named fixtures (default: all) into ``out``; skips files whose config is unchanged."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or list(FIXTURES):
        config = FIXTURES[name]
        path = out / f"{name}.tflite"
        config_path = path.with_suffix(".tflite.config.json")
        stamp_path = path.with_suffix(".tflite.stamp")
        stamp = code_stamp()
        if (path.exists() and config_path.exists() and stamp_path.exists() and stamp_path.read_text() == stamp
                and json.loads(config_path.read_text()) == config.to_dict()):
            logging.info("fixture %s up to date", path)
        else:
            logging.info("exporting fixture %s", path)
            write_export(config, path)
            stamp_path.write_text(stamp)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("build/test-models"))
    parser.add_argument("--only", action="append", choices=sorted(FIXTURES))
    parser.add_argument("--force", action="store_true", help="re-export even when up to date")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.force:
        for name in args.only or FIXTURES:
            (args.out / f"{name}.tflite").unlink(missing_ok=True)
    for path in write_fixtures(args.out, args.only):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
