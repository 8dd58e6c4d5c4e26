"""scikit-learn's bundled handwritten digits (``load_digits``: 1,797 8x8 images, 10 classes); optional."""

from __future__ import annotations

import numpy as np

from tflite_train.data.dataset import LabeledImages, SourceUnavailable


def load_sklearn_digits(image_size: int) -> LabeledImages:
    """All 1,797 digits, 0..16 grey scaled to 0..255, upsampled (bilinear) to ``image_size``, RGB."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:
        raise SourceUnavailable("scikit-learn is not installed", "pip install scikit-learn") from err
    from PIL import Image

    bunch = load_digits()
    grey = (bunch.images * (255.0 / 16.0)).round().astype(np.uint8)
    images = np.stack([
        np.asarray(Image.fromarray(g).resize((image_size, image_size), Image.BILINEAR).convert("RGB")) for g in grey
    ])
    return LabeledImages(images=images, labels=bunch.target.astype(np.int32), class_names=tuple(str(d) for d in range(10)))
