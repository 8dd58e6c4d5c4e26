"""TensorFlow Datasets (the paper's Meta-Dataset domains), only when installed AND already prepared on disk.

Nothing is downloaded: a missing package or a data set that was not prepared beforehand raises
``SourceUnavailable`` (which the cache skips for optional data sets).
"""

from __future__ import annotations

import numpy as np

from tflite_train.data.dataset import LabeledImages, SourceUnavailable


def load_tfds(
    name: str,
    image_size: int,
    *,
    split: str = "train",
    data_dir: str | None = None,
    image_key: str = "image",
    label_key: str = "label",
    max_per_class: int = 50,
) -> LabeledImages:
    """Reads up to ``max_per_class`` images per class of a prepared TFDS data set, resized to ``image_size``.

    Raises:
      SourceUnavailable: ``tensorflow_datasets`` not installed, or ``name`` not prepared in ``data_dir``.
    """
    try:
        import tensorflow_datasets as tfds
    except ImportError as err:
        raise SourceUnavailable("tensorflow_datasets is not installed", "pip install tensorflow-datasets") from err
    from PIL import Image

    from tflite_train.data.dataset import to_rgb_uint8

    try:
        builder = tfds.builder(name, data_dir=data_dir)
        dataset = builder.as_dataset(split=split, shuffle_files=False)
    except Exception as err:  # noqa: BLE001 - tfds raises many types for "not prepared"; all mean unavailable here
        raise SourceUnavailable(f"TFDS data set {name!r} is not prepared in {data_dir or '~/tensorflow_datasets'}: {err}",
                                f"prepare it offline with `tfds build {name}` where its files are available") from err
    names = builder.info.features[label_key].names
    counts = np.zeros(len(names), np.int64)
    images, labels = [], []
    for example in tfds.as_numpy(dataset):
        label = int(example[label_key])
        if counts[label] >= max_per_class:
            continue
        counts[label] += 1
        pixels = example[image_key]
        if pixels.shape[-1] == 1:
            pixels = pixels[..., 0]
        images.append(to_rgb_uint8(Image.fromarray(pixels), image_size))
        labels.append(label)
    if not images:
        raise SourceUnavailable(f"TFDS data set {name!r} split {split!r} is empty", f"`tfds build {name}`")
    return LabeledImages(images=np.stack(images), labels=np.asarray(labels, np.int32), class_names=tuple(names))
