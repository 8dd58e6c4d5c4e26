"""Baked classifiers: a plain model made from an export and a checkpoint."""
