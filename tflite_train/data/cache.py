"""The on-disk data cache that ``tflite-train data prepare`` builds and training reads.

Layout of ``DIR``:

- ``<name>.npz`` per data set: ``images`` uint8 (N, S, S, 3) RGB, ``labels`` int32 (N,),
  ``class_names`` unicode (C,).
- ``manifest.json``: ``{"format": 2, "image_size": S, "preprocessing": PREPROCESSING, "datasets": {name: {"file", "sha256", "role"
  ("source" | "target"), "num_images", "num_classes", "shape", "min_per_class", "max_per_class",
  "splits": {"train"|"val"|"test": [class ids]}, "origin"}}}``. Source data sets have fixed
  train/val/test class splits; a target's classes are all ``test``.

Images that are not rendered at S x S (photos, stamps, emoji and icon PNGs) are prepared by
``tflite_train.runtime.to_model_input``, the device's own preprocessing (centre crop, bilinear), and
rounded to uint8: a cache at the model's input size holds exactly what ``adapt`` would feed the model.
One cache per input size (``--image-size``): a model is never fed images upscaled from a smaller cache.

Preparation is deterministic (same inputs -> same bytes, same checksums), idempotent (an
up-to-date cache is left alone) and verified (counts, shapes and checksums re-read after writing).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import pathlib
from collections.abc import Callable

import numpy as np

from tflite_train.data.dataset import LabeledImages, SourceUnavailable

log = logging.getLogger(__name__)

CACHE_FORMAT = 2
"""2: images prepared by the device's preprocessing (centre crop); 1 padded non-square images to a square."""
PREPROCESSING = "alpha on white, centre crop, bilinear (tflite_train.runtime.to_model_input), rounded to uint8"
MANIFEST = "manifest.json"
DEFAULT_IMAGE_SIZE = 64
SPLIT_SEED = 20240721
DOWNLOADS = "downloads/npm"
"""Folder of the cache (``<cache>/downloads/npm``) where ``make data`` puts the pinned npm tarballs."""
DEB_DOWNLOADS = "downloads/deb"
"""Folder of the cache where ``make icon-data`` unpacks the pinned icon-theme ``.deb`` files (``dpkg -x``)."""


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One data set of the cache.

    Attributes:
      name: File stem and manifest key.
      role: ``"source"`` (meta-training, split by class) or ``"target"`` (cross-domain, test only).
      origin: Human-readable provenance (package, path).
      loader: ``loader(image_size) -> LabeledImages``; may raise ``SourceUnavailable``.
      required: If False a missing source is skipped with a log line instead of failing.
      split_fractions: (train, val) class fractions for sources; the rest is test.
      downloads: Folder of the cache holding fetched files the loader reads ("" = none): the loader is then
        called as ``loader(image_size, <cache>/<downloads>)`` (``DOWNLOADS`` or ``DEB_DOWNLOADS``).
    """

    name: str
    role: str
    origin: str
    loader: Callable[[int], LabeledImages]
    required: bool = True
    split_fractions: tuple[float, float] = (0.7, 0.15)
    downloads: str = ""


def default_datasets() -> tuple[DatasetSpec, ...]:
    """The project's data sets: glyph source (Latin/Greek/Cyrillic, the shipped weights' source) and the larger
    multi-script glyph source ``glyphs_multiscript`` (``glyphs.MULTISCRIPT_CONFIG``); the ``emoji`` source (several
    vendors' drawings of the same emoji, ``tflite_train.data.emoji``; needs the npm tarballs that ``make data``
    fetches); the ``icon_themes`` source (freedesktop icon names drawn by several Debian icon themes,
    ``tflite_train.data.icon_themes``; needs the packages that ``make icon-data`` unpacks); fashion-MNIST, Tux Paint, Armenian/Georgian glyph targets; the
    ``line_icons`` target (line-art icon names drawn by several npm icon sets, disjoint by name from the sources,
    ``tflite_train.data.line_icons``; needs ``make npm-data`` and ``make icon-data``); optional: scikit-learn digits (if
    scikit-learn is installed), TFDS omniglot (if installed and prepared)."""
    from tflite_train.data.digits import load_sklearn_digits
    from tflite_train.data.emoji import EMOJI_STYLES, PACKAGES, EmojiConfig, load_emoji
    from tflite_train.data.fashion_mnist import load_fashion_mnist
    from tflite_train.data.glyphs import MULTISCRIPT_CONFIG, SCRIPTS, TARGET_CHARS, GlyphConfig, render_glyph_dataset
    from tflite_train.data.icon_themes import THEMES, IconThemesConfig, load_icon_themes
    from tflite_train.data.folder_datasets import load_tuxpaint_stamps
    from tflite_train.data.line_icons import describe as describe_line_icons
    from tflite_train.data.line_icons import load_line_icons
    from tflite_train.data.tfds_source import load_tfds

    icons = IconThemesConfig()
    return (
        DatasetSpec("glyphs", "source", "Latin/Greek/Cyrillic letters + digits rendered from Debian font packages",
                    lambda s: render_glyph_dataset(GlyphConfig(), s)),
        DatasetSpec("glyphs_multiscript", "source", f"letters of {len(SCRIPTS) + 3} scripts (Latin, Greek, Cyrillic, "
                    + ", ".join(n for n, _ in SCRIPTS) + ") + digits rendered from Debian font packages, 10 per class",
                    lambda s: render_glyph_dataset(MULTISCRIPT_CONFIG, s)),
        DatasetSpec("emoji", "source", "emoji drawn in the styles " + ", ".join(s for s, _ in EMOJI_STYLES) + " (npm "
                    + ", ".join(p.spec for p in PACKAGES.values()) + f"), >= {EmojiConfig().min_vendors} vendors per "
                    "class, no Flags/Component, no emoji sharing a name word with a Tux Paint stamp or Fashion-MNIST class",
                    lambda s, downloads: load_emoji(s, download_dir=downloads), required=False, downloads=DOWNLOADS),
        DatasetSpec("icon_themes", "source", "freedesktop icon names drawn by the Debian icon themes "
                    + ", ".join(t.spec for t in THEMES) + f" (PNG), >= {icons.min_themes} themes per class, "
                    f"near-duplicates (8x8 aHash <= {icons.max_hash_distance} bits and 16x16 RMS <= "
                    f"{icons.max_rms:g}) of Tux Paint stamps and within a class dropped, no name sharing a "
                    "word with a Tux Paint stamp or Fashion-MNIST class",
                    lambda s, downloads: load_icon_themes(s, download_dir=downloads), required=False,
                    downloads=DEB_DOWNLOADS),
        DatasetSpec("fashion_mnist", "target", "Debian dataset-fashion-mnist, t10k, 100 per class",
                    lambda s: load_fashion_mnist(s)),
        DatasetSpec("tuxpaint", "target", "Debian tuxpaint-stamps-default, category/subcategory folders",
                    lambda s: load_tuxpaint_stamps(s)),
        DatasetSpec("glyphs_armenian_georgian", "target", "Armenian + Georgian letters rendered from fonts",
                    lambda s: render_glyph_dataset(GlyphConfig(chars=TARGET_CHARS, min_fonts=4), s)),
        DatasetSpec("line_icons", "target", describe_line_icons(),
                    lambda s, downloads: load_line_icons(s, download_dir=downloads,
                                                         deb_dir=pathlib.Path(downloads).parents[1] / DEB_DOWNLOADS),
                    required=False, downloads=DOWNLOADS),
        DatasetSpec("digits", "target", "scikit-learn load_digits (8x8 handwritten digits)",
                    lambda s: load_sklearn_digits(s), required=False),
        DatasetSpec("tfds_omniglot", "target", "TensorFlow Datasets omniglot (only if installed and prepared)",
                    lambda s: load_tfds("omniglot", s, split="test", max_per_class=20), required=False),
    )


def image_folder_spec(name: str, root: str, role: str = "target") -> DatasetSpec:
    """A user's ``root/<class>/*.png|jpg`` folder as a cache data set (``role`` "source" or "target")."""
    from tflite_train.data.folder_datasets import load_image_folder

    if role not in ("source", "target"):
        raise ValueError(f"role must be 'source' or 'target', got {role!r}")
    if not name.isidentifier():
        raise ValueError(f"name must be an identifier (it names a file), got {name!r}")
    return DatasetSpec(name, role, f"image folder {root}", lambda s: load_image_folder(root, s, min_per_class=2))


def class_splits(num_classes: int, fractions: tuple[float, float], seed: int = SPLIT_SEED) -> dict[str, list[int]]:
    """Fixed train/val/test class ids: a seeded permutation cut at round(f_train*C), round((f_train+f_val)*C)."""
    order = np.random.default_rng(seed).permutation(num_classes)
    a = int(round(fractions[0] * num_classes))
    b = int(round((fractions[0] + fractions[1]) * num_classes))
    return {k: sorted(int(c) for c in v) for k, v in (("train", order[:a]), ("val", order[a:b]), ("test", order[b:]))}


def sha256_file(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_npz(path: pathlib.Path, data: LabeledImages) -> None:
    tmp = path.with_name(path.name + ".tmp.npz")
    # np.savez_compressed writes fixed zip timestamps, so identical arrays give identical bytes.
    np.savez_compressed(tmp, images=data.images, labels=data.labels, class_names=np.asarray(data.class_names, dtype=str))
    tmp.replace(path)


def read_npz(path: pathlib.Path) -> LabeledImages:
    """Reads one cache file. Raises ValueError when it is missing or corrupt."""
    import zipfile

    if not path.exists():
        raise ValueError(f"cache file {path} is missing; run `tflite-train data prepare --out {path.parent}`")
    try:
        with np.load(path, allow_pickle=False) as z:
            return LabeledImages(images=z["images"], labels=z["labels"].astype(np.int32), class_names=tuple(str(c) for c in z["class_names"]))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError, TypeError) as err:
        raise ValueError(f"cache file {path} is corrupt ({type(err).__name__}: {err}); delete it and re-run `tflite-train data prepare`") from err


def _entry(spec: DatasetSpec, data: LabeledImages, path: pathlib.Path) -> dict:
    counts = data.class_counts()
    entry = {
        "file": path.name,
        "sha256": sha256_file(path),
        "role": spec.role,
        "origin": spec.origin,
        "num_images": len(data),
        "num_classes": data.num_classes,
        "shape": list(data.images.shape[1:]),
        "min_per_class": int(counts.min()),
        "max_per_class": int(counts.max()),
    }
    entry["splits"] = (
        class_splits(data.num_classes, spec.split_fractions) if spec.role == "source" else {"train": [], "val": [], "test": list(range(data.num_classes))}
    )
    return entry


def read_manifest(cache_dir: str | pathlib.Path) -> dict:
    """The cache's manifest. Raises ValueError when missing or unreadable."""
    path = pathlib.Path(cache_dir) / MANIFEST
    if not path.exists():
        raise ValueError(f"no {MANIFEST} in {cache_dir}; run `tflite-train data prepare --out {cache_dir}`")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is corrupt: {err}") from err


def verify_cache(cache_dir: str | pathlib.Path, *, deep: bool = False) -> dict:
    """Checks every listed file's sha256 (and, with ``deep``, re-reads counts and shapes).

    Returns the manifest. Raises ValueError naming the first missing or corrupt file.
    """
    cache_dir = pathlib.Path(cache_dir)
    manifest = read_manifest(cache_dir)
    for name, entry in manifest["datasets"].items():
        path = cache_dir / entry["file"]
        if not path.exists():
            raise ValueError(f"cache file {path} for {name!r} is missing; re-run `tflite-train data prepare`")
        digest = sha256_file(path)
        if digest != entry["sha256"]:
            raise ValueError(f"cache file {path} is corrupt: sha256 {digest[:12]}... != manifest {entry['sha256'][:12]}...")
        if deep:
            data = read_npz(path)
            if len(data) != entry["num_images"] or data.num_classes != entry["num_classes"] or list(data.images.shape[1:]) != entry["shape"]:
                raise ValueError(f"cache file {path} disagrees with the manifest (counts or shapes)")
    return manifest


def prepare_cache(
    out: str | pathlib.Path,
    *,
    image_size: int = DEFAULT_IMAGE_SIZE,
    datasets: tuple[DatasetSpec, ...] | None = None,
    force: bool = False,
    downloads_root: str | pathlib.Path | None = None,
) -> dict:
    """Builds (or confirms) the cache in ``out``; returns the manifest.

    Idempotent and incremental: a data set that ``out``'s manifest already holds for the same image
    size with the same ``origin`` description (a changed source definition changes its origin), its
    file passing its checksum, is kept as it is; only the others are built (all with ``force``).
    When every data set is kept, nothing is written. ``downloads_root`` is the cache whose ``downloads/``
    folder holds the fetched npm tarballs and icon-theme packages (default: ``out``), so that a second cache
    at another image size reads the same files.

    Raises:
      ValueError: bad ``image_size``; a required source is missing (message says what to install);
        a written file fails verification.
    """
    if not isinstance(image_size, int) or image_size < 32:
        raise ValueError(f"image_size must be an int >= 32 (MCUNet's total stride), got {image_size!r}")
    out = pathlib.Path(out)
    downloads_root = out if downloads_root is None else pathlib.Path(downloads_root)
    specs = default_datasets() if datasets is None else datasets
    reusable: dict = {}
    old_names: set = set()
    if not force and (out / MANIFEST).exists():
        try:
            manifest = verify_cache(out)
        except ValueError as err:
            log.warning("existing cache not usable (%s); rebuilding", err)
        else:
            if manifest.get("format") == CACHE_FORMAT and manifest.get("image_size") == image_size:
                reusable = {s.name: manifest["datasets"][s.name] for s in specs
                            if manifest["datasets"].get(s.name, {}).get("origin") == s.origin}
            old_names = set(manifest["datasets"])
            if len(reusable) == len(specs):
                log.info("cache in %s is up to date (%d data sets); nothing to do", out, len(manifest["datasets"]))
                return manifest
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"format": CACHE_FORMAT, "image_size": image_size, "preprocessing": PREPROCESSING, "datasets": {}}
    built = False
    for spec in specs:
        if spec.name in reusable:  # same origin, checksum verified above: kept as it is
            manifest["datasets"][spec.name] = reusable[spec.name]
            log.info("%s is up to date", spec.name)
            continue
        log.info("preparing %s (%s)", spec.name, spec.origin)
        try:
            data = spec.loader(image_size, downloads_root / spec.downloads) if spec.downloads else spec.loader(image_size)
        except SourceUnavailable as err:
            if spec.required:
                raise ValueError(f"data set {spec.name!r} unavailable: {err}") from err
            log.warning("skipping optional data set %s: %s", spec.name, err)
            continue
        if data.images.shape[1:3] != (image_size, image_size):
            raise ValueError(f"{spec.name} loader returned images of shape {data.images.shape[1:]}, wanted {image_size}")
        path = out / f"{spec.name}.npz"
        _write_npz(path, data)
        built = True
        entry = _entry(spec, data, path)
        check = read_npz(path)
        if len(check) != len(data) or check.num_classes != data.num_classes or not np.array_equal(check.labels, data.labels):
            raise ValueError(f"verification of {path} failed after writing")
        manifest["datasets"][spec.name] = entry
        log.info("  %s: %d images, %d classes (%d..%d per class), sha256 %s", spec.name, len(data), data.num_classes,
                 entry["min_per_class"], entry["max_per_class"], entry["sha256"][:12])
    if not built and set(manifest["datasets"]) == old_names:  # only unavailable optional sources were retried
        log.info("cache in %s is up to date (%d data sets); nothing to do", out, len(manifest["datasets"]))
        return manifest
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(out / MANIFEST)
    return manifest


def load_split(cache_dir: str | pathlib.Path, name: str, split: str = "test") -> LabeledImages:
    """The images of one class split of a cached data set (relabelled 0..C_split-1), checksum-verified."""
    cache_dir = pathlib.Path(cache_dir)
    manifest = read_manifest(cache_dir)
    if name not in manifest["datasets"]:
        fetched = {spec.name for spec in default_datasets() if spec.downloads}
        hint = ("; run `make data` (it fetches the npm tarballs and the icon-theme packages) to add it"
                if name in fetched else "")
        raise ValueError(f"name must be one of {sorted(manifest['datasets'])}, got {name!r}{hint}")
    entry = manifest["datasets"][name]
    if split not in ("train", "val", "test", "all"):
        raise ValueError(f"split must be train|val|test|all, got {split!r}")
    path = cache_dir / entry["file"]
    if path.exists() and sha256_file(path) != entry["sha256"]:
        raise ValueError(f"cache file {path} is corrupt: checksum differs from the manifest")
    data = read_npz(path)
    if split == "all":
        return data
    classes = entry["splits"][split]
    if not classes:
        raise ValueError(f"{name!r} has no {split!r} classes (role {entry['role']})")
    return data.subset_classes(classes)
