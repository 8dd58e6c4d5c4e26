"""``adapt`` on a folder of real JPEGs whose pixels are stored rotated, with an EXIF Orientation tag
(as phone cameras write them): also in the Pi env, where Pillow now comes with the ``pi`` extra.

The images are Fashion-MNIST test images (Debian ``dataset-fashion-mnist``), enlarged to 56 x 42
(not square, so a missed rotation changes the shape), rotated in storage, tagged so that a viewer
shows them upright, and saved as JPEG by Pillow.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from tests.runtime.runtime_fixtures import episode_indices, fixture_model, run_cli
from tflite_train.runtime.images.images import decode_image

ORIENTATION = 0x0112
# EXIF orientation -> the transpose that stores an upright image so that the tag restores it.
STORED = {3: Image.Transpose.ROTATE_180, 6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}


def _upright(image: np.ndarray) -> Image.Image:
    return Image.fromarray(image).convert("RGB").resize((42, 56), Image.BILINEAR)  # 42 wide, 56 high


def _save_rotated_jpeg(upright: Image.Image, orientation: int, path) -> None:
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    upright.transpose(STORED[orientation]).save(path, format="JPEG", quality=95, exif=exif)


@pytest.mark.parametrize("orientation", sorted(STORED))
def test_exif_rotation_is_undone(fashion, tmp_path, orientation):
    images, _ = fashion
    upright = _upright(images[0])
    _save_rotated_jpeg(upright, orientation, tmp_path / "r.jpg")
    upright.save(tmp_path / "u.jpg", format="JPEG", quality=95)
    stored = Image.open(tmp_path / "r.jpg")
    assert stored.getexif()[ORIENTATION] == orientation
    assert stored.size == ((56, 42) if orientation in (6, 8) else (42, 56))
    decoded = decode_image(tmp_path / "r.jpg").astype(np.float64)
    reference = decode_image(tmp_path / "u.jpg").astype(np.float64)
    assert decoded.shape == reference.shape == (56, 42, 3)
    # the same picture up to JPEG noise; a wrong rotation would differ by far more
    assert np.abs(decoded - reference).mean() < 3.0
    wrong = np.rot90(decoded, 2)
    assert np.abs(wrong - reference).mean() > 10.0


def test_adapt_on_rotated_jpegs(fashion, tmp_path, capsys):
    images, labels = fashion
    support, query = episode_indices(labels, ways=3, shots=4, queries=4, seed=1)
    for part, pairs in (("support", support), ("query", query)):
        for n, (i, k) in enumerate(pairs):
            folder = tmp_path / part / f"class{k}"
            folder.mkdir(parents=True, exist_ok=True)
            _save_rotated_jpeg(_upright(images[i]), sorted(STORED)[n % 3], folder / f"IMG_{n:04d}.JPG")
    out = tmp_path / "m.ckpt"
    assert run_cli(["adapt", "--mem-budget", "unlimited",
                    "--model", str(fixture_model("tiny_adam_33")), "--support", str(tmp_path / "support"),
                    "--query", str(tmp_path / "query"), "--out", str(out), "--epochs", "2", "--json", "--quiet"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["shots"] == [4, 4, 4] and record["query_size"] == 12 and len(record["losses"]) == 24
    assert record["query_accuracy"] > 1 / 3  # better than chance on upright-restored real images
    jpgs = sorted(str(p) for p in (tmp_path / "query" / "class0").iterdir())
    assert run_cli(["predict", "--model", str(fixture_model("tiny_adam_33")), "--checkpoint", str(out), "--json",
                    *jpgs]) == 0
    assert [r["file"] for r in json.loads(capsys.readouterr().out)] == jpgs
