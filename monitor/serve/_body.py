"""Reading a request body within limits: before and after decompression, streaming, so a bomb is cheap to refuse."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from monitor.otlp import DecodeError
from monitor.replay import ZstdTooLarge, unzstd

Take = Callable[[int], None]  # called with the size of each part kept; raises to stop reading


class BodyTooLarge(Exception):
    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"{what} exceeds the limit of {limit} bytes")


class BadEncoding(Exception):
    pass


class Busy(Exception):
    """The bodies being read at once would pass their shared bound: retry later."""


class InFlight:
    """Bytes held by the request bodies being read at once, across requests (one event loop, no lock)."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, n: int) -> None:
        if self.held + n > self.limit:
            raise Busy(f"request bodies being read exceed {self.limit} bytes together")
        self.held += n

    def give(self, n: int) -> None:
        self.held -= n


async def read_limited(chunks: AsyncIterator[bytes], limit: int, take: Take | None = None) -> bytes:
    """Concatenate chunks; BodyTooLarge as soon as more than `limit` bytes arrived."""
    parts: list[bytes] = []
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise BodyTooLarge("request body", limit)
        if take is not None:
            take(len(chunk))
        parts.append(chunk)
    return b"".join(parts)


GZIP = "gzip"
DEFLATE = "deflate"
ZSTD = "zstd"  # the Collector's otlphttp exporter sends it with `compression: zstd`
IDENTITY = "identity"
# `zlib`: the name the Collector's otlphttp exporter sends with `compression: zlib` (zlib data, HTTP's deflate), which
# the Collector's receiver reads as deflate
_CODINGS = {"gzip": GZIP, "x-gzip": GZIP, "deflate": DEFLATE, "zlib": DEFLATE, "zstd": ZSTD}


def content_coding(header: str) -> str | None:
    """The coding of a Content-Encoding value: GZIP, DEFLATE, ZSTD or IDENTITY; None for any other (or for two
    codings).

    Codings are case-insensitive, `x-gzip` is gzip (RFC 9110 8.4.1.3), `zlib` is deflate (as the Collector reads it)
    and `identity` entries change nothing.
    """
    codings = [c.strip().lower() for c in header.split(",")]
    applied = [c for c in codings if c not in ("", IDENTITY)]
    if not applied:
        return IDENTITY
    if len(applied) > 1:
        return None
    return _CODINGS.get(applied[0])


def _deflate_wbits(head: bytes) -> int:
    """zlib data (RFC 1950, what HTTP's deflate is) when `head` is a zlib header, else raw DEFLATE, which some
    clients send as deflate."""
    if len(head) >= 2 and head[0] & 0x0F == 8 and head[0] >> 4 <= 7 and (head[0] << 8 | head[1]) % 31 == 0:
        return 15
    return -15


class _Inflater:
    """A gzip or deflate stream decompressed piece by piece, its output bounded."""

    def __init__(self, coding: str, limit: int, take: Take | None) -> None:
        self.coding, self.limit, self.take = coding, limit, take
        self.d: Any = zlib.decompressobj(wbits=31) if coding == GZIP else None
        self.head = b""  # deflate: the first bytes, until there are two to tell zlib data from raw DEFLATE
        self.parts: list[bytes] = []
        self.total = 0

    def _keep(self, out: bytes) -> None:
        self.total += len(out)
        if self.total > self.limit:
            raise BodyTooLarge("decompressed body", self.limit)
        if self.take is not None:
            self.take(len(out))
        self.parts.append(out)

    def feed(self, data: bytes) -> None:
        if self.d is None:
            self.head += data
            if len(self.head) < 2:
                return
            self.d, data = zlib.decompressobj(wbits=_deflate_wbits(self.head)), self.head
        while data:
            if self.d.eof:
                if self.coding != GZIP:  # concatenated gzip members are valid gzip; data after a zlib stream is not
                    raise BadEncoding(f"invalid {self.coding} data: {len(data)} bytes after the end of the stream")
                self.d = zlib.decompressobj(wbits=31)
            self._keep(self.d.decompress(data, self.limit - self.total + 1))
            data = self.d.unused_data if self.d.eof else self.d.unconsumed_tail

    def finish(self) -> bytes:
        if self.d is None:  # a deflate body of fewer than 2 bytes
            self.d = zlib.decompressobj(wbits=-15)
            self.feed(self.head)
        self._keep(self.d.flush())
        if not self.d.eof:
            raise BadEncoding(f"invalid {self.coding} data: truncated stream")
        return b"".join(self.parts)


async def inflate_limited(
    chunks: AsyncIterator[bytes], coding: str, limit: int, wire_limit: int, take: Take | None = None
) -> bytes:
    """Decompress a gzip or deflate stream chunk by chunk; stops with BodyTooLarge once the output passes `limit`.
    zstd: the whole wire body first (bounded by `wire_limit`), then decompressed as a stream, refused past `limit`."""
    if coding == ZSTD:
        return _unzstd_limited(await read_limited(chunks, wire_limit, take), limit, take)
    inflater = _Inflater(coding, limit, take)
    wire = 0
    try:
        async for chunk in chunks:
            wire += len(chunk)
            if wire > wire_limit:
                raise BodyTooLarge("request body", wire_limit)
            inflater.feed(chunk)
        return inflater.finish()
    except zlib.error as exc:
        raise BadEncoding(f"invalid {coding} data: {exc}") from None


def _unzstd_limited(body: bytes, limit: int, take: Take | None) -> bytes:
    try:
        out = unzstd(body, limit)
    except ZstdTooLarge:
        raise BodyTooLarge("decompressed body", limit) from None
    except DecodeError as exc:
        raise BadEncoding(str(exc)) from None
    if take is not None:
        take(len(out))
    return out
