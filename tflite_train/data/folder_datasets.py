"""Data sets read from image folders: ``root/<class_name>/*.png|jpg`` (any user data set), and Tux Paint stamps.

Not the device's reader (``tflite_train.runtime.images.image_folder``, which ``adapt`` uses): this one prepares the data
cache, with a minimum of images per class, at one image size."""

from __future__ import annotations

import logging
import pathlib

import numpy as np

from tflite_train.data.dataset import LabeledImages, SourceUnavailable, to_rgb_uint8

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
TUXPAINT_STAMPS = pathlib.Path("/usr/share/tuxpaint/stamps")


def _read_images(files_by_class: dict[str, list[pathlib.Path]], image_size: int) -> LabeledImages:
    from PIL import Image, UnidentifiedImageError

    images, labels = [], []
    names = sorted(files_by_class)
    for label, name in enumerate(names):
        for path in files_by_class[name]:
            try:
                with Image.open(path) as image:
                    images.append(to_rgb_uint8(image, image_size))
            except (OSError, UnidentifiedImageError) as err:
                raise ValueError(f"cannot read image {path}: {err}") from err
            labels.append(label)
    return LabeledImages(
        images=np.stack(images) if images else np.zeros((0, image_size, image_size, 3), np.uint8),
        labels=np.asarray(labels, np.int32),
        class_names=tuple(names),
    )


def load_image_folder(root: str | pathlib.Path, image_size: int, *, min_per_class: int = 1) -> LabeledImages:
    """Reads ``root/<class_name>/*.png|jpg|jpeg`` (sorted; class ids by sorted folder name).

    Args:
      root: The folder holding one sub-folder per class.
      image_size: Output side; images are prepared as the device prepares them (centre crop, bilinear;
        ``dataset.to_rgb_uint8``).
      min_per_class: Classes with fewer images are skipped (logged).

    Raises:
      ValueError: ``root`` is not a folder, has no class with enough images, or an image is corrupt.
    """
    root = pathlib.Path(root)
    if not root.is_dir():
        raise ValueError(f"root must be a folder of class folders, got {str(root)!r}")
    files_by_class = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if len(files) >= min_per_class:
            files_by_class[folder.name] = files
        else:
            log.info("skipping class %s: %d images < %d", folder.name, len(files), min_per_class)
    if not files_by_class:
        raise ValueError(f"no class folder with >= {min_per_class} images under {str(root)!r}")
    return _read_images(files_by_class, image_size)


def load_tuxpaint_stamps(image_size: int, *, min_per_class: int = 8, root: pathlib.Path = TUXPAINT_STAMPS) -> LabeledImages:
    """Tux Paint stamp clip-art: one class per ``category/subcategory`` folder with enough PNGs.

    The ``symbols/alphabets`` folder is left out (letters belong to the glyph domain). Thumbnails are
    skipped. Debian package: ``tuxpaint-stamps-default``.
    """
    if not root.is_dir():
        raise SourceUnavailable(f"Tux Paint stamps not found at {root}", "apt-get install tuxpaint-stamps-default")
    files_by_class = {}
    for category in sorted(p for p in root.iterdir() if p.is_dir()):
        for sub in sorted(p for p in category.iterdir() if p.is_dir()):
            name = f"{category.name}/{sub.name}"
            if name == "symbols/alphabets":
                continue
            files = sorted(
                p for p in sub.rglob("*.png") if "thumb" not in p.name.lower() and "thumb" not in p.parent.name.lower()
            )
            if len(files) >= min_per_class:
                files_by_class[name] = files
    if not files_by_class:
        raise SourceUnavailable(f"no stamp folders with >= {min_per_class} PNGs under {root}", "apt-get install tuxpaint-stamps-default")
    return _read_images(files_by_class, image_size)
