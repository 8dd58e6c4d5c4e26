"""The golden file that pins the Java ``ImagePreprocessor`` to ``model_input.to_model_input``.

The committed PNGs in ``android_demo/core/src/test/resources/image/`` (made once by
``make_parity_images`` from a Tux Paint stamp: RGBA with real transparency, its RGB, palette and
grey versions, 45 x 32 pixels) are decoded by Pillow (``images.decode_image``) and preprocessed to
several model inputs (square and non-square crops, down- and up-sampling, 1 and 3 channels, two
value ranges); ``image_golden.json`` stores the float32 results. The Java test decodes the same
files with ``javax.imageio`` and must reproduce them (``ImagePreprocessorParityTest``).

    python -m tools.golden.image_vectors android_demo/core/src/test/resources/image
"""

from __future__ import annotations

import json
import pathlib
import sys

from tflite_train.runtime.images.images import decode_image
from tflite_train.runtime.images.model_input import to_model_input

GOLDEN_NAME = "image_golden.json"
STAMP = pathlib.Path("/usr/share/tuxpaint/stamps/animals/insects/cartoon/ladybug.png")  # Debian tuxpaint-stamps-default
CASES = (
    ("stamp_rgba.png", (8, 8, 3), (0.0, 1.0)),
    ("stamp_rgba.png", (6, 10, 3), (-1.0, 1.0)),
    ("stamp_rgba.png", (7, 5, 1), (0.0, 1.0)),
    ("stamp_rgba.png", (24, 30, 3), (0.0, 1.0)),
    ("stamp_rgb.png", (8, 8, 3), (0.0, 1.0)),
    ("stamp_rgb.png", (20, 20, 3), (0.0, 1.0)),
    ("stamp_palette.png", (8, 8, 3), (0.0, 1.0)),
    ("stamp_grey.png", (8, 8, 1), (0.0, 1.0)),
    ("stamp_grey.png", (12, 9, 3), (0.0, 1.0)),
)
"""(file, model input (h, w, c), input range)."""


def make_parity_images(folder: str | pathlib.Path, source: str | pathlib.Path = STAMP) -> list[pathlib.Path]:
    """Writes the four 45 x 32 test PNGs of ``CASES`` from an RGBA stamp (run once; the files are committed)."""
    from PIL import Image

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with Image.open(source) as image:
        rgba = image.convert("RGBA").resize((45, 32), Image.BILINEAR)
    variants = {"stamp_rgba.png": rgba, "stamp_rgb.png": rgba.convert("RGB"),
                "stamp_palette.png": rgba.convert("P", palette=Image.ADAPTIVE, colors=64),
                "stamp_grey.png": rgba.convert("L")}
    paths = []
    for name, image in variants.items():
        paths.append(folder / name)
        image.save(paths[-1])
    return paths


def golden_cases(folder: str | pathlib.Path) -> list[dict]:
    """The golden records: per case, the file, shape, range and the float32 values (H x W x C row-major),
    each written as the shortest decimal that reads back as the same float32."""
    folder = pathlib.Path(folder)
    out = []
    for name, shape, value_range in CASES:
        values = to_model_input(decode_image(folder / name), shape, value_range)
        out.append({"file": name, "shape": list(shape), "range": list(value_range),
                    "values": [float(str(v)) for v in values.reshape(-1)]})  # float32's shortest repr
    return out


def write_image_golden(folder: str | pathlib.Path) -> pathlib.Path:
    """Writes ``folder/image_golden.json`` from the PNGs in ``folder``."""
    path = pathlib.Path(folder) / GOLDEN_NAME
    cases = ",\n".join(json.dumps(case) for case in golden_cases(folder))  # one line per case
    path.write_text(f'{{"generator": "python -m tools.golden.image_vectors", "cases": [\n{cases}\n]}}\n')
    return path


if __name__ == "__main__":
    target = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "android_demo/core/src/test/resources/image")
    if not (target / CASES[0][0]).exists():
        make_parity_images(target)
    print(f"wrote {write_image_golden(target)}")
