"""Helpers of the runtime tests: exported test models and real Fashion-MNIST episodes.

Models come from ``python -m tools.fixtures --out build/test-models`` (main env); the images
from the Debian package ``dataset-fashion-mnist`` (``make data-deps``), read with numpy;
image files are written with Pillow.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest
from PIL import Image

from tflite_train.data.fashion_mnist import FASHION_MNIST_DIR, read_idx
from tflite_train.runtime.images.model_input import to_model_input

FIXTURE_DIR = pathlib.Path(os.environ.get("TFLITE_TRAIN_TEST_MODELS", "build/test-models"))
ROOT = pathlib.Path(__file__).resolve().parents[2]
"""The checkout's root (``tflite_train``, ``tests``, ``tools`` import from there)."""


def checkout_env() -> dict[str, str]:
    """The environment of a child process that runs this checkout's code (``python -m tflite_train.cli``, a
    ``-c`` script importing ``tests.runtime.runtime_fixtures``): the root first on ``PYTHONPATH``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def fixture_model(name: str) -> pathlib.Path:
    """Path of an exported test model (fails with the command to make it when missing)."""
    path = FIXTURE_DIR / f"{name}.tflite"
    if not path.exists():
        pytest.fail(f"missing test model {path}: run `python -m tools.fixtures --out {FIXTURE_DIR}` in the main env")
    return path


def relative_error(a, b) -> float:
    """max |a - b| / max |b| in float64 (the parity tests' tolerance measure; 1e-12 floor)."""
    b = np.asarray(b, np.float64)
    return float(np.max(np.abs(np.asarray(a, np.float64) - b)) / max(np.max(np.abs(b)), 1e-12))


def parity_model(name: str):
    """(model, reference): a fixture opened with its reset state and the reference's head, and its
    TF reference arrays (``<name>.parity.npz``, written by ``tools.fixtures``)."""
    from tflite_train.runtime import TrainableModel

    path = fixture_model(name)
    ref = dict(np.load(path.with_suffix(".parity.npz")))
    model = TrainableModel(path)
    model.reset_state()
    model.set_head(ref["prototypes"][: int(ref["num_classes"])])
    return model, ref


def load_fashion() -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST test split: uint8 [10000, 28, 28], labels [10000]."""
    images = FASHION_MNIST_DIR / "t10k-images-idx3-ubyte.gz"
    labels = FASHION_MNIST_DIR / "t10k-labels-idx1-ubyte.gz"
    if not images.exists():
        pytest.fail(f"missing {images}: install the Debian package dataset-fashion-mnist (make data-deps)")
    return read_idx(images), read_idx(labels).astype(np.int32)


def episode_indices(labels: np.ndarray, ways: int, shots: int, queries: int, seed: int):
    """(support [(index, label)], query [(index, label)]) of a random ways-way episode."""
    rng = np.random.default_rng(seed)
    classes = rng.choice(np.unique(labels), ways, replace=False)
    support, query = [], []
    for k, c in enumerate(classes):
        idx = rng.permutation(np.flatnonzero(labels == c))
        support += [(i, k) for i in idx[:shots]]
        query += [(i, k) for i in idx[shots:shots + queries]]
    return support, query


def episode_arrays(fashion, shape, ways=4, shots=5, queries=20, seed=0, value_range=(0.0, 1.0)):
    """Support/query float32 images at the model input ``shape`` and ``value_range``, and their labels."""
    images, labels = fashion
    support, query = episode_indices(labels, ways, shots, queries, seed)

    def arrays(pairs):
        x = np.stack([to_model_input(images[i][..., None] / np.float32(255.0), shape, value_range) for i, _ in pairs])
        return x.astype(np.float32), np.asarray([k for _, k in pairs], np.int32)

    return (*arrays(support), *arrays(query))


def write_episode_folders(fashion, root: pathlib.Path, ways=3, shots=4, queries=6, seed=0):
    """Writes ``root/support/<class>/*.png`` and ``root/query/<class>/*.png`` from real images."""
    images, labels = fashion
    support, query = episode_indices(labels, ways, shots, queries, seed)
    for part, pairs in (("support", support), ("query", query)):
        for n, (i, k) in enumerate(pairs):
            folder = root / part / f"class{k}"
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(images[i]).save(folder / f"{n:03d}.png")
    return root / "support", root / "query"


def run_cli(argv: list[str]) -> int:
    """``tflite_train.cli.main(argv)``'s exit code, also when argparse exits (SystemExit)."""
    from tflite_train.cli import main

    try:
        return main(argv)
    except SystemExit as exit_info:
        return int(exit_info.code or 0)


CLI_MODEL = "tiny_adam_33"


def adapt_cli(support: pathlib.Path, out: pathlib.Path, *extra: str) -> int:
    """Exit code of ``tflite-train adapt`` on the tiny fixture model: 3 iterations (unless ``extra`` sets
    --epochs), no memory budget, quiet."""
    length = [] if "--epochs" in extra else ["--iterations", "3"]
    return run_cli(["adapt", "--mem-budget", "unlimited",
                    "--model", str(fixture_model(CLI_MODEL)), "--support", str(support), "--out", str(out),
                    *length, "--quiet", *extra])


def assert_one_line_error(err: str, *fragments: str) -> None:
    """``err`` is exactly one line "tflite-train <command>: error: ..." containing every fragment, no traceback."""
    assert err.endswith("\n") and err.count("\n") == 1, f"expected one line on stderr, got {err!r}"
    assert err.startswith("tflite-train") and ": error: " in err and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"


def snapshot(folder: pathlib.Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes): to show that nothing was written or lost."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
