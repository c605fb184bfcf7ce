"""Text that can always be shown: no lone surrogate (unencodable in UTF-8), no control character a terminal would act
on, no bidirectional formatting character that would reorder what is shown. Used wherever user text is printed: the
reports, and the errors of rule files (which name the user's files)."""

from __future__ import annotations

import re

# C0 controls but tab and line feed, DEL and the C1 controls: a terminal acts on them (ESC starts a sequence that can
# clear the screen, recolour or retitle it, a C1 CSI likewise; CR and BS overwrite what was printed).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# The bidirectional formatting characters: an override (U+202E) or isolate reorders what follows it on screen, so a
# made-up tool name or an input reads as other text ("Trojan Source"); the marks (U+200E/F, U+061C) likewise steer it.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with lone surrogates (valid in JSON, unencodable in UTF-8) shown as `\\udXXX` escapes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def escape_controls(text: str) -> str:
    """`text` with the control characters a terminal would act on shown as `\\xNN` escapes (line feed and tab
    stay), and the bidirectional formatting characters, which reorder what is shown, as `\\uNNNN`."""
    return escape_bidi(_CONTROLS.sub(lambda m: f"\\x{ord(m[0]):02x}", text))


def escape_bidi(text: str) -> str:
    """`text` with the bidirectional formatting characters (U+202E, ...) shown as `\\uNNNN` escapes."""
    return _BIDI.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def elide(text: str, limit: int) -> str:
    """`text` when it has at most `limit` characters, else its first `limit - 3` and `...`: `limit` in all."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def visible(text: str) -> str:
    """`printable(text)` with the control characters a terminal would act on shown as `\\xNN` escapes, and the
    bidirectional formatting characters as `\\uNNNN` (`escape_controls`)."""
    return escape_controls(printable(text))
