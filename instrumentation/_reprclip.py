"""The beginning of a `repr()`, for the values recorded through theirs, made without the whole of it.

A value the JSON encoding does not know (a deque, an attrs instance, any object) is recorded as its `repr()`. For a
deque, a mappingproxy or an attrs instance that is the repr of all it holds: a deque of a million items cost its
whole repr to record 16 KiB of it. `repr_prefix` writes the repr of the containers whose repr is known (list, tuple,
dict, deque, mappingproxy, str, bytes, attrs-generated reprs) item by item, and stops once more than `room`
characters are written; any other value gives its own `repr()`. A value reached twice on one path (a cycle) gives
up: the caller then takes the whole `repr()`, which knows how to show a cycle.
"""

from __future__ import annotations

import collections
import types
from typing import Any

_ATTRS_REPR = "<attrs generated"


class Cycle(Exception):
    """A container met again on its own path: the repr is the value's own."""


def repr_prefix(value: Any, room: int) -> str:
    """`repr(value)`, or a text longer than `room` characters that begins as `repr(value)` does."""
    try:
        return _Writer(room).text(value)
    except Cycle:
        return repr(value)


class _Writer:
    __slots__ = ("path", "room")

    def __init__(self, room: int) -> None:
        self.room = room
        self.path: set[int] = set()

    def text(self, value: Any) -> str:
        kind = type(value)
        if kind is str or kind is bytes:
            return self._quoted(value)
        if kind is list:
            return self._items(value, "[", "]", value)
        if kind is tuple:
            return self._items(value, "(", ",)" if len(value) == 1 else ")", value)
        if kind is dict:
            return self._items(value.items(), "{", "}", value)
        if kind is types.MappingProxyType:
            return self._items(value.items(), "mappingproxy({", "})", value)
        if kind is collections.deque:
            close = "])" if value.maxlen is None else f"], maxlen={value.maxlen})"
            return self._items(value, "deque([", close, value)
        fields = _attrs_fields(kind)
        if fields is not None:
            name = kind.__qualname__.rsplit(">.", 1)[-1]
            pairs = [(field, getattr(value, field)) for field in fields]
            return self._items(pairs, name + "(", ")", value, "=")
        out = repr(value)
        self.room -= len(out)
        return out

    def _quoted(self, value: str | bytes) -> str:
        if len(value) < self.room:
            out = repr(value)
        else:  # cut where its repr quotes as the whole one's does (a repr is double quoted when it holds ' and no ")
            marks: tuple[Any, Any] = ("'", '"') if isinstance(value, str) else (b"'", b'"')
            whole: Any = value
            cut = whole[: max(self.room, 0)]
            if _double_quoted(whole, marks) != _double_quoted(cut, marks):
                missing = marks[0] if marks[0] not in cut else marks[1]  # the whole's first one past the cut
                cut = whole[: whole.find(missing, len(cut)) + 1]
            out = repr(cut)[:-1]  # no closing quote: the repr goes on
        self.room -= len(out)
        return out

    def _items(self, items: Any, opening: str, closing: str, owner: Any, between: str = ": ") -> str:
        key = id(owner)
        if key in self.path:
            raise Cycle
        self.path.add(key)
        parts = [opening]
        self.room -= len(opening)
        complete = True
        for item in items:
            if self.room < 0:
                complete = False
                break
            if len(parts) > 1:
                parts.append(", ")
                self.room -= 2
            if owner is not items:  # a dict's or an attrs instance's (key, value) pairs
                head, item = item
                if between == "=":  # an attrs field's name
                    parts.append(head)
                    self.room -= len(head)
                else:
                    parts.append(self.text(head))
                parts.append(between)
                self.room -= len(between)
            parts.append(self.text(item))
        self.path.discard(key)
        if complete:
            parts.append(closing)
            self.room -= len(closing)
        return "".join(parts)


def _double_quoted(text: Any, marks: tuple[Any, Any]) -> bool:
    """Whether the repr of `text` quotes with '"': it holds a single quote and no double quote."""
    return bool(marks[0] in text and marks[1] not in text)


def _attrs_fields(kind: type) -> tuple[str, ...] | None:
    """The fields an attrs-generated `__repr__` shows (with no repr function of their own), or None."""
    fields = getattr(kind, "__attrs_attrs__", None)
    code = getattr(getattr(kind, "__repr__", None), "__code__", None)
    if fields is None or code is None or not code.co_filename.startswith(_ATTRS_REPR):
        return None
    if any((field.repr is not True and field.repr is not False) or not field.init for field in fields):
        return None  # a field's own repr function, or one shown only when set: the value's own repr
    return tuple(field.name for field in fields if field.repr is True)
