"""Pure-Python reader of a ``.tflite`` flatbuffer: metadata entries and operator codes (no TF).

Flatbuffer layout used: the file starts with a u32 offset to the root ``Model`` table; a table
starts with an i32 back-offset to its vtable (u16 vtable size, u16 table size, u16 field offsets);
reference fields (strings, vectors, sub-tables) hold a u32 offset relative to the field's own
position; a vector is a u32 length followed by its elements.
Schema fields used: Model{version 0, operator_codes 1, subgraphs 2, description 3, buffers 4,
metadata_buffer 5, metadata 6}; Buffer{data 0, offset 1, size 2}; Metadata{name 0, buffer 1};
OperatorCode{deprecated_builtin_code 0, custom_code 1, version 2, builtin_code 3}.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from typing import Any

from tflite_train.contract import (F_FORMAT, F_INPUTS, F_OUTPUTS, FORMAT, METADATA_NAME, SELFTEST_NAME, ContractError,
                                   StrictJsonError, loads_strict)
from tflite_train.runtime.model.builtin_ops import BUILTIN_OPS, CUSTOM_CODE
from tflite_train.runtime.model.flatbuffer_verify import FlatbufferError

__all__ = ["METADATA_NAME", "SELFTEST_NAME", "OperatorCode", "read_metadata", "read_metadata_buffers",
           "read_operator_codes", "read_signature_defs"]


@dataclasses.dataclass(frozen=True)
class OperatorCode:
    """One entry of ``Model.operator_codes``."""

    builtin_code: int
    name: str
    version: int
    custom_code: str | None

    @property
    def is_custom(self) -> bool:
        """True for custom and Flex ops (not runnable on a builtins-only interpreter)."""
        return self.builtin_code == CUSTOM_CODE or self.custom_code is not None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def _check(self, pos: int, size: int) -> None:
        if pos < 0 or pos + size > len(self.data):
            raise FlatbufferError(f"truncated or foreign .tflite file: read of {size} bytes at {pos} beyond {len(self.data)}")

    def u8(self, pos):
        self._check(pos, 1)
        return self.data[pos]

    def i8(self, pos):
        self._check(pos, 1)
        return struct.unpack_from("<b", self.data, pos)[0]

    def u16(self, pos):
        self._check(pos, 2)
        return struct.unpack_from("<H", self.data, pos)[0]

    def u32(self, pos):
        self._check(pos, 4)
        return struct.unpack_from("<I", self.data, pos)[0]

    def i32(self, pos):
        self._check(pos, 4)
        return struct.unpack_from("<i", self.data, pos)[0]

    def i32s(self, pos: int, n: int) -> tuple[int, ...]:
        """``n`` consecutive int32 at ``pos`` (one bounds check, one unpack)."""
        self._check(pos, 4 * n)
        return struct.unpack_from(f"<{n}i", self.data, pos)

    def u64(self, pos):
        self._check(pos, 8)
        return struct.unpack_from("<Q", self.data, pos)[0]

    def field(self, table: int, index: int) -> int | None:
        """Absolute position of field ``index`` of the table at ``table``, or None if absent."""
        vtable = table - self.i32(table)
        vt_size = self.u16(vtable)
        slot = 4 + 2 * index
        if slot >= vt_size:
            return None
        off = self.u16(vtable + slot)
        return table + off if off else None

    def deref(self, pos: int) -> int:
        return pos + self.u32(pos)

    def vector(self, table: int, index: int) -> tuple[int, int]:
        """(start of elements, length) of a vector field; (0, 0) when absent."""
        pos = self.field(table, index)
        if pos is None:
            return 0, 0
        vec = self.deref(pos)
        return vec + 4, self.u32(vec)

    def table_vector(self, table: int, index: int) -> list[int]:
        start, n = self.vector(table, index)
        self._check(start, 4 * n)
        return [start + 4 * i + off for i, off in enumerate(struct.unpack_from(f"<{n}I", self.data, start))]

    def u32_field(self, table: int, index: int, default: int = 0) -> int:
        pos = self.field(table, index)
        return self.u32(pos) if pos is not None else default

    def named_refs(self, table: int, vector_index: int, name_field: int, index_field: int, targets: list[int],
                   what: str):
        """``(entry, name, target)`` for each table of a vector whose tables hold a name and a u32 index into
        ``targets`` (Metadata{name, buffer}, SignatureDef{signature_key, subgraph_index},
        TensorMap{name, tensor_index}); an index out of range is a ValueError naming ``what``."""
        for entry in self.table_vector(table, vector_index):
            name = self.string(entry, name_field)
            index = self.u32_field(entry, index_field)
            if index >= len(targets):
                raise FlatbufferError(f"{what} {name!r} points to entry {index} of {len(targets)} (truncated or corrupt file)")
            yield entry, name, targets[index]

    def string(self, table: int, index: int) -> str | None:
        start, n = self.vector(table, index)
        if not start:
            return None
        self._check(start, n)
        return self.data[start:start + n].decode("utf-8")


def _load(model: str | os.PathLike | bytes | bytearray) -> _Reader:
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    elif isinstance(model, (str, os.PathLike)):
        with open(model, "rb") as f:
            data = f.read()
    else:
        raise TypeError(f"model must be a path or bytes; got {type(model).__name__}")
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise FlatbufferError("not a .tflite flatbuffer (missing 'TFL3' identifier or truncated)")
    return _Reader(data)


def _root(reader: _Reader) -> int:
    return reader.deref(0)


def metadata_spans(model: str | os.PathLike | bytes) -> dict[str, tuple[int, int]]:
    """Where each ``Model.metadata`` entry's bytes lie in the file: ``{name: (start, length)}``.

    Raises:
      ValueError: for a truncated or foreign file (every offset is bounds-checked).
    """
    reader = _load(model)
    root = _root(reader)
    buffers = reader.table_vector(root, 4)
    return {name: _buffer_span(reader, buf) for _, name, buf in reader.named_refs(root, 6, 0, 1, buffers, "metadata")}


def _buffer_span(reader: _Reader, buf: int) -> tuple[int, int]:
    """(start, length) of a Buffer's bytes: its ``data`` vector, or ``offset``/``size`` outside the
    flatbuffer (the large-model layout; offset <= 1 means no data)."""
    start, n = reader.vector(buf, 0)
    if start:
        reader._check(start, n)
        return start, n
    off_pos, size_pos = reader.field(buf, 1), reader.field(buf, 2)
    offset = reader.u64(off_pos) if off_pos else 0
    size = reader.u64(size_pos) if size_pos else 0
    reader._check(offset, size)
    return (offset, size) if offset > 1 else (0, 0)


def read_metadata_buffers(model: str | os.PathLike | bytes) -> dict[str, bytes]:
    """All ``Model.metadata`` entries as ``{name: raw bytes}``.

    Raises:
      ValueError: for a truncated or foreign file.
    """
    data = _load(model).data
    return {name: data[start:start + n] for name, (start, n) in metadata_spans(data).items()}


def read_metadata(model: str | os.PathLike | bytes, source: str | None = None) -> dict[str, Any]:
    """The ``tflite_train`` metadata JSON of an exported model (see CONTRACT.md), read as strict JSON
    (``contract.loads_strict``: a duplicate key or a NaN is refused, as the Java core refuses it).

    Args:
      model: The model file or its bytes.
      source: The file's name in errors (default: ``model`` when it is a path; none for bytes).

    Raises:
      FlatbufferError: a truncated or foreign file.
      ContractError: no ``tflite_train`` metadata, not strict JSON, or another format (both are ValueErrors);
        one line naming the file and what is wrong (e.g. ``m.tflite: 'tflite_train' metadata is not strict
        JSON: duplicate key 'format'``).
    """
    if source is None and not isinstance(model, (bytes, bytearray, memoryview)):
        source = os.fspath(model)
    where = "" if source is None else f"{source}: "
    entries = read_metadata_buffers(model)
    if METADATA_NAME not in entries:
        raise ContractError(f"{where}model has no {METADATA_NAME!r} metadata entry (found {sorted(entries)})")
    try:
        meta = loads_strict(entries[METADATA_NAME].decode("utf-8"))
    except StrictJsonError as exc:
        raise ContractError(f"{where}{METADATA_NAME!r} metadata is not strict JSON: {exc}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ContractError(f"{where}{METADATA_NAME!r} metadata is not UTF-8 JSON: {str(exc)[:200]}") from None
    if not isinstance(meta, dict) or meta.get(F_FORMAT) != FORMAT:
        found = meta.get(F_FORMAT) if isinstance(meta, dict) else type(meta).__name__
        raise ContractError(f"{where}metadata field {F_FORMAT!r} must be {FORMAT!r}; got {str(repr(found))[:80]}")
    return meta


def read_operator_codes(model: str | os.PathLike | bytes) -> list[OperatorCode]:
    """``Model.operator_codes`` with builtin names resolved.

    The builtin code is max(deprecated_builtin_code, builtin_code) (schema v3a rule).
    """
    reader = _load(model)
    out = []
    for op in reader.table_vector(_root(reader), 1):
        pos = reader.field(op, 0)
        deprecated = reader.i8(pos) if pos is not None else 0
        pos = reader.field(op, 3)
        builtin = reader.i32(pos) if pos is not None else 0
        pos = reader.field(op, 2)
        version = reader.i32(pos) if pos is not None else 1
        code = max(deprecated, builtin)
        custom = reader.string(op, 1)
        out.append(OperatorCode(code, BUILTIN_OPS.get(code, f"UNKNOWN_{code}"), version, custom))
    return out


TENSOR_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool", 7: "int16",
                9: "int8", 10: "float64"}
"""Schema ``TensorType`` codes of the types a trainable model's signatures may use."""


def read_signature_defs(model: str | os.PathLike | bytes) -> dict[str, dict[str, dict[str, tuple[tuple[int, ...], str]]]]:
    """The graph's signatures as the file declares them, read without an interpreter.

    Schema fields used: Model{signature_defs 7, subgraphs 2}; SignatureDef{inputs 0, outputs 1,
    signature_key 2, subgraph_index 4}; TensorMap{name 0, tensor_index 1}; SubGraph{tensors 0};
    Tensor{shape 0, type 1, shape_signature 7} (dynamic dims are -1 in ``shape_signature``).

    Returns:
      ``{signature: {"inputs": {name: (shape, dtype)}, "outputs": {...}}}``.

    Raises:
      ValueError: for a truncated or foreign file.
    """
    reader = _load(model)
    root = _root(reader)
    out = {}
    for sig, key, subgraph in reader.named_refs(root, 7, 2, 4, reader.table_vector(root, 2), "signature"):
        tensors = reader.table_vector(subgraph, 0)
        out[key] = {kind: {name: _tensor_info(reader, tensor)
                           for _, name, tensor in reader.named_refs(sig, field, 0, 1, tensors, f"signature {key!r} {kind}")}
                    for kind, field in ((F_INPUTS, 0), (F_OUTPUTS, 1))}
    return out


def _tensor_info(reader: _Reader, tensor: int) -> tuple[tuple[int, ...], str]:
    """(shape, dtype) of a Tensor: ``shape_signature`` (dynamic dims -1) when present, else ``shape``."""
    start, n = reader.vector(tensor, 7)
    if not start:
        start, n = reader.vector(tensor, 0)
    shape = tuple(reader.i32(start + 4 * i) for i in range(n))
    pos = reader.field(tensor, 1)
    code = reader.i8(pos) if pos is not None else 0
    return shape, TENSOR_TYPES.get(code, f"type_{code}")
