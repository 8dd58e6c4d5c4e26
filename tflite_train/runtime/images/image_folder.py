"""Labelled image folders on the device: ``root/<class>/<image>``, listed and read.

What is skipped silently (hidden files, AppleDouble ``._x`` companions), skipped with a warning
(files without an image ending, subfolders of a class that has images) and what is an error (a class
folder without images of its own, images directly in the root, no class folders) is stated in
``scan_image_folder``; each file is read by ``tflite_train.runtime.images.images.decode_image`` and
preprocessed by ``tflite_train.runtime.images.model_input.to_model_input``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import stat
from collections.abc import Sequence

import numpy as np

from tflite_train.runtime.errors import ImageFolderError
from tflite_train.runtime.images.images import DEFAULT_LIMITS, IMAGE_SUFFIXES, ImageLimits
from tflite_train.runtime.images.model_input import load_images
from tflite_train.runtime.text import printable

LOG = logging.getLogger(__name__)


def _is_hidden(name: str) -> bool:
    """Hidden files and folders, including macOS AppleDouble ``._x`` companions and ``.DS_Store``."""
    return name.startswith(".")


def _has_image_suffix(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


def _holds_images(folder: pathlib.Path, depth: int = 3) -> bool:
    """True when ``folder`` or its subfolders (to ``depth`` levels) name an image file."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    for entry in entries:
        if _is_hidden(entry.name):
            continue
        if _has_image_suffix(entry.name) and not entry.is_dir():
            return True
        if depth > 0 and entry.is_dir() and _holds_images(pathlib.Path(entry.path), depth - 1):
            return True
    return False


@dataclasses.dataclass(frozen=True)
class ImageFolder:
    """The files of ``root/<class>/<image>`` a reader uses.

    Attributes:
      root: The folder.
      class_names: Class folder names, sorted (class id = position).
      files: Per class, its image files, sorted by name.
    """

    root: pathlib.Path
    class_names: tuple[str, ...]
    files: tuple[tuple[pathlib.Path, ...], ...]

    @property
    def paths(self) -> list[pathlib.Path]:
        """All image files, class by class."""
        return [p for group in self.files for p in group]

    @property
    def labels(self) -> np.ndarray:
        """i32 [N]: the class id of each of ``paths``."""
        return np.asarray([k for k, group in enumerate(self.files) for _ in group], np.int32)


def scan_image_folder(root: str | os.PathLike) -> ImageFolder:
    """Lists ``root/<class>/<image>``; an image is a file whose name ends in one of ``IMAGE_SUFFIXES``.

    Hidden entries (names starting with "."; AppleDouble ``._x`` files, ``.DS_Store``) are skipped
    silently; other files with other endings are skipped with a logged warning. A class folder never
    disappears silently: one without images of its own is an error, naming the subfolders that hold
    images if there are any; subfolders of a class folder that has images are skipped with a warning.

    Raises:
      ImageFolderError: ``root`` is not a directory, holds images directly instead of class folders,
        holds no class folder, or a class folder has no images.
    """
    root = pathlib.Path(root)
    shown = printable(str(root))
    try:
        if not stat.S_ISDIR(os.stat(root).st_mode):
            raise ImageFolderError(f"image folder {shown} is not a directory")
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError as err:
        raise ImageFolderError(f"image folder {shown} does not exist") from err
    except OSError as err:
        raise ImageFolderError(f"cannot read image folder {shown}: {err.strerror or err}") from err
    classes, loose = [], []
    for entry in entries:
        if _is_hidden(entry.name):
            continue
        if entry.is_dir():
            classes.append(entry.name)
        elif _has_image_suffix(entry.name):
            loose.append(entry.name)
        else:
            LOG.warning("skipping %s: not a class folder", printable(entry.path))
    if loose:
        raise ImageFolderError(
            f"image folder {shown} holds images directly ({printable(loose[0])}{', ...' if len(loose) > 1 else ''}); "
            f"put each class's images in a folder of their own: {shown}/<class>/<image>")
    if not classes:
        raise ImageFolderError(f"image folder {shown} has no class folders (expected {shown}/<class>/<image>)")
    files = []
    for name in classes:
        folder = root / name
        images, subfolders = [], []
        try:
            class_entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as err:
            raise ImageFolderError(f"cannot read class folder {printable(str(folder))}: {err.strerror or err}") from err
        for entry in class_entries:
            if _is_hidden(entry.name):
                continue
            if entry.is_dir():
                subfolders.append(entry.name)
            elif _has_image_suffix(entry.name):
                images.append(pathlib.Path(entry.path))
            else:
                LOG.warning("skipping %s: not an image (known endings: %s)", printable(entry.path), " ".join(IMAGE_SUFFIXES))
        nested = [s for s in subfolders if _holds_images(folder / s)]
        if not images:
            detail = (f"; images are only in its subfolder(s) {', '.join(printable(s) for s in nested)}: "
                      "a class's images must lie directly in its folder") if nested else ""
            raise ImageFolderError(f"class folder {printable(str(folder))} has no images{detail}")
        for sub in subfolders:
            LOG.warning("skipping subfolder %s: a class's images must lie directly in its folder",
                        printable(str(folder / sub)))
        files.append(tuple(images))
    return ImageFolder(root, tuple(classes), tuple(files))


def load_image_folder(
    root: str | os.PathLike, shape: Sequence[int], value_range: Sequence[float] = (0.0, 1.0),
    limits: ImageLimits = DEFAULT_LIMITS, progress=None,
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Reads ``root/<class>/<image>`` -> (images f32 [N, *shape], labels i32 [N], class names).

    Class ids follow the sorted folder names; files within a class are sorted by name (see
    ``scan_image_folder`` for what is skipped and what is an error, ``decode_image`` for the files).

    Raises:
      ImageFolderError, ImageError: as ``scan_image_folder`` and ``decode_image`` (naming the folder or file).
    """
    folder = scan_image_folder(root)
    return load_images(folder.paths, shape, value_range, limits, progress), folder.labels, folder.class_names
