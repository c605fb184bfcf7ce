"""Text helpers every report form shares: text that can always be written (monitor._text), and natural sort order."""

from __future__ import annotations

import html
import re

from monitor._text import escape_bidi, escape_controls, printable, visible

__all__ = ["cut", "escape_bidi", "escape_controls", "html_escape", "natural_key", "printable", "visible"]

_DIGITS = re.compile(r"([0-9]+)")


def cut(text: str, limit: int) -> str:
    """The first `limit` characters of `text`, and `…` when there were more."""
    return text if len(text) <= limit else text[:limit] + "…"


def html_escape(text: str) -> str:
    """`visible(text)` escaped for HTML text or a quoted attribute: no markup, no raw control character (HTML
    forbids most of them, and a viewer of the page source may act on an ESC sequence)."""
    return html.escape(visible(text))


def natural_key(text: str) -> tuple[list[str | int], str]:
    """Sort key that orders the numbers inside names by value: c1, c2, c10 (not c1, c10, c2)."""
    # re.split with one group alternates text (even places) and digits (odd places): like compares with like.
    parts: list[str | int] = [int(p) if i % 2 else p for i, p in enumerate(_DIGITS.split(text))]
    return parts, text
