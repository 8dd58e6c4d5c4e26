"""Whether every tensor shape of a model follows from its input shapes alone, read from the flatbuffer.

ai-edge-litert's CompiledModel (``compiled_signatures``) sizes a signature's output buffers from the
output shapes its interpreter reports after an input resize, before anything runs. An operator whose
output shape depends on the *values* of a tensor computed at run time (a ``RESHAPE`` to
``concat(shape(x)[:3], [c])``, as Keras writes a ``Dense`` on a 4-D tensor; a ``BROADCAST_TO`` of
``shape(y)``) leaves its output shape unknown until it runs: the interpreter then reports the shapes of
the previous allocation, the buffers are too small for the resized batch, and the kernels write past
them (a SIGSEGV or a corrupted heap; LiteRT issue 5774, "Support dynamic shape output for
CompiledModel"). Measured on a ConvNeXt-style model (``Dense`` after ``LayerNormalization`` on 4-D
activations): ``infer`` at batch 3 reports logits [1, 64] and crashes the process.

:func:`value_shaped_operators` finds such operators before any native code runs. It is conservative: an
operator kind it does not list (``KNOWN_SHAPE_OPS``, ``SHAPE_OPERANDS``) counts as value-shaped, and so
does a shape operand that is neither a constant of the file nor empty. Shapes that only the
interpreter's own rules leave unknown (e.g. a scalar ``READ_VARIABLE``) are caught at run time by
``compiled_signatures``: before each run on new input shapes it compares the output shapes the
interpreter reports with :func:`expected_output_shapes` and refuses to run on a difference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from tflite_train.runtime.model.flatbuffer_graph import Graph

__all__ = ["KNOWN_SHAPE_OPS", "SHAPE_OPERANDS", "expected_output_shapes", "value_shaped_operators"]

KNOWN_SHAPE_OPS = frozenset({
    # element-wise (broadcasting) and activations
    "ABS", "ADD", "CAST", "CEIL", "COS", "DEQUANTIZE", "DIV", "ELU", "EQUAL", "EXP", "FLOOR", "FLOOR_DIV",
    "FLOOR_MOD", "GELU", "GREATER", "GREATER_EQUAL", "HARD_SWISH", "LEAKY_RELU", "LESS", "LESS_EQUAL", "LOG",
    "LOGICAL_AND", "LOGICAL_NOT", "LOGICAL_OR", "LOGISTIC", "LOG_SOFTMAX", "MAXIMUM", "MINIMUM", "MUL", "NEG",
    "NOT_EQUAL", "POW", "PRELU", "QUANTIZE", "RELU", "RELU6", "RELU_N1_TO_1", "ROUND", "RSQRT", "SELECT",
    "SELECT_V2", "SIGN", "SIN", "SOFTMAX", "SQRT", "SQUARE", "SQUARED_DIFFERENCE", "SUB", "TANH", "ZEROS_LIKE",
    "L2_NORMALIZATION",
    # layers whose output shape follows from the operand shapes and the options
    "AVERAGE_POOL_2D", "BATCH_MATMUL", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D",
    "CONCATENATION", "PACK", "UNPACK", "SQUEEZE", "GATHER", "REVERSE_V2", "CUMSUM", "SHAPE",
    # resource variables and control flow (an IF's branches are subgraphs of their own, checked too)
    "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", "IF",
})
"""Operator kinds whose output shapes follow from their operands' shapes and their options alone."""

SHAPE_OPERANDS: dict[str, tuple[int, ...]] = {
    "RESHAPE": (1,), "FILL": (0,), "BROADCAST_TO": (1,), "TILE": (1,), "PAD": (1,), "PADV2": (1,),
    "MIRROR_PAD": (1,), "SLICE": (1, 2), "STRIDED_SLICE": (1, 2, 3), "TRANSPOSE": (1,), "EXPAND_DIMS": (1,),
    "MEAN": (1,), "SUM": (1,), "REDUCE_PROD": (1,), "REDUCE_MAX": (1,), "REDUCE_MIN": (1,), "REDUCE_ANY": (1,),
    "SPLIT": (0,), "SPLIT_V": (1, 2), "ONE_HOT": (1,), "ARG_MAX": (1,), "ARG_MIN": (1,),
    "RESIZE_BILINEAR": (1,), "RESIZE_NEAREST_NEIGHBOR": (1,), "SPACE_TO_BATCH_ND": (1, 2),
    "BATCH_TO_SPACE_ND": (1, 2), "TRANSPOSE_CONV": (0,), "RANGE": (0, 1, 2), "SCATTER_ND": (2,), "TOPK_V2": (1,),
}
"""Operator kind -> the operands whose *values* decide its output shape (a reshape's target shape, a
reduction's axes, a pad's paddings...); static when each is a constant of the file (or empty, or absent)."""


def _known(graph: Graph, subgraph: int, tensor: int) -> bool:
    """True when the tensor's values are known before anything runs: absent (-1), a constant with bytes in
    the file, or empty (a 0 in its shape: a ``RESHAPE`` to a scalar takes the empty shape ``[]``)."""
    if tensor < 0:
        return True
    if graph.buffer_span(graph.tensor_buffer(subgraph, tensor))[1] > 0:
        return True
    return 0 in graph.tensor_shape(subgraph, tensor)


def value_shaped_operators(graph: Graph, subgraphs: Iterable[int] | None = None) -> list[str]:
    """The operators of ``subgraphs`` (None: every subgraph a signature runs, transitively) whose output
    shape may depend on a tensor's values at run time (module docstring), as ``"<op> (subgraph i)"``, each
    kind and subgraph once; empty when every shape follows from the input shapes.

    An operator is shape-static when its kind is in ``KNOWN_SHAPE_OPS``, or it is in ``SHAPE_OPERANDS`` and
    every listed operand is known before running (a constant with bytes in the file, empty, or absent);
    anything else (another kind, e.g. ``WHILE``, ``WHERE``, a custom op) counts as value-shaped.
    """
    chosen = sorted(graph.reachable(graph.signatures.values()) if subgraphs is None else set(subgraphs))
    found: list[str] = []
    for subgraph in chosen:
        for op in graph.operators[subgraph]:
            if op.name in KNOWN_SHAPE_OPS:
                continue
            operands = SHAPE_OPERANDS.get(op.name)
            if operands is not None and all(_known(graph, subgraph, op.inputs[i]) if i < len(op.inputs) else True
                                            for i in operands):
                continue
            entry = f"{op.name} (subgraph {subgraph})"
            if entry not in found:
                found.append(entry)
    return found


def expected_output_shapes(declared_inputs: Mapping[str, Sequence[int]], inputs: Mapping[str, Sequence[int]],
                           declared_outputs: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, ...]] | None:
    """The output shapes a signature must report for these input shapes, from the file's declared shapes
    (``shape_signature``: -1 marks a dynamic dimension, the batch).

    Every dynamic input dimension takes the batch: with the one value they all take, n, each dynamic
    output dimension is n and every other one is as declared; e.g. inputs (-1, 32, 32, 3) given as
    (3, 32, 32, 3) make a declared output (-1, 64) (3, 64) and a declared (16,) stay (16,).

    Returns:
      ``{output: shape}``; None when the inputs give their dynamic dimensions different values, or give
      none while an output has one (the shapes cannot be predicted).
    """
    batch = {int(actual) for name, shape in declared_inputs.items()
             for declared, actual in zip(shape, inputs[name]) if declared == -1}
    if len(batch) > 1 or (not batch and any(-1 in shape for shape in declared_outputs.values())):
        return None
    n = next(iter(batch), -1)
    return {name: tuple(n if d == -1 else int(d) for d in shape) for name, shape in declared_outputs.items()}
