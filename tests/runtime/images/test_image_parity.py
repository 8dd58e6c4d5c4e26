"""Python side of the Python/Java image-preprocessing parity (the Java side: ImagePreprocessorParityTest).

The committed golden file must be what ``to_model_input`` makes of the committed PNGs today, so that
the Java test compares against the current Python algorithm (measured: max |Java - Python| = 0.0).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

from tools.golden.image_vectors import CASES, GOLDEN_NAME, golden_cases

FOLDER = pathlib.Path(__file__).resolve().parents[3] / "android_demo/core/src/test/resources/image"


def test_committed_golden_is_current():
    committed = json.loads((FOLDER / GOLDEN_NAME).read_text())["cases"]
    fresh = golden_cases(FOLDER)
    assert [(c["file"], tuple(c["shape"]), tuple(c["range"])) for c in committed] == list(CASES)
    for old, new in zip(committed, fresh):
        np.testing.assert_array_equal(np.float32(old["values"]), np.float32(new["values"]), err_msg=old["file"])


def test_golden_covers_alpha_palette_grey_and_crops():
    from PIL import Image

    modes = {name: Image.open(FOLDER / name).mode for name, _, _ in CASES}
    assert set(modes.values()) == {"RGBA", "RGB", "P", "L"}
    size = Image.open(FOLDER / "stamp_rgba.png").size
    aspects = {shape[1] / shape[0] for _, shape, _ in CASES}
    assert size == (45, 32) and len(aspects) >= 3 and {shape[2] for _, shape, _ in CASES} == {1, 3}
