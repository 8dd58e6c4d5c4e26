"""Hypothesis settings of the property-based (fuzz) suites: seeded and bounded in CI, long by hand.

``HYPOTHESIS_PROFILE=ci`` (the default): each property runs its ``ci`` example count with a derandomized
(fixed-seed) search and no example database, so CI is reproducible and takes a bounded time.
``HYPOTHESIS_PROFILE=long``: ``LONG_FACTOR`` times as many examples, randomly seeded (a different
search every run); run by hand (README "Testing")::

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest -q -p no:cacheprovider tests/runtime -k fuzz

The property everywhere: a result, or the project's own error type (``PROJECT_ERRORS``; on the command
line exit 2 with one line on stderr) — never another exception, never a signal.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from tflite_train.contract import ContractError
from tflite_train.runtime.errors import UserError
from tflite_train.runtime.model.flatbuffer_verify import FlatbufferError
from tflite_train.runtime.model.integrity import ModelIntegrityError

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
LONG_FACTOR = 20
"""How many times the CI example count a ``long`` run tries."""
PROJECT_ERRORS = (UserError, ContractError, ModelIntegrityError, FlatbufferError)
"""The project's own error types (each a ``ValueError`` the command line turns into one line and exit 2)."""

_COMMON = dict(deadline=None, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                      HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.register_profile("ci", derandomize=True, **_COMMON)
settings.register_profile("long", derandomize=False, **_COMMON)
if PROFILE not in ("ci", "long"):
    raise ValueError(f"HYPOTHESIS_PROFILE must be ci or long; got {PROFILE!r}")
settings.load_profile(PROFILE)


def examples(ci: int) -> settings:
    """Settings running ``ci`` examples in CI, ``LONG_FACTOR`` x ``ci`` in a long run."""
    return settings(max_examples=ci * (LONG_FACTOR if PROFILE == "long" else 1))
