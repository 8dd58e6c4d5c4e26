"""Printing text that comes from the user's files: file, folder and class names shown safely.

A name on disk may hold any byte but "/" and NUL: newlines, terminal escape sequences, bidirectional
overrides, bytes that are not UTF-8. ``printable`` escapes everything that could break or forge an
output line, so one name is always one visible token on one line.
"""

from __future__ import annotations

import unicodedata

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
_UNSAFE_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def printable(text: str, *, backslash: bool = True) -> str:
    """``text`` with every unsafe character escaped.

    Escaped: backslash (``\\\\``; not with ``backslash=False``, for text already escaped in part), ``\\n``, ``\\r``, ``\\t``; other control and format characters,
    line/paragraph separators, private-use and unassigned code points as ``\\xNN`` / ``\\uNNNN`` /
    ``\\UNNNNNNNN``; a byte that was not UTF-8 (decoded by Python as a lone surrogate U+DC80..U+DCFF,
    "surrogateescape") as ``\\xNN`` of the original byte. Everything else (letters of any script,
    spaces, punctuation) is kept. The result encodes as UTF-8 and contains no line break.
    """
    out = []
    for char in str(text):
        if char == "\\" and not backslash:
            out.append(char)
            continue
        if char in _NAMED:
            out.append(_NAMED[char])
            continue
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif unicodedata.category(char) in _UNSAFE_CATEGORIES:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)
