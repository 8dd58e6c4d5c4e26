"""Line-art icons drawn by several vendors under the same name: an evaluation target (issue 28).

A class is one normalised icon name (``chevron-down``, ``wallet``, ``sofa``, ...) drawn by at least
``LineIconsConfig.min_vendors`` of the icon sets of ``VENDORS`` (npm packages pinned in ``PACKAGES``:
Lucide, Tabler, Phosphor, Remix Icon, Ionicons, Iconoir, Heroicons, Bootstrap Icons, Eva Icons,
Octicons); its samples are the vendors' drawings, **one per vendor**, each in the vendor's line
(outline) style only: filled, solid, sharp, duotone and size variants are not read. Feather is not a
vendor: Lucide is its fork and redraws most Feather icons under the same names.

**Name rule** (``Vendor.icon_name``): the member's file stem in the vendor's line-style folder,
lower-cased, with the vendor's style suffix removed (``-line`` of Remix Icon, ``-outline`` of
Ionicons and Eva, ``-24`` of Octicons; size and style folders such as ``24/outline`` or
``assets/regular`` are only where the files are read from). A vendor that ships an other-style
file beside the line one (Bootstrap's ``-fill``, Remix Icon's ``-fill``) has those skipped; Remix
Icon's single-style icons (no ``-line``/``-fill`` file, e.g. ``bold``) are read under their plain
stem. Ionicons' plain stems are its filled style and are not read.

Classes dropped, in this order (``drop_reason``; counts are logged and returned by ``line_icon_classes``):

1. ``numbered_variant``: the name's last ``-`` token is a number (``menu-2``, ``dice-3``): a vendor's
   alternative drawing, not a concept of its own.
2. ``brand_logo``: a trademark that every vendor copies rather than draws (Remix Icon's ``Logos``
   folder, Tabler's ``brand-<name>``, Ionicons' ``logo-<name>``, Phosphor's ``<name>-logo``).
3. ``no_name_word``: the name has no word of ``emoji.name_words`` (``x``, ``at``, ``hd``).
4. ``emoji_word``: a name word is a word of the CLDR name of an emoji the emoji source considers (every
   ``emoji-datasource`` entry outside its excluded categories; both its OpenMoji annotation and its
   ``emoji-datasource`` name: a superset of the source's classes).
5. ``icon_theme_word``: a name word is a word of a freedesktop icon name the icon_themes source
   considers (drawn by >= ``IconThemesConfig.min_themes`` of its themes, before its deduplication).
6. ``glyph_word``: a name word is a word of the Unicode name of a glyph class (``glyphs.MULTISCRIPT_CHARS``,
   a superset of ``glyphs.SOURCE_CHARS``) or of a script name of ``glyphs.SCRIPTS``.

Words are ``emoji.name_words`` (lower-case letter runs of >= 3 letters, plural "s" dropped, minus
``emoji.STOP_WORDS``; ``-`` separates words). Then each drawing is rendered; a blank drawing and a
drawing that nearly duplicates an earlier vendor's drawing of the class (``icon_themes.near_duplicates``:
8x8 aHash and 16x16 RMS) are dropped, and a class left with fewer than ``min_vendors`` drawings is
dropped (``class_too_few_vendors``). Of the rest, at most ``max_classes`` are kept, a seeded choice
(``over_cap``).

**Rendering** (``render_icon``): ``currentColor`` is set to black, ``rsvg-convert`` (Debian
``librsvg2-bin``) renders the SVG on white at ``oversample`` times the output size, the drawing is
cropped to its ink bounding box, centred on a white square with a ``margin`` (fraction of the side)
on each side and downsampled (Lanczos) to the output size, then stored as grey (ITU-R 601 luma) in
all three channels: dark strokes on white. The ``npm-data`` Makefile target fetches the tarballs;
nothing is fetched at run time.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import io
import logging
import pathlib
import re
import unicodedata

import numpy as np

from tflite_train.data.dataset import LabeledImages, SourceUnavailable
from tflite_train.data.line_icon_vendors import PACKAGES, VENDORS, Vendor
from tflite_train.data.npm_packages import NpmPackage, read_members
from tflite_train.data.svg_raster import rasterize_svg

log = logging.getLogger(__name__)


DROP_REASONS = ("numbered_variant", "brand_logo", "no_name_word", "emoji_word", "icon_theme_word", "glyph_word")
RENDER_DROPS = ("blank", "near_duplicate_within_class", "class_too_few_vendors", "over_cap")
CAP_SEED = 20240728


@dataclasses.dataclass(frozen=True)
class LineIconsConfig:
    """What the line-icon target keeps (module docstring).

    Attributes:
      vendors: The vendors read (sample order).
      min_vendors: A class needs drawings by at least this many vendors (before and after deduplication).
      max_classes: At most this many classes (a seeded choice among the kept ones); 0 = no cap.
      seed: Seed of that choice.
      margin: White margin on each side of the centred drawing, as a fraction of the image side.
      oversample: Render at this many times the output size before cropping and downsampling.
      max_hash_distance, max_rms, min_std: Near-duplicate and blank thresholds (``icon_themes`` defaults).
      exclude_source_words: Apply the name-word rules 4-6 (disjointness from the meta-training sources).
    """

    vendors: tuple[Vendor, ...] = VENDORS
    min_vendors: int = 3
    max_classes: int = 200
    seed: int = CAP_SEED
    margin: float = 0.1
    oversample: int = 4
    max_hash_distance: int = 4
    max_rms: float = 0.08
    min_std: float = 4.0
    exclude_source_words: bool = True

    def __post_init__(self) -> None:
        if self.min_vendors < 2:
            raise ValueError(f"min_vendors must be >= 2 (a class needs two drawings); got {self.min_vendors}")
        if not 0.0 <= self.margin < 0.5:
            raise ValueError(f"margin must be in [0, 0.5); got {self.margin}")
        if self.oversample < 1 or self.max_classes < 0:
            raise ValueError(f"need oversample >= 1 and max_classes >= 0; got {self.oversample}, {self.max_classes}")


def name_words(name: str) -> frozenset[str]:
    """The words of an icon name (``-`` and ``_`` separate words): ``emoji.name_words``."""
    from tflite_train.data.emoji import name_words as words

    return words(name.replace("-", " ").replace("_", " "))


def is_numbered_variant(name: str) -> bool:
    """The name's last ``-`` token is a number (``menu-2``; not ``grid-3x3``)."""
    return name.rpartition("-")[2].isdigit()


def emoji_words(npm_dir: pathlib.Path) -> frozenset[str]:
    """Words of the names of every emoji the emoji source considers (rule 4 of the module docstring)."""
    from tflite_train.data import emoji

    entries, openmoji = emoji._catalogue(npm_dir)  # the emoji source's own catalogue reader
    words: set[str] = set()
    for e in entries:
        if e["category"] in emoji.EXCLUDED_CATEGORIES:
            continue
        words |= emoji.name_words(e["name"].lower())
        words |= emoji.name_words(openmoji.get(emoji._key(e["unified"]), {}).get("annotation") or "")
    return frozenset(words)


def icon_theme_words(deb_dir: pathlib.Path) -> frozenset[str]:
    """Words of the freedesktop icon names the icon_themes source considers (rule 5 of the module docstring)."""
    from tflite_train.data.icon_themes import DEB_HINT, IconThemesConfig, candidate_classes, scan_theme

    config = IconThemesConfig()
    per_theme = {}
    for theme in config.themes:
        root = deb_dir / theme.package / theme.theme_dir
        if not root.is_dir():
            raise SourceUnavailable(f"icon theme {theme.name} not found at {root} (the line_icons target is kept "
                                    "disjoint from its names)", DEB_HINT)
        per_theme[theme.name] = scan_theme(root, config.min_size, config.target_size)
    words: set[str] = set()
    for name, _ in candidate_classes(per_theme, config.min_themes):
        words |= name_words(name)
    return frozenset(words)


def glyph_words() -> frozenset[str]:
    """Words of the Unicode names (``unicodedata``) of the glyph classes and of the glyph script names (rule 6)."""
    from tflite_train.data.emoji import name_words as words
    from tflite_train.data.glyphs import MULTISCRIPT_CHARS, SCRIPTS

    out: set[str] = set()
    for char in MULTISCRIPT_CHARS:
        out |= words(unicodedata.name(char, ""))
    for script, _ in SCRIPTS:
        out |= words(script)
    return frozenset(out)


def drop_reason(name: str, brands: frozenset[str], source_words: dict[str, frozenset[str]]) -> str | None:
    """The first rule of the module docstring (1-6) that drops the class ``name``, None if it is kept.

    ``source_words`` maps ``emoji_word`` / ``icon_theme_word`` / ``glyph_word`` to the words of that source
    (a missing key: the rule is not applied).
    """
    if is_numbered_variant(name):
        return "numbered_variant"
    if name in brands:
        return "brand_logo"
    words = name_words(name)
    if not words:
        return "no_name_word"
    for reason in ("emoji_word", "icon_theme_word", "glyph_word"):
        if words & source_words.get(reason, frozenset()):
            return reason
    return None


def _member_names(package: NpmPackage, download_dir: pathlib.Path, folder: str) -> list[str]:
    """Names of the tarball's members under ``folder`` (no bytes kept: ``wanted`` only records and refuses)."""
    names: list[str] = []

    def record(name: str) -> bool:
        if name.startswith(folder):
            names.append(name)
        return False

    read_members(package, download_dir, record)
    return names


def line_icon_classes(download_dir: str | pathlib.Path, *, deb_dir: str | pathlib.Path | None = None,
                      config: LineIconsConfig = LineIconsConfig()) -> tuple[list[tuple[str, dict[str, str]]], dict[str, int]]:
    """The candidate classes after rules 1-6: ([(name, {vendor: member})] names sorted, vendors in config order;
    counts: ``names_with_enough_vendors`` and one per ``DROP_REASONS``).

    Args:
      download_dir: Folder of the npm tarballs (these packages' and the emoji source's).
      deb_dir: Folder of the unpacked icon-theme packages (rule 5); required when ``config.exclude_source_words``.
    """
    download_dir = pathlib.Path(download_dir)
    per_vendor: dict[str, dict[str, str]] = {}
    brands: set[str] = set()
    for vendor in config.vendors:
        members = _member_names(PACKAGES[vendor.key], download_dir, vendor.folder)
        per_vendor[vendor.key] = vendor.drawings(members)
        brands |= {b for b in map(vendor.brand, members) if b}
    names = sorted({n for drawings in per_vendor.values() for n in drawings})
    source_words: dict[str, frozenset[str]] = {}
    if config.exclude_source_words:
        if deb_dir is None:
            raise ValueError("deb_dir is needed to exclude the icon_themes source's names")
        source_words = {"emoji_word": emoji_words(download_dir), "icon_theme_word": icon_theme_words(pathlib.Path(deb_dir)),
                        "glyph_word": glyph_words()}
    counts = dict.fromkeys(("names_with_enough_vendors",) + DROP_REASONS, 0)
    classes = []
    for name in names:
        drawings = {v.key: per_vendor[v.key][name] for v in config.vendors if name in per_vendor[v.key]}
        if len(drawings) < config.min_vendors:
            continue
        counts["names_with_enough_vendors"] += 1
        reason = drop_reason(name, frozenset(brands), source_words)
        if reason:
            counts[reason] += 1
        else:
            classes.append((name, drawings))
    return classes, counts


def describe(config: LineIconsConfig = LineIconsConfig()) -> str:
    """The data set's provenance and rules in one line (the cache's ``origin``: a change rebuilds the data set)."""
    from tflite_train.data import emoji
    from tflite_train.data.icon_themes import THEMES

    specs = ", ".join(PACKAGES[v.key].spec for v in config.vendors)
    cap = f"<= {config.max_classes} classes (seeded choice, seed {config.seed})" if config.max_classes else "no class cap"
    words = (" no name sharing a word with an emoji of the emoji source (npm " + ", ".join(p.spec for p in emoji.PACKAGES.values())
             + "), a freedesktop icon name of the icon_themes source (" + ", ".join(t.spec for t in THEMES)
             + f") or a glyph class (Unicode {unicodedata.unidata_version} names),") if config.exclude_source_words else ""
    return (f"line-art icons of npm {specs}, one line-style drawing per vendor, one class per normalised name drawn "
            f"by >= {config.min_vendors} vendors; numbered variants and brand logos dropped,{words} drawings nearly "
            f"duplicating an earlier vendor's (8x8 aHash <= {config.max_hash_distance} bits and 16x16 RMS <= "
            f"{config.max_rms:g}) dropped; {cap}; rsvg-convert, ink box centred with margin {config.margin:g}, "
            f"{config.oversample}x oversampled, dark strokes on white")


def render_icon(svg: bytes, size: int, *, margin: float = 0.1, oversample: int = 4) -> np.ndarray | None:
    """An SVG icon as dark strokes on white, uint8 (size, size, 3) grey in all channels (module docstring);
    None if nothing is drawn.

    Raises:
      SourceUnavailable: rsvg-convert is missing.
      ValueError: rsvg-convert fails on the SVG.
    """
    from PIL import Image

    svg = re.sub(rb"(?i)currentcolor", b"#000000", svg)
    side = size * oversample
    png = rasterize_svg(svg, side, "the line_icons target")
    with Image.open(io.BytesIO(png)) as image:
        rgb = np.asarray(image.convert("RGB"), np.float64)
    grey = np.clip(np.rint(rgb @ np.array([0.299, 0.587, 0.114])), 0, 255).astype(np.uint8)
    ink = np.argwhere(grey < 255)
    if ink.size == 0:
        return None
    (top, left), (bottom, right) = ink.min(axis=0), ink.max(axis=0) + 1
    h, w = bottom - top, right - left
    canvas_side = int(np.ceil(max(h, w) / (1.0 - 2.0 * margin)))
    canvas = Image.new("L", (canvas_side, canvas_side), 255)
    canvas.paste(Image.fromarray(grey[top:bottom, left:right]), ((canvas_side - w) // 2, (canvas_side - h) // 2))
    out = np.asarray(canvas.resize((size, size), Image.LANCZOS), np.uint8)
    return np.repeat(out[..., None], 3, axis=-1)


def load_line_icons(image_size: int, *, download_dir: str | pathlib.Path, deb_dir: str | pathlib.Path | None = None,
                    config: LineIconsConfig = LineIconsConfig()) -> LabeledImages:
    """The line-icon target (module docstring): class names = normalised icon names (sorted), one sample per
    vendor in ``config.vendors`` order, dark strokes on white, RGB uint8 (N, S, S, 3).

    Args:
      image_size: Output side S (a multiple of 16, for the near-duplicate thumbnails).
      download_dir: Folder of the pinned npm tarballs (``make npm-data``).
      deb_dir: Folder of the unpacked icon-theme packages (``make icon-data``), for the name rule 5.
      config: What to keep.

    Raises:
      SourceUnavailable: a tarball, an icon theme or rsvg-convert is missing (says what to run / install).
      ValueError: a tarball fails its integrity check or holds a refused member; rsvg-convert fails.
    """
    from tflite_train.data.icon_themes import is_blank, near_duplicates

    download_dir = pathlib.Path(download_dir)
    classes, counts = line_icon_classes(download_dir, deb_dir=deb_dir, config=config)
    blobs: dict[tuple[str, str], bytes] = {}  # by (vendor, member): two packages may hold the same member path
    for vendor in config.vendors:
        wanted = {d[vendor.key] for _, d in classes if vendor.key in d}
        if wanted:
            found = read_members(PACKAGES[vendor.key], download_dir, wanted.__contains__)
            blobs.update(((vendor.key, member), data) for member, data in found.items())
    jobs = [item for _, drawings in classes for item in drawings.items()]

    def draw(job: tuple[str, str]) -> np.ndarray | None:
        return render_icon(blobs[job], image_size, margin=config.margin, oversample=config.oversample)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        rendered = dict(zip(jobs, pool.map(draw, jobs)))
    counts.update(dict.fromkeys(RENDER_DROPS, 0))
    kept: list[tuple[str, list[np.ndarray]]] = []
    for name, drawings in classes:
        images: list[np.ndarray] = []
        for job in drawings.items():
            image = rendered[job]
            if image is None or is_blank(image[None], config.min_std)[0]:
                counts["blank"] += 1
            elif images and near_duplicates(image[None], np.stack(images), config.max_hash_distance, config.max_rms)[0]:
                counts["near_duplicate_within_class"] += 1
            else:
                images.append(image)
        if len(images) < config.min_vendors:
            counts["class_too_few_vendors"] += 1
        else:
            kept.append((name, images))
    if config.max_classes and len(kept) > config.max_classes:
        chosen = sorted(np.random.default_rng(config.seed).choice(len(kept), config.max_classes, replace=False))
        counts["over_cap"] = len(kept) - config.max_classes
        kept = [kept[int(i)] for i in chosen]
    if len(kept) < 2:
        raise SourceUnavailable(f"only {len(kept)} icon names are drawn by >= {config.min_vendors} vendors",
                                "run `make data`")
    images = [im for _, ims in kept for im in ims]
    labels = [c for c, (_, ims) in enumerate(kept) for _ in ims]
    log.info("line icons: %d classes, %d images (%s)", len(kept), len(images),
             ", ".join(f"{k} {v}" for k, v in counts.items()))
    return LabeledImages(images=np.stack(images), labels=np.asarray(labels, np.int32),
                         class_names=tuple(name for name, _ in kept))
