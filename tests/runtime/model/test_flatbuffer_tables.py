"""``flatbuffer_tables``: a model read as tables and written again is a valid model that computes the same.

The whole tiny fixture (every table, union and vector of the schema it holds, the int8 one's quantization
tables) goes through ``read_table`` and ``write_flatbuffer``: the verifier accepts the new file and, re-sealed,
its ``infer`` gives bit-identical outputs on the interpreter. Field edits by hand: a scalar appended to a
table lands aligned to its width from the table's position modulo 8, and a dropped field reads as absent.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import fixture_model
from tflite_train.runtime import TrainableModel
from tflite_train.runtime.model.flatbuffer_tables import Table, Vector, new_table, read_table, write_flatbuffer
from tflite_train.runtime.model.flatbuffer_verify import verify_model
from tflite_train.runtime.model.integrity import seal
from tflite_train.runtime.model.metadata import _Reader, _root

pytestmark = pytest.mark.pi


@pytest.mark.parametrize("name", ["tiny_nocache_17", "tiny_int8_33"])
def test_a_model_written_again_computes_the_same(name):
    data = fixture_model(name).read_bytes()
    reader = _Reader(data)
    rewritten = seal(write_flatbuffer(read_table(reader, _root(reader), "Model")))
    verify_model(rewritten)
    before, after = TrainableModel(data), TrainableModel(rewritten)
    images = np.random.default_rng(0).random((2, *before.input_shape), dtype=np.float32)
    for key, value in before.infer(images).items():
        np.testing.assert_array_equal(after.infer(images)[key], value)


def test_fields_set_by_hand_are_aligned_and_read_back():
    table = new_table({0: ("b", -3)}, {1: b"name"})
    table.phase = 4  # as if read at a position 4 modulo 8
    table.set(2, "q", 2**40)
    assert (table.phase + table.slots[2]) % 8 == 0 and table.get(2, "q") == 2**40 and table.get(0, "b") == -3
    table.drop(1)
    assert not table.has(1) and table.get(5, "I", 7) == 7
    root = new_table({0: ("I", 3)}, {1: [table], 2: Vector.of("i", [1, -1], align=16)})
    data = write_flatbuffer(root, b"TEST")
    reader = _Reader(data)
    assert data[4:8] == b"TEST" and reader.u32_field(_root(reader), 0) == 3
    start, n = reader.vector(_root(reader), 2)
    assert start % 16 == 0 and struct.unpack_from("<2i", data, start) == (1, -1) and n == 2
    child = reader.table_vector(_root(reader), 1)[0]
    assert child % 8 == 4 and reader.string(child, 1) is None
    assert struct.unpack_from("<q", data, reader.field(child, 2))[0] == 2**40


def test_a_table_too_large_for_its_vtable_is_refused():
    table = Table(bytearray(4), [], {})
    with pytest.raises(ValueError, match="vtable's limit"):
        for field in range(20_000):
            table.set(field, "i", field)


def test_a_union_type_outside_the_schema_is_refused():
    data = bytearray(fixture_model("tiny_nocache_17").read_bytes())
    reader = _Reader(bytes(data))
    subgraph = reader.table_vector(_root(reader), 2)[0]
    op = next(op for op in reader.table_vector(subgraph, 3) if reader.field(op, 3) is not None
              and data[reader.field(op, 3)] != 0)
    data[reader.field(op, 3)] = 250  # builtin_options_type
    with pytest.raises(ValueError, match="union type 250"):
        read_table(_Reader(bytes(data)), _root(reader), "Model")
