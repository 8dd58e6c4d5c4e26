"""The on-device half imports and runs without TensorFlow."""

import importlib
import importlib.util
import os

import pytest

IN_PI_ENV = os.environ.get("TFLITE_TRAIN_PI_ENV") == "1"


@pytest.mark.skipif(not IN_PI_ENV, reason="only meaningful in the Pi environment")
def test_pi_env_has_no_tensorflow_but_has_tflite_runtime():
    assert importlib.util.find_spec("tensorflow") is None
    assert importlib.util.find_spec("keras") is None
    import numpy
    import tflite_runtime.interpreter  # noqa: F401

    assert int(numpy.__version__.split(".")[0]) < 2


def test_pi_requirements_pin_what_the_pi_extra_installs():
    """requirements/pi.txt (the Pi venv) and setup.py's pi extras pin the same Pillow and tqdm."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[3]
    pins = dict(re.findall(r"^([a-z-]+)==([0-9.]+)", (root / "requirements/pi.txt").read_text(), re.M))
    setup = (root / "setup.py").read_text()
    for package in ("pillow", "tqdm"):
        assert setup.count(f'"{package}=={pins[package]}"') == 2, package  # the pi and pi-legacy extras
    if IN_PI_ENV:
        from importlib import metadata

        assert {p: metadata.version(p) for p in ("pillow", "tqdm")} == {p: pins[p] for p in ("pillow", "tqdm")}


@pytest.mark.parametrize("module", ["tflite_train.sparse", "tflite_train.runtime", "tflite_train.runtime.model.selftest", "tflite_train.sparse.cost_model", "tflite_train.architectures", "tflite_train.cli"])
def test_on_device_modules_import_without_tensorflow(module):
    import subprocess
    import sys

    code = (
        "import sys, importlib\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('tensorflow', 'keras'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"importlib.import_module({module!r})\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
