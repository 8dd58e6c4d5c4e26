"""Checkpoints: the adapted weights saved beside a model, and their schema."""
