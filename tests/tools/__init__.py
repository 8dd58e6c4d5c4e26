"""Tests of the repository-only ``tools``."""
