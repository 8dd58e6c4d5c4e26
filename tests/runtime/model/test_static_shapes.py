"""Which models may run on LiteRT's CompiledModel (``static_shapes``): an operator whose output shape depends on
tensor values is found from the file alone, on hand-made graphs (golden cases) and on the exported fixtures (none);
the output shapes a signature must report follow from the file's declared shapes."""

from __future__ import annotations

import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train.runtime.model.flatbuffer_graph import Operator, read_graph
from tflite_train.runtime.model.static_shapes import expected_output_shapes, value_shaped_operators

CONSTANT, EMPTY_CONSTANT, COMPUTED, EMPTY_COMPUTED = 0, 1, 2, 3
"""Tensors of the hand-made graphs: a constant with bytes, an empty shape [] given as a constant without
bytes, a tensor computed at run time, and a computed tensor with 0 elements."""


class HandMadeGraph:
    """The part of ``flatbuffer_graph.Graph`` that ``value_shaped_operators`` reads: subgraph 0 is the signature
    ``main``; it runs subgraph 1 through an IF."""

    def __init__(self, main: list[Operator], branch: list[Operator] = ()) -> None:
        self.signatures = {"main": 0}
        self.operators = [list(main) + [Operator(0, "IF", (COMPUTED,), (COMPUTED,), (1, 1))], list(branch)]
        self._shapes = {CONSTANT: (4,), EMPTY_CONSTANT: (0,), COMPUTED: (4,), EMPTY_COMPUTED: (2, 0)}

    def reachable(self, entries):
        return {0, 1} if 0 in set(entries) else set()

    def tensor_buffer(self, subgraph: int, tensor: int) -> int:
        return 7 if tensor in (CONSTANT, EMPTY_CONSTANT) else 0

    def buffer_span(self, buffer: int) -> tuple[int, int]:
        return (100, 16) if buffer == 7 else (0, 0)

    def tensor_shape(self, subgraph: int, tensor: int) -> tuple[int, ...]:
        return self._shapes[tensor]


def op(name: str, *inputs: int) -> Operator:
    return Operator(0, name, inputs, (COMPUTED,))


@pytest.mark.parametrize("main, branch, found", [
    ([op("CONV_2D", COMPUTED, CONSTANT, CONSTANT), op("RESHAPE", COMPUTED, CONSTANT)], [], []),
    ([op("RESHAPE", COMPUTED, EMPTY_CONSTANT), op("RESHAPE", COMPUTED, EMPTY_COMPUTED)], [], []),  # to a scalar
    ([op("RESHAPE", COMPUTED)], [], []),  # the target shape in the options
    ([op("RESHAPE", COMPUTED, COMPUTED), op("RESHAPE", COMPUTED, COMPUTED)], [], ["RESHAPE (subgraph 0)"]),
    ([op("MEAN", COMPUTED, CONSTANT)], [op("BROADCAST_TO", COMPUTED, COMPUTED)], ["BROADCAST_TO (subgraph 1)"]),
    ([op("STRIDED_SLICE", COMPUTED, CONSTANT, CONSTANT, COMPUTED)], [], ["STRIDED_SLICE (subgraph 0)"]),
    ([op("GATHER", COMPUTED, COMPUTED), op("SHAPE", COMPUTED)], [], []),  # shapes from operand shapes only
    ([op("WHILE", COMPUTED), op("CUSTOM", COMPUTED)], [op("WHERE", COMPUTED)],
     ["WHILE (subgraph 0)", "CUSTOM (subgraph 0)", "WHERE (subgraph 1)"]),  # not known: value-shaped
])
def test_value_shaped_operators(main, branch, found):
    assert value_shaped_operators(HandMadeGraph(main, branch)) == found


def test_only_the_given_subgraphs_are_read():
    graph = HandMadeGraph([op("ADD", COMPUTED, COMPUTED)], [op("RESHAPE", COMPUTED, COMPUTED)])
    assert value_shaped_operators(graph, [0]) == []
    assert value_shaped_operators(graph, [1]) == ["RESHAPE (subgraph 1)"]


@pytest.mark.parametrize("name", ["tiny_adam_33", "mcunet_adam_35", "lite0_meta_adam_64", "tiny_int8_33",
                                  "byo_plain_cnn_23", "byo_mobilenet_v3_small_32"])
def test_the_exported_fixtures_have_static_shapes(name):
    assert value_shaped_operators(read_graph(fixture_model(name).read_bytes())) == []


@pytest.mark.parametrize("inputs, outputs, want", [
    ({"images": (3, 8, 8, 3)}, {"logits": (-1, 5), "embeddings": (-1, 16)}, {"logits": (3, 5), "embeddings": (3, 16)}),
    ({"images": (1, 8, 8, 3), "labels": (1,)}, {"loss": (), "l1": (16,)}, {"loss": (), "l1": (16,)}),
    ({"images": (2, 8, 8, 3), "labels": (3,)}, {"loss": ()}, None),  # two batch sizes
    ({"dummy": ()}, {"ok": ()}, {"ok": ()}),
])
def test_expected_output_shapes(inputs, outputs, want):
    declared = {"images": (-1, 8, 8, 3), "labels": (-1,), "dummy": ()}
    assert expected_output_shapes({k: declared[k] for k in inputs}, inputs, outputs) == want


def test_no_batch_for_a_batch_output():
    assert expected_output_shapes({"dummy": ()}, {"dummy": ()}, {"logits": (-1, 5)}) is None
