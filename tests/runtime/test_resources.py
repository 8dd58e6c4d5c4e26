"""Resources: RSS stays flat over 100 adaptations in one process (files read through Pillow, model
adapted, checkpoint written each time), and the image size limits hold."""

from __future__ import annotations

import pathlib

import pytest

from runtime_fixtures import fixture_model, write_episode_folders
from tflite_train.runtime.adapt_job import run_adaptation
from tflite_train.runtime.errors import ImageError
from tflite_train.runtime.images import ImageLimits, decode_image
from tflite_train.runtime.trainer import AdaptConfig


def _rss_kib() -> int:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    pytest.skip("no /proc/self/status on this system")


@pytest.mark.slow
def test_rss_is_flat_over_100_adaptations(fashion, tmp_path):
    support, query = write_episode_folders(fashion, tmp_path / "data", ways=3, shots=4, queries=2, seed=0)
    config = AdaptConfig(policy="tinytrain", memory_bytes=2**20, compute_fraction=0.15, iterations=3)
    model = fixture_model("tiny_adam_33")
    samples = []
    for run in range(100):
        run_adaptation(model, support, tmp_path / "m.ckpt", config, query_dir=query)
        if run in (19, 99):
            samples.append(_rss_kib())
    growth = samples[1] - samples[0]
    # 80 runs after a warm-up of 20: a leak of one image or one interpreter per run would exceed this
    assert growth < 8 * 1024, f"RSS grew by {growth} KiB over 80 adaptations ({samples})"


def test_pixel_and_size_limits_are_explicit(tmp_path):
    from PIL import Image

    Image.new("RGB", (40, 30)).save(tmp_path / "a.png")
    assert decode_image(tmp_path / "a.png", ImageLimits(max_pixels=1200)).shape == (30, 40, 3)
    with pytest.raises(ImageError, match="decompression bomb|limit"):
        decode_image(tmp_path / "a.png", ImageLimits(max_pixels=1199))
    size = (tmp_path / "a.png").stat().st_size
    with pytest.raises(ImageError, match=f"has {size} bytes; the limit is {size - 1}"):
        decode_image(tmp_path / "a.png", ImageLimits(max_file_bytes=size - 1))
    default = Image.MAX_IMAGE_PIXELS
    seen = []
    real_open = Image.open

    def spy(*args, **kwargs):
        seen.append(Image.MAX_IMAGE_PIXELS)
        return real_open(*args, **kwargs)

    Image.open = spy
    try:
        decode_image(tmp_path / "a.png", ImageLimits(max_pixels=4321))
    finally:
        Image.open = real_open
    assert seen == [4321] and Image.MAX_IMAGE_PIXELS == default  # set for the read, then restored


def test_image_set_size_is_checked_before_reading(tmp_path):
    from tflite_train.runtime.images import load_images

    paths = [tmp_path / f"never-read-{i}.png" for i in range(3)]  # do not exist: the check comes first
    with pytest.raises(ImageError, match=r"3 images need 3072 bytes at the model's input size \(16, 16, 1\); the limit is 3071"):
        load_images(paths, (16, 16, 1), limits=ImageLimits(max_set_bytes=3071))
