"""Tests of ``tools.diagnostics``."""
