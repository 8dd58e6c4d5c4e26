"""Freedesktop icon themes: one class per icon name, drawn by several Debian icon themes.

A class is one freedesktop icon name (``document-open``, ``user-trash``, ``audio-x-generic``, ...);
its samples are the drawings of that name by the themes of ``THEMES`` (one sample per theme: the
theme's PNG of the smallest size >= ``IconThemesConfig.target_size``, else its largest size >=
``min_size``), composited onto white and resized to the cache's image size. Only regular PNG files
count: symbolic links (a theme's aliases of one drawing under other names), SVGs (``scalable``),
``*-symbolic`` names, non-square images (animation strips) and the folders of ``SKIPPED_FOLDERS``
(animations, panel and stock icons, emotes) are not read.

Deduplication, all with the 8x8 average hash (``average_hash``; aHash, Krawetz 2011: the image in
grey levels, box-downsampled to 8x8, each cell 1 if brighter than the mean; distance = Hamming
distance of the 64 bits):

1. Within a class, a drawing at distance <= ``max_hash_distance`` from an earlier theme's drawing
   is dropped (themes that share artwork, e.g. MATE's and GNOME's icons, would give a query that
   repeats a support image).
2. A class with a drawing whose file bytes equal a drawing of an earlier class is dropped (the
   same artwork under two names is one concept, not two).
3. **Leakage check**: a drawing at distance <= ``max_hash_distance`` from any Tux Paint stamp (an
   evaluation target, partly from Open Clip Art) is dropped. No openclipart package is read.
4. Classes whose name shares a word with a Tux Paint stamp or a Fashion-MNIST class (the emoji
   source's rule, ``emoji.name_words`` / ``emoji.target_words``) are dropped.

A class needs drawings by >= ``min_themes`` themes after these steps. The Makefile target
``icon-data`` fetches the pinned ``.deb`` files with ``apt-get download`` and unpacks them with
``dpkg -x`` into ``<cache>/downloads/deb/<package>/``; nothing is fetched at run time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import pathlib
import re

import numpy as np

from tflite_train.data.dataset import LabeledImages, SourceUnavailable, to_rgb_uint8
from tflite_train.data.folder_datasets import TUXPAINT_STAMPS

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class IconTheme:
    """One icon theme of a Debian package.

    Attributes:
      package: Debian package name.
      version: Pinned Debian version (``apt-get download package=version``).
      licence: Licence of the artwork (the ``Files: *`` / theme stanzas of ``/usr/share/doc/<package>/copyright``).
      theme_dir: The theme's folder inside the unpacked package.
    """

    package: str
    version: str
    licence: str
    theme_dir: str

    @property
    def spec(self) -> str:
        return f"{self.package}={self.version}"

    @property
    def name(self) -> str:
        return pathlib.PurePosixPath(self.theme_dir).name


THEMES: tuple[IconTheme, ...] = (
    IconTheme("tango-icon-theme", "0.8.90-11", "public-domain", "usr/share/icons/Tango"),
    IconTheme("gnome-icon-theme", "3.12.0-5", "GPL-2+", "usr/share/icons/gnome"),
    IconTheme("mate-icon-theme", "1.26.0-1", "LGPL-3+ or CC-BY-SA (version not stated)", "usr/share/icons/mate"),
    IconTheme("oxygen-icon-theme", "5:5.103.0-1", "LGPL-3+", "usr/share/icons/oxygen/base"),
    IconTheme("elementary-xfce-icon-theme", "0.17-1", "GPL-2+ (10 drawing/emblem icons CC-BY-SA-2.0)", "usr/share/icons/elementary-xfce"),
    IconTheme("faenza-icon-theme", "1.3.1-3", "GPL-3+", "usr/share/icons/Faenza"),
    IconTheme("lxde-icon-theme", "0.5.1-2.1", "LGPL-3+", "usr/share/icons/nuoveXT2"),
)
"""The themes read, in sample order (raster PNG themes; SVG-only themes such as Papirus and Breeze are not used)."""

SKIPPED_FOLDERS = frozenset({"animations", "panel", "stock", "symbolic", "scalable", "emotes", "extra", "extras",
                             "notifications"})
_SIZE = re.compile(r"^(\d+)(?:x(\d+))?$")
MAX_PNG_SIDE = 512
DEB_HINT = "run `make icon-data` (apt-get download + dpkg -x of the icon theme packages)"


@dataclasses.dataclass(frozen=True)
class IconThemesConfig:
    """What the icon-theme source keeps (module docstring).

    Attributes:
      themes: The themes read.
      min_themes: A class needs drawings by at least this many themes (after deduplication).
      min_size, target_size: PNG sizes (px) considered: the smallest >= target_size, else the largest >= min_size.
      max_hash_distance, max_rms: Two images are near-duplicates when their average-hash Hamming distance (of 64
        bits) is <= max_hash_distance and the RMS difference of their 16x16 thumbnails (in [0, 1]) is <= max_rms.
      min_std: A drawing whose grey standard deviation (of 255) is below this is blank on white (a white-only icon).
      exclude_target_words: Drop classes whose name shares a word with a Tux Paint stamp or a Fashion-MNIST class.
    """

    themes: tuple[IconTheme, ...] = THEMES
    min_themes: int = 3
    min_size: int = 32
    target_size: int = 64
    max_hash_distance: int = 4
    max_rms: float = 0.08
    min_std: float = 4.0
    exclude_target_words: bool = True

    def __post_init__(self) -> None:
        if self.min_themes < 2:
            raise ValueError(f"min_themes must be >= 2 (a class needs two drawings); got {self.min_themes}")
        if not 0 <= self.max_hash_distance < 64:
            raise ValueError(f"max_hash_distance must be in [0, 64); got {self.max_hash_distance}")
        if not 0.0 <= self.max_rms <= 1.0:
            raise ValueError(f"max_rms must be in [0, 1]; got {self.max_rms}")
        if not 0 < self.min_size <= self.target_size:
            raise ValueError(f"need 0 < min_size <= target_size; got {self.min_size}, {self.target_size}")


def _grey(images: np.ndarray) -> np.ndarray:
    """ITU-R 601 luma 0.299 R + 0.587 G + 0.114 B of RGB images (..., 3), float64."""
    return np.asarray(images, dtype=np.float64) @ np.array([0.299, 0.587, 0.114])


def average_hash(images: np.ndarray) -> np.ndarray:
    """8x8 average hashes of uint8 RGB images (N, H, W, 3), H and W multiples of 8 -> bool (N, 64).

    h = [g_ij > mean(g)] over the 8x8 box means g of the grey image (ITU-R 601 luma 0.299 R + 0.587 G + 0.114 B).
    """
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[-1] != 3 or images.shape[1] % 8 or images.shape[2] % 8:
        raise ValueError(f"images must be (N, H, W, 3) with H, W multiples of 8; got {images.shape}")
    grey = _grey(images)
    n, h, w = grey.shape
    cells = grey.reshape(n, 8, h // 8, 8, w // 8).mean(axis=(2, 4)).reshape(n, 64)
    return cells > cells.mean(axis=1, keepdims=True)


def hamming_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise Hamming distances of bool hashes a (N, 64) and b (M, 64) -> int (N, M)."""
    a, b = np.asarray(a, dtype=np.int32), np.asarray(b, dtype=np.int32)
    return a @ (1 - b).T + (1 - a) @ b.T


def thumbnails(images: np.ndarray) -> np.ndarray:
    """16x16 RGB box-mean thumbnails of uint8 images (N, H, W, 3), H and W multiples of 16 -> float (N, 768) in [0, 1]."""
    images = np.asarray(images)
    n, h, w, _ = images.shape
    return images.reshape(n, 16, h // 16, 16, w // 16, 3).mean(axis=(2, 4)).reshape(n, -1) / 255.0


def near_duplicates(images: np.ndarray, reference: np.ndarray, max_hash_distance: int, max_rms: float,
                    chunk: int = 1024) -> np.ndarray:
    """bool (N,): image i nearly duplicates some reference image.

    Near-duplicate = average-hash Hamming distance <= ``max_hash_distance`` AND root-mean-square
    difference of the 16x16 thumbnails <= ``max_rms`` (the hash alone matches any two centred
    blobs on white: a calculator and a gravestone at distance 0; the thumbnail check confirms).
    """
    out = np.zeros(len(images), bool)
    if len(images) == 0 or len(reference) == 0:
        return out
    ref_hash, ref_thumb = average_hash(reference), thumbnails(reference)
    ref_sq = (ref_thumb ** 2).sum(axis=1)
    for start in range(0, len(images), chunk):
        batch = images[start:start + chunk]
        close = hamming_distances(average_hash(batch), ref_hash) <= max_hash_distance
        t = thumbnails(batch)
        rms = np.sqrt(np.maximum((t ** 2).sum(axis=1)[:, None] + ref_sq[None] - 2 * t @ ref_thumb.T, 0) / t.shape[1])
        out[start:start + chunk] = (close & (rms <= max_rms)).any(axis=1)
    return out


def is_blank(images: np.ndarray, min_std: float) -> np.ndarray:
    """bool (N,): the grey image's standard deviation is below ``min_std`` (of 255): nothing drawn on the white."""
    grey = _grey(images)
    return grey.reshape(len(grey), -1).std(axis=1) < min_std


def icon_size(relative: pathlib.PurePath) -> int | None:
    """The pixel size a theme path names (a folder ``48x48`` or ``48``), None if none or if a skipped folder is in it."""
    size = None
    for part in relative.parts[:-1]:
        if part in SKIPPED_FOLDERS:
            return None
        m = _SIZE.match(part)
        if m and (m.group(2) is None or m.group(2) == m.group(1)):
            size = int(m.group(1))
    return size


def scan_theme(root: pathlib.Path, min_size: int, target_size: int) -> dict[str, pathlib.Path]:
    """{icon name: PNG path} of one theme: regular PNG files only, the size chosen as in the module docstring."""
    found: dict[str, tuple[tuple[int, int], pathlib.Path]] = {}
    for path in sorted(root.rglob("*.png")):
        if path.is_symlink() or not path.is_file() or path.stem.endswith("-symbolic"):
            continue
        size = icon_size(path.relative_to(root))
        if size is None or size < min_size:
            continue
        rank = (0, size) if size >= target_size else (1, -size)  # smallest >= target first, then the largest below
        if path.stem not in found or rank < found[path.stem][0]:
            found[path.stem] = (rank, path)
    return {name: path for name, (_, path) in found.items()}


def candidate_classes(per_theme: dict[str, dict[str, pathlib.Path]], min_themes: int) -> list[tuple[str, dict[str, pathlib.Path]]]:
    """(name, {theme: path}) of every icon name drawn by >= min_themes themes, names sorted, themes in dict order."""
    names = sorted({n for paths in per_theme.values() for n in paths})
    out = []
    for name in names:
        drawings = {theme: paths[name] for theme, paths in per_theme.items() if name in paths}
        if len(drawings) >= min_themes:
            out.append((name, drawings))
    return out


def _read_png(path: pathlib.Path, data: bytes, size: int) -> np.ndarray | None:
    """The PNG ``data`` (the bytes of ``path``) as RGB uint8 (size, size, 3); None if not a square PNG."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "PNG" or image.size[0] != image.size[1] or image.size[0] > MAX_PNG_SIDE:
                return None
            return to_rgb_uint8(image, size)
    except (UnidentifiedImageError, OSError) as err:
        log.warning("icon %s unreadable (%s); skipped", path, err)
        return None


def select_drawings(images: list[list[np.ndarray]], digests: list[list[str]], reference: np.ndarray,
                    config: IconThemesConfig) -> tuple[list[list[int]], dict[str, int]]:
    """Deduplication steps 1-3 of the module docstring (and blank drawings) on decoded drawings.

    Args:
      images: Per candidate class, its drawings (uint8 (S, S, 3)) in theme order.
      digests: The same shape: a digest of each drawing's file bytes.
      reference: uint8 (R, S, S, 3) evaluation-target images (Tux Paint stamps) no drawing may nearly duplicate.
      config: ``max_hash_distance``, ``max_rms``, ``min_std``, ``min_themes``.

    Returns:
      (kept drawing indices per class, [] for a dropped class; counts of the drawings and classes dropped
      by each rule: "blank", "near_duplicate_of_target", "near_duplicate_within_class",
      "class_same_bytes_as_earlier", "class_too_few_themes").
    """
    counts = dict.fromkeys(("blank", "near_duplicate_of_target", "near_duplicate_within_class",
                            "class_same_bytes_as_earlier", "class_too_few_themes"), 0)
    seen_digests: set[str] = set()
    kept_all: list[list[int]] = []
    flat = [im for drawings in images for im in drawings]
    leaked_flat = (near_duplicates(np.stack(flat), reference, config.max_hash_distance, config.max_rms)
                   if flat else np.zeros(0, bool))
    offset = 0
    for drawings, class_digests in zip(images, digests):
        leaked = leaked_flat[offset:offset + len(drawings)]
        offset += len(drawings)
        if any(d in seen_digests for d in class_digests):
            counts["class_same_bytes_as_earlier"] += 1
            kept_all.append([])
            continue
        seen_digests.update(class_digests)
        kept: list[int] = []
        if drawings:
            stack = np.stack(drawings)
            blank = is_blank(stack, config.min_std)
            for i in range(len(drawings)):
                if blank[i]:
                    counts["blank"] += 1
                elif leaked[i]:
                    counts["near_duplicate_of_target"] += 1
                elif kept and near_duplicates(stack[i:i + 1], stack[kept], config.max_hash_distance, config.max_rms)[0]:
                    counts["near_duplicate_within_class"] += 1
                else:
                    kept.append(i)
        if len(kept) < config.min_themes:
            counts["class_too_few_themes"] += 1
            kept = []
        kept_all.append(kept)
    return kept_all, counts


def load_icon_themes(image_size: int, *, download_dir: str | pathlib.Path, config: IconThemesConfig = IconThemesConfig(),
                     reference_images: np.ndarray | None = None, stamps_root: pathlib.Path = TUXPAINT_STAMPS) -> LabeledImages:
    """The icon-theme source (module docstring): class names = icon names, samples in theme order, RGB uint8 (N, S, S, 3).

    Args:
      image_size: Output side S (a multiple of 8).
      download_dir: Folder holding ``<package>/`` (each theme package unpacked by ``dpkg -x``).
      config: What to keep.
      reference_images: uint8 (R, S, S, 3) images no drawing may nearly duplicate (the Tux Paint stamps);
        None = read every PNG stamp under ``stamps_root``.
      stamps_root: Tux Paint stamps (for the reference images and the name words).

    Raises:
      SourceUnavailable: a theme package is not unpacked in ``download_dir`` (says what to run).
    """
    from tflite_train.data.emoji import name_words, target_words

    download_dir = pathlib.Path(download_dir)
    per_theme: dict[str, dict[str, pathlib.Path]] = {}
    for theme in config.themes:
        root = download_dir / theme.package / theme.theme_dir
        if not root.is_dir():
            raise SourceUnavailable(f"icon theme {theme.name} not found at {root}", DEB_HINT)
        per_theme[theme.name] = scan_theme(root, config.min_size, config.target_size)
    candidates = candidate_classes(per_theme, config.min_themes)
    words = target_words(stamps_root) if config.exclude_target_words else frozenset()
    shares_word = [bool(name_words(name.replace("-", " ")) & words) for name, _ in candidates]
    excluded_by_word = sum(shares_word)
    candidates = [c for c, shared in zip(candidates, shares_word) if not shared]
    if reference_images is None:
        reference_images = _stamp_images(stamps_root, image_size)
    images, digests = [], []
    for _, drawings in candidates:
        imgs, dg = [], []
        for path in drawings.values():
            data = path.read_bytes()
            image = _read_png(path, data, image_size)
            if image is not None:
                imgs.append(image)
                dg.append(hashlib.sha256(data).hexdigest())
        images.append(imgs)
        digests.append(dg)
    kept, counts = select_drawings(images, digests, reference_images, config)
    out_images, labels, names = [], [], []
    for (name, _), imgs, idx in zip(candidates, images, kept):
        if not idx:
            continue
        out_images += [imgs[i] for i in idx]
        labels += [len(names)] * len(idx)
        names.append(name)
    if len(names) < 2:
        raise SourceUnavailable(f"only {len(names)} icon names are drawn by >= {config.min_themes} themes", DEB_HINT)
    stats = {"excluded_by_target_word": excluded_by_word, **counts}
    log.info("icon themes: %d classes, %d images (%s)", len(names), len(out_images),
             ", ".join(f"{k} {v}" for k, v in stats.items()))
    return LabeledImages(images=np.stack(out_images), labels=np.asarray(labels, np.int32), class_names=tuple(names))


def _stamp_images(root: pathlib.Path, image_size: int) -> np.ndarray:
    """Every PNG stamp under ``root`` (thumbnails included), at image_size; empty if the folder is missing."""
    from PIL import Image, UnidentifiedImageError

    images = []
    if root.is_dir():
        for path in sorted(root.rglob("*.png")):
            try:
                with Image.open(path) as image:
                    images.append(to_rgb_uint8(image, image_size))
            except (UnidentifiedImageError, OSError) as err:
                log.warning("stamp %s unreadable (%s); skipped", path, err)
    else:
        log.warning("no Tux Paint stamps at %s: the leakage check has nothing to compare with", root)
    return np.stack(images) if images else np.zeros((0, image_size, image_size, 3), np.uint8)
