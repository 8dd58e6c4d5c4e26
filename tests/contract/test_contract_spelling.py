"""Nothing outside the contract module spells a contract name; no document cites a missing file.

Contract names (:func:`contract_names`) are every string constant of ``tflite_train.contract``
(module attributes in upper case: signature names, tensor names, state suffixes, metadata entry
names, metadata field names including the nested ``F_*`` keys, checkpoint and selection header keys,
format tags), every tensor name of its ``SIGNATURES`` table and every component of a
``METADATA_FIELDS`` path. Not names: placeholders such as ``<state>``, and the keys of a ``layers``
entry other than ``candidate`` (``contract.LAYER_KEYS``: their single source is the
``tflite_train.sparse`` ``LayerSpec`` / ``LayerCost`` dataclasses, and ``kernel``, ``stride``,
``activation`` ... are also graph-IR attributes).

The scan covers the non-test sources: ``tflite_train/``, ``converters/``, ``bench/``, ``tools/`` (Python: string
literals read with :mod:`ast`, so comments and docstrings may mention a name in prose; f-string
pieces count; ``__all__`` entries are identifiers, not names) and ``android_demo/**/src/main``
(Java: string literals outside comments). Only ``tflite_train/contract/`` and the generated
``Contract.java`` may spell them. The rule:

* A **distinctive** name (a contract name not in :data:`GENERIC`, e.g. ``set_head``,
  ``class_capacity``, ``candidates``, ``channel_mask``, ``_kernel``, ``tflite_train_selftest``,
  ``payload_bytes``) must not occur as a literal anywhere.
* A **generic** name (:data:`GENERIC`: an ordinary word or common identifier that other schemas of
  the project use for their own keys, e.g. ``name``, ``shape``, ``mean``, ``step``, ``policy``,
  ``num_classes`` of the data cache, ``fisher`` as a selection criterion, ``infer`` as a benchmark
  workload, ``tflite-train`` as the program name) is a violation only where it is read as a key of
  model metadata or a header: Python ``x["name"]`` / ``x.get("name")`` on a chain rooted at a name
  containing ``meta`` or ``header`` (``model.metadata["input"]["range"]``); Java
  ``get/put/string/integer/number/...("name")`` in a file that handles the contract (mentions
  ``Contract.``, ``ModelMetadata``, ``Checkpoint`` or ``JsonFields``).

:data:`GENERIC` must stay a subset of the contract names (a test checks it), so it can only relax
the rule for words the contract really uses. Paths: every repository path cited in README.md,
docs/*.md, CONTRACT.md, bench/README.md, tools/diagnostics/README.md, weights/README.md,
android_demo/README.md (markdown links and inline-code paths that start with a committed top-level
name), and every ``docs/...`` / ``CONTRACT.md`` path cited in a source file, exists.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import re

from tflite_train import contract as C

ROOT = pathlib.Path(__file__).resolve().parents[2]
ALLOWED_DIR = ROOT / "tflite_train" / "contract"
"""The contract package: the only Python source that may spell a contract name."""
ALLOWED = {ROOT / C.JAVA_CONTRACT_PATH}
"""The generated Java class: the only Java source that may spell one."""

GENERIC = frozenset({
    # signature / tensor names that are also ordinary words of other schemas
    "infer", "fisher", "images", "labels", "logits", "loss", "accuracy", "ok", "step",
    # metadata keys that are ordinary words
    "format", "backbone", "input", "head", "optimizer", "state", "signatures", "selftest", "config",
    "height", "width", "dtype", "range", "mean", "std", "type", "scale", "name", "momentum",
    "epsilon", "candidate", "inputs", "outputs", "signature", "entry",
    # checkpoint and selection header keys that are ordinary words
    "arrays", "selection", "shape", "offset", "policy", "layers", "channels", "class_names", "report",
    # common identifiers of other schemas (data cache, configs), the project and package names
    "num_classes", "learning_rate", "format_version", "tflite-train", "tflite_train",
})
"""Contract names that are ordinary words; flagged only where read as metadata/header keys (module docstring)."""

_JAVA_KEY_CALLS = ("get", "put", "containsKey", "remove", "string", "integer", "number", "numbers", "array",
                   "bool", "object", "has", "require")
_PY_KEY_CALLS = ("get", "pop", "setdefault")


def contract_names() -> frozenset[str]:
    """Every name the contract defines (module docstring)."""
    names = {v for k, v in vars(C).items() if k.isupper() and isinstance(v, str)}
    for spec in C.SIGNATURES:
        names.add(spec.name)
        names.update(t.name for t in (*spec.inputs, *spec.outputs))
    for field in C.METADATA_FIELDS:
        names.update(field.path.split("."))
    names -= set(C.LAYER_KEYS) - {C.F_CANDIDATE, C.F_NAME}  # "name" also keys the optimizer and checkpoint arrays
    return frozenset(n for n in names if n and not n.startswith("<"))


def _sources(suffix: str, *dirs: str):
    for d in dirs:
        for path in sorted((ROOT / d).rglob(f"*{suffix}")):
            if path not in ALLOWED and ALLOWED_DIR not in path.parents and "/test/" not in path.as_posix() \
                    and ".venv" not in path.parts:
                yield path


def _python_sources():
    yield from _sources(".py", "tflite_train", "converters", "bench", "tools")


def _java_sources():
    for path in _sources(".java", "android_demo"):
        if "/src/main/" in path.as_posix():
            yield path


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for i, stmt in enumerate(body):
                # a string expression statement: the docstring, or an attribute docstring after an assignment
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
                        stmt.value.value, str) and (i == 0 or isinstance(body[i - 1], (ast.Assign, ast.AnnAssign))):
                    out.add(id(stmt.value))
    return out


_METADATA_ROOT = re.compile(r"meta|header", re.I)


def _root_name(node: ast.AST) -> str:
    """The identifier a subscript/call chain starts from, with the attribute read from it
    (``model.metadata["a"]["b"]`` -> ``model.metadata``)."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _PY_KEY_CALLS:
            node = node.func.value
        elif isinstance(node, ast.Attribute):
            return _root_name(node.value) + "." + node.attr
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return ""


def _python_keys(tree: ast.AST) -> set[int]:
    """ids of string constants read as a key (subscript or ``.get/.pop/.setdefault`` argument) from a
    chain rooted at a ``*meta*`` / ``*header*`` name (``model.metadata["input"]["range"]``)."""
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _METADATA_ROOT.search(_root_name(node.value)):
            keys.add(id(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _PY_KEY_CALLS \
                and node.args and _METADATA_ROOT.search(_root_name(node.func.value)):
            keys.add(id(node.args[0]))
    return keys


def _all_entries(tree: ast.AST) -> set[int]:
    """ids of the string constants listed in ``__all__`` (identifiers, not contract names)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            out.update(id(n) for n in ast.walk(node.value) if isinstance(n, ast.Constant))
    return out


@dataclasses.dataclass(frozen=True)
class Spelling:
    path: str
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name!r}"


def python_spellings(path: pathlib.Path, names: frozenset[str], root: pathlib.Path = ROOT) -> list[Spelling]:
    """Contract names spelled as string literals in one Python file (module docstring rule)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree) | _all_entries(tree)
    keys = _python_keys(tree)
    pieces = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    rel = path.relative_to(root).as_posix()
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in skip:
            continue
        if node.value in names and (node.value not in GENERIC or id(node) in keys):
            out.append((node.lineno, node.col_offset, Spelling(rel, node.lineno, node.value)))
        elif id(node) in pieces:
            for part in node.value.split("/"):  # an f-string path such as f"train_step/{i}/loss"
                if part in names and part not in GENERIC:
                    out.append((node.lineno, node.col_offset, Spelling(rel, node.lineno, part)))
    return [s for *_, s in sorted(out, key=lambda t: t[:2])]


_JAVA_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_JAVA_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def java_spellings(path: pathlib.Path, names: frozenset[str], root: pathlib.Path = ROOT) -> list[Spelling]:
    """Contract names spelled as string literals in one Java file (module docstring rule)."""
    text = path.read_text(encoding="utf-8")
    # blank comments but keep line numbers (strings inside comments are prose)
    code = _JAVA_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    contract_file = bool(re.search(r"\bContract\.|\bModelMetadata\b|\bCheckpoint\b|\bJsonFields\b", code))
    rel = path.relative_to(root).as_posix()
    out = []
    for m in _JAVA_STRING.finditer(code):
        value = m.group(1)
        if value not in names:
            continue
        before = code[:m.start()].rstrip()
        as_key = bool(re.search(r"\.(%s)\($" % "|".join(_JAVA_KEY_CALLS), before))
        if value not in GENERIC or (contract_file and as_key):
            out.append(Spelling(rel, code.count("\n", 0, m.start()) + 1, value))
    return out


def all_spellings() -> list[Spelling]:
    names = contract_names()
    out = [s for p in _python_sources() for s in python_spellings(p, names)]
    out += [s for p in _java_sources() for s in java_spellings(p, names)]
    return out


def test_generic_words_are_contract_names():
    assert GENERIC <= contract_names(), sorted(GENERIC - contract_names())


def test_contract_names_cover_the_schema():
    names = contract_names()
    assert set(C.SIGNATURE_NAMES) <= names
    assert {C.F_CLASS_CAPACITY, C.F_CANDIDATES, C.F_MODEL_ID, C.METADATA_NAME, C.SELFTEST_NAME, C.DUMMY} <= names


def test_no_contract_name_is_spelled_outside_the_contract_module():
    found = all_spellings()
    assert not found, ("contract names spelled outside tflite_train/contract/ and Contract.java (use the constants):\n"
                       + "\n".join(map(str, found)))


def test_the_scan_finds_a_reintroduced_spelling(tmp_path):
    names = contract_names()
    py = tmp_path / "m.py"
    py.write_text(
        '"""Mentions set_head and candidates in prose."""\n__all__ = ["prototypes"]\n'
        'x = row["class_capacity"]  # class_capacity in a comment\ny = row["name"]\nz = {"mean": 1}\n'
        'w = f"{a}_kernel"\nv = "a name"\nr = model.metadata["input"].get("range")\ng = ("infer", "train_step")\n'
        'h = header["arrays"]\nk = layer["out_channels"]\nf = f"train_step/{i}/loss"\n', encoding="utf-8")
    found = python_spellings(py, names, tmp_path)
    assert [(s.line, s.name) for s in found] == [(3, "class_capacity"), (6, "_kernel"), (8, "input"), (8, "range"),
                                                 (9, "train_step"), (10, "arrays"), (12, "train_step")]
    java = tmp_path / "M.java"
    java.write_text('class M { // "set_head"\n  String a = Contract.INFER;\n  Object b = meta.get("candidates");\n'
                    '  Object c = head.string("type");\n  String d = "type of thing";\n  /* "model_id" */\n}\n',
                    encoding="utf-8")
    found = java_spellings(java, names, tmp_path)
    assert [(s.line, s.name) for s in found] == [(3, "candidates"), (4, "type")]


DOCUMENTS = ("README.md", "CONTRACT.md", "bench/README.md", "tools/diagnostics/README.md", "weights/README.md",
             "android_demo/README.md")
_PATHISH = re.compile(r"^[\w.-]+(/[\w.-]+)*/?$")
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
_CODE = re.compile(r"`([^`\s]+)`")
_SOURCE_REF = re.compile(r"(?<![\w/.-])(docs/[\w./-]*[\w/]|CONTRACT\.md)")


def _tracked_roots() -> set[str]:
    """Top-level names a repository path can start with (what is committed, not build output)."""
    return {p.name for p in ROOT.iterdir() if not p.name.startswith(".") and p.name not in {"build", "runs"}}


def cited_paths(text: str, base: pathlib.Path, roots: set[str]) -> set[str]:
    """Repository paths a markdown text cites: link targets and inline-code tokens that start with a
    committed top-level name (relative to the document for links, to the root for code)."""
    out = set()
    for target in _LINK.findall(text):
        if "://" not in target and not target.startswith("mailto:"):
            out.add((base / target).resolve().relative_to(ROOT).as_posix() if (base / target).resolve().is_relative_to(
                ROOT) else target)
    for token in _CODE.findall(text):
        token = token.rstrip(".,:;")
        if _PATHISH.match(token) and "/" in token and token.split("/")[0] in roots:
            out.add(token.rstrip("/"))
        elif token in roots and token.endswith(".md"):
            out.add(token)
    return out


def _documents():
    yield from (ROOT / d for d in DOCUMENTS)
    yield from sorted((ROOT / "docs").glob("*.md"))


def test_documents_cite_only_existing_files():
    roots = _tracked_roots()
    missing = []
    for doc in _documents():
        for path in sorted(cited_paths(doc.read_text(encoding="utf-8"), doc.parent, roots)):
            if not (ROOT / path).exists():
                missing.append(f"{doc.relative_to(ROOT)} cites {path}")
    assert not missing, "\n".join(missing)


def test_sources_cite_only_existing_documents():
    missing = []
    for path in [*_python_sources(), *_sources(".java", "android_demo"), ROOT / "Makefile"]:
        for ref in set(_SOURCE_REF.findall(path.read_text(encoding="utf-8"))):
            if not (ROOT / ref).exists():
                missing.append(f"{path.relative_to(ROOT)} cites {ref}")
    assert not missing, "\n".join(missing)


def test_the_path_check_finds_a_missing_file(tmp_path):
    text = "See [the contract](CONTRACT.md), `tflite_train/contract/signatures.py`, `docs/NOPE.md`, `x = 1`, " \
           "[web](https://example.org/a.md) and [gone](docs/GONE.md)."
    cited = cited_paths(text, ROOT, _tracked_roots())
    assert cited == {"CONTRACT.md", "tflite_train/contract/signatures.py", "docs/NOPE.md", "docs/GONE.md"}
    assert [p for p in sorted(cited) if not (ROOT / p).exists()] == ["docs/GONE.md", "docs/NOPE.md"]
    assert _SOURCE_REF.findall("# see docs/BUILD.md and CONTRACT.md.") == ["docs/BUILD.md", "CONTRACT.md"]
