"""Structural verifier of a ``.tflite`` flatbuffer, run before any interpreter sees the bytes.

The integrity seal (``integrity``) proves a file is the one the exporter wrote; a file crafted and
re-sealed passes it. This module checks what the interpreter would otherwise trust blindly, the way
FlatBuffers' C++ ``Verifier`` does (there is no verifier in the Python ``flatbuffers`` package, and
neither ``tflite-runtime`` nor ``ai-edge-litert`` exposes the C++ one), then what the TFLite schema
means:

Structure (every table reachable from the root ``Model``): a table lies inside the buffer, 4-byte
aligned; its vtable (at ``table - i32(table)``) lies inside, 2-byte aligned, of an even size >= 4,
with the table's inline size >= 4 and inside; every present field lies inside the table's inline
size, aligned to its width; an offset field (u32, 4-aligned, relative to itself) points forward
inside the buffer; a string is a u32 length, its bytes and a NUL, inside; a vector is a u32
length and ``length x width`` bytes inside (no overflow); union types are in range. The schema has no
recursion, so the walk's depth is bounded; the number of tables visited (``MAX_TABLES``) and of
index elements checked (``MAX_ELEMENTS``) are capped, checked before anything is gathered, so that
vectors shared by many tables cannot blow up the time or the memory.

Semantics (``_check_semantics``): operator input/output/intermediate tensor indices in range (-1,
TFLite's optional tensor, allowed for inputs), ``opcode_index`` in range, subgraph inputs/outputs
in range, a tensor's ``buffer`` in range, a constant tensor's buffer holding exactly
``prod(shape) x dtype size`` bytes (non-negative dims), buffers stored outside the flatbuffer
(``Buffer.offset/size``) and large custom options inside the file, signature subgraph and tensor
indices in range, metadata buffer indices in range.

The tables, fields and unions walked are those of ``tflite_schema`` (schema.fbs field ids).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tflite_train.runtime.model.tflite_schema import MAX_TENSOR_TYPE, SCHEMA, TENSOR_TYPE_BYTES, UNIONS, WIDTH

__all__ = ["FlatbufferError", "MAX_ELEMENTS", "MAX_TABLES", "verify_model"]

MAX_TABLES = 1 << 18
"""Most tables one file may have: ten times the largest fixture's 24,403 (the C++ ``Verifier``'s default is
10**6; lower here because the batches are held in memory at once, ~0.5 KB per table at worst)."""
MAX_ELEMENTS = 1 << 24
"""Most elements of one index or shape field over all tables of a file (operator inputs, shapes ...)."""


class FlatbufferError(ValueError):
    """The bytes are not a well-formed TFLite model (the message names the field and the defect)."""


_DTYPES = {"u8": "u1", "i8": "i1", "bool": "u1", "u16": "<u2", "i32": "<i4", "u32": "<u4", "f32": "<u4",
           "i64": "<i8", "u64": "<u8"}


_SHIFT = {code: int(np.log2(np.dtype(code).itemsize)) for code in set(_DTYPES.values())}


class _Batch:
    """All tables of one type reached through one field: positions, field values, and their parents.

    ``parent``/``owner`` (index into the parent batch) and ``item`` (index in the parent's vector, or
    None) name an element for an error message only."""

    def __init__(self, kind: str, pos: np.ndarray, name: str, parent: _Batch | None, owner: np.ndarray,
                 item: np.ndarray | None) -> None:
        self.kind, self.pos, self.name, self.parent, self.owner, self.item = kind, pos, name, parent, owner, item
        self.values: dict[str, np.ndarray] = {}  # scalar fields (0 when absent)
        self.vectors: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # (start of elements, count); count 0 if absent
        self.children: dict[str, list[_Batch]] = {}
        self.present: dict[str, np.ndarray] = {}

    def path(self, i: int) -> str:
        parts, batch = [], self
        while batch is not None:
            parts.append(batch.name if batch.item is None else f"{batch.name}[{int(batch.item[i])}]")
            i = int(batch.owner[i]) if batch.parent is not None else 0
            batch = batch.parent
        return ".".join(reversed(parts))


class _Subset:
    """Rows of a batch, named like the batch's own elements (for the messages of checks on those rows)."""

    def __init__(self, batch: _Batch, rows: np.ndarray) -> None:
        self.batch, self.rows = batch, rows

    def path(self, i: int) -> str:
        return self.batch.path(int(self.rows[i]))


class _Verifier:
    """One verification of one buffer, type by type over numpy arrays (the cost grows with the number of
    (table type, field) pairs, not with the number of tables)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)
        self.tables = 0
        self.views = {code: np.frombuffer(data, code, count=self.size // np.dtype(code).itemsize)
                      for code in set(_DTYPES.values())}
        self.u8 = self.views["u1"]

    def read(self, code: str, at: np.ndarray) -> np.ndarray:
        """Values of type ``code`` at the (aligned, checked) byte positions ``at``."""
        return self.views[code][at >> _SHIFT[code]].astype(np.int64)

    def fail(self, batch: _Batch | _Subset | None, bad: np.ndarray, message: Callable[[int], str]) -> None:
        """Raises for the first True of ``bad`` (``message(i)``: the defect of element i), if any."""
        if bad.any():
            i = int(np.argmax(bad))
            where = batch.path(i) + ": " if batch is not None else ""
            raise FlatbufferError(where + message(i))

    def targets(self, batch: _Batch | _Subset, at: np.ndarray, what: str) -> np.ndarray:
        """Where the offset fields at ``at`` point (4-aligned, non-zero, forward, inside)."""
        self.fail(batch, ((at & 3) != 0) | (at + 4 > self.size),
                  lambda i: f"{what}: offset at byte {at[i]} is misaligned or outside the {self.size}-byte file")
        rel = self.read("<u4", at)
        target = at + rel
        self.fail(batch, (rel == 0) | (rel >= 2**31) | (target + 4 > self.size),
                  lambda i: f"{what}: points to byte {target[i]}, outside the {self.size}-byte file")
        return target

    def vectors(self, batch: _Batch | _Subset, start: np.ndarray, width: int, what: str) -> tuple[np.ndarray, np.ndarray]:
        self.fail(batch, (start & 3) != 0, lambda i: f"{what}: vector at byte {start[i]} is not 4-byte aligned")
        count = self.read("<u4", start)
        self.fail(batch, count * width > self.size - start - 4,
                  lambda i: f"{what}: vector of {count[i]} elements x {width} bytes runs past the end of the file")
        return start + 4, count

    def tables_batch(self, batch: _Batch) -> None:
        """Verifies the tables of ``batch`` (structure, module docstring) and queues their sub-tables."""
        kind, pos, size = batch.kind, batch.pos, self.size
        self.tables += len(pos)
        if self.tables > MAX_TABLES:
            raise FlatbufferError(f"{batch.path(0)}: more than {MAX_TABLES} tables")
        self.fail(batch, ((pos & 3) != 0) | (pos + 4 > size),
                  lambda i: f"{kind} table at byte {pos[i]} is misaligned or outside the {size}-byte file")
        vtable = pos - self.read("<i4", pos)
        self.fail(batch, ((vtable & 1) != 0) | (vtable < 0) | (vtable + 4 > size),
                  lambda i: f"{kind} vtable at byte {vtable[i]} is misaligned or outside the {size}-byte file")
        vt_size, inline = self.read("<u2", vtable), self.read("<u2", vtable + 2)
        self.fail(batch, (vt_size < 4) | ((vt_size & 1) != 0) | (vtable + vt_size > size) | (inline < 4)
                  | (pos + inline > size),
                  lambda i: f"{kind} vtable ({vt_size[i]} bytes) or table ({inline[i]} bytes) is malformed or "
                            "outside the file")
        slots = (vt_size - 4) >> 1
        # every field of every distinct vtable, known or not, lies inside the table's inline part
        unique, first = np.unique(vtable, return_index=True)
        counts = slots[first]
        if counts.sum():
            slot_at = np.repeat(unique + 4, counts) + 2 * _ranges(counts)
            off = self.read("<u2", slot_at)
            limit = np.repeat(inline[first], counts)
            self.fail(None, off >= limit, lambda i: f"{batch.path(0).rsplit('[', 1)[0]}: a {kind} vtable has a "
                                                    f"field at offset {off[i]} outside its {limit[i]}-byte table")
        fields = SCHEMA[kind]
        offsets = {}
        zeros = np.zeros(len(pos), np.int64)
        if fields:  # every known field's offset at once: [table, field id], 0 where absent
            fid = np.arange(max(fields) + 1)
            valid = slots[:, None] > fid
            matrix = np.where(valid, self.views["<u2"][np.where(valid, (vtable[:, None] + 4 + 2 * fid) >> 1, 0)], 0)
            matrix = matrix.astype(np.int64)
        for fid, (name, ftype, arg) in fields.items():
            off = matrix[:, fid]
            present = off > 0
            if not present.any():
                offsets[name] = (present, zeros)
                batch.present[name] = present
                if ftype in WIDTH:
                    batch.values[name] = zeros
                continue
            width = WIDTH.get(ftype, 4)
            at = pos + off
            self.fail(batch, present & ((off + width > inline) | ((at & (width - 1)) != 0)),
                      lambda i: f"{name}: field at offset {off[i]} ({width} bytes) is misaligned or outside the "
                                f"{inline[i]}-byte {kind} table")
            offsets[name] = (present, at)
            batch.present[name] = present
            if ftype in WIDTH:  # gathered at every row (absent ones read byte 0), kept where present
                batch.values[name] = np.where(present, self.read(_DTYPES[ftype], np.where(present, at, 0)), 0)
        for fid, (name, ftype, arg) in fields.items():
            present, at = offsets[name]
            if ftype in WIDTH or not present.any():
                if ftype in ("vector", "string"):
                    batch.vectors[name] = (np.zeros(len(pos), np.int64), np.zeros(len(pos), np.int64))
                continue
            rows = np.flatnonzero(present)
            sub = _Subset(batch, rows)  # names the rows in messages
            target = self.targets(sub, at[rows], name)
            if ftype == "string":
                start, count = self.vectors(sub, target, 1, name)
                end = start + count
                self.fail(sub, end >= size, lambda i: f"{name}: string runs past the end of the file")
                self.fail(sub, self.u8[end] != 0, lambda i: f"{name}: string is not NUL-terminated")
                batch.vectors[name] = (_scatter(len(pos), rows, start), _scatter(len(pos), rows, count))
            elif ftype == "vector":
                start, count = self.vectors(sub, target, WIDTH[arg], name)
                batch.vectors[name] = (_scatter(len(pos), rows, start), _scatter(len(pos), rows, count))
            elif ftype == "table":
                batch.children[name] = [_Batch(arg, target, name, batch, rows, None)]
            elif ftype == "tables":
                start, count = self.vectors(sub, target, 4, name)
                if self.tables + int(count.sum()) > MAX_TABLES:  # shared vectors could multiply the work
                    raise FlatbufferError(f"{batch.path(0)}: {name}: more than {MAX_TABLES} tables")
                owner = np.repeat(rows, count)
                item = _ranges(count)
                element = np.repeat(start, count) + 4 * item
                child = _Batch(arg, np.zeros(0, np.int64), name, batch, owner, item)
                child.pos = self.targets(child, element, "element")
                batch.children[name] = [child]
                batch.vectors[name] = (_scatter(len(pos), rows, start), _scatter(len(pos), rows, count))
            else:  # union
                type_name = fields[arg[0]][0]
                utype = batch.values[type_name][rows]
                largest, members = UNIONS[arg[1]]
                self.fail(sub, (utype < 1) | (utype > largest),
                          lambda i: f"{name}: {arg[1]} type {utype[i]} is not a member (1..{largest})")
                groups: dict[str, list[np.ndarray]] = {}
                for t in np.unique(utype):
                    groups.setdefault(members.get(int(t), ""), []).append(utype == t)
                batch.children[name] = [_Batch(member, target[np.any(masks, axis=0)], name, batch,
                                               rows[np.any(masks, axis=0)], None) for member, masks in groups.items()]
        for fid, (name, ftype, arg) in fields.items():  # union types in range even without a value
            if ftype == "union":
                utype = batch.values[fields[arg[0]][0]]
                self.fail(batch, utype > UNIONS[arg[1]][0],
                          lambda i: f"{name}: {arg[1]} type {utype[i]} is not a member (0..{UNIONS[arg[1]][0]})")

    def walk(self, root: _Batch) -> None:
        """Verifies ``root`` and every table below it, breadth first, one batch per (type, field)."""
        queue = [root]
        while queue:
            batch = queue.pop()
            if len(batch.pos):
                self.tables_batch(batch)
                for children in batch.children.values():
                    queue.extend(children)

    def gather(self, batch: _Batch, name: str, code: str = "<i4") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(values, owner row, index within the vector) of a scalar-vector field over the whole batch."""
        start, count = batch.vectors.get(name, (np.zeros(len(batch.pos), np.int64),) * 2)
        if int(count.sum()) > MAX_ELEMENTS:  # shared vectors could multiply the work
            raise FlatbufferError(f"{batch.path(0)}: {name}: more than {MAX_ELEMENTS} elements in all")
        item = _ranges(count)
        at = np.repeat(start, count) + np.dtype(code).itemsize * item
        return self.read(code, at), np.repeat(np.arange(len(count)), count), item


def _ranges(counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(c) for c in counts])``, vectorised."""
    counts = np.asarray(counts, np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(counts)
    return np.arange(total, dtype=np.int64) - np.repeat(ends - counts, counts)


def _scatter(n: int, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.zeros(n, np.int64)
    out[rows] = values
    return out


def _child(batch: _Batch, name: str) -> _Batch:
    children = batch.children.get(name)
    if children:
        return children[0]
    empty = np.zeros(0, np.int64)
    return _Batch(SCHEMA[batch.kind][next(f for f, s in SCHEMA[batch.kind].items() if s[0] == name)][2], empty, name,
                  batch, empty, empty)


def _per_owner(child: _Batch, owners: int) -> np.ndarray:
    """How many elements of ``child`` each row of its parent owns."""
    return np.bincount(child.owner, minlength=owners).astype(np.int64)


def _check_semantics(v: _Verifier, model: _Batch) -> None:
    """Indices in range and constant buffers of the right size (module docstring)."""
    buffers, subgraphs = _child(model, "buffers"), _child(model, "subgraphs")
    n_buffers, n_opcodes = len(buffers.pos), len(_child(model, "operator_codes").pos)
    if not len(subgraphs.pos):
        raise FlatbufferError("Model has no subgraphs")
    offset, size = buffers.values["offset"], buffers.values["size"]
    v.fail(buffers, (offset > 1) & (offset + size > v.size),
           lambda i: f"data at bytes {offset[i]}..{offset[i] + size[i]} lies outside the {v.size}-byte file")
    values, _, item = v.gather(model, "metadata_buffer")
    v.fail(None, (values < 0) | (values >= n_buffers),
           lambda i: f"Model.metadata_buffer[{item[i]}] = {values[i]} is not a buffer index (0..{n_buffers - 1})")
    metadata = _child(model, "metadata")
    index = metadata.values.get("buffer", np.zeros(0, np.int64))
    v.fail(metadata, index >= n_buffers, lambda i: f"buffer = {index[i]} is not a buffer index (0..{n_buffers - 1})")

    tensors, operators = _child(subgraphs, "tensors"), _child(subgraphs, "operators")
    n_tensors = _per_owner(tensors, len(subgraphs.pos))
    for name in ("inputs", "outputs"):
        values, row, item = v.gather(subgraphs, name)
        limit = n_tensors[row]
        v.fail(None, (values < 0) | (values >= limit),
               lambda i: f"{subgraphs.path(int(row[i]))}.{name}[{item[i]}] = {values[i]} is not a tensor index "
                         f"(0..{limit[i] - 1})")
    if len(operators.pos):
        code = operators.values["opcode_index"]
        v.fail(operators, code >= n_opcodes,
               lambda i: f"opcode_index = {code[i]} is not an operator code index (0..{n_opcodes - 1})")
        for name, low in (("inputs", -1), ("outputs", 0), ("intermediates", 0)):
            values, row, item = v.gather(operators, name)
            limit = n_tensors[operators.owner[row]]
            v.fail(None, (values < low) | (values >= limit),
                   lambda i: f"{operators.path(int(row[i]))}.{name}[{item[i]}] = {values[i]} is not a tensor index "
                             f"({low}..{limit[i] - 1})")
        start, length = operators.values["large_custom_options_offset"], operators.values["large_custom_options_size"]
        v.fail(operators, (start > 0) & (start + length > v.size),
               lambda i: f"large custom options at bytes {start[i]}..{start[i] + length[i]} lie outside the file")
    if len(tensors.pos):
        _check_tensors(v, tensors, buffers)
    signatures = _child(model, "signature_defs")
    if len(signatures.pos):
        graph = signatures.values["subgraph_index"]
        v.fail(signatures, graph >= len(subgraphs.pos), lambda i: f"subgraph_index = {graph[i]} is not a subgraph "
                                                                  f"index (0..{len(subgraphs.pos) - 1})")
        for name in ("inputs", "outputs"):
            maps = _child(signatures, name)
            index = maps.values.get("tensor_index", np.zeros(0, np.int64))
            limit = n_tensors[graph[maps.owner]] if len(maps.pos) else index
            v.fail(maps, index >= limit,
                   lambda i: f"tensor_index = {index[i]} is not a tensor index of subgraph "
                             f"{graph[maps.owner[i]]} (0..{limit[i] - 1})")


def _check_tensors(v: _Verifier, tensors: _Batch, buffers: _Batch) -> None:
    dtype, index = tensors.values["type"], tensors.values["buffer"]
    v.fail(tensors, (dtype < 0) | (dtype > MAX_TENSOR_TYPE),
           lambda i: f"type = {dtype[i]} is not a TensorType (0..{MAX_TENSOR_TYPE})")
    n_buffers = len(buffers.pos)
    v.fail(tensors, index >= n_buffers, lambda i: f"buffer = {index[i]} is not a buffer index (0..{n_buffers - 1})")
    if not n_buffers:
        return
    data_bytes = buffers.vectors["data"][1]
    external = np.where(buffers.values["offset"] > 1, buffers.values["size"], 0)
    stored = np.maximum(data_bytes, external)[index]
    element = np.array([TENSOR_TYPE_BYTES.get(int(t), 0.0) for t in range(MAX_TENSOR_TYPE + 1)])[dtype]
    constant = (stored > 0) & (element > 0) & ~tensors.present["sparsity"]
    dims, row, _ = v.gather(tensors, "shape")
    negative = np.bincount(row[dims < 0], minlength=len(tensors.pos)) > 0
    v.fail(tensors, constant & negative,
           lambda i: f"constant tensor of shape {_shape(v, tensors, i)} has a negative dimension")
    count = tensors.vectors["shape"][1]
    elements = np.ones(len(tensors.pos))  # prod(shape) per tensor; float64 is exact below 2**53, files are far smaller
    if len(dims):
        starts = np.cumsum(count) - count
        elements[count > 0] = np.multiply.reduceat(np.maximum(dims, 0).astype(np.float64), starts[count > 0])
    expected = np.ceil(elements * element)
    v.fail(tensors, constant & (stored != expected),
           lambda i: f"its buffer {index[i]} holds {stored[i]} bytes; shape {_shape(v, tensors, i)} of type "
                     f"{dtype[i]} needs {expected[i]:.0f}")


def _shape(v: _Verifier, tensors: _Batch, i: int) -> list[int]:
    start, count = tensors.vectors["shape"][0][i], tensors.vectors["shape"][1][i]
    return [int(d) for d in np.frombuffer(v.data, "<i4", count=int(count), offset=int(start))]


def verify_model(data: bytes) -> None:
    """Verifies the TFLite flatbuffer ``data`` (module docstring); returns None if it is well formed.

    Raises:
      FlatbufferError: one line naming the first defect, e.g. ``Model.subgraphs[0].operators[3].inputs[1]
        = 912 is not a tensor index (-1..240)``.
    """
    if len(data) < 8:
        raise FlatbufferError(f"{len(data)} bytes is too short for a flatbuffer")
    v = _Verifier(data)
    root = int(np.frombuffer(data, "<u4", count=1)[0])
    if root % 4 or root < 4 or root + 4 > len(data):
        raise FlatbufferError(f"root table offset {root} is misaligned or outside the {len(data)}-byte file")
    model = _Batch("Model", np.array([root], np.int64), "Model", None, np.zeros(1, np.int64), None)
    v.walk(model)
    _check_semantics(v, model)
