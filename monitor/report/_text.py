"""Text helpers every report form shares: text that can always be written, and natural sort order."""

from __future__ import annotations

import re

_DIGITS = re.compile(r"([0-9]+)")


def printable(text: str) -> str:
    """`text` with lone surrogates (valid in JSON, unencodable in UTF-8) shown as `\\udXXX` escapes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def natural_key(text: str) -> tuple[list[str | int], str]:
    """Sort key that orders the numbers inside names by value: c1, c2, c10 (not c1, c10, c2)."""
    # re.split with one group alternates text (even places) and digits (odd places): like compares with like.
    parts: list[str | int] = [int(p) if i % 2 else p for i, p in enumerate(_DIGITS.split(text))]
    return parts, text
