"""The on-device half imports what a Pi needs and nothing of the training side.

``adapt``, ``predict`` and ``bake`` (the CLI's device commands and the library's ``tflite_train.runtime``)
must not pull in the data set builders of ``tflite_train.data`` (npm and TFDS readers, SVG rasterisers, the
cache), the meta-training of ``tflite_train.meta``, the exporter or TensorFlow: the pseudo-query
augmentation lives in ``tflite_train.runtime.adaptation.augmentation``. Checked in a fresh interpreter, so that no
other test's imports count.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.pi

TRAINING_SIDE = ("tflite_train.data", "tflite_train.meta", "tflite_train.models", "converters",
                 "tflite_train.converters", "tensorflow", "keras")


def _imported_after(statement: str) -> list[str]:
    code = (f"import json, sys\n{statement}\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {{'tflite_train', 'converters', "
            f"'tensorflow', 'keras'}})))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("statement", [
    "import tflite_train.runtime",
    "from tflite_train.runtime import adapt, AdaptConfig, AugmentConfig, augment",
    "import tflite_train.runtime.adapt_job, tflite_train.runtime.adaptation.trainer",
    "import tflite_train.runtime.baked.baked_model, tflite_train.runtime.baked.bake_job",
    "from tflite_train.cli import device_commands",
])
def test_device_code_imports_nothing_of_the_training_side(statement):
    modules = _imported_after(statement)
    assert "tflite_train.runtime" in modules
    leaked = [m for m in modules if m.startswith(TRAINING_SIDE)]
    assert not leaked, f"{statement!r} imports {leaked}"
