"""Reading a request body within limits: before and after decompression, streaming, so a bomb is cheap to refuse."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator


class BodyTooLarge(Exception):
    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"{what} exceeds the limit of {limit} bytes")


class BadEncoding(Exception):
    pass


async def read_limited(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """Concatenate chunks; BodyTooLarge as soon as more than `limit` bytes arrived."""
    parts: list[bytes] = []
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise BodyTooLarge("request body", limit)
        parts.append(chunk)
    return b"".join(parts)


async def gunzip_limited(chunks: AsyncIterator[bytes], limit: int, wire_limit: int) -> bytes:
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
