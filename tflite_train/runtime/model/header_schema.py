"""A declared schema for the JSON headers the runtime reads, checked field by field before any value is used.

A header (a checkpoint's, its selection, a model's metadata) is untrusted input: a digest proves that
the bytes are intact, not that their writer was this project. Each header declares its schema with
the types below (``Object``, ``ListOf``, ``MapOf``, ``Int``, ``Float``, ``Str``, ``Bool``, ``Const``,
``Nullable``, ``JsonObject``); ``check_header(schema, value, name)`` walks the value and raises
``SchemaError`` at the first field that does not fit, naming the field by its path (e.g.
``selection.channels['b07_expand'][2]``) and what is wrong, in one line. Cross-field rules (sizes that
must agree with each other or with the model) are checked by the header's own module afterwards,
on values that are then known to be well typed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tflite_train.runtime.errors import UserError

__all__ = ["Bool", "Const", "Field", "Float", "Int", "JsonObject", "ListOf", "MapOf", "Nullable", "Object", "Schema",
           "SchemaError", "Str", "check_header", "describe", "field_path", "require", "sequence_text"]

MAX_SHOWN = 60
"""Longest excerpt of an offending value a message quotes."""


class SchemaError(UserError):
    """A header field whose value does not fit the declared schema.

    Attributes:
      field: The field's path, e.g. ``selection.channels['conv1']``.
      problem: What is wrong with it.
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field {field}: {problem}")
        self.field = field
        self.problem = problem


def describe(value: Any) -> str:
    """A short JSON-flavoured description of ``value`` for an error message ("a list", "null", "-3", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, str):
        shown = value if len(value) <= MAX_SHOWN else value[:MAX_SHOWN] + "..."
        return "a string " + repr(shown).encode("ascii", "backslashreplace").decode("ascii")
    if isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."
    return f"a {type(value).__name__}"


def field_path(parent: str, key: str | int) -> str:
    """The path of member ``key`` of ``parent``: ``a.b`` for a simple key, ``a['x y']`` otherwise, ``a[3]`` for an index."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if key.isidentifier() and parent:
        return f"{parent}.{key}"
    if key.isidentifier():
        return key
    shown = key if len(key) <= MAX_SHOWN else key[:MAX_SHOWN] + "..."
    return f"{parent}[{repr(shown).encode('ascii', 'backslashreplace').decode('ascii')}]"


class Schema:
    """A schema node: ``check(value, path)`` returns the value (Python-typed) or raises ``SchemaError``."""

    def check(self, value: Any, path: str) -> Any:  # pragma: no cover - every node overrides it
        raise NotImplementedError

    def expected(self) -> str:  # pragma: no cover
        raise NotImplementedError

    plural = "values"
    """The kind of value, plural, for "a list of <plural>"."""


@dataclasses.dataclass(frozen=True)
class Int(Schema):
    """A JSON integer (not a boolean, not a float) in ``low..high``."""

    plural = "integers"

    low: int
    high: int

    def check(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(path, f"must be {self.expected()}; got {describe(value)}")
        if not self.low <= value <= self.high:
            raise SchemaError(path, f"must be in {self.low}..{self.high}; got {describe(value)}")
        return value

    def expected(self) -> str:
        return "an integer"


@dataclasses.dataclass(frozen=True)
class Float(Schema):
    """A finite JSON number in ``[low, high]`` (``low_open``: ``(low, high]``)."""

    plural = "numbers"

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False

    def check(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(path, f"must be {self.expected()}; got {describe(value)}")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise SchemaError(path, f"must be finite; got {describe(value)}")
        if not (number > self.low if self.low_open else number >= self.low) or number > self.high:
            low = "(" if self.low_open else "["
            raise SchemaError(path, f"must be in {low}{self.low:g}, {self.high:g}]; got {describe(value)}")
        return number

    def expected(self) -> str:
        return "a number"


@dataclasses.dataclass(frozen=True)
class Str(Schema):
    """A JSON string of ``min_length..max_length`` characters, one of ``choices`` if given."""

    plural = "strings"

    max_length: int = 256
    min_length: int = 0
    choices: tuple[str, ...] = ()

    def check(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise SchemaError(path, f"must be {self.expected()}; got {describe(value)}")
        if self.choices and value not in self.choices:
            raise SchemaError(path, f"must be one of {', '.join(self.choices)}; got {describe(value)}")
        if not self.min_length <= len(value) <= self.max_length:
            raise SchemaError(path, f"must have {self.min_length}..{self.max_length} characters; got {len(value)}")
        return value

    def expected(self) -> str:
        return "a string"


@dataclasses.dataclass(frozen=True)
class Bool(Schema):
    """JSON ``true`` or ``false``."""

    plural = "booleans"

    def check(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise SchemaError(path, f"must be true or false; got {describe(value)}")
        return value

    def expected(self) -> str:
        return "true or false"


@dataclasses.dataclass(frozen=True)
class Const(Schema):
    """Exactly ``value`` (a format tag or version): same JSON type and value."""

    plural = "values"

    value: str | int

    def check(self, value: Any, path: str) -> Any:
        if type(value) is not type(self.value) or value != self.value:
            raise SchemaError(path, f"must be {self.value!r}; got {describe(value)}")
        return value

    def expected(self) -> str:
        return repr(self.value)


@dataclasses.dataclass(frozen=True)
class Nullable(Schema):
    """``null`` or a value of ``schema``."""

    plural = "values"

    schema: Schema

    def check(self, value: Any, path: str) -> Any:
        return None if value is None else self.schema.check(value, path)

    def expected(self) -> str:
        return f"null or {self.schema.expected()}"


@dataclasses.dataclass(frozen=True)
class ListOf(Schema):
    """A JSON array of ``min_length..max_length`` items of ``item``; ``increasing``: strictly increasing
    (sorted and unique), ``unique``: no item twice."""

    plural = "lists"

    item: Schema
    max_length: int
    min_length: int = 0
    unique: bool = False
    increasing: bool = False

    def check(self, value: Any, path: str) -> list:
        if not isinstance(value, list):
            raise SchemaError(path, f"must be {self.expected()}; got {describe(value)}")
        if not self.min_length <= len(value) <= self.max_length:
            raise SchemaError(path, f"must have {self.min_length}..{self.max_length} items; got {len(value)}")
        items = [self.item.check(v, field_path(path, i)) for i, v in enumerate(value)]
        for i in range(1, len(items)):
            if self.increasing and not items[i - 1] < items[i]:
                raise SchemaError(field_path(path, i), f"must be sorted and unique; {describe(items[i])} follows "
                                                       f"{describe(items[i - 1])}")
        if self.unique and len(set(items)) != len(items):
            repeated = next(v for i, v in enumerate(items) if v in items[:i])
            raise SchemaError(path, f"must not repeat an item; {describe(repeated)} appears twice")
        return items

    def expected(self) -> str:
        return f"a list of {self.item.plural}"


@dataclasses.dataclass(frozen=True)
class MapOf(Schema):
    """A JSON object of at most ``max_length`` members, each key of ``key`` and value of ``value``."""

    plural = "objects"

    key: Str
    value: Schema
    max_length: int

    def check(self, value: Any, path: str) -> dict:
        if not isinstance(value, Mapping):
            raise SchemaError(path, f"must be {self.expected()}; got {describe(value)}")
        if len(value) > self.max_length:
            raise SchemaError(path, f"must have at most {self.max_length} members; got {len(value)}")
        out = {}
        for key, item in value.items():
            self.key.check(key, f"{path} key")
            out[key] = self.value.check(item, field_path(path, key))
        return out

    def expected(self) -> str:
        return f"an object of name -> {self.value.expected()}"


@dataclasses.dataclass(frozen=True)
class Field:
    """One member of an ``Object``: its schema and whether it must be present."""

    schema: Schema
    required: bool = True


@dataclasses.dataclass(frozen=True)
class Object(Schema):
    """A JSON object with the declared ``fields``; ``extra``: other members are allowed (and not checked)."""

    plural = "objects"

    fields: Mapping[str, Field]
    extra: bool = False
    validator: Callable[[dict, str], None] | None = None
    """Cross-field rule, called with the checked object and its path (raises ``SchemaError``)."""

    def check(self, value: Any, path: str) -> dict:
        if not isinstance(value, Mapping):
            raise SchemaError(path or "header", f"must be {self.expected()}; got {describe(value)}")
        missing = [k for k, f in self.fields.items() if f.required and k not in value]
        if missing:
            raise SchemaError(field_path(path, missing[0]), "is missing")
        unknown = sorted(str(k) for k in value if k not in self.fields)
        if unknown and not self.extra:
            raise SchemaError(field_path(path, unknown[0]), "is not a known field")
        out = dict(value) if self.extra else {}
        for key, spec in self.fields.items():
            if key in value:
                out[key] = spec.schema.check(value[key], field_path(path, key))
        if self.validator is not None:
            self.validator(out, path)
        return out

    def expected(self) -> str:
        return "an object"


@dataclasses.dataclass(frozen=True)
class JsonObject(Schema):
    """Any JSON object (informative documents such as a run's config): only its type is checked."""

    plural = "objects"

    def check(self, value: Any, path: str) -> dict:
        if not isinstance(value, Mapping):
            raise SchemaError(path, f"must be an object; got {describe(value)}")
        return dict(value)

    def expected(self) -> str:
        return "an object"


def check_header(schema: Schema, value: Any, name: str = "") -> Any:
    """Checks ``value`` (parsed JSON) against ``schema`` field by field; returns the checked value.

    Args:
      schema: The declared schema.
      value: The parsed JSON.
      name: Path prefix of the fields in messages (e.g. ``"selection"``), or "" for the top level.

    Raises:
      SchemaError: the first field that does not fit, named by its path.
    """
    return schema.check(value, name)


def require(condition: bool, field: str, problem: str) -> None:
    """Raises ``SchemaError(field, problem)`` unless ``condition`` (for cross-field validators)."""
    if not condition:
        raise SchemaError(field, problem)


def sequence_text(values: Sequence[Any], limit: int = 5) -> str:
    """At most ``limit`` values, comma-separated, "..." after (for messages)."""
    shown = ", ".join(str(v) for v in list(values)[:limit])
    return shown + (", ..." if len(values) > limit else "")
