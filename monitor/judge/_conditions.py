"""Evaluation of `when` / `unless` conditions on a turn. Regexes are RE2 (linear time)."""

from __future__ import annotations

from monitor.records import Turn
from monitor.rules._model import (
    All,
    Always,
    AnyOf,
    Attribute,
    Condition,
    Contains,
    Equals,
    Not,
    Prefix,
    Search,
)


def _attribute(c: Attribute, turn: Turn) -> bool:
    attrs = turn.resource if c.resource else turn.attributes
    if c.key not in attrs:
        return c.exists is False
    value = attrs[c.key]
    if c.exists is not None:
        return c.exists
    if c.equals is not None:
        if isinstance(c.equals, bool) or isinstance(value, bool):
            return value is c.equals
        if isinstance(c.equals, str):
            return isinstance(value, str) and value == c.equals
        return isinstance(value, int | float) and value == c.equals
    text = value if isinstance(value, str) else str(value)
    if c.prefix is not None:
        return text.startswith(c.prefix)
    if c.regex is not None:
        return c.regex.test(text)
    return True


def holds(c: Condition, turn: Turn) -> bool:
    """Whether condition `c` holds for `turn` (prefix ignores the input's leading whitespace)."""
    if isinstance(c, Prefix):
        return turn.input_text.lstrip().startswith(c.text)
    if isinstance(c, Search):
        return c.regex.test(turn.input_text)
    if isinstance(c, Contains):
        return c.text in turn.input_text
    if isinstance(c, Equals):
        return turn.input_text == c.text
    if isinstance(c, Attribute):
        return _attribute(c, turn)
    if isinstance(c, All):
        return all(holds(p, turn) for p in c.parts)
    if isinstance(c, AnyOf):
        return any(holds(p, turn) for p in c.parts)
    if isinstance(c, Not):
        return not holds(c.part, turn)
    if isinstance(c, Always):
        return True
    raise TypeError(f"unknown condition {c!r}")
