"""The compiled, immutable rule set. Built by monitor.rules.load_rules; read by monitor.judge."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

NO_MAX = None  # a slot without an upper bound


@dataclass(frozen=True, slots=True)
class Regex:
    """An RE2 regular expression (linear-time matching on any input)."""

    pattern: str
    compiled: Any = field(compare=False, repr=False)  # re2 regexp: search with groups
    matcher: Any = field(compare=False, repr=False)  # one-pattern RE2 set: a fast yes/no answer
    size: int = field(default=0, compare=False, repr=False)  # the characters and classes it stands for (regex_size)

    def search(self, text: str | bytes) -> Any:
        """The first match (with groups), or None; on bytes (UTF-8), its groups are bytes."""
        return self.compiled.search(text)

    def test(self, text: str) -> bool:
        """Whether the pattern occurs in text (no match object is built)."""
        return bool(self.matcher(text.encode("utf-8", "surrogatepass")))


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str = ""
    schema_json: str | None = None  # canonical JSON text of the arguments' JSON Schema
    source: str = ""  # file that declared it

    @property
    def schema(self) -> dict[str, Any] | None:
        """A fresh copy of the arguments' JSON Schema (None when the tool declares none)."""
        return None if self.schema_json is None else dict(json.loads(self.schema_json))


# ---- conditions (`when`, `unless`) ----


@dataclass(frozen=True, slots=True)
class Prefix:
    text: str


@dataclass(frozen=True, slots=True)
class Contains:
    text: str


@dataclass(frozen=True, slots=True)
class Equals:
    text: str


@dataclass(frozen=True, slots=True)
class Search:
    regex: Regex


@dataclass(frozen=True, slots=True)
class Attribute:
    key: str
    resource: bool = False
    equals: str | int | float | bool | None = None
    prefix: str | None = None
    regex: Regex | None = None
    exists: bool | None = None
    # `equals: true` and `equals: 1` hold for different values (a bool equals only a bool), though True == 1 in
    # Python: conditions that differ so compare unequal (the lint of rules that can never match compares them).
    equals_bool: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "equals_bool", isinstance(self.equals, bool))


@dataclass(frozen=True, slots=True)
class All:
    parts: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class Not:
    part: Condition


@dataclass(frozen=True, slots=True)
class Always:
    pass


Condition = Prefix | Contains | Equals | Search | Attribute | All | AnyOf | Not | Always

# ---- argument checks ----


class FrozenDict(Mapping[str, Any]):
    """A read-only, hashable JSON object."""

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping[str, Any]) -> None:
        self._items = dict(items)
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return f"FrozenDict({self._items!r})"


def freeze(value: Any) -> Any:
    """A JSON value made immutable: lists become tuples, objects FrozenDicts."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, Mapping):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    return value


def thaw(value: Any) -> Any:
    """The plain JSON value (lists and dicts) of a frozen one."""
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    if isinstance(value, FrozenDict):
        return {k: thaw(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, slots=True)
class ArgCheck:
    """One argument check. `mode` in exact, normalized, one_of, fuzzy, numeric, regex, from_input."""

    argument: str
    mode: str
    expected: Any  # frozen JSON value (see `freeze`); for regex / from_input the pattern text
    threshold: float = 90.0  # fuzzy
    tolerance: float = 0.0  # numeric
    regex: Regex | None = None  # regex / from_input
    group: int | str = 1  # from_input


@dataclass(frozen=True, slots=True)
class Slot:
    index: int  # position among the slots of its alternative (file order)
    tool: str
    min: int
    max: int | None
    checks: tuple[ArgCheck, ...] = ()


@dataclass(frozen=True, slots=True)
class Alternative:
    """One acceptable call set: slots, or no call at all (`none`, an empty slot tuple)."""

    slots: tuple[Slot, ...]
    expected_calls: int  # sum of minimums
    max_calls: int | None  # sum of maximums, None when unbounded
    by_tool: tuple[tuple[str, tuple[int, ...]], ...]  # tool -> indexes of its slots, first-slot order
    expected_by_tool: tuple[tuple[str, int], ...] = ()  # tool -> sum of its slots' minimums


@dataclass(frozen=True, slots=True)
class Forbid:
    tool: str
    unless: Condition | None = None


@dataclass(frozen=True, slots=True)
class Order:
    """An ordering constraint: an expected sequence (`pairwise=False`), or `before` -> `after` (`pairwise=True`:
    every call of `after` comes after a call of `before`; holds when `after` is not called)."""

    names: tuple[str, ...]
    pairwise: bool = False


@dataclass(frozen=True, slots=True)
class Respond:
    contains: str | None = None
    regex: Regex | None = None
    description: str = ""


@dataclass(frozen=True, slots=True)
class Expectation:
    """An expect rule or a labelled case: what a matching turn should call."""

    id: str  # rule id ("<file stem>:<n>" by default) or "case:<id>"
    alternatives: tuple[Alternative, ...]
    when: Condition = Always()
    forbid: tuple[Forbid, ...] = ()
    order: tuple[Order, ...] = ()
    respond: tuple[Respond, ...] = ()
    agent: str | None = None  # scope (the file's `agent`)
    source: str = ""
    line: int = 0
    description: str = ""


@dataclass(frozen=True, slots=True)
class Alert:
    name: str
    figure: str
    agent: str | None
    tool: str | None
    below: float | None
    above: float | None
    objective: float | None
    window: str
    for_: str
    min_samples: int
    severity: str
    summary: str
    source: str = ""
    line: int = 0


@dataclass(frozen=True, slots=True)
class RuleSet:
    """Everything the judge needs, merged from one or more rule files in the order given."""

    tools: tuple[Tool, ...]
    expectations: tuple[Expectation, ...]
    forbid: tuple[tuple[str | None, Forbid], ...] = ()  # (agent scope, forbid) from top-level `forbid`
    cases_by_id: tuple[tuple[str, Expectation], ...] = ()
    # Per input, the first case of each agent scope (None: unscoped) in load order: a turn takes the first of these
    # that applies to its agent.
    cases_by_input: tuple[tuple[str, tuple[Expectation, ...]], ...] = ()
    # Every labelled case in load order, (id, input, expectation): cases_by_input keeps only the first of
    # several cases of one agent scope with one input; eval judges each case of its dataset with its own expectation.
    cases: tuple[tuple[str | None, str | None, Expectation], ...] = ()
    alerts: tuple[Alert, ...] = ()
    from_definitions: bool = False
    agents: frozenset[str] = frozenset()
    scoped_tools: tuple[tuple[str, frozenset[str]], ...] = ()  # agent -> tools of its files + unscoped files
    unscoped_tools: frozenset[str] = frozenset()
    files: tuple[str, ...] = ()
    cases_files: tuple[str, ...] = ()  # the cases files the rule files name (`cases: PATH`), as loaded

    @property
    def catalog(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tools)

    def tool(self, name: str) -> Tool | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None
