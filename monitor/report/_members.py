"""The wanted members of a JSON object too large to read whole (a report of 100,000 cases, read as a baseline for its
figures): read in chunks, each value decoded on its own and dropped unless wanted, so memory stays bounded."""

from __future__ import annotations

import codecs
import json
import re
from typing import IO, Any


class ValueTooLarge(ValueError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"a value over {limit} bytes")
        self.limit = limit


class MembersError(ValueError):
    """Not one JSON object: `msg` at character `offset` of the text; `cut`: the text ends there, inside the object."""

    def __init__(self, msg: str, offset: int, cut: bool = False) -> None:
        super().__init__(f"{msg} (at character {offset})")
        self.msg, self.offset, self.cut = msg, offset, cut


_CHUNK_BYTES = 1 << 20
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _Chunks:
    """The text of a file read in chunks (the part parsed dropped): JSON values decoded one at a time, none past
    `limit` bytes."""

    def __init__(self, head: bytes, fh: IO[bytes], limit: int) -> None:
        self._fh, self._limit = fh, limit
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self.buf, self.pos, self.eof = self._utf8.decode(head), 0, False
        self.dropped = 0  # characters read and dropped before buf

    def fill(self) -> None:
        """Read more: as much again as the value being read holds (linear time for a value across many chunks), none
        once that is past the limit."""
        if self.eof:
            return
        held = len(self.buf) - self.pos
        if held > self._limit:
            raise ValueTooLarge(self._limit)
        chunk = self._fh.read(max(min(_CHUNK_BYTES, self._limit), held))
        self.eof = not chunk
        self.dropped += self.pos
        self.buf = self.buf[self.pos :] + self._utf8.decode(chunk, final=self.eof)
        self.pos = 0

    def ends_here(self) -> bool:
        """Whether the file holds nothing but whitespace past what is read (read on to its end, or to the first other
        byte): a number read whole before the chunk's end (`0` of `0.`) leaves the file unread past it."""
        while not self.eof:
            chunk = self._fh.read(_CHUNK_BYTES)
            self.eof = not chunk
            if chunk.strip(b" \t\n\r"):
                return False
        return True

    def peek(self) -> str:
        """The next character past whitespace, "" at the end."""
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # * always matches
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos : self.pos + 1]
            self.fill()

    def expect(self, chars: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            what = " or ".join(repr(x) for x in chars)
            raise json.JSONDecodeError(f"Expecting {what}", self.buf, self.pos)
        self.pos += 1
        return c

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if self.eof:
                    raise
                self.fill()  # cut at the chunk's end, maybe
                continue
            if end < len(self.buf) or self.eof:  # a number may go on in the next chunk
                self.pos = end
                return value
            self.fill()


def read_members(head: bytes, fh: IO[bytes], limit: int, wanted: tuple[str, ...]) -> dict[str, Any]:
    """The members named `wanted` of the JSON object whose text starts with `head` and goes on in `fh`: its members
    read one at a time, an array's items one at a time, only these kept. Raises ValueTooLarge for a value past
    `limit` bytes, MembersError for what is not one JSON object, UnicodeDecodeError for what is not UTF-8."""
    src = _Chunks(head, fh, limit)
    try:
        return _members(src, wanted)
    except json.JSONDecodeError as exc:
        raise MembersError(exc.msg, src.dropped + exc.pos, cut_short(exc) and src.ends_here()) from None


# What a value cut inside leaves after the place the decoder reports: part of a literal (`nu`, `tr`, `fals`), a sign,
# or a number's point or exponent without their digits (`0.`, `1e`, `1e-`: the number read is `0` or `1`).
_CUT_VALUE = re.compile(r"t(?:ru?)?|f(?:a(?:ls?)?)?|n(?:ul?)?|-|\.|[eE][-+]?")


def cut_short(exc: json.JSONDecodeError) -> bool:
    """Whether the JSON text of `exc` (all of it) ends before its value does: a file cut short, not one with a bad
    character somewhere (a string not closed by the end, nothing but space after the error's place, or only the start
    of a literal or of a number's fraction or exponent)."""
    if exc.msg.startswith("Unterminated string"):
        return True
    rest = exc.doc[exc.pos :].strip()
    return not rest or (exc.msg != "Extra data" and _CUT_VALUE.fullmatch(rest) is not None)


def _members(src: _Chunks, wanted: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    src.expect("{")
    if src.peek() != "}":
        while True:
            key = src.value()
            src.expect(":")
            if not isinstance(key, str):
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", src.buf, src.pos)
            if key not in wanted and src.peek() == "[":
                src.pos += 1
                if src.peek() != "]":
                    while True:
                        src.value()
                        if src.expect(",]") == "]":
                            break
                else:
                    src.pos += 1
            else:
                value = src.value()
                if key in wanted:
                    out[key] = value
            if src.expect(",}") == "}":
                break
    else:
        src.pos += 1
    if src.peek():
        raise json.JSONDecodeError("Extra data", src.buf, src.pos)
    return out
