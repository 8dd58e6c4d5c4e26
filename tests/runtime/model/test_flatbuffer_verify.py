"""Category 1, crafted files: a model edited and RE-SEALED (so its digest passes) is refused by the
structural verifier (``flatbuffer_verify``) with one line naming the defect, before any interpreter
exists; every real fixture passes it. Both environments (TF-free; in the Pi env on tflite-runtime 2.14).
"""

from __future__ import annotations

import struct

import pytest

from tests.runtime.runtime_fixtures import FIXTURE_DIR, fixture_model
from tflite_train.cli import main
from tflite_train.runtime import TrainableModel
from tflite_train.runtime.model.flatbuffer_verify import FlatbufferError, verify_model
from tflite_train.runtime.model.integrity import ModelIntegrityError, check_model_bytes, seal

pytestmark = pytest.mark.pi
FIXTURE = "tiny_adam_33"


# A few lines of independent flatbuffer navigation (schema.fbs field ids) to find what to edit.
def _u32(d, p):
    return struct.unpack_from("<I", d, p)[0]


def _field(d, table: int, fid: int) -> int | None:
    """Absolute position of field ``fid`` of the table at ``table``, or None if absent."""
    vtable = table - struct.unpack_from("<i", d, table)[0]
    if 4 + 2 * fid >= struct.unpack_from("<H", d, vtable)[0]:
        return None
    off = struct.unpack_from("<H", d, vtable + 4 + 2 * fid)[0]
    return table + off if off else None


def _ref(d, table: int, fid: int) -> int:
    at = _field(d, table, fid)
    return at + _u32(d, at)


def _tables(d, table: int, fid: int) -> list[int]:
    vec = _ref(d, table, fid)
    return [vec + 4 + 4 * i + _u32(d, vec + 4 + 4 * i) for i in range(_u32(d, vec))]


MODEL_SUBGRAPHS, MODEL_BUFFERS = 2, 4  # schema.fbs: Model.subgraphs, Model.buffers
SUBGRAPH_TENSORS, SUBGRAPH_OPERATORS = 0, 3  # SubGraph.tensors, SubGraph.operators
TENSOR_SHAPE, TENSOR_BUFFER = 0, 2  # Tensor.shape, Tensor.buffer
OPERATOR_OPCODE, OPERATOR_INPUTS = 0, 1  # Operator.opcode_index, Operator.inputs
BUFFER_DATA = 0  # Buffer.data


def _parts(d):
    model = _u32(d, 0)
    graph = _tables(d, model, MODEL_SUBGRAPHS)[0]
    return model, graph, _tables(d, graph, SUBGRAPH_TENSORS), _tables(d, graph, SUBGRAPH_OPERATORS)


def _operator_input_out_of_range(d: bytearray) -> None:
    _, _, tensors, operators = _parts(d)
    inputs = next(v for v in (_ref(d, op, OPERATOR_INPUTS) for op in operators) if _u32(d, v))
    struct.pack_into("<i", d, inputs + 4, len(tensors) + 7)


def _constant_buffer_too_short(d: bytearray) -> None:
    model, _, tensors, _ = _parts(d)
    buffers = _tables(d, model, MODEL_BUFFERS)
    for tensor in tensors:
        at = _field(d, tensor, TENSOR_BUFFER)
        buffer = buffers[_u32(d, at)] if at else None
        if buffer is not None and _field(d, buffer, BUFFER_DATA) and _u32(d, _ref(d, buffer, BUFFER_DATA)):
            shape = _ref(d, tensor, TENSOR_SHAPE)
            if _u32(d, shape):
                struct.pack_into("<i", d, shape + 4, _u32(d, shape + 4) * 2)  # twice the elements, same bytes
                return
    raise AssertionError("the fixture has no constant tensor")


def _vector_past_the_end(d: bytearray) -> None:
    _, graph, _, _ = _parts(d)
    struct.pack_into("<I", d, _ref(d, graph, SUBGRAPH_TENSORS), 0x3FFFFFFF)


def _vtable_outside_the_file(d: bytearray) -> None:
    _, _, _, operators = _parts(d)
    struct.pack_into("<i", d, operators[0], -len(d))  # vtable = table + len(file)


def _opcode_index_out_of_range(d: bytearray) -> None:
    _, _, _, operators = _parts(d)
    for op in operators:
        at = _field(d, op, OPERATOR_OPCODE)
        if at:
            struct.pack_into("<I", d, at, 4321)
            return
    raise AssertionError("no operator stores its opcode_index")


CRAFTED = [
    (_operator_input_out_of_range, r"Model\.subgraphs\[0\]\.operators\[\d+\]\.inputs\[0\] = \d+ is not a tensor index "
                                   r"\(-1\.\.\d+\)"),
    (_constant_buffer_too_short, r"Model\.subgraphs\[0\]\.tensors\[\d+\]: its buffer \d+ holds \d+ bytes; shape .* needs"),
    (_vector_past_the_end, r"Model\.subgraphs\[0\]: tensors: vector of 1073741823 elements x 4 bytes runs past "
                           "the end of the file"),
    (_vtable_outside_the_file, r"Model\.subgraphs\[0\]\.operators\[0\]: Operator vtable at byte \d+ is misaligned or "
                               "outside"),
    (_opcode_index_out_of_range, r"Model\.subgraphs\[0\]\.operators\[\d+\]: opcode_index = 4321 is not an "
                                 r"operator code index \(0\.\.\d+\)"),
]


def _crafted(edit) -> bytes:
    data = bytearray(fixture_model(FIXTURE).read_bytes())
    edit(data)
    return seal(bytes(data))  # re-sealed: the digest vouches for the crafted bytes


@pytest.mark.parametrize("edit,message", CRAFTED, ids=[e.__name__.strip("_") for e, _ in CRAFTED])
def test_crafted_and_resealed_model_is_refused_before_the_interpreter(no_interpreter, edit, message):
    data = _crafted(edit)
    with pytest.raises(FlatbufferError, match=message):
        verify_model(data)
    with pytest.raises(ModelIntegrityError, match="model bytes: malformed model: " + message):
        TrainableModel(data)


def test_cli_refuses_a_crafted_model_in_one_line(no_interpreter, tmp_path, capsys):
    bad = tmp_path / "crafted.tflite"
    bad.write_bytes(_crafted(_operator_input_out_of_range))
    assert main(["verify", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "crafted.tflite: malformed model: Model.subgraphs[0].operators[" in err and "].inputs[0] = " in err


@pytest.mark.parametrize("path", sorted(FIXTURE_DIR.glob("*.tflite")), ids=lambda p: p.stem)
def test_every_fixture_passes(path):
    data = path.read_bytes()
    verify_model(data)
    check_model_bytes(data, str(path))



def test_the_table_cap_stops_the_walk_before_it_gathers(monkeypatch):
    """A file with more tables than ``MAX_TABLES`` (here lowered to 1000; the fixture has 3,410 buffers alone) is refused
    when a vector would exceed it, before its elements are gathered."""
    monkeypatch.setattr("tflite_train.runtime.model.flatbuffer_verify.MAX_TABLES", 1000)
    with pytest.raises(FlatbufferError, match=r"^Model: buffers: more than 1000 tables$"):
        verify_model(fixture_model(FIXTURE).read_bytes())
