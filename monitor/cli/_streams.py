"""Standard output and error that never fail on a character their encoding lacks.

Python opens stdout with errors="strict": on a stream whose encoding cannot hold every character (an ASCII or
Latin-1 locale, `PYTHONIOENCODING=ascii`), a report naming a tool, a rule or an input with other characters (and the
terminal report's own `·`) ended in a UnicodeEncodeError traceback instead of the report. Those characters are
escaped instead, as Python's own stderr escapes them (`\\xef`, `\\u2713`); the report forms written to stdout escape
them themselves (`report.output`). A stream that writes undecodable bytes of file names back as they were
(errors="surrogateescape", under the C locale) still does, and escapes the rest; one with another handler
(`PYTHONIOENCODING=ascii:replace`) keeps it. (click writes its own messages to a stream whose encoding is ASCII as
UTF-8: it takes the stream for a misconfigured one.)
"""

from __future__ import annotations

import codecs
import contextlib
import io
import sys

_BYTES_OR_ESCAPE = "toolwatch.surrogateescape-backslashreplace"


def _bytes_or_escape(exc: UnicodeError) -> tuple[str | bytes, int]:
    """surrogateescape's byte for the character a decoding with it made of one (U+DC80..U+DCFF), else backslashreplace's
    escape: one character at a time."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    code = ord(exc.object[exc.start])
    if 0xDC80 <= code <= 0xDCFF:
        return bytes([code - 0xDC00]), exc.start + 1
    return exc.object[exc.start].encode("ascii", "backslashreplace").decode("ascii"), exc.start + 1


codecs.register_error(_BYTES_OR_ESCAPE, _bytes_or_escape)
_INSTEAD = {"strict": "backslashreplace", "surrogateescape": _BYTES_OR_ESCAPE}  # handlers that raise, and what escapes


def escape_unencodable() -> None:
    """Make sys.stdout and sys.stderr escape what their encoding cannot hold, instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors in _INSTEAD:
            with contextlib.suppress(ValueError, OSError):  # closed, or no longer writable
                stream.reconfigure(errors=_INSTEAD[stream.errors])
