"""Routing: the first `expect` rule (file order) whose `when` matches, without a linear scan.

Each rule is indexed by one text trigger its condition requires: a prefix (a table keyed by prefix, one
lookup per distinct prefix length), an exact input (a dict), or a regex / substring (all in one combined
RE2 set: one linear pass over the input whatever the number of patterns). The candidates found are
checked in rule order; the first whose whole condition holds wins. Rules with no indexable trigger
(`any`, `not`, attribute-only, no `when`) are always candidates.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Sequence
from typing import Any

import re2

from monitor.judge._conditions import holds
from monitor.records import Turn
from monitor.rules._model import All, Condition, Contains, Equals, Expectation, Prefix, Search
from monitor.rules._regex import MAX_REGEX_SIZE, regex_set, set_matcher

Trigger = tuple[str, Any]
logger = logging.getLogger(__name__)


def _trigger(c: Condition) -> Trigger | None:
    if isinstance(c, Prefix):
        return ("prefix", c.text)
    if isinstance(c, Equals):
        return ("equals", c.text)
    if isinstance(c, Search):
        return ("regex", c.regex)
    if isinstance(c, Contains):
        return ("contains", c.text)
    if isinstance(c, All):
        found = [t for t in map(_trigger, c.parts) if t is not None]
        found.sort(key=lambda t: ("prefix", "equals", "contains", "regex").index(t[0]))
        return found[0] if found else None
    return None


def _one_set(patterns: list[str]) -> Callable[[bytes], Any]:
    """One RE2 set over the patterns; should RE2 refuse to combine them (memory), one set per pattern."""
    try:
        return set_matcher(regex_set(patterns))
    except ValueError:
        logger.warning("routing: %d regexes do not fit one RE2 set; matching them one by one", len(patterns))
        singles = [set_matcher(regex_set([p])) for p in patterns]
        return lambda data: [k for k, m in enumerate(singles) if m(data)]


def _combined(patterns: list[str], sizes: list[int]) -> Callable[[bytes], Any]:
    """RE2 sets over every pattern, each holding patterns of MAX_REGEX_SIZE in all (`regex_size`; the length of a
    literal): matching tracks every place of every pattern of a set at once, and eight patterns of 5,000 in one
    set took 5 s per input of 100,000 x's, every turn. Usually one set; the indexes returned are of `patterns`."""
    groups: list[list[int]] = [[]]
    total = 0
    for k, size in enumerate(sizes):
        if groups[-1] and total + size > MAX_REGEX_SIZE:
            groups.append([])
            total = 0
        groups[-1].append(k)
        total += size
    if len(groups) == 1:
        return _one_set(patterns)
    sets = [(_one_set([patterns[k] for k in group]), group) for group in groups]
    return lambda data: [group[j] for match, group in sets for j in (match(data) or ())]


class Router:
    """First-match routing over a fixed list of expectations."""

    def __init__(self, rules: Sequence[Expectation]) -> None:
        self.rules = tuple(rules)
        self._prefixes: dict[str, list[int]] = {}
        self._equals: dict[str, list[int]] = {}
        self._always: list[int] = []
        self._exact: list[bool] = []  # the trigger is the whole condition: no re-check needed
        patterns: list[str] = []
        sizes: list[int] = []
        self._set_rules: list[int] = []
        for i, rule in enumerate(self.rules):
            trig = _trigger(rule.when)
            self._exact.append(trig is not None and not isinstance(rule.when, All))
            if trig is None:
                self._always.append(i)
            elif trig[0] == "prefix":
                self._prefixes.setdefault(trig[1], []).append(i)
            elif trig[0] == "equals":
                self._equals.setdefault(trig[1], []).append(i)
            else:  # a regex (its size measured when it was compiled), or a literal to find
                rx = trig[1] if trig[0] == "regex" else None
                patterns.append(rx.pattern if rx is not None else re2.escape(trig[1]))
                sizes.append(rx.size if rx is not None else len(trig[1]))
                self._set_rules.append(i)
        # Prefix table: one dict lookup per distinct prefix length (a handful), whatever the number of rules.
        self._lengths = tuple(sorted({len(p) for p in self._prefixes}))
        self._match = _combined(patterns, sizes) if patterns else None
        # Only plain prefix rules (no compound condition to re-check): the fast path of `route`.
        self._prefix_only = (
            bool(self._prefixes)
            and not (self._equals or self._always or patterns)
            and all(self._exact[i] for hits in self._prefixes.values() for i in hits)
        )

    def candidates(self, text: str) -> list[int]:
        """Indexes of rules whose trigger matches, ascending."""
        found: list[int] = []
        if self._lengths:
            head = text.lstrip()
            prefixes = self._prefixes
            size = len(head)
            for n in self._lengths:
                if n > size:
                    break
                hits = prefixes.get(head[:n])
                if hits:
                    found.extend(hits)
        if self._equals:
            eq = self._equals.get(text)
            if eq:
                found.extend(eq)
        if self._match is not None:
            hits = self._match(text.encode("utf-8", "surrogatepass"))
            if hits:
                found.extend(self._set_rules[k] for k in hits)
        if len(found) > 1:
            found.sort()
        return found

    def prefix_table(self) -> tuple[int, dict[str, int]] | None:
        """(n, prefix -> rule index) when routing is plain prefixes of one length n: the rule of an input is
        the table's entry for `input_text.lstrip()[:n]` (none when absent). None for any other router."""
        if not self._prefix_only or len(self._lengths) != 1:
            return None
        return self._lengths[0], {p: hits[0] for p, hits in self._prefixes.items()}

    def route(self, turn: Turn) -> Expectation | None:
        i = self.index(turn)
        return self.rules[i] if i >= 0 else None

    def index(self, turn: Turn) -> int:
        """The index of the first matching rule, -1 when none matches."""
        if self._prefix_only:  # plain prefix rules only: one lookup per distinct prefix length
            head = turn.input_text.lstrip()
            size = len(head)
            best = -1
            for n in self._lengths:
                if n > size:
                    break
                hits = self._prefixes.get(head[:n])
                if hits and (best < 0 or hits[0] < best):  # hits are in rule order: the earliest rule wins
                    best = hits[0]
            return best
        found = self.candidates(turn.input_text)
        merged = heapq.merge(found, self._always) if self._always else found
        rules, exact = self.rules, self._exact
        for i in merged:
            if exact[i] or holds(rules[i].when, turn):
                return i
        return -1
