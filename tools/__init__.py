"""Maintainer tools of the repository (not installed with ``tflite_train``): run from the checkout."""

__all__: list[str] = []
