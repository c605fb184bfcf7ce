"""Faults of ours (an exception no input is meant to cause: a bug), logged so that however many come the log stays
bounded: which of them to log, and their tracebacks as bounded text."""

from __future__ import annotations

import traceback

from monitor._text import elide

MAX_TRACEBACK_CHARS = 16 * 1024
MAX_TRACEBACK_LINE_CHARS = 2048


def power_of_ten(n: int) -> bool:
    """Whether `n` is 1, 10, 100...: the faults logged with their traceback (bounded, however many come)."""
    while n >= 10 and n % 10 == 0:
        n //= 10
    return n == 1


def traceback_text(exc: BaseException) -> str:
    """The exception's traceback, each of its lines and the whole cut to a bound (its innermost frames kept): an
    exception's message may quote what it failed on (a KeyError of a key of megabytes), which logger.exception would
    print whole."""
    text = "".join(elide(line, MAX_TRACEBACK_LINE_CHARS) for line in traceback.format_exception(exc))
    return text if len(text) <= MAX_TRACEBACK_CHARS else "...\n" + text[-MAX_TRACEBACK_CHARS:]
