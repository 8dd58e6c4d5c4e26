"""The code stamp of an exported file: which exporter code, libraries and weights produced it.

An export is reused (``converters.export.ensure_export``, the test fixtures) only while its resolved
config AND its code stamp are unchanged, so a file written by older exporter code, another
TensorFlow/Keras release or other weights behind the same path is rebuilt rather than served stale.

    stamp = sha256( STAMP_VERSION, the versions of the PACKAGES, every source file matching SOURCES
                    (path and bytes, sorted), the bytes of the config's weights / Keras model file )
"""

from __future__ import annotations

import hashlib
import pathlib
from importlib import metadata

import tflite_train
from tflite_train.converters.export_config import ExportConfig

__all__ = ["PACKAGES", "SOURCES", "STAMP_VERSION", "code_stamp", "stamp_path"]

ROOT = pathlib.Path(tflite_train.__file__).parent
"""The installed package's folder (in a checkout ``tflite_train/``, whose ``converters`` links to ``converters/``)."""
STAMP_VERSION = 2
"""Bumped when what the stamp covers changes (2: paths relative to the package, as installed from the wheel)."""
SOURCES = (
    "converters/**/*.py",  # the exporter: graph reader, ops, signatures, metadata, self-test
    "models/*.py",  # the built-in Keras backbones and weight loaders
    "architectures.py",
    "contract/*.py",  # names, metadata schema, format version
    "sparse/cost_model.py",  # the per-layer costs written into the metadata
    "sparse/layer_table.py",
)
"""Source files (globs relative to ``ROOT``) whose change makes an export stale."""
PACKAGES = (("tensorflow", "tensorflow-cpu"), ("keras",), ("flatbuffers",))
"""Distributions whose version is part of the stamp (alternative names of one package grouped)."""


def _package_versions() -> list[str]:
    out = []
    for names in PACKAGES:
        for name in names:
            try:
                out.append(f"{name}=={metadata.version(name)}")
                break
            except metadata.PackageNotFoundError:
                continue
        else:
            out.append(f"{names[0]} absent")
    return out


def code_stamp(config: ExportConfig | None = None, root: pathlib.Path = ROOT) -> str:
    """sha256 (hex) over the exporter's sources, the library versions and the config's input files.

    Args:
      config: The export config; its ``weights`` and ``keras_model`` files are hashed when they are
        files (``weights="imagenet"`` names the package file, which its loader checks by hash).
      root: Package folder the ``SOURCES`` globs are taken from.
    """
    digest = hashlib.sha256(f"tflite-train export stamp v{STAMP_VERSION}\n".encode())
    for line in _package_versions():
        digest.update(line.encode() + b"\n")
    files = sorted({path for pattern in SOURCES for path in root.glob(pattern) if path.is_file()})
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\n")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    for name in ("weights", "keras_model"):
        value = getattr(config, name, None) if config is not None else None
        if value and pathlib.Path(value).is_file():
            digest.update(hashlib.sha256(pathlib.Path(value).read_bytes()).digest())
        elif value:
            digest.update(f"{name}={value}\n".encode())
    return digest.hexdigest()


def stamp_path(out: str | pathlib.Path) -> pathlib.Path:
    """``m.tflite`` -> ``m.tflite.stamp``: where the code stamp of an export is kept."""
    out = pathlib.Path(out)
    return out.with_suffix(out.suffix + ".stamp")
