"""A bounded, detached copy of a value whose JSON begins as the value's own would.

`to_json` encodes with `json`'s C encoder and a `default` hook (`_content._default`): strings, numbers, lists,
tuples and dicts (and their subclasses) natively; enums, dataclasses, sets, dates and `model_dump` models through
the hook; anything else as its `repr()`. `clip` walks a value the same way and builds plain data (dict, list, str,
int, float, bool, None, bytes) that encodes to the same text, but only as far as the kept prefix needs: containers
keep their first items, strings their first characters, until `room` characters are certain (each counted at its
least). A dataclass holding a million rows therefore costs as much as one holding a few; a dataclass reached only
past the cut is never looked at. The copy holds none of the value's own objects, so a redaction hook given it
cannot change what the tool received.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Callable, Mapping
from typing import Any

from instrumentation._reprclip import repr_prefix
from instrumentation._stats import STATS

Redacts = Callable[[object], bool]
"""Whether the value under this key is to be replaced by the redaction marker."""

# Least JSON characters per unit of len() of a value of these types: a str's character, a list's item and its
# comma, a dict's item (`"":0,`), a bytes' byte (in its repr).
LEAST_CHARS: dict[type, int] = {str: 1, list: 2, tuple: 2, set: 2, frozenset: 2, dict: 5, bytes: 1, bytearray: 1}
SCALARS: frozenset[type] = frozenset({int, float, bool, type(None)})
"""Types whose JSON is short and which `room_left` counts as one character."""

_least_chars = LEAST_CHARS.get


def room_left(value: Any, room: int) -> int:
    """`room` less the least number of characters the JSON of `value` takes; stops counting once that is below 0.
    Looks into containers (as many of their items as could fit), counts a scalar as one character, and any other
    value (a dataclass, a subclass, ...) as not fitting: those go through `clip`, which is bounded."""
    least = _least_chars(type(value))
    if least is None:
        return room - 1 if type(value) in SCALARS else -1
    size = len(value)
    if size * least > room:
        return -1
    if least == 1:  # str, bytes: a character each, and the opening quote
        return room - size - 1
    room -= size * (least - 1)  # the brackets, commas and `"":` of the items: all but the item values themselves
    if type(value) is dict:
        return _room_left_of_dict(value, room)
    for item in value:
        kind = type(item)
        if kind is str:  # the common items inline: this runs on every recorded call
            room -= len(item) + 1
        elif kind in LEAST_CHARS:
            room = room_left(item, room)
        elif kind in SCALARS:
            room -= 1
        else:
            return -1
        if room < 0:
            break
    return room


def _room_left_of_dict(value: dict[Any, Any], room: int) -> int:
    """`room_left` of a dict's keys and values, the brackets, commas and `"":` already counted."""
    for key, item in value.items():
        if type(key) is not str:  # a number, or a key the encoder refuses: for `clip` to tell
            return -1
        room = room_left(item, room - len(key))
        if room < 0:
            break
    return room


def model_dump_of(value: Any) -> Callable[..., Any] | None:
    """The `model_dump` of a value whose class defines one (pydantic v2 models), else None. Looked up on the class: an
    object that answers every attribute (an RPC client, a service stub, a test double) is no model, and calling what
    it answers for `model_dump` called it, then the dump of what that returned, down to the recursion limit."""
    if not callable(getattr(type(value), "model_dump", None)):
        return None
    dump: Callable[..., Any] = value.model_dump
    return dump


def same_quotes(data: bytes | bytearray, cut: bytes | bytearray) -> bool:
    """Whether the repr of `cut` quotes as that of `data` does (double quotes when there are single but no double)."""
    return (b"'" in data and b'"' not in data) == (b"'" in cut and b'"' not in cut)


class Circular(RecursionError):
    """A container met again inside itself: a RecursionError, as the encoder (without its circular check) raises."""


class Clipper:
    """One walk of `clip`: the room left, the containers on the path (a circular value raises RecursionError, as
    the encoder without its circular check does), the key redaction and its marker."""

    __slots__ = ("marker", "path", "redacts", "room")

    def __init__(self, room: int, redacts: Redacts | None = None, marker: str = "") -> None:
        self.room = room
        self.path: set[int] = set()
        self.redacts = redacts
        self.marker = marker

    def clip(self, value: Any) -> Any:  # noqa: C901 - one branch per kind the encoder tells apart, in its order
        if value is None or value is True or value is False:
            self.room -= 1
            return value
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, int):  # as the encoder does: int.__repr__, whatever the subclass says
            self.room -= 1
            return value if type(value) is int else int.__int__(value)
        if isinstance(value, float):
            self.room -= 1
            return value if type(value) is float else float.__float__(value)
        if isinstance(value, (list, tuple)):
            return self._nested(value, self._items)
        if isinstance(value, dict) or (self.redacts is not None and isinstance(value, Mapping)):
            return self._nested(value.items(), self._pairs, value)  # key redaction makes any mapping a dict
        return self._other(value)

    def _other(self, value: Any) -> Any:
        """What `_content._default` turns a value into, clipped; in its order."""
        if isinstance(value, enum.Enum):
            return self.clip(value.value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
            return self._nested(fields, self._pairs, value)
        if isinstance(value, (set, frozenset)):
            return self._nested(value, self._items)
        if isinstance(value, (datetime.date, datetime.time)):
            return self.clip(value.isoformat())
        dump = model_dump_of(value)  # pydantic v2 models: called only when the prefix reaches it
        if dump is not None:
            return self.clip(dump(mode="json"))
        kind = type(value)
        if kind is bytes or kind is bytearray:  # the encoder gives their repr (and counts the fallback)
            cut = value
            if len(value) >= self.room:
                cut = value[: max(self.room, 0)]  # its opening quote makes the JSON longer than the room
                if not same_quotes(value, cut):
                    cut = value
            self.room -= len(cut) + 1
            return bytes(cut) if kind is bytes else bytearray(cut)
        STATS.serialization_fallbacks += 1
        return self._text(repr_prefix(value, self.room))

    def _text(self, value: str) -> str:
        if len(value) >= self.room:
            value = str.__getitem__(value, slice(None, max(self.room, 0)))
        elif type(value) is not str:
            value = str.__str__(value)
        self.room -= len(value) + 1
        return value

    def _nested(self, items: Any, walk: Callable[[Any], Any], owner: Any = None) -> Any:
        key = id(items if owner is None else owner)
        path = self.path
        if key in path:
            raise Circular("circular reference")
        path.add(key)  # not taken out on an exception: the walk ends there
        self.room -= 1
        kept = walk(items)
        path.discard(key)
        return kept

    def _items(self, items: Any) -> list[Any]:
        kept: list[Any] = []
        for item in items:
            if self.room <= 0:
                break
            if kept:
                self.room -= 1  # the comma
            kind = type(item)
            if kind is int or kind is float:  # the common items inline
                self.room -= 1
                kept.append(item)
            elif kind is str and len(item) < self.room:
                self.room -= len(item) + 1
                kept.append(item)
            elif kind is list or kind is tuple:
                kept.append(self._nested(item, self._items))
            else:
                kept.append(self.clip(item))
        return kept

    def _pairs(self, pairs: Any) -> dict[Any, Any]:
        kept: dict[Any, Any] = {}
        redacts = self.redacts
        for key, item in pairs:
            if self.room <= 0:
                break
            if kept:
                self.room -= 1  # the comma
            name = self.key(key, kept)
            kept[name] = self.clip(self.marker if redacts is not None and redacts(key) else item)
        return kept

    def key(self, key: Any, kept: dict[Any, Any]) -> Any:
        """The key as the encoder writes it: a str (cut, and kept distinct from the keys before it), an exact number,
        True, False or None; any other key fails as it does in the encoder."""
        self.room -= 1  # the opening quote
        if isinstance(key, str):
            if len(key) < self.room:
                name = key if type(key) is str else str.__str__(key)
            else:  # a cut key: as long as the room, or longer where a shorter one is taken already
                size = max(self.room, 0)
                name = str.__getitem__(key, slice(None, size))
                while name in kept and size < len(key):
                    size += 1
                    name = str.__getitem__(key, slice(None, size))
            self.room -= len(name) + 2  # and `":`
            return name
        self.room -= 3
        if key is None or key is True or key is False:
            return key
        if isinstance(key, float):
            return key if type(key) is float else float.__float__(key)
        if isinstance(key, int):
            return key if type(key) is int else int.__int__(key)
        raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def clip(value: Any, room: int, redacts: Redacts | None = None, marker: str = "") -> Any:
    """A detached copy of `value` whose JSON starts as that of `value` for at least `room` characters (all of it when
    shorter), with the values under keys `redacts` accepts replaced by `marker`. Raises what the encoder would raise
    on `value` (RecursionError on a circular value, TypeError on a bad key) and what the value's own methods raise."""
    return Clipper(room, redacts, marker).clip(value)


def clip_arguments(
    arguments: Mapping[Any, Any], room: int, redacts: Redacts | None = None, marker: str = ""
) -> dict[Any, Any]:
    """`clip` of an argument mapping, each argument with its own `room` (a redaction hook that drops one large
    argument still finds the others whole), as many arguments as `room` characters of keys hold."""
    keys = Clipper(room)
    kept: dict[Any, Any] = {}
    for key, value in arguments.items():
        if keys.room <= 0:
            break
        name = keys.key(key, kept)  # the same key rule, with a room of its own
        kept[name] = marker if redacts is not None and redacts(key) else clip(value, room, redacts, marker)
    return kept
