"""A ``.tflite`` flatbuffer's tables as plain data, and the writer that lays them out as a new file (no TensorFlow).

``flatbuffer_graph`` edits a file in place, which can only shrink or overwrite what is there. A new file
(``baked_model``: a subset of one file's tables plus new ones) is built here instead:

* ``read_table(reader, pos, kind)`` copies one table of schema type ``kind`` (``tflite_schema.SCHEMA``) and
  everything it references: its inline bytes and vtable verbatim (so scalar fields the schema table does
  not list, as in the option tables of scalars only, are kept as they are), and per reference field the
  child (a string's bytes, a ``Vector`` of scalars that points into the source bytes, a ``Table``, a list
  of ``Table``; a union's member type is read from its type field);
* ``new_table`` lays out a table from scalar values and children; ``Table.set``/``set_ref``/``drop``
  change one field of either kind (a field that was absent is appended to the inline bytes, aligned);
* ``write_flatbuffer(root, identifier)`` writes the root and, depth first, each table before its
  children, so every offset (u32, relative to its own position) points forward as the format requires;
  a vtable precedes its table (the table's i32 back-offset is positive), a table starts at the same
  position modulo 8 as where it was read (its 8-byte scalars stay aligned), a vector's elements are
  aligned to their width (``Vector.align``: a model's buffers use 16, as TFLite's converter does).

The output is what ``flatbuffer_verify`` accepts (``tests/runtime/model/test_flatbuffer_tables.py`` rewrites a
fixture whole and compares the interpreter's outputs).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping, Sequence
from typing import Union

from tflite_train.runtime.model.flatbuffer_verify import FlatbufferError
from tflite_train.runtime.model.metadata import _Reader
from tflite_train.runtime.model.tflite_schema import SCHEMA, UNIONS, WIDTH

__all__ = ["Table", "Vector", "new_table", "read_table", "write_flatbuffer"]

BUFFER_ALIGNMENT = 16
"""Alignment of a model buffer's bytes (TFLite's converter aligns them so; kernels may read them in place)."""
_MAX_INLINE = 0xFFFF
"""Largest inline table size a vtable can state (u16)."""


@dataclasses.dataclass(frozen=True)
class Vector:
    """A vector of scalars: its elements' little-endian bytes (``len(data) / width`` elements), aligned to
    ``align`` bytes in the output."""

    data: bytes | memoryview
    width: int
    align: int = 0

    @classmethod
    def of(cls, fmt: str, values: Sequence[int | float], align: int = 0) -> Vector:
        """A vector of ``values`` packed as the ``struct`` format character ``fmt`` (e.g. ``"i"``)."""
        return cls(struct.pack(f"<{len(values)}{fmt}", *values), struct.calcsize(f"<{fmt}"), align)


Child = Union[bytes, Vector, "Table", list]
"""A reference field's value: a string (bytes, no NUL), a ``Vector``, a ``Table`` or a list of ``Table``."""


@dataclasses.dataclass
class Table:
    """One table: its inline bytes (the first 4, the vtable back-offset, are rewritten by the writer), the
    inline offset of each field id (0 = absent), its reference fields' children, and the position modulo 8
    at which its inline bytes keep their alignment."""

    inline: bytearray
    slots: list[int]
    refs: dict[int, Child]
    phase: int = 0

    def has(self, field: int) -> bool:
        """True when the field is present."""
        return field < len(self.slots) and self.slots[field] != 0

    def get(self, field: int, fmt: str, default: int | float = 0) -> int | float:
        """A scalar field's value (``struct`` format character ``fmt``), or ``default`` when absent."""
        if not self.has(field):
            return default
        return struct.unpack_from(f"<{fmt}", self.inline, self.slots[field])[0]

    def _slot(self, field: int, width: int) -> int:
        """The field's inline offset, appending a zeroed, aligned slot of ``width`` bytes when absent."""
        if self.has(field):
            return self.slots[field]
        pad = -(self.phase + len(self.inline)) % width
        at = len(self.inline) + pad
        if at + width > _MAX_INLINE:
            raise FlatbufferError(f"table of {at + width} inline bytes exceeds the vtable's limit")
        self.inline += bytes(pad + width)
        self.slots += [0] * (field + 1 - len(self.slots))
        self.slots[field] = at
        return at

    def set(self, field: int, fmt: str, value: int | float) -> None:
        """Sets a scalar field (``struct`` format character ``fmt``)."""
        struct.pack_into(f"<{fmt}", self.inline, self._slot(field, struct.calcsize(f"<{fmt}")), value)

    def set_ref(self, field: int, child: Child) -> None:
        """Sets a reference field to ``child``."""
        self._slot(field, 4)
        self.refs[field] = child

    def drop(self, field: int) -> None:
        """Removes a field (its inline bytes stay, unreferenced)."""
        if self.has(field):
            self.slots[field] = 0
        self.refs.pop(field, None)


def new_table(scalars: Mapping[int, tuple[str, int | float]] = {},  # noqa: B006 (read only)
              refs: Mapping[int, Child] = {}) -> Table:  # noqa: B006
    """A table of the given scalar fields (field id -> (``struct`` format character, value)) and reference
    fields (field id -> child)."""
    table = Table(bytearray(4), [], {})
    for field, (fmt, value) in sorted(scalars.items(), key=lambda item: -struct.calcsize(item[1][0])):
        table.set(field, fmt, value)
    for field, child in sorted(refs.items()):
        table.set_ref(field, child)
    return table


def _read_vector(reader: _Reader, at: int, width: int) -> memoryview:
    vector = reader.deref(at)
    n = reader.u32(vector)
    reader._check(vector + 4, n * width)
    return memoryview(reader.data)[vector + 4:vector + 4 + n * width]


def read_table(reader: _Reader, pos: int, kind: str) -> Table:
    """The table of schema type ``kind`` at ``pos`` with everything it references (module docstring).

    Raises:
      FlatbufferError: a read outside the file, or a union type outside the schema.
    """
    vtable = pos - reader.i32(pos)
    vtable_size, size = reader.u16(vtable), reader.u16(vtable + 2)
    slots = [reader.u16(vtable + 4 + 2 * i) for i in range(max(vtable_size - 4, 0) // 2)]
    reader._check(pos, size)
    table = Table(bytearray(reader.data[pos:pos + size]), slots, {}, pos % 8)
    for field, (name, field_kind, arg) in SCHEMA[kind].items():
        if not table.has(field):
            continue
        at = pos + slots[field]
        if field_kind == "string":
            table.refs[field] = bytes(_read_vector(reader, at, 1))
        elif field_kind == "vector":
            table.refs[field] = Vector(_read_vector(reader, at, WIDTH[arg]), WIDTH[arg],
                                       BUFFER_ALIGNMENT if (kind, field) == ("Buffer", 0) else 0)
        elif field_kind == "table":
            table.refs[field] = read_table(reader, reader.deref(at), arg)
        elif field_kind == "tables":
            vector = reader.deref(at)
            table.refs[field] = [read_table(reader, reader.deref(vector + 4 + 4 * i), arg)
                                 for i in range(reader.u32(vector))]
        elif field_kind == "union":
            type_field, union = arg
            code = int(table.get(type_field, "B"))
            largest, members = UNIONS[union]
            if not 0 < code <= largest:
                raise FlatbufferError(f"{kind}.{name}: union type {code} outside 1..{largest}")
            table.refs[field] = read_table(reader, reader.deref(at), members.get(code, ""))
    return table


class _Writer:
    """Lays tables out front to back (module docstring)."""

    def __init__(self, identifier: bytes) -> None:
        self.out = bytearray(4) + identifier

    def _pad(self, align: int, phase: int = 0) -> None:
        self.out += bytes(-(len(self.out) - phase) % align)

    def _patch(self, at: int, target: int) -> None:
        struct.pack_into("<I", self.out, at, target - at)

    def child(self, child: Child) -> int:
        if isinstance(child, Table):
            return self.table(child)
        if isinstance(child, list):
            self._pad(4)
            start = len(self.out)
            self.out += struct.pack("<I", len(child)) + bytes(4 * len(child))
            for i, table in enumerate(child):
                self._patch(start + 4 + 4 * i, self.table(table))
            return start
        if isinstance(child, bytes):
            self._pad(4)
            start = len(self.out)
            self.out += struct.pack("<I", len(child)) + child + b"\0"
            return start
        self._pad(max(child.align, child.width, 4), -4)  # the elements, after the u32 length, are aligned
        start = len(self.out)
        self.out += struct.pack("<I", len(child.data) // child.width)
        self.out += child.data
        return start

    def table(self, table: Table) -> int:
        used = len(table.slots)
        while used and not table.slots[used - 1]:
            used -= 1
        self._pad(2)
        vtable = len(self.out)
        self.out += struct.pack(f"<HH{used}H", 4 + 2 * used, len(table.inline), *table.slots[:used])
        self._pad(8, table.phase)
        start = len(self.out)
        self.out += table.inline
        struct.pack_into("<i", self.out, start, start - vtable)
        for field, child in sorted(table.refs.items()):
            if table.has(field):
                self._patch(start + table.slots[field], self.child(child))
        return start


def write_flatbuffer(root: Table, identifier: bytes = b"TFL3") -> bytes:
    """The bytes of a flatbuffer whose root table is ``root`` (file identifier ``identifier``, 4 bytes)."""
    if len(identifier) != 4:
        raise ValueError(f"a file identifier has 4 bytes; got {identifier!r}")
    writer = _Writer(identifier)
    struct.pack_into("<I", writer.out, 0, writer.table(root))
    return bytes(writer.out)
