import dataclasses
import gzip
import pathlib

import numpy as np
import pytest
from PIL import Image

from tflite_train.data.dataset import SourceUnavailable
from tflite_train.data.fashion_mnist import FASHION_MNIST_DIR, load_fashion_mnist, read_idx
from tflite_train.data.folder_datasets import TUXPAINT_STAMPS, load_image_folder, load_tuxpaint_stamps
from tflite_train.data.glyphs import MULTISCRIPT_CHARS, SCRIPTS, MULTISCRIPT_CONFIG, TARGET_CHARS, GlyphConfig, render_glyph_dataset

NEEDS = "Debian packages missing: run `make data-deps` (apt-get install fonts-noto-core fonts-freefont-ttf fonts-liberation dataset-fashion-mnist tuxpaint-stamps-default)"


def test_image_folder(tmp_path):
    for name, color in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
        (tmp_path / name).mkdir()
        for i in range(3):
            Image.new("RGB", (20, 10), color).save(tmp_path / name / f"{i}.png")
    (tmp_path / "few").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "few" / "0.jpg")
    data = load_image_folder(tmp_path, 16, min_per_class=2)
    assert data.class_names == ("cat", "dog")
    assert data.images.shape == (6, 16, 16, 3)
    np.testing.assert_array_equal(data.class_counts(), [3, 3])
    # 20x10 centre-cropped to square as the device does (no white padding): red everywhere
    assert (data.images[:3] == np.array([255, 0, 0], np.uint8)).all()
    (tmp_path / "dog" / "bad.png").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="bad.png"):
        load_image_folder(tmp_path, 16)
    with pytest.raises(ValueError, match="root"):
        load_image_folder(tmp_path / "none", 16)


def test_read_idx_by_hand(tmp_path):
    payload = bytes([0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3]) + bytes(range(6))
    path = tmp_path / "x.gz"
    path.write_bytes(gzip.compress(payload))
    np.testing.assert_array_equal(read_idx(path), np.arange(6).reshape(2, 3))
    path.write_bytes(gzip.compress(payload[:-1]))
    with pytest.raises(ValueError, match="needs"):
        read_idx(path)
    path.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="cannot read"):
        read_idx(path)


def test_missing_sources_name_packages(tmp_path):
    with pytest.raises(SourceUnavailable, match="apt-get install dataset-fashion-mnist"):
        load_fashion_mnist(32, root=tmp_path)
    with pytest.raises(SourceUnavailable, match="tuxpaint-stamps-default"):
        load_tuxpaint_stamps(32, root=tmp_path / "none")
    with pytest.raises(SourceUnavailable, match="fonts-noto-core"):
        render_glyph_dataset(GlyphConfig(), 32, root=tmp_path)


@pytest.mark.skipif(not FASHION_MNIST_DIR.exists(), reason=NEEDS)
def test_fashion_mnist():
    data = load_fashion_mnist(32, per_class=5)
    assert data.images.shape == (50, 32, 32, 3) and data.num_classes == 10
    np.testing.assert_array_equal(data.class_counts(), [5] * 10)


@pytest.mark.skipif(not TUXPAINT_STAMPS.exists(), reason=NEEDS)
def test_tuxpaint_stamps():
    data = load_tuxpaint_stamps(32, min_per_class=40)
    assert data.num_classes >= 2 and data.class_counts().min() >= 40
    assert "symbols/alphabets" not in data.class_names


@pytest.mark.skipif(not pathlib.Path("/usr/share/fonts/truetype/noto").exists(), reason=NEEDS)
def test_glyphs_distinct_fonts_and_dedup():
    # Latin A, Greek Alpha, Cyrillic A render identically: one class. B has its own.
    config = GlyphConfig(chars=("A", "\u0391", "\u0410", "B", "\u0416"), min_fonts=10, samples_per_class=12)
    data = render_glyph_dataset(config, 32)
    assert [n.split()[0] for n in data.class_names] == ["U+0041", "U+0042", "U+0416"]
    assert data.images.shape == (36, 32, 32, 3)
    imgs = data.images[data.labels == 0].reshape(12, -1)
    assert len({im.tobytes() for im in imgs}) == 12  # genuinely different samples
    again = render_glyph_dataset(config, 32)
    np.testing.assert_array_equal(again.images, data.images)  # deterministic


def test_multiscript_source_excludes_the_target_scripts():
    armenian_georgian = [(0x0530, 0x058F), (0x10A0, 0x10FF), (0x1C90, 0x1CBF), (0x2D00, 0x2D2F)]
    assert not [c for c in MULTISCRIPT_CHARS if any(lo <= ord(c) <= hi for lo, hi in armenian_georgian)]
    assert not set(MULTISCRIPT_CHARS) & set(TARGET_CHARS)
    assert len(set(MULTISCRIPT_CHARS)) == len(MULTISCRIPT_CHARS) > 1000
    assert len(SCRIPTS) >= 40 and MULTISCRIPT_CONFIG.chars == MULTISCRIPT_CHARS


@pytest.mark.skipif(not pathlib.Path("/usr/share/fonts/truetype/noto").exists(), reason=NEEDS)
def test_glyphs_stroke_change_is_deterministic_and_varies_ink():
    # Tifinagh letters (many Noto Tifinagh fonts) with the source's distortion, incl. stroke weight.
    chars = tuple(chr(c) for c in range(0x2D30, 0x2D36))
    config = dataclasses.replace(MULTISCRIPT_CONFIG, chars=chars)
    data = render_glyph_dataset(config, 32)
    assert data.num_classes >= 4 and data.class_counts().min() == 10
    np.testing.assert_array_equal(render_glyph_dataset(config, 32).images, data.images)
    plain = render_glyph_dataset(dataclasses.replace(config, max_stroke=0), 32)
    assert not np.array_equal(plain.images, data.images)
    ink = (255 - data.images[..., 0].astype(np.float64)).sum(axis=(1, 2))
    assert ink.min() > 0  # erosion never wipes a glyph out
