"""Resources: RSS stays flat over 100 adaptations in one process, over 100 reads of photo-sized
images, and within a stated bound over 100 full file-to-checkpoint runs (each loop in a fresh
process: ``_growth_in_fresh_process``); the image limits hold."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tests.runtime.runtime_fixtures import checkout_env, fixture_model, write_episode_folders
from tflite_train.runtime.errors import ImageError
from tflite_train.runtime.images.images import ImageLimits, decode_image

_GROWTH = """
import pathlib, sys

def growth(run, times=100, warm_up=20):
    samples = []
    for i in range(times):
        run()
        if i + 1 in (warm_up, times):
            status = pathlib.Path("/proc/self/status").read_text().splitlines()
            samples.append(next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")))
    return samples[1] - samples[0]
"""


def _growth_in_fresh_process(body: str, *args: object) -> int:
    """KiB of VmRSS growth over the last 80 of 100 calls of the ``run()`` that ``body`` defines, measured
    in a fresh interpreter process (``sys.argv[1:]`` = ``args``).

    A fresh process because in the long-lived test process the allocator's state left by earlier tests
    (glibc raises its mmap threshold after large frees, so later buffers come from a heap that need not
    shrink) made these loops grow by 7-10 MiB without any leak (CI, full suite); alone they grow by
    under 0.5 MiB. The checkout's root is on the path (``tests.runtime.runtime_fixtures``).
    """
    if not pathlib.Path("/proc/self/status").exists():
        pytest.skip("no /proc/self/status on this system")
    script = _GROWTH + body + "\nprint(growth(run))\n"
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                          env=checkout_env(), timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


_ADAPTATIONS = """
from tests.runtime.runtime_fixtures import episode_arrays, load_fashion
from tflite_train.runtime import AdaptConfig, TrainableModel, adapt, evaluate

model = TrainableModel(sys.argv[1])
images, labels, queries, query_labels = episode_arrays(load_fashion(), model.input_shape, ways=3, shots=4, queries=2)
config = AdaptConfig(policy="tinytrain", memory_bytes=2**20, compute_fraction=0.15, iterations=3)

def run():
    adapt(model, images, labels, config)
    evaluate(model, queries, query_labels)
"""


@pytest.mark.slow
def test_rss_is_flat_over_100_adaptations():
    """One model adapted 100 times (the library loop of an app): measured +0.3 MiB over the last 80 in both envs."""
    growth = _growth_in_fresh_process(_ADAPTATIONS, fixture_model("tiny_adam_33"))
    assert growth < 2 * 1024, f"RSS grew by {growth} KiB over 80 adaptations"


_DECODES = """
from tflite_train.runtime.images.image_folder import load_image_folder

def run():
    load_image_folder(pathlib.Path(sys.argv[1]), (64, 64, 3))
"""


@pytest.mark.slow
def test_rss_is_flat_reading_images_100_times(tmp_path):
    """Decoding 6 photo-sized JPEG/PNGs 100 times: a leaked decode (about 1 MB each) would show at once."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for k in range(2):
        (tmp_path / f"c{k}").mkdir()
        for i in range(3):
            pixels = rng.integers(0, 256, (400, 600, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / f"c{k}" / f"{i}.{'jpg' if i % 2 else 'png'}")
    growth = _growth_in_fresh_process(_DECODES, tmp_path)
    assert growth < 2 * 1024, f"RSS grew by {growth} KiB over 80 x 6 decodes"


_FULL_RUNS = """
from tflite_train.runtime import AdaptConfig
from tflite_train.runtime.adapt_job import run_adaptation

model, support, query, out = (pathlib.Path(a) for a in sys.argv[1:5])
config = AdaptConfig(policy="tinytrain", memory_bytes=2**20, compute_fraction=0.15, iterations=3)

def run():
    run_adaptation(model, support, out, config, query_dir=query)
"""


@pytest.mark.slow
def test_rss_over_100_full_runs(fashion, tmp_path):
    """100 ``run_adaptation`` calls (files read, a new interpreter, checkpoint written, each time).

    Measured over the last 80: +0.3 MiB with ai-edge-litert 2.3; with tflite-runtime 2.14, which keeps memory
    per interpreter created (reused interpreters stay flat, see above): +6.2 MiB (about 78 KiB per run) before
    the cached cut's signatures, +10.4 to +11.5 MiB (about 130-145 KiB per run) with them (more
    subgraphs per interpreter), +17.5 to +21.7 MiB since a run builds two interpreters (the selection's, then
    the training's: ``adapt(..., reopen=True)``; 110-140 KiB per interpreter). A leak of our own per run (a
    support set, about 1 MB here: 80 MiB) would exceed both limits.
    """
    from tflite_train.runtime.model.interpreter import load_interpreter_class

    support, query = write_episode_folders(fashion, tmp_path / "data", ways=3, shots=4, queries=2, seed=0)
    growth = _growth_in_fresh_process(_FULL_RUNS, fixture_model("tiny_adam_33"), support, query, tmp_path / "m.ckpt")
    limit = 32 * 1024 if load_interpreter_class()[1].startswith("tflite_runtime") else 10 * 1024
    assert growth < limit, f"RSS grew by {growth} KiB over 80 adaptations"


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
    from tflite_train.runtime.images.model_input import load_images

    paths = [tmp_path / f"never-read-{i}.png" for i in range(3)]  # do not exist: the check comes first
    with pytest.raises(ImageError, match=r"3 images need 3072 bytes at the model's input size \(16, 16, 1\); the limit is 3071"):
        load_images(paths, (16, 16, 1), limits=ImageLimits(max_set_bytes=3071))
