"""The README's Python example runs as written, in both environments (no TensorFlow in the Pi env): it opens a
model, adapts it to an image folder, saves a checkpoint, opens the model again, restores the checkpoint and
predicts a new image. The tiny fixture model stands in for the default export (same API, a second instead of
a minute); the images are the folder and file the example names, written here from seeded noise."""

from __future__ import annotations

import ast
import pathlib
import re
import shutil

import numpy as np
from PIL import Image

from tflite_train.runtime import load_checkpoint

from tests.runtime.runtime_fixtures import fixture_model

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
CLASSES = ("cat", "dog", "owl")


def readme_python_example() -> str:
    """The README's one ``python`` code block."""
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)
    assert len(blocks) == 1, f"expected one Python example in the README, found {len(blocks)}"
    return blocks[0]


def string_arguments(code: str, function: str) -> list[str]:
    """The string literals among the arguments of every call of ``function`` in ``code`` (lists included)."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == function:
            for arg in node.args:
                found += [c.value for c in ast.walk(arg) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return found


def test_the_readme_python_example_runs_as_written(tmp_path, monkeypatch, capsys):
    code = readme_python_example()
    [model_file] = set(string_arguments(code, "TrainableModel"))
    [folder] = string_arguments(code, "load_image_folder")
    [checkpoint] = set(string_arguments(code, "save_checkpoint"))
    [new_image] = string_arguments(code, "load_images")
    shutil.copy(fixture_model("tiny_adam_33"), tmp_path / model_file)
    rng = np.random.default_rng(0)
    for k, name in enumerate(CLASSES):
        (tmp_path / folder / name).mkdir(parents=True)
        for i in range(3):
            pixels = np.clip(rng.normal(60 + 70 * k, 30, (40, 40, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(tmp_path / folder / name / f"{i}.png")
    (tmp_path / new_image).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((50, 30, 3), 200, np.uint8)).save(tmp_path / new_image)

    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})  # noqa: S102 - the README's own code

    printed = capsys.readouterr().out.strip().splitlines()
    assert load_checkpoint(tmp_path / checkpoint).class_names == CLASSES
    assert len(printed) == 2, printed
    assert ast.literal_eval(printed[-1])[0] in CLASSES
