"""Character glyphs rendered from installed fonts: one class per character, samples from different fonts.

Each sample is the character drawn by one of the font files that have it (different typeface, weight
or slant; cycled when there are fewer fonts than samples), then warped by a random affine map and,
optionally, a stroke-weight change (ink dilated or eroded by a 3x3 max/min filter, ``r`` times), all
drawn from a seed derived from (character, font, sample index), so the output is deterministic.
Characters that render like an earlier class in a reference font are dropped (Latin ``A``, Greek
``Α`` and Cyrillic ``А`` would be one class). Fonts: Debian ``fonts-dejavu-core``,
``fonts-freefont-ttf``, ``fonts-liberation``, ``fonts-noto-core``; a font "has" a character when its
cmap maps the code point (read with fontTools) and it inks something other than its .notdef box.

Three character sets are defined:

- ``SOURCE_CHARS`` (cache data set ``glyphs``, the shipped weights' source): digits, Latin, Greek and
  Cyrillic letters, 20 samples per class from >= 10 distinct font drawings, mild affine jitter.
- ``MULTISCRIPT_CHARS`` (``MULTISCRIPT_CONFIG``, cache data set ``glyphs_multiscript``): the digits
  and the Latin, Greek and Cyrillic letters plus the letters of ``len(SCRIPTS)`` other scripts (Hebrew, Arabic, the Indic scripts, Thai,
  Lao, Tibetan, Myanmar, Ethiopic, Cherokee, Canadian syllabics, Ogham, Runic, Khmer, Tifinagh, Vai,
  Yi, ...), at most ``MAX_PER_SCRIPT`` evenly spaced code points per script so that no script
  dominates. Armenian and Georgian are NOT in it.
- ``TARGET_CHARS`` (a cross-domain target): the Armenian and Georgian letters.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import pathlib

import numpy as np

from tflite_train.data.dataset import LabeledImages, SourceUnavailable

log = logging.getLogger(__name__)

FONT_ROOT = pathlib.Path("/usr/share/fonts/truetype")
FONT_PACKAGES = "apt-get install fonts-noto-core fonts-dejavu-core fonts-freefont-ttf fonts-liberation"
_CANVAS = 96  # render size before the affine warp and the final resize
_MISSING = "\U0010fffd"  # a private-use code point no font draws: renders as .notdef


def _chars(*ranges: tuple[int, int]) -> tuple[str, ...]:
    return tuple(chr(c) for lo, hi in ranges for c in range(lo, hi + 1))


# Source: Latin, Greek and Cyrillic letters and the digits (the "alphabetic" family).
SOURCE_CHARS = (
    _chars((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A))
    + _chars((0x391, 0x3A1), (0x3A3, 0x3A9), (0x3B1, 0x3C9))
    + _chars((0x410, 0x44F))
)
# Target: Armenian and Georgian letters (other scripts, not in the source).
TARGET_CHARS = _chars((0x531, 0x556), (0x561, 0x586), (0x10D0, 0x10F0))

# Letters (no combining marks, no digits) of other scripts drawn by fonts-noto-core. Armenian
# (U+0530..U+058F) and Georgian (U+10A0..U+10FF, U+1C90..U+1CBF, U+2D00..U+2D2F) stay out: they are a target.
SCRIPTS: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = (
    ("Hebrew", ((0x05D0, 0x05EA),)),
    ("Arabic", ((0x0621, 0x063A), (0x0641, 0x064A))),
    ("Thaana", ((0x0780, 0x07A5),)),
    ("NKo", ((0x07CA, 0x07EA),)),
    ("Devanagari", ((0x0904, 0x0939),)),
    ("Bengali", ((0x0985, 0x09B9),)),
    ("Gurmukhi", ((0x0A05, 0x0A39),)),
    ("Gujarati", ((0x0A85, 0x0AB9),)),
    ("Oriya", ((0x0B05, 0x0B39),)),
    ("Tamil", ((0x0B85, 0x0BB9),)),
    ("Telugu", ((0x0C05, 0x0C39),)),
    ("Kannada", ((0x0C85, 0x0CB9),)),
    ("Malayalam", ((0x0D05, 0x0D3A),)),
    ("Sinhala", ((0x0D85, 0x0DC6),)),
    ("Thai", ((0x0E01, 0x0E2E),)),
    ("Lao", ((0x0E81, 0x0EAE),)),
    ("Tibetan", ((0x0F40, 0x0F6C),)),
    ("Myanmar", ((0x1000, 0x102A),)),
    ("Ethiopic", ((0x1200, 0x135A),)),
    ("Cherokee", ((0x13A0, 0x13F5),)),
    ("Canadian syllabics", ((0x1401, 0x166C),)),
    ("Ogham", ((0x1681, 0x169A),)),
    ("Runic", ((0x16A0, 0x16EA),)),
    ("Khmer", ((0x1780, 0x17B3),)),
    ("Tai Tham", ((0x1A20, 0x1A54),)),
    ("Balinese", ((0x1B05, 0x1B33),)),
    ("Sundanese", ((0x1B83, 0x1BA0),)),
    ("Ol Chiki", ((0x1C5A, 0x1C7D),)),
    ("Tifinagh", ((0x2D30, 0x2D67),)),
    ("Yi", ((0xA000, 0xA48C),)),
    ("Lisu", ((0xA4D0, 0xA4F7),)),
    ("Vai", ((0xA500, 0xA62B),)),
    ("Bamum", ((0xA6A0, 0xA6EF),)),
    ("Kayah Li", ((0xA90A, 0xA925),)),
    ("Javanese", ((0xA984, 0xA9B2),)),
    ("Cham", ((0xAA00, 0xAA28),)),
    ("Meetei Mayek", ((0xABC0, 0xABE2),)),
    ("Hanifi Rohingya", ((0x10D00, 0x10D23),)),
    ("Warang Citi", ((0x118A0, 0x118DF),)),
    ("Medefaidrin", ((0x16E40, 0x16E7F),)),
    ("Wancho", ((0x1E2C0, 0x1E2EB),)),
    ("Adlam", ((0x1E900, 0x1E943),)),
)
MAX_PER_SCRIPT = 40


def _spread(chars: tuple[str, ...], k: int) -> tuple[str, ...]:
    """At most ``k`` of ``chars``, evenly spaced (indices floor(i * n / k))."""
    n = len(chars)
    return chars if n <= k else tuple(chars[(i * n) // k] for i in range(k))


MULTISCRIPT_CHARS = SOURCE_CHARS + tuple(c for _, ranges in SCRIPTS for c in _spread(_chars(*ranges), MAX_PER_SCRIPT))


@dataclasses.dataclass(frozen=True)
class GlyphConfig:
    """How glyph data sets are rendered.

    Attributes:
      chars: Candidate characters (classes), in order of priority for de-duplication.
      min_fonts: A character needs at least this many fonts that draw it, else it is dropped.
      samples_per_class: Samples per class; when fewer fonts draw a character, fonts are reused with
        other affine draws (only when ``min_fonts`` < ``samples_per_class``).
      font_globs: Font files under ``FONT_ROOT`` that may be used.
      max_rotation_deg, max_shift, scale_range, max_shear: Affine jitter ranges (shift in canvas pixels).
      max_stroke: Stroke-weight change r ~ U{-max_stroke, ..., max_stroke} (3x3 max filter r times
        for r > 0, min filter -r times for r < 0, on the 96 px canvas; an erosion step that would leave
        less than half of the original ink is skipped, so thin strokes survive); 0 disables it.
      dedup_threshold: Mean absolute ink difference (0..1, 48 px reference rendering) below which a character counts as a
        duplicate of an earlier one.
    """

    chars: tuple[str, ...] = SOURCE_CHARS
    min_fonts: int = 10
    samples_per_class: int = 20
    font_globs: tuple[str, ...] = ("*/*.ttf", "*/*.otf")
    max_rotation_deg: float = 8.0
    max_shift: float = 5.0
    scale_range: tuple[float, float] = (0.85, 1.1)
    max_shear: float = 0.15
    max_stroke: int = 0
    dedup_threshold: float = 0.004


# The larger meta-training source (cache data set ``glyphs_multiscript``): many scripts, few fonts per character for most of them, so 10 samples per
# class with a stronger distortion (rotation, shear, scale, stroke weight) than the default.
MULTISCRIPT_CONFIG = GlyphConfig(chars=MULTISCRIPT_CHARS, min_fonts=2, samples_per_class=10, max_rotation_deg=12.0,
                            max_shift=6.0, scale_range=(0.75, 1.1), max_shear=0.25, max_stroke=2)


def font_files(config: GlyphConfig, root: pathlib.Path = FONT_ROOT) -> list[pathlib.Path]:
    """Sorted font files (math and music fonts excluded)."""
    files = sorted({p for g in config.font_globs for p in root.glob(g)})
    return [p for p in files if not any(k in p.name for k in ("Math", "Music", "Symbols", "Emoji"))]


@functools.lru_cache(maxsize=None)
def _font(path: str, size: int):
    from PIL import ImageFont

    return ImageFont.truetype(path, size)


def render_glyph(char: str, font_path: str, size: int = _CANVAS) -> np.ndarray:
    """The character drawn black-on-white, baseline at 3/4 height, centred: float32 (size, size) in [0, 1] ink."""
    from PIL import Image, ImageDraw

    font = _font(font_path, int(size * 0.6))
    image = Image.new("L", (size, size), 0)
    ImageDraw.Draw(image).text((size / 2, size * 0.72), char, fill=255, font=font, anchor="ms")
    return np.asarray(image, np.float32) / 255.0


@functools.lru_cache(maxsize=None)
def _cmap(path: str) -> frozenset[int]:
    from fontTools.ttLib import TTFont

    return frozenset(TTFont(path, lazy=True, fontNumber=0).getBestCmap() or ())


def draws(char: str, font_path: str) -> bool:
    """Whether the font has a glyph for ``char``: its cmap maps the code point, and it inks something
    other than its .notdef box."""
    if ord(char) not in _cmap(font_path):
        return False
    ink = render_glyph(char, font_path, 48)
    return bool(ink.max() > 0.5) and not np.array_equal(ink, render_glyph(_MISSING, font_path, 48))


def _seed(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("|".join(parts).encode()).digest()[:8], "little")


def _jitter(ink: np.ndarray, rng: np.random.Generator, config: GlyphConfig, out_size: int) -> np.ndarray:
    from PIL import Image

    angle = np.deg2rad(rng.uniform(-config.max_rotation_deg, config.max_rotation_deg))
    scale = rng.uniform(*config.scale_range)
    shear = rng.uniform(-config.max_shear, config.max_shear)
    tx, ty = rng.uniform(-config.max_shift, config.max_shift, 2)
    # Inverse map (output -> input) about the centre, as PIL's AFFINE transform expects.
    c = ink.shape[0] / 2
    fwd = scale * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]) @ np.array([[1, shear], [0, 1]])
    inv = np.linalg.inv(fwd)
    offset = np.array([c, c]) - inv @ np.array([c + tx, c + ty])
    coeffs = (inv[0, 0], inv[0, 1], offset[0], inv[1, 0], inv[1, 1], offset[1])
    image = Image.fromarray((ink * 255).astype(np.uint8))
    if config.max_stroke:
        from PIL import ImageFilter

        r = int(rng.integers(-config.max_stroke, config.max_stroke + 1))
        total = float(np.asarray(image, np.float32).sum())
        for _ in range(abs(r)):
            thinner_or_bolder = image.filter(ImageFilter.MaxFilter(3) if r > 0 else ImageFilter.MinFilter(3))
            if r < 0 and float(np.asarray(thinner_or_bolder, np.float32).sum()) < 0.5 * total:
                break  # erosion would wipe out a thin font's strokes: keep the last legible weight
            image = thinner_or_bolder
    image = image.transform(ink.shape[::-1], Image.AFFINE, coeffs, Image.BILINEAR)
    image = image.resize((out_size, out_size), Image.LANCZOS)
    return np.asarray(image, np.uint8)


def render_glyph_dataset(config: GlyphConfig, image_size: int, *, root: pathlib.Path = FONT_ROOT) -> LabeledImages:
    """Renders ``config.chars`` with every font that draws them; see the module docstring.

    Returns dark ink on white, RGB (the grey value copied to 3 channels). Class names are
    ``U+XXXX <char>``.

    Raises:
      SourceUnavailable: no fonts installed, or fewer than 2 characters have ``min_fonts`` fonts.
    """
    fonts = font_files(config, root)
    if not fonts:
        raise SourceUnavailable(f"no fonts under {root}", FONT_PACKAGES)
    reference = next((f for f in fonts if f.name == "DejaVuSans.ttf"), fonts[0])
    kept_chars: list[str] = []
    kept_refs = np.empty((len(config.chars), 48, 48), np.float32)  # reference renderings of kept chars
    kept_fonts: list[list[pathlib.Path]] = []
    for char in config.chars:
        have, seen = [], set()
        for f in fonts:  # fonts that draw the character, one per distinct drawing
            if draws(char, str(f)):
                key = (render_glyph(char, str(f), 48) > 0.5).tobytes()
                if key not in seen:
                    seen.add(key)
                    have.append(f)
        if len(have) < config.min_fonts:
            log.debug("dropping %r: %d fonts < %d", char, len(have), config.min_fonts)
            continue
        ref_font = reference if reference in have else have[0]
        ref = render_glyph(char, str(ref_font), 48)
        if kept_chars and float(np.abs(kept_refs[:len(kept_chars)] - ref).mean(axis=(1, 2)).min()) < config.dedup_threshold:
            log.debug("dropping %r: looks like an earlier class", char)
            continue
        kept_refs[len(kept_chars)] = ref
        kept_chars.append(char)
        kept_fonts.append(have)
    if len(kept_chars) < 2:
        raise SourceUnavailable(f"only {len(kept_chars)} characters have >= {config.min_fonts} fonts", FONT_PACKAGES)
    images, labels = [], []
    for label, (char, have) in enumerate(zip(kept_chars, kept_fonts)):
        rng = np.random.default_rng(_seed("order", char))
        order = [have[i] for i in rng.permutation(len(have))]
        for k in range(config.samples_per_class):
            font = order[k % len(order)]
            ink = render_glyph(char, str(font))
            sample_rng = np.random.default_rng(_seed(char, font.name, str(k)))
            grey = 255 - _jitter(ink, sample_rng, config, image_size)
            images.append(np.repeat(grey[..., None], 3, axis=-1))
            labels.append(label)
    return LabeledImages(
        images=np.stack(images),
        labels=np.asarray(labels, np.int32),
        class_names=tuple(f"U+{ord(c):04X} {c}" for c in kept_chars),
    )
