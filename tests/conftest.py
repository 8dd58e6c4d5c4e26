"""Shared test set-up.

Tests under ``tests/sparse`` and ``tests/runtime`` exercise the on-device half and must import no
TensorFlow: they are marked ``pi`` automatically and run a second time in the Pi environment
(``make test-pi``), where TensorFlow is not installed.
"""

from __future__ import annotations

import os
import pathlib

import pytest

PI_DIRS = ("sparse", "runtime")
TESTS_ROOT = pathlib.Path(__file__).parent
IN_PI_ENV = os.environ.get("TFLITE_TRAIN_PI_ENV") == "1"

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_ignore_collect(collection_path: pathlib.Path, config: pytest.Config) -> bool | None:
    """In the Pi environment, collect only the on-device test folders."""
    if not IN_PI_ENV or collection_path.is_dir() and collection_path == TESTS_ROOT:
        return None
    relative = collection_path.relative_to(TESTS_ROOT) if collection_path.is_relative_to(TESTS_ROOT) else None
    if relative is None or not relative.parts:
        return None
    if relative.parts[0] in PI_DIRS or relative.name == "conftest.py":
        return None
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        relative = pathlib.Path(item.fspath).relative_to(TESTS_ROOT)
        if relative.parts[0] in PI_DIRS:
            item.add_marker(pytest.mark.pi)
