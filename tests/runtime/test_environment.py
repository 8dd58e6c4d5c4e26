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


@pytest.mark.parametrize("module", ["tflite_train.sparse", "tflite_train.runtime", "tflite_train.runtime.selftest", "tflite_train.sparse.cost_model", "tflite_train.architectures"])
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
