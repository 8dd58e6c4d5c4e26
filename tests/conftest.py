"""Shared test set-up.

The tests mirror the repository's packages (``tests/runtime`` tests ``tflite_train/runtime``, ...). The folders
in ``PI_DIRS`` exercise the on-device half and must import no TensorFlow: they are marked ``pi`` automatically and
run a second time in the Pi environment (``make test-pi``), where TensorFlow is not installed. The fixtures that
the runtime, command-line and exported-model tests share are defined here (their helpers in
``tests/runtime/runtime_fixtures.py``).
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import adapt_cli, load_fashion, write_episode_folders

PI_DIRS = ("sparse", "runtime", "cli", "converters/exported")
"""Test folders (relative to ``tests/``) of the on-device half: the device code, the command line, and the
exported test models replayed on the installed runtime."""
TESTS_ROOT = pathlib.Path(__file__).parent
IN_PI_ENV = os.environ.get("TFLITE_TRAIN_PI_ENV") == "1"
_PI_PARTS = tuple(tuple(folder.split("/")) for folder in PI_DIRS)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def in_pi_dir(relative: pathlib.PurePath) -> bool:
    """True for a path (relative to ``tests/``) inside one of ``PI_DIRS``."""
    return any(relative.parts[:len(parts)] == parts for parts in _PI_PARTS)


def pytest_ignore_collect(collection_path: pathlib.Path, config: pytest.Config) -> bool | None:
    """In the Pi environment, collect only the on-device test folders (and the folders above them)."""
    if not IN_PI_ENV or not collection_path.is_relative_to(TESTS_ROOT):
        return None
    relative = collection_path.relative_to(TESTS_ROOT)
    if not relative.parts or in_pi_dir(relative) or relative.name in ("conftest.py", "__init__.py"):
        return None
    if collection_path.is_dir() and any(parts[:len(relative.parts)] == relative.parts for parts in _PI_PARTS):
        return None
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if in_pi_dir(pathlib.Path(item.fspath).relative_to(TESTS_ROOT)):
            item.add_marker(pytest.mark.pi)


@pytest.fixture(scope="session")
def fashion() -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST test split: uint8 [10000, 28, 28], labels [10000]."""
    return load_fashion()


@pytest.fixture()
def no_interpreter(monkeypatch):
    """Makes creating any interpreter fail the test: for files that must be refused before native code."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("an interpreter was created for a refused file")

    from tflite_train.runtime.model import interpreter

    monkeypatch.setattr(interpreter, "load_interpreter_class", lambda preferred=None: (refuse, "refused"))


@pytest.fixture()
def earlier_run(fashion, tmp_path):
    """(support folder of 3 classes x 4 real images, run folder holding an earlier ``adapt`` run's ``m.ckpt``)."""
    support, _ = write_episode_folders(fashion, tmp_path / "data", ways=3, shots=4, queries=1, seed=0)
    run = tmp_path / "run"
    run.mkdir()
    assert adapt_cli(support, run / "m.ckpt") == 0
    return support, run


@pytest.fixture()
def no_training(monkeypatch):
    """Makes any call of the training loop fail the test: for runs that must be refused before training."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("training started although the run should have been refused")

    monkeypatch.setattr("tflite_train.runtime.adapt_job.adapt", refuse)
