"""Fixtures of the runtime tests (helpers in ``runtime_fixtures.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from runtime_fixtures import adapt_cli, load_fashion, write_episode_folders
from tflite_train.runtime import interpreter


@pytest.fixture(scope="session")
def fashion() -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST test split: uint8 [10000, 28, 28], labels [10000]."""
    return load_fashion()


@pytest.fixture()
def no_interpreter(monkeypatch):
    """Makes creating any interpreter fail the test: for files that must be refused before native code."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("an interpreter was created for a refused file")

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
