"""Emoji drawn by several vendors for the same code points: a meta-training source of many classes.

A class is one emoji (a code-point sequence of ``emoji-datasource``'s ``emoji.json``, skin-tone
variants not included); its samples are the drawings of the vendors' styles that have it
(``EMOJI_STYLES``), each composited onto white and resized to the cache's image size:

- ``google`` (Noto, Apache-2.0) and ``twitter`` (Twemoji, CC-BY 4.0): 64 px RGBA PNGs of the npm
  packages ``emoji-datasource-google`` / ``-twitter`` (only where ``has_img_<vendor>`` is true,
  i.e. not the packages' fallback images);
- ``openmoji`` (CC-BY-SA 4.0): SVG only (``openmoji`` ``color/svg/<HEX>.svg``);
- ``fluent_flat``, ``fluent_modern``, ``fluent_high_contrast`` (Microsoft Fluent emoji, MIT): SVG
  only (``fluentui-emoji`` ``icons/<style>/<cldr-name-slug>.svg``), matched by the CLDR short name
  that ``openmoji``'s ``data/openmoji.json`` gives for the code points.

SVGs are rendered by ``rsvg-convert`` (Debian ``librsvg2-bin``) at prepare time; Pillow cannot.
A class needs drawings from at least ``min_vendors`` different vendors (google, twitter, openmoji,
fluent; the three Fluent styles count as one vendor).

Disjointness from the evaluation targets: the categories ``Flags`` (near-identical striped
rectangles) and ``Component`` are left out, and so is every emoji whose CLDR short name shares a word
(``name_words``: lower-case letter runs of >= 3 letters, a trailing "s" dropped, minus
``STOP_WORDS``) with a Tux Paint stamp (file stem or folder name under the stamps root) or a
Fashion-MNIST class name. ``excluded_emoji`` lists them; the cache's origin string records the count.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import io
import json
import logging
import pathlib
import re

import numpy as np

from tflite_train.data.dataset import LabeledImages, SourceUnavailable, to_rgb_uint8
from tflite_train.data.folder_datasets import TUXPAINT_STAMPS
from tflite_train.data.npm_packages import NpmPackage, read_members
from tflite_train.data.svg_raster import rasterize_svg

log = logging.getLogger(__name__)

DEFAULT_DOWNLOAD_DIR = pathlib.Path("build/downloads/npm")

PACKAGES: dict[str, NpmPackage] = {
    "google": NpmPackage(
        "emoji-datasource-google", "16.0.0",
        "sha512-ZRexfzs7MVoLnmzZmNsO4TKhnAJp5D++Vm6PpUpH/jEQQlemp3l88CjZ+DoZ2faM9R4QxZkOPJCoT8DlPhfQ3A==",
        "MIT", "Apache-2.0 (Noto emoji)"),
    "twitter": NpmPackage(
        "emoji-datasource-twitter", "16.0.0",
        "sha512-7F+uCuHH+7Qnrc15P5tnbvKkg9E6tlzi4MnT2uW1RlN4pLYTza6cP/dstIfSDMtpjFLWuZewWg8jBbuL2eyELQ==",
        "MIT", "CC-BY-4.0 (Twemoji graphics)"),
    "openmoji": NpmPackage(
        "openmoji", "17.0.0",
        "sha512-EBnYrNGdcdw+OSXmENeNE1yBNRu6tOraTmoOyUbJkTmvT/+XETp8RZLSJFzD3lrPc5N9CzsyPnRTk0Vp4UaI9w==",
        "LGPL-3.0 (code)", "CC-BY-SA-4.0 (graphics)"),
    "fluent": NpmPackage(
        "fluentui-emoji", "1.3.0",
        "sha512-JTXXwqIie2rWTgOkIJDJxr0WtwTz2WU4kdOq8buLVThYwQ264aFR2jdTyuon2oEbLqqGMT64zI4btyn1saB2xw==",
        "MIT", "MIT (Microsoft Fluent emoji)"),
}
"""The pinned npm packages (``dist.integrity`` from the registry), by vendor."""

EMOJI_STYLES: tuple[tuple[str, str], ...] = (
    ("google", "google"),
    ("twitter", "twitter"),
    ("openmoji", "openmoji"),
    ("fluent_flat", "fluent"),
    ("fluent_modern", "fluent"),
    ("fluent_high_contrast", "fluent"),
)
"""(style, vendor): one sample per style a class has."""

FASHION_MNIST_NAMES = ("t-shirt", "top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
                       "ankle boot")
STOP_WORDS = frozenset({"the", "and", "with", "for", "without", "face", "button", "sign", "symbol", "mark", "black",
                        "white", "red", "blue", "green", "yellow", "orange", "purple", "brown", "small", "large",
                        "big", "little", "old", "new", "one", "two", "three", "left", "right", "up", "down", "top",
                        "bottom", "open", "closed", "light", "dark", "medium"})
EXCLUDED_CATEGORIES = ("Flags", "Component")


@dataclasses.dataclass(frozen=True)
class EmojiConfig:
    """What the emoji source keeps.

    Attributes:
      styles: Styles to draw (names from ``EMOJI_STYLES``).
      min_vendors: A class needs drawings from at least this many vendors.
      exclude_target_words: Drop emoji whose CLDR name shares a word with a Tux Paint stamp or a
        Fashion-MNIST class (module docstring).
    """

    styles: tuple[str, ...] = tuple(s for s, _ in EMOJI_STYLES)
    min_vendors: int = 3
    exclude_target_words: bool = True


def name_words(text: str) -> frozenset[str]:
    """Lower-case letter runs of >= 3 letters, a plural "s" dropped (not from "ss"), minus ``STOP_WORDS``."""
    words = set()
    for w in re.findall(r"[a-z]+", text.lower()):
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        if len(w) >= 3 and w not in STOP_WORDS:
            words.add(w)
    return frozenset(words)


def target_words(stamps_root: pathlib.Path = TUXPAINT_STAMPS) -> frozenset[str]:
    """Words of every Tux Paint stamp file stem and folder name, and of the Fashion-MNIST class names."""
    words: set[str] = set()
    for name in FASHION_MNIST_NAMES:
        words |= name_words(name)
    if stamps_root.is_dir():
        for path in stamps_root.rglob("*"):
            if path.is_dir() or path.suffix.lower() in (".png", ".svg", ".jpg"):
                words |= name_words(path.stem if path.is_file() else path.name)
    return frozenset(words)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _key(hexcode: str) -> str:
    """Code-point sequence without variation selector 16, upper case: ``2764-FE0F`` -> ``2764``."""
    return "-".join(p for p in hexcode.upper().split("-") if p != "FE0F")


def _render_svg(svg: bytes, size: int) -> np.ndarray:
    from PIL import Image

    png = rasterize_svg(svg, size, "the SVG emoji sets")
    with Image.open(io.BytesIO(png)) as image:
        return to_rgb_uint8(image, size)


def _decode_png(data: bytes, size: int) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        if image.format != "PNG" or image.size[0] > 512 or image.size[1] > 512:
            raise ValueError(f"not a small PNG: {image.format} {image.size}")
        return to_rgb_uint8(image, size)


def _catalogue(download_dir: pathlib.Path) -> tuple[list[dict], dict[str, dict]]:
    """(emoji-datasource entries, openmoji records by code-point key)."""
    meta = read_members(PACKAGES["google"], download_dir, lambda n: n == "package/emoji.json")
    entries = json.loads(meta["package/emoji.json"])
    om = read_members(PACKAGES["openmoji"], download_dir, lambda n: n == "package/data/openmoji.json")
    openmoji = {_key(r["hexcode"]): r for r in json.loads(om["package/data/openmoji.json"]) if not r.get("skintone")}
    return entries, openmoji


def excluded_emoji(config: EmojiConfig = EmojiConfig(), download_dir: str | pathlib.Path = DEFAULT_DOWNLOAD_DIR,
                   stamps_root: pathlib.Path = TUXPAINT_STAMPS) -> list[tuple[str, str, tuple[str, ...]]]:
    """(code points, CLDR name, shared words) of each emoji left out for sharing a word with a target."""
    entries, openmoji = _catalogue(pathlib.Path(download_dir))
    words = target_words(stamps_root)
    out = []
    for e in entries:
        if e["category"] in EXCLUDED_CATEGORIES:
            continue
        name = openmoji.get(_key(e["unified"]), {}).get("annotation") or e["name"].lower()
        shared = name_words(name) & words
        if shared:
            out.append((e["unified"], name, tuple(sorted(shared))))
    return out


def load_emoji(image_size: int, *, download_dir: str | pathlib.Path = DEFAULT_DOWNLOAD_DIR,
               config: EmojiConfig = EmojiConfig(), stamps_root: pathlib.Path = TUXPAINT_STAMPS) -> LabeledImages:
    """The emoji source (module docstring): class names ``<code points> <CLDR name>``, samples in
    ``config.styles`` order, white background, RGB uint8 (N, S, S, 3).

    Raises:
      SourceUnavailable: a tarball or rsvg-convert is missing (says what to run / install).
      ValueError: a tarball fails its integrity check or holds a refused member or a bad image.
    """
    download_dir = pathlib.Path(download_dir)
    entries, openmoji = _catalogue(download_dir)
    words = target_words(stamps_root) if config.exclude_target_words else frozenset()
    vendor_of = dict(EMOJI_STYLES)
    unknown = [s for s in config.styles if s not in vendor_of]
    if unknown:
        raise ValueError(f"unknown emoji style {unknown[0]!r}; known: {[s for s, _ in EMOJI_STYLES]}")
    classes = []  # (key, name, {style: member name})
    excluded = 0
    for e in sorted(entries, key=lambda e: e["sort_order"]):
        if e["category"] in EXCLUDED_CATEGORIES:
            continue
        key = _key(e["unified"])
        record = openmoji.get(key)
        name = (record or {}).get("annotation") or e["name"].lower()
        if words and name_words(name) & words:
            excluded += 1
            continue
        members = {}
        for style in config.styles:
            vendor = vendor_of[style]
            if vendor in ("google", "twitter") and e.get(f"has_img_{vendor}"):
                members[style] = f"package/img/{vendor}/64/{e['image']}"
            elif vendor == "openmoji" and record is not None:
                members[style] = f"package/color/svg/{record['hexcode']}.svg"
            elif vendor == "fluent":
                members[style] = f"package/icons/{style[len('fluent_'):].replace('_', '-')}/{_slug(name)}.svg"
        classes.append((key, name, members))
    wanted_by_vendor: dict[str, set[str]] = {}
    for _, _, members in classes:
        for style, member in members.items():
            wanted_by_vendor.setdefault(vendor_of[style], set()).add(member)
    blobs: dict[str, bytes] = {}
    for vendor, wanted in wanted_by_vendor.items():
        blobs.update(read_members(PACKAGES[vendor], download_dir, wanted.__contains__))
    kept = []
    for key, name, members in classes:
        present = {s: m for s, m in members.items() if m in blobs}
        if len({vendor_of[s] for s in present}) >= config.min_vendors:
            kept.append((key, name, present))
    if len(kept) < 2:
        raise SourceUnavailable(f"only {len(kept)} emoji have >= {config.min_vendors} vendors", "run `make data`")
    jobs = [(c, s, m) for c, (_, _, present) in enumerate(kept) for s, m in present.items()]

    def draw(job):
        _, _, member = job
        data = blobs[member]
        return _render_svg(data, image_size) if member.endswith(".svg") else _decode_png(data, image_size)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        images = list(pool.map(draw, jobs))
    log.info("emoji: %d classes (%d excluded for sharing a word with a target), %d images", len(kept), excluded,
             len(images))
    return LabeledImages(images=np.stack(images), labels=np.asarray([c for c, _, _ in jobs], np.int32),
                         class_names=tuple(f"{key} {name}" for key, name, _ in kept))
