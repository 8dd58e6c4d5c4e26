"""SVG to PNG with ``rsvg-convert`` (Debian ``librsvg2-bin``): the SVG-only drawings of the emoji source and
the line-icon target (Pillow cannot read SVG)."""

from __future__ import annotations

import subprocess

from tflite_train.data.dataset import SourceUnavailable

__all__ = ["RSVG", "RSVG_HINT", "rasterize_svg"]

RSVG = "rsvg-convert"
RSVG_HINT = "apt-get install librsvg2-bin"


def rasterize_svg(svg: bytes, side: int, needed_by: str) -> bytes:
    """PNG bytes of ``svg`` drawn into a ``side`` x ``side`` square on white, aspect ratio kept.

    Raises:
      SourceUnavailable: rsvg-convert is missing (``needed_by`` names what needs it).
      ValueError: rsvg-convert fails on the SVG.
    """
    try:
        return subprocess.run([RSVG, "-w", str(side), "-h", str(side), "-a", "-b", "white", "-f", "png"],
                              input=svg, capture_output=True, timeout=60, check=True).stdout
    except FileNotFoundError:
        raise SourceUnavailable(f"rsvg-convert is not installed ({needed_by} needs it)", RSVG_HINT) from None
    except subprocess.CalledProcessError as err:
        raise ValueError(f"rsvg-convert failed: {err.stderr.decode(errors='replace')[:200]}") from None
