"""The emoji source: name-word exclusion rule, pins, and (when fetched) the real tarballs."""

import os
import pathlib

import numpy as np
import pytest

from tflite_train.data import emoji
from tflite_train.data.cache import DOWNLOADS

CACHE = pathlib.Path(os.environ.get("TFLITE_TRAIN_CACHE", pathlib.Path(__file__).resolve().parents[2] / "build" / "data_cache"))


def test_name_words_rule():
    assert emoji.name_words("Japanese “free of charge” button") == {"japanese", "free", "charge"}
    assert emoji.name_words("cats and dogs") == {"cat", "dog"}
    assert emoji.name_words("glass") == {"glass"}  # "ss" keeps its s


def test_target_words_cover_fashion_mnist_and_stamps(tmp_path):
    (tmp_path / "animals" / "birds").mkdir(parents=True)
    (tmp_path / "animals" / "birds" / "penguin_2.png").write_bytes(b"")
    words = emoji.target_words(tmp_path)
    assert {"sandal", "sneaker", "boot", "ankle", "animal", "bird", "penguin"} <= words
    assert "top" not in words  # a stop word


def test_every_package_is_pinned_by_sha512():
    for pkg in emoji.PACKAGES.values():
        assert pkg.integrity.startswith("sha512-") and len(pkg.integrity) == 7 + 88
        assert pkg.image_licence and pkg.code_licence


@pytest.mark.skipif(not (CACHE / DOWNLOADS / emoji.PACKAGES["openmoji"].tarball).exists(),
                    reason="npm tarballs not fetched (make data)")
def test_real_emoji_classes_have_several_vendors_and_avoid_target_words():
    excluded = emoji.excluded_emoji(download_dir=CACHE / DOWNLOADS)
    assert any("moon" in words for _, _, words in excluded)
    data = emoji.load_emoji(32, download_dir=CACHE / DOWNLOADS,
                            config=emoji.EmojiConfig(styles=("google", "twitter", "openmoji")))
    assert data.num_classes > 300 and data.images.shape[1:] == (32, 32, 3)
    assert data.class_counts().min() >= 3
    words = emoji.target_words()
    assert not any(emoji.name_words(n.split(" ", 1)[1]) & words for n in data.class_names)
    assert np.mean(np.all(data.images[:, 0, 0] == 255, axis=-1)) > 0.9  # composited on white
