"""``free_memory.release_free_memory``: glibc's ``malloc_trim`` where the C library has it (the Pi's and this
machine's), a no-op elsewhere; it frees nothing in use. No memory figures here (bench/results/MEMORY.md)."""

from __future__ import annotations

import ctypes
import platform

import numpy as np
import pytest

from tflite_train.runtime.adaptation import free_memory

pytestmark = pytest.mark.pi


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_has_malloc_trim_and_live_arrays_survive_a_trim():
    assert free_memory._malloc_trim() is not None
    kept = np.arange(1 << 20, dtype=np.float64)
    freed = [np.ones(1 << 18) for _ in range(16)]
    del freed
    assert isinstance(free_memory.release_free_memory(), bool)
    np.testing.assert_array_equal(kept, np.arange(1 << 20, dtype=np.float64))


def test_without_malloc_trim_nothing_happens(monkeypatch):
    class NoTrim:
        def __getattr__(self, name):
            raise AttributeError(name)

    free_memory._malloc_trim.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", lambda _name: NoTrim())
    try:
        assert free_memory.release_free_memory() is False
    finally:
        free_memory._malloc_trim.cache_clear()
