"""Reading a request body within limits: before and after decompression, streaming, so a bomb is cheap to refuse."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable

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


async def gunzip_limited(chunks: AsyncIterator[bytes], limit: int, wire_limit: int, take: Take | None = None) -> bytes:
    """Decompress a gzip stream chunk by chunk; stops with BodyTooLarge once the output passes `limit`."""
    d = zlib.decompressobj(wbits=31)
    parts: list[bytes] = []
    total = 0
    wire = 0
    try:
        async for chunk in chunks:
            wire += len(chunk)
            if wire > wire_limit:
                raise BodyTooLarge("request body", wire_limit)
            data = chunk
            while data:
                if d.eof:  # concatenated gzip members are valid gzip
                    d = zlib.decompressobj(wbits=31)
                out = d.decompress(data, limit - total + 1)
                total += len(out)
                if total > limit:
                    raise BodyTooLarge("decompressed body", limit)
                if take is not None:
                    take(len(out))
                parts.append(out)
                data = d.unused_data if d.eof else d.unconsumed_tail
        out = d.flush()
        total += len(out)
        if total > limit:
            raise BodyTooLarge("decompressed body", limit)
        parts.append(out)
    except zlib.error as exc:
        raise BadEncoding(f"invalid gzip data: {exc}") from None
    if not d.eof:
        raise BadEncoding("invalid gzip data: truncated stream")
    return b"".join(parts)
