"""Tests of ``bench`` (the benchmark command and the peer comparison)."""
