"""Fixtures of the runtime tests (helpers in ``runtime_fixtures.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from runtime_fixtures import load_fashion
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
