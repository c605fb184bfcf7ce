"""RE2 compilation: linear-time regular expressions for everything a rule file matches."""

from __future__ import annotations

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
    return Regex(pattern, compiled)


def regex_set(patterns: list[str]) -> Any:
    """One combined RE2 automaton; `.Match(text)` returns the indexes of every pattern found in text."""
    opts = _options()
    opts.max_mem = 64 << 20
    s = re2.Set.SearchSet(opts)
    for p in patterns:
        if s.Add(p) < 0:
            raise ValueError(f"invalid regular expression {p!r}")
    s.Compile()
    return s
