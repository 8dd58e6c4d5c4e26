"""The operators of a ``.tflite`` file's subgraphs, read without TensorFlow: what the runtime edits in place.

Read with ``metadata``'s bounds-checked flatbuffer reader (schema fields: ``tflite_schema``): per subgraph
the position of its ``operators`` vector and each operator's builtin name, inputs, outputs, the subgraphs
it runs (``IF`` then/else, ``WHILE`` cond/body, ``CALL_ONCE`` init) and, for ``VAR_HANDLE``, the
variable's name; per tensor its buffer; per buffer where its bytes lie. An operator that runs subgraphs
any other way (``CALL``, the StableHLO control flow of ``builtin_options_2``) makes ``Graph.plain_control_flow``
False, and the editors then leave the file as it is.

Editing in place keeps the file valid: a vector's length can shrink (``Graph.keep_operators``: the kept
operators' offsets are moved to the front; a uoffset is relative to its own position and tables lie after
the vectors that point to them, so every moved offset stays positive), and a constant buffer's bytes can
be overwritten with values of the same type and shape.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable, Sequence

from tflite_train.runtime.model.builtin_ops import BUILTIN_OPS
from tflite_train.runtime.model.metadata import _buffer_span, _Reader, _root

__all__ = ["Graph", "Operator", "constant_outputs", "read_graph"]

IF_OPTIONS, WHILE_OPTIONS, CALL_OPTIONS, CALL_ONCE_OPTIONS, VAR_HANDLE_OPTIONS = 92, 93, 16, 103, 111
"""``BuiltinOptions`` union type values (schema.fbs)."""
SUBGRAPH_FIELDS = {IF_OPTIONS: (0, 1), WHILE_OPTIONS: (0, 1), CALL_ONCE_OPTIONS: (0,)}
"""Option table -> its fields holding subgraph indices (IfOptions then/else, WhileOptions cond/body,
CallOnceOptions init)."""


@dataclasses.dataclass(frozen=True)
class Operator:
    """One operator: its table's position in the file, builtin name, tensor inputs/outputs (-1 = none),
    the subgraphs it runs (in option order: IF then, else) and a ``VAR_HANDLE``'s variable name."""

    table: int
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    subgraphs: tuple[int, ...] = ()
    variable: str | None = None


class Graph:
    """A model file's subgraphs, operators, tensor buffers and signatures (module docstring)."""

    def __init__(self, data: bytes | bytearray) -> None:
        reader = _Reader(data)
        self._reader = reader
        root = _root(reader)
        codes = []
        for code in reader.table_vector(root, 1):
            pos = reader.field(code, 0)
            deprecated = reader.i8(pos) if pos is not None else 0
            pos = reader.field(code, 3)
            codes.append(max(deprecated, reader.i32(pos) if pos is not None else 0))
        self._codes = codes
        self._subgraphs = reader.table_vector(root, 2)
        self._buffers = reader.table_vector(root, 4)
        self.signatures: dict[str, int] = {reader.string(s, 2): reader.u32_field(s, 4)
                                           for s in reader.table_vector(root, 7)}
        """Signature key -> its subgraph index."""
        self.signature_outputs: dict[str, dict[str, int]] = {
            reader.string(s, 2): {reader.string(t, 0): reader.u32_field(t, 1) for t in reader.table_vector(s, 1)}
            for s in reader.table_vector(root, 7)}
        """Signature key -> {output name: tensor index in its subgraph}."""
        self.plain_control_flow = True
        self._tensor_tables: dict[int, list[int]] = {}
        self.operators: list[list[Operator]] = [self._operators(sg) for sg in self._subgraphs]
        """Per subgraph, its operators in execution order."""

    def _ints(self, table: int, field: int) -> tuple[int, ...]:
        start, n = self._reader.vector(table, field)
        return self._reader.i32s(start, n)

    def _operators(self, subgraph: int) -> list[Operator]:
        r = self._reader
        out = []
        for op in r.table_vector(subgraph, 3):
            index = r.u32_field(op, 0)
            code = self._codes[index] if index < len(self._codes) else -1
            pos = r.field(op, 3)
            options_type = r.u8(pos) if pos is not None else 0
            pos = r.field(op, 11)
            if options_type == CALL_OPTIONS or (pos is not None and r.u8(pos) != 0):
                self.plain_control_flow = False
            pos = r.field(op, 4)
            options = r.deref(pos) if pos is not None else None
            subgraphs: tuple[int, ...] = ()
            variable = None
            if options is not None and options_type in SUBGRAPH_FIELDS:
                subgraphs = tuple(r.i32(f) if (f := r.field(options, i)) is not None else 0
                                  for i in SUBGRAPH_FIELDS[options_type])
            elif options is not None and options_type == VAR_HANDLE_OPTIONS:
                variable = r.string(options, 1)
            out.append(Operator(op, BUILTIN_OPS.get(code, f"UNKNOWN_{code}"), self._ints(op, 1), self._ints(op, 2),
                                subgraphs, variable))
        return out

    def subgraph_io(self, subgraph: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(inputs, outputs): a subgraph's input and output tensor indices."""
        table = self._subgraphs[subgraph]
        return self._ints(table, 1), self._ints(table, 2)

    def tensor_table(self, subgraph: int, tensor: int) -> int:
        """The position of a tensor's table in the file."""
        if subgraph not in self._tensor_tables:
            self._tensor_tables[subgraph] = self._reader.table_vector(self._subgraphs[subgraph], 0)
        return self._tensor_tables[subgraph][tensor]

    def tensor_buffer(self, subgraph: int, tensor: int) -> int:
        """The buffer index of a tensor (0 = no data)."""
        return self._reader.u32_field(self.tensor_table(subgraph, tensor), 2)

    def tensor_shape(self, subgraph: int, tensor: int) -> tuple[int, ...]:
        """A tensor's ``shape``."""
        return self._ints(self.tensor_table(subgraph, tensor), 0)

    def empty_tensor(self, data: bytearray, subgraph: int, tensor: int) -> None:
        """Rewrites, in ``data``, a tensor's ``shape`` to the same rank with every dimension 0: the interpreter
        then gives it no memory (only for a tensor no operator reads or writes)."""
        start, n = self._reader.vector(self.tensor_table(subgraph, tensor), 0)
        struct.pack_into(f"<{n}i", data, start, *([0] * n))

    def tensor_type(self, subgraph: int, tensor: int) -> int:
        """A tensor's schema ``TensorType`` code (0 = float32)."""
        pos = self._reader.field(self.tensor_table(subgraph, tensor), 1)
        return self._reader.i8(pos) if pos is not None else 0

    def buffer_span(self, buffer: int) -> tuple[int, int]:
        """(start, length) of a buffer's bytes in the file ((0, 0): none)."""
        return _buffer_span(self._reader, self._buffers[buffer]) if 0 < buffer < len(self._buffers) else (0, 0)

    def reachable(self, entries: Iterable[int]) -> set[int]:
        """The subgraphs ``entries`` and every subgraph their operators run, transitively."""
        seen: set[int] = set()
        stack = list(entries)
        while stack:
            index = stack.pop()
            if index in seen or not 0 <= index < len(self.operators):
                continue
            seen.add(index)
            stack.extend(j for op in self.operators[index] for j in op.subgraphs)
        return seen

    def initialiser(self, signatures: Iterable[str]) -> int | None:
        """The subgraph that each of ``signatures`` runs before anything else, through a ``CALL_ONCE`` as its
        first operator (the file's variable initialiser, which an interpreter runs once, at the first call of
        any of them), or None when one of them starts otherwise or they name different ones."""
        found = set()
        for name in signatures:
            operators = self.operators[self.signatures[name]]
            if not operators or operators[0].name != "CALL_ONCE":
                return None
            found.add(operators[0].subgraphs)
        return found.pop()[0] if len(found) == 1 else None

    def keep_operators(self, data: bytearray, subgraph: int, kept: Sequence[int]) -> None:
        """Rewrites, in ``data``, the subgraph's operator list to the operators at positions ``kept``
        (ascending; module docstring); ``kept`` empty leaves the subgraph without operators."""
        r = self._reader
        pos = r.field(self._subgraphs[subgraph], 3)
        if pos is None:
            return
        vector = r.deref(pos)
        tables = [self.operators[subgraph][i].table for i in kept]
        if any(table <= vector + 4 + 4 * slot for slot, table in enumerate(tables)):
            raise ValueError(f"subgraph {subgraph}: an operator table lies before its vector slot; "
                             "not editable in place")
        struct.pack_into("<I", data, vector, len(tables))
        for slot, table in enumerate(tables):
            at = vector + 4 + 4 * slot
            struct.pack_into("<I", data, at, table - at)


def constant_outputs(data: bytes | bytearray) -> dict[str, set[str]]:
    """Per signature, the names of its outputs that are constants (a tensor with a buffer of data), read
    from the signature defs alone (no operator is read)."""
    reader = _Reader(data)
    root = _root(reader)
    subgraphs, buffers = reader.table_vector(root, 2), reader.table_vector(root, 4)
    out: dict[str, set[str]] = {}
    for signature, key, subgraph in reader.named_refs(root, 7, 2, 4, subgraphs, "signature"):
        tensors = reader.table_vector(subgraph, 0)
        outputs = reader.named_refs(signature, 1, 0, 1, tensors, f"signature {key!r} outputs")
        out[key] = {name for _, name, tensor in outputs
                    if 0 < (b := reader.u32_field(tensor, 2)) < len(buffers) and _buffer_span(reader, buffers[b])[1]}
    return out


def read_graph(data: bytes | bytearray) -> Graph:
    """The ``Graph`` of a model file's bytes (FlatbufferError for a truncated or foreign file)."""
    return Graph(data)
