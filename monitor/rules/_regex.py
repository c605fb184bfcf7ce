"""RE2 compilation: linear-time regular expressions for everything a rule file matches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import re2

from monitor.rules._model import Regex


def _options() -> Any:
    opts = re2.Options()
    opts.log_errors = False
    return opts


OPTIONS = _options()


def compile_regex(pattern: str) -> Regex:
    """Compile with RE2; raise ValueError with RE2's message (e.g. look-behind is not supported)."""
    try:
        compiled = re2.compile(pattern, options=OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise ValueError(f"invalid regular expression {pattern!r} (RE2 syntax): {detail}") from None
    return Regex(pattern, compiled, set_matcher(regex_set([pattern])))


def set_matcher(s: Any) -> Callable[[bytes], Any]:
    """`matcher(utf8_bytes)` -> the matching pattern indexes (empty or None when none match).

    Calls the compiled RE2::Set directly when the binding exposes it (skipping a Python wrapper frame).
    """
    raw = getattr(s, "_set", None)
    match = getattr(raw, "Match", None)
    return match if callable(match) else s.Match  # type: ignore[no-any-return]


def regex_set(patterns: list[str]) -> Any:
    """One combined RE2 automaton; `.Match(text)` returns the indexes of every pattern found in text."""
    opts = _options()
    opts.max_mem = 64 << 20
    opts.never_capture = True
    s = re2.Set.SearchSet(opts)
    try:
        for p in patterns:
            s.Add(p)
        s.Compile()
    except re2.error as exc:
        raise ValueError(f"cannot combine {len(patterns)} regular expression(s) into one RE2 set: {exc}") from None
    return s
