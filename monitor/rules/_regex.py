"""RE2 compilation: linear-time regular expressions for everything a rule file matches."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import re2

from monitor._text import elide
from monitor.rules._model import Regex


def _options() -> Any:
    opts = re2.Options()
    opts.log_errors = False
    return opts


OPTIONS = _options()

MAX_REGEX_SIZE = 5000
"""Most characters and classes a regex may stand for (`regex_size`), and the most a combined set of them holds.
RE2 matches in time linear in the input, but each step tracks every place of the pattern the input could be at:
an input of 100,000 x's took 78 s against a literal of 100,000 x's (a long `contains`), 3 s against `x{1000}`
written 20 times, and 5 s against eight rules of 5,000 each in one set, each turn (the automaton's cache could not
hold its states). At 5,000 the first such input takes about 0.2 s and later ones are cached."""

_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


def _escape_end(pattern: str, i: int) -> int:
    """The index after the escape at `pattern[i]` (a backslash): \\pL, \\p{Greek}, \\x41, \\x{10FFFF}, \\n ..."""
    kind = pattern[i + 1 : i + 2]
    if kind in ("p", "P", "x") and pattern[i + 2 : i + 3] == "{":
        end = pattern.find("}", i + 3)
        return end + 1 if end >= 0 else len(pattern)
    return i + (4 if kind == "x" else 3 if kind in ("p", "P") else 2)


def _class_end(pattern: str, i: int) -> int:
    """The index after the character class opening at `pattern[i]`."""
    j = i + 1
    if pattern[j : j + 1] == "^":
        j += 1
    if pattern[j : j + 1] == "]":  # a ] first is a literal
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        if pattern[j] == "\\":
            j = _escape_end(pattern, j)
        elif pattern.startswith("[:", j) and ":]" in pattern[j + 2 :]:
            j = pattern.index(":]", j + 2) + 2
        else:
            j += 1
    return j + 1


class _Size:
    """The size of each open group of a pattern being read: its finished alternatives, the alternative being read
    and that alternative's last atom (which a repetition multiplies)."""

    def __init__(self) -> None:
        self.groups: list[list[int]] = [[0, 0, 0]]

    def atom(self, size: int) -> None:
        self.groups[-1][1] += size
        self.groups[-1][2] = size

    def open(self) -> None:
        self.groups.append([0, 0, 0])

    def close(self) -> None:
        done = self.groups.pop()
        self.atom(done[0] + done[1])

    def bar(self) -> None:
        self.groups[-1][0] += self.groups[-1][1]
        self.groups[-1][1] = self.groups[-1][2] = 0

    def repeat(self, times: int) -> None:
        self.groups[-1][1] += self.groups[-1][2] * (times - 1)
        self.groups[-1][2] *= times

    def total(self) -> int:
        while len(self.groups) > 1:  # unbalanced: RE2 refused it already
            self.close()
        return self.groups[0][0] + self.groups[0][1]


def _group_start(pattern: str, i: int) -> tuple[int, bool]:
    """After the ( at `pattern[i]`: the index where the group's content starts, and whether a group opens there
    ((?i) only sets flags; (?i:...), (?P<name>...), (?<name>...) and (...) open one)."""
    i += 1
    if not pattern.startswith("?", i):
        return i, True
    j = i + 1
    while j < len(pattern) and pattern[j] not in ":)>":
        j += 1
    return j + 1, pattern[j : j + 1] != ")"


def regex_size(pattern: str) -> int:
    """How many characters and classes `pattern` stands for, repetitions written out (`x{1000}` 1,000, `(a|bc){10}`
    30, `\\pL+` 1): about the most places RE2 tracks at once while matching it, whatever the bytes of its classes
    (RE2's program size counts those, which `\\pL` has hundreds of). For a pattern RE2 compiled."""
    size = _Size()
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and pattern.startswith("Q", i + 1):  # \\Q...\\E: literal text
            end = pattern.find("\\E", i + 2)
            for _ in range((end if end >= 0 else n) - i - 2):
                size.atom(1)
            i = end + 2 if end >= 0 else n
        elif c in "\\[":
            size.atom(1)
            i = _escape_end(pattern, i) if c == "\\" else _class_end(pattern, i)
        elif c == "(":
            i, opens = _group_start(pattern, i)
            if opens:
                size.open()
        elif c == ")" and len(size.groups) > 1:
            size.close()
            i += 1
        elif c == "|":
            size.bar()
            i += 1
        elif c in "*+?":  # the last atom once more at most: no new place
            i += 1
        elif c == "{" and (m := _REPEAT.match(pattern, i)):
            low, comma, high = int(m.group(1)), m.group(2), m.group(3)
            size.repeat(int(high) if high else low + 1 if comma else low)
            i = m.end()
        else:
            size.atom(1)
            i += 1
    return size.total()


def compile_regex(pattern: str) -> Regex:
    """Compile with RE2; raise ValueError with RE2's message (e.g. look-behind is not supported), or when the
    pattern stands for more than MAX_REGEX_SIZE characters and classes."""
    try:
        compiled = re2.compile(pattern, options=OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise ValueError(f"invalid regular expression {_quoted(pattern)} (RE2 syntax): {detail}") from None
    size = regex_size(pattern)
    if size > MAX_REGEX_SIZE:
        raise ValueError(f"regular expression {_quoted(pattern)} stands for {size} characters and classes "
                         f"(repetitions written out), at most {MAX_REGEX_SIZE}: matching it would be slow on long "
                         "inputs; shorten it, or repeat less")
    return Regex(pattern, compiled, set_matcher(regex_set([pattern])), size)


def set_matcher(s: Any) -> Callable[[bytes], Any]:
    """`matcher(utf8_bytes)` -> the matching pattern indexes (empty or None when none match).

    Calls the compiled RE2::Set directly when the binding exposes it (skipping a Python wrapper frame).
    """
    raw = getattr(s, "_set", None)
    match = getattr(raw, "Match", None)
    return match if callable(match) else s.Match  # type: ignore[no-any-return]


def _quoted(pattern: str) -> str:
    """A pattern for a message: its repr, cut to 80 characters."""
    return elide(repr(pattern), 80)


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
