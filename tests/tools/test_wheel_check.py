"""The wheel holds the package ``tflite_train`` alone, and the package imports nothing of the repository.

``make test-wheel`` (``tools/wheel_check.py``) installs the wheel and runs it outside the checkout; these tests are
the fast part: the built wheel's file list, and the imports that would work in a checkout (its root is on the path
there) but not from the wheel.
"""

from __future__ import annotations

import ast
import os
import pathlib
import zipfile

from tools.wheel_check import REQUIRED, build_wheel, wheel_problems

ROOT = pathlib.Path(__file__).resolve().parents[2]
REPOSITORY_PACKAGES = ("converters", "bench", "tools")
"""Top-level folders of the repository that are not installed (``converters`` only as ``tflite_train.converters``)."""
CHECKOUT_IMPORTS = {ROOT / "tflite_train" / "cli" / "paper_commands.py": {"bench"}}
"""Product modules that may import a repository folder: the ``bench`` command, after checking that it is there."""


def _package_files() -> set[str]:
    """The checkout's package files as the wheel names them (through the ``tflite_train/converters`` link)."""
    out = set()
    for folder, dirs, files in os.walk(ROOT / "tflite_train", followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith((".py", ".json")):
                out.add((pathlib.Path(folder) / name).relative_to(ROOT).as_posix())
    return out


def _top_level_imports(path: pathlib.Path) -> set[str]:
    """Top-level names of every absolute import in ``path`` (at any depth of the module)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def test_the_wheel_holds_the_package_and_nothing_else(tmp_path):
    names = zipfile.ZipFile(build_wheel(tmp_path)).namelist()
    assert wheel_problems(names) == []
    shipped = {n for n in names if n.startswith("tflite_train/")}
    assert shipped == _package_files()  # every module of the checkout's package, through the converters link
    assert "tflite_train/converters/export.py" in shipped and len(shipped) > 150


def test_the_file_list_check_finds_what_must_not_ship():
    bad = ["bench/runner.py", "converters/export.py", "tools/fixtures.py", "tflite_train/converters/fixtures.py",
           "tflite_train/golden/java_vectors.py", "tflite_train/converters/parity_reference.py", "setup.py"]
    licence = "tflite_train-0.1.0.dist-info/LICENSE"
    problems = wheel_problems([*bad, *REQUIRED, licence])
    assert [p.split(":")[0] for p in problems] == bad
    assert wheel_problems(["tflite_train-0.1.0.dist-info/RECORD", *REQUIRED, licence]) == []
    assert wheel_problems([*REQUIRED[1:], licence]) == [f"{REQUIRED[0]}: missing"]
    assert wheel_problems(REQUIRED) == ["LICENSE: missing from the .dist-info folder"]


def test_the_package_imports_no_repository_folder():
    """``from converters ...``, ``bench`` or ``tools`` in the package run in a checkout and fail from the wheel."""
    found = {}
    for folder in ("tflite_train", "converters"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            bad = _top_level_imports(path) & set(REPOSITORY_PACKAGES) - CHECKOUT_IMPORTS.get(path, set())
            if bad:
                found[path.relative_to(ROOT).as_posix()] = sorted(bad)
    assert found == {}


def test_nothing_imports_the_exporter_by_its_folder_name():
    """A checkout can import ``converters`` from its root, a second copy of every exporter module beside
    ``tflite_train.converters`` (two registries, two ``ExportConfig`` classes): everything uses the package name."""
    found = []
    for folder in ("tflite_train", "converters", "bench", "tools", "tests", "android_demo"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "converters" in _top_level_imports(path):
                found.append(path.relative_to(ROOT).as_posix())
    assert found == []
