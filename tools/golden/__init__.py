"""Golden vectors shared with the Java core (TensorFlow-free)."""

from tools.golden.java_vectors import (
    CASES,
    DEFAULT_OUT,
    FORMAT_VERSION,
    VECTORS_VERSION,
    cost_vectors,
    metadata_example,
    render_vectors,
    write_vectors,
)
from tools.golden.checkpoint_vectors import CHECKPOINT_FILE, checkpoint_vectors, render_checkpoint_vectors
from tools.golden.procedure_vectors import PROCEDURE_FILE, procedure_vectors, render_procedure_vectors
from tools.golden.selection_vectors import (
    SELECTION_BACKBONES,
    render_selection_vectors,
    selection_vectors,
    synthetic_weights,
)

__all__ = [
    "CASES",
    "CHECKPOINT_FILE",
    "DEFAULT_OUT",
    "FORMAT_VERSION",
    "PROCEDURE_FILE",
    "SELECTION_BACKBONES",
    "VECTORS_VERSION",
    "checkpoint_vectors",
    "cost_vectors",
    "metadata_example",
    "procedure_vectors",
    "render_checkpoint_vectors",
    "render_procedure_vectors",
    "render_selection_vectors",
    "render_vectors",
    "selection_vectors",
    "synthetic_weights",
    "write_vectors",
]
