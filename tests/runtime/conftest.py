"""Fixtures of the runtime tests (helpers in ``runtime_fixtures.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from runtime_fixtures import load_fashion


@pytest.fixture(scope="session")
def fashion() -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST test split: uint8 [10000, 28, 28], labels [10000]."""
    return load_fashion()
