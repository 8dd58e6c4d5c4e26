"""Fashion-MNIST from the Debian package ``dataset-fashion-mnist`` (IDX files, gzip)."""

from __future__ import annotations

import gzip
import pathlib

import numpy as np

from tflite_train.data.dataset import LabeledImages, SourceUnavailable

FASHION_MNIST_DIR = pathlib.Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = (
    "t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle-boot",
)


def read_idx(path: pathlib.Path) -> np.ndarray:
    """Reads a gzip IDX file (magic 0x0000 0x08 ndim, big-endian int32 dims, uint8 data).

    Raises:
      ValueError: the file is truncated, corrupt, or not uint8 IDX.
    """
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as err:
        raise ValueError(f"cannot read IDX file {path}: {err}") from err
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path} is not a uint8 IDX file (header {data[:4]!r})")
    ndim = data[3]
    dims = tuple(int(d) for d in np.frombuffer(data, ">i4", count=ndim, offset=4))
    expected = 4 + 4 * ndim + int(np.prod(dims))
    if len(data) != expected:
        raise ValueError(f"{path} has {len(data)} bytes, its header {dims} needs {expected}")
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_fashion_mnist(image_size: int, *, per_class: int = 100, root: pathlib.Path = FASHION_MNIST_DIR) -> LabeledImages:
    """The first ``per_class`` test images of each class, grey -> RGB, resized to ``image_size`` (bilinear).

    """
    from PIL import Image

    images_path, labels_path = root / "t10k-images-idx3-ubyte.gz", root / "t10k-labels-idx1-ubyte.gz"
    if not images_path.exists() or not labels_path.exists():
        raise SourceUnavailable(f"Fashion-MNIST not found in {root}", "apt-get install dataset-fashion-mnist")
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or labels.shape != (images.shape[0],):
        raise ValueError(f"Fashion-MNIST shapes disagree: images {images.shape}, labels {labels.shape}")
    keep = np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in range(len(FASHION_MNIST_CLASSES))])
    out = np.stack([
        np.asarray(Image.fromarray(images[i]).resize((image_size, image_size), Image.BILINEAR).convert("RGB"))
        for i in keep
    ])
    return LabeledImages(images=out, labels=labels[keep].astype(np.int32), class_names=FASHION_MNIST_CLASSES)
