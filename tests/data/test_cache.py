import json
import logging

import numpy as np
import pytest

from tflite_train.data.cache import DatasetSpec, class_splits, load_split, prepare_cache, read_npz, verify_cache
from tflite_train.data.dataset import LabeledImages, SourceUnavailable


def _toy(num_classes, per_class, size, seed):
    rng = np.random.default_rng(seed)
    return LabeledImages(
        images=rng.integers(0, 256, size=(num_classes * per_class, size, size, 3), dtype=np.uint8),
        labels=np.repeat(np.arange(num_classes), per_class).astype(np.int32),
        class_names=tuple(f"c{i}" for i in range(num_classes)),
    )


SPECS = (
    DatasetSpec("src", "source", "toy", lambda s: _toy(20, 3, s, 0)),
    DatasetSpec("tgt", "target", "toy", lambda s: _toy(6, 4, s, 1)),
)


def test_prepare_is_deterministic_and_verified(tmp_path):
    a = prepare_cache(tmp_path / "a", image_size=32, datasets=SPECS)
    b = prepare_cache(tmp_path / "b", image_size=32, datasets=SPECS)
    assert a == b  # same bytes -> same checksums
    src = a["datasets"]["src"]
    assert src["num_images"] == 60 and src["num_classes"] == 20 and src["shape"] == [32, 32, 3]
    splits = src["splits"]
    assert sorted(splits["train"] + splits["val"] + splits["test"]) == list(range(20))
    assert (len(splits["train"]), len(splits["val"]), len(splits["test"])) == (14, 3, 3)
    assert a["datasets"]["tgt"]["splits"]["test"] == list(range(6))
    verify_cache(tmp_path / "a", deep=True)
    train = load_split(tmp_path / "a", "src", "train")
    assert train.num_classes == 14 and len(train) == 42


def test_second_run_does_nothing(tmp_path, caplog):
    prepare_cache(tmp_path, image_size=32, datasets=SPECS)
    mtimes = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    calls = []
    specs = tuple(DatasetSpec(s.name, s.role, s.origin, lambda size, s=s: calls.append(1) or s.loader(size)) for s in SPECS)
    with caplog.at_level(logging.INFO):
        prepare_cache(tmp_path, image_size=32, datasets=specs)
    assert not calls
    assert "up to date" in caplog.text
    assert mtimes == {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}


def test_changed_source_origin_rebuilds(tmp_path):
    prepare_cache(tmp_path, image_size=32, datasets=SPECS)
    calls = []
    changed = (DatasetSpec("src", "source", "toy v2", lambda size: calls.append(1) or _toy(20, 3, size, 0)), SPECS[1])
    manifest = prepare_cache(tmp_path, image_size=32, datasets=changed)
    assert calls == [1]
    assert manifest["datasets"]["src"]["origin"] == "toy v2"


def test_corrupt_file_fails_clearly_and_is_rebuilt(tmp_path):
    prepare_cache(tmp_path, image_size=32, datasets=SPECS)
    path = tmp_path / "src.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="src.npz is corrupt"):
        verify_cache(tmp_path)
    with pytest.raises(ValueError, match="corrupt"):
        load_split(tmp_path, "src", "train")
    path.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="corrupt"):
        read_npz(path)
    prepare_cache(tmp_path, image_size=32, datasets=SPECS)  # detects the bad checksum and rebuilds
    verify_cache(tmp_path, deep=True)


def test_missing_file_and_manifest(tmp_path):
    with pytest.raises(ValueError, match="data prepare"):
        verify_cache(tmp_path)
    prepare_cache(tmp_path, image_size=32, datasets=SPECS)
    (tmp_path / "tgt.npz").unlink()
    with pytest.raises(ValueError, match="tgt.npz .*missing"):
        verify_cache(tmp_path)
    (tmp_path / "manifest.json").write_text("{broken")
    with pytest.raises(ValueError, match="corrupt"):
        verify_cache(tmp_path)


def test_missing_source_names_the_package(tmp_path):
    def missing(size):
        raise SourceUnavailable("fonts not found", "apt-get install fonts-noto-core")

    with pytest.raises(ValueError, match="apt-get install fonts-noto-core"):
        prepare_cache(tmp_path, image_size=32, datasets=(DatasetSpec("g", "source", "x", missing),))
    optional = (SPECS[0], DatasetSpec("g", "target", "x", missing, required=False))
    manifest = prepare_cache(tmp_path, image_size=32, datasets=optional)
    assert set(manifest["datasets"]) == {"src"}


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="image_size"):
        prepare_cache(tmp_path, image_size=16, datasets=SPECS)
    prepare_cache(tmp_path, image_size=32, datasets=SPECS)
    with pytest.raises(ValueError, match="name must be one of"):
        load_split(tmp_path, "nope")
    with pytest.raises(ValueError, match="no 'train' classes"):
        load_split(tmp_path, "tgt", "train")


def test_class_splits_fixed():
    assert class_splits(10, (0.6, 0.2)) == class_splits(10, (0.6, 0.2))
    s = class_splits(10, (0.6, 0.2))
    assert [len(s[k]) for k in ("train", "val", "test")] == [6, 2, 2]


def test_cli_data_prepare(tmp_path, monkeypatch, capsys):
    from tflite_train import cli
    import tflite_train.data.cache as cache

    monkeypatch.setattr(cache, "default_datasets", lambda: SPECS)
    assert cli.main(["data", "prepare", "--out", str(tmp_path), "--image-size", "32"]) == 0
    assert "src" in capsys.readouterr().out
    assert json.loads((tmp_path / "manifest.json").read_text())["image_size"] == 32
    assert cli.main(["data", "prepare", "--out", str(tmp_path), "--image-size", "8"]) == 2


def test_cli_data_prepare_with_user_folder(tmp_path, monkeypatch):
    from PIL import Image

    from tflite_train import cli
    import tflite_train.data.cache as cache

    for name in ("a", "b"):
        (tmp_path / "mine" / name).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (8, 8), (i * 100, 0, 0)).save(tmp_path / "mine" / name / f"{i}.png")
    monkeypatch.setattr(cache, "default_datasets", lambda: SPECS)
    out = tmp_path / "cache"
    assert cli.main(["data", "prepare", "--out", str(out), "--image-size", "32", "--folder", f"mine={tmp_path / 'mine'}"]) == 0
    entry = json.loads((out / "manifest.json").read_text())["datasets"]["mine"]
    assert entry["role"] == "target" and entry["num_classes"] == 2 and entry["num_images"] == 4
    assert cli.main(["data", "prepare", "--out", str(out), "--folder", "bad"]) == 2


def test_cache_images_are_prepared_as_the_device_prepares_them():
    """A non-square RGBA image goes into the cache exactly as ``to_model_input`` feeds it to a model (alpha on
    white, centre crop, bilinear), rounded to uint8: no padding to a square."""
    from PIL import Image

    from tflite_train.data.dataset import to_rgb_uint8
    from tflite_train.runtime import to_model_input

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (30, 70, 4), dtype=np.uint8)
    pixels[:, :20, 3] = 0  # transparent left edge
    cached = to_rgb_uint8(Image.fromarray(pixels, "RGBA"), 24)
    assert cached.shape == (24, 24, 3) and cached.dtype == np.uint8
    device = to_model_input(pixels, (24, 24, 3), (0.0, 1.0)) * 255.0
    assert np.abs(cached.astype(np.float64) - device).max() <= 0.5 + 1e-4
    # the crop keeps the middle 30 x 30: the transparent columns 0..19 fall outside it, so no white pad shows
    assert (cached == 255).all(axis=-1).mean() < 0.01
    grey = to_rgb_uint8(Image.fromarray(pixels[..., 0], "L"), 24)
    np.testing.assert_array_equal(grey[..., 0], grey[..., 2])
