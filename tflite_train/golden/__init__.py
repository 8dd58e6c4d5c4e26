"""Golden vectors shared with the Java core (TensorFlow-free)."""

from tflite_train.golden.java_vectors import (
    CASES,
    DEFAULT_OUT,
    FORMAT_VERSION,
    VECTORS_VERSION,
    cost_vectors,
    metadata_example,
    render_vectors,
    write_vectors,
)

__all__ = [
    "CASES",
    "DEFAULT_OUT",
    "FORMAT_VERSION",
    "VECTORS_VERSION",
    "cost_vectors",
    "metadata_example",
    "render_vectors",
    "write_vectors",
]
