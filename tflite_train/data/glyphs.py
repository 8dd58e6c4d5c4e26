"""Character glyphs rendered from installed fonts: one class per character, one sample per font.

Each sample is the character drawn by a different font file (different typeface, weight or slant),
then warped by a small random affine map drawn from a seed derived from (character, font), so the
output is deterministic. Characters that render like an earlier class in a reference font are dropped
(Latin ``A``, Greek ``Α`` and Cyrillic ``А`` would be one class). Fonts: Debian ``fonts-dejavu-core``,
``fonts-freefont-ttf``, ``fonts-liberation``, ``fonts-noto-core``.
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
    dedup_threshold: float = 0.004


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


def draws(char: str, font_path: str) -> bool:
    """Whether the font has a glyph for ``char`` (it inks something other than its .notdef box)."""
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
    image = Image.fromarray((ink * 255).astype(np.uint8)).transform(ink.shape[::-1], Image.AFFINE, coeffs, Image.BILINEAR)
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
    kept_refs: list[np.ndarray] = []
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
        if any(np.abs(ref - r).mean() < config.dedup_threshold for r in kept_refs):
            log.debug("dropping %r: looks like an earlier class", char)
            continue
        kept_chars.append(char)
        kept_refs.append(ref)
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
