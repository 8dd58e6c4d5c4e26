"""Nothing outside ``converters/ops/`` decides by an op's name: the registry's attributes and predicates do.

Op names (:func:`op_names`) are the IR kinds of the op registry (``converters.ops.registry.KINDS`` and its
structural kinds ``input`` / ``opaque``) and the Keras class names its rules read (``LAYERS``, ``OPERATIONS``:
``Flatten``, ``BatchNormalization``, ``Conv2D`` ...). The scan reads the Python sources of ``converters/``
(``converters/ops/`` excepted) and ``tflite_train/`` with :mod:`ast` and reports an op name that is

* compared: a string literal on either side of ``==``, ``!=``, ``in``, ``not in`` (also inside a tuple, list or
  set literal there: ``node.op in ("conv2d", "depthwise")``), or a ``case`` pattern;
* a table: a tuple, list or set literal whose strings are all op names, or a dict literal whose keys are
  (``{"global_pool": ...}``), as the name lookups of a dispatch are written.

Building a node of a kind (``Node(name, registry.OPAQUE, ...)``), a layer-table role ("depthwise" is also one)
and prose are not decisions and not reported. :data:`EXEMPT` lists the files whose op-name tables are about
something else than the exporter's op families, each with its reason.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib

from tflite_train.converters.ops import registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
OPS_DIR = ROOT / "converters" / "ops"
EXEMPT = {
    "tflite_train/models/lite0_meta.py": "the Keras variables meta-training updates in EfficientNet-Lite0's own "
                                         "layers (Keras training, not the exporter's graph)",
}


def op_names() -> frozenset[str]:
    """Every IR kind and every Keras class name of the op registry (module docstring)."""
    return frozenset({*registry.KINDS, *registry.STRUCTURAL_KINDS, *registry.LAYERS, *registry.OPERATIONS})


@dataclasses.dataclass(frozen=True)
class Spelling:
    path: str
    line: int
    name: str
    how: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name!r} ({self.how})"


def _strings(node: ast.AST) -> list[ast.Constant]:
    """The string literal ``node`` is, or the ones a tuple/list/set literal ``node`` holds."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _table(node: ast.AST, names: frozenset[str]) -> list[ast.Constant]:
    """The op names of a literal table (module docstring), or []."""
    entries = node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(
        node, (ast.Tuple, ast.List, ast.Set)) else []
    strings = [e for e in entries if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if entries and len(strings) == len(entries) and all(s.value in names for s in strings):
        return strings
    return []


def spellings(path: pathlib.Path, names: frozenset[str], root: pathlib.Path = ROOT) -> list[Spelling]:
    """Op names compared or tabled in one Python file (module docstring)."""
    rel = path.relative_to(root).as_posix()
    found: dict[tuple[int, int], Spelling] = {}

    def report(constant: ast.Constant, how: str) -> None:
        if constant.value in names:
            found.setdefault((constant.lineno, constant.col_offset), Spelling(rel, constant.lineno, constant.value, how))

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                for constant in _strings(side):
                    report(constant, "compared")
        elif isinstance(node, ast.MatchValue):
            for constant in _strings(node.value):
                report(constant, "case pattern")
        for constant in _table(node, names):
            report(constant, "table")
    return [found[k] for k in sorted(found)]


def _sources():
    for folder in ("converters", "tflite_train"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if OPS_DIR not in path.parents and path.relative_to(ROOT).as_posix() not in EXEMPT:
                yield path


def test_no_op_name_decides_outside_the_registry():
    names = op_names()
    found = [s for path in _sources() for s in spellings(path, names)]
    assert not found, ("op names compared or tabled outside converters/ops/ (ask the op registry: its kinds' "
                       "attributes and predicates):\n" + "\n".join(map(str, found)))


def test_exempt_files_exist_and_hold_what_they_are_exempt_for():
    names = op_names()
    for rel in EXEMPT:
        assert spellings(ROOT / rel, names), f"{rel} is exempt but spells no op name: drop it from EXEMPT"


def test_the_scan_finds_a_reintroduced_dispatch(tmp_path):
    names = op_names()
    source = tmp_path / "m.py"
    source.write_text(
        '"""Prose may say depthwise and Flatten."""\n'
        'a = node.op == "depthwise"\n'
        'b = n.keras_class in ("Flatten", "Other")\n'
        'RULES = {"global_pool": "global average pooling"}\n'
        'KINDS = ("dense", "affine")\n'
        'c = node.attrs.get("activation", "linear") != "linear"\n'
        'role = "depthwise"\n'
        'n = Node("x", "reshape", ("y",), (4,))\n'
        'match node.op:\n'
        '    case "identity":\n'
        '        pass\n'
        'd = "BatchNormalization" != cls\n', encoding="utf-8")
    found = [(s.line, s.name, s.how) for s in spellings(source, names, tmp_path)]
    assert found == [(2, "depthwise", "compared"), (3, "Flatten", "compared"), (4, "global_pool", "table"),
                     (5, "dense", "table"), (5, "affine", "table"), (10, "identity", "case pattern"),
                     (12, "BatchNormalization", "compared")]
