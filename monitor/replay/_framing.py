"""How captured messages are framed and compressed: what the Collector's file exporter and protobuf tools write.

- zstd (magic 28 B5 2F FD, or a skippable frame's first), the Collector file exporter's only compression: a whole
  file (its native-compression feature gate: one stream, in one or more frames) or each framed message (its legacy
  mode). Decompressed as a stream, never more than a bound at a time; a stream that ends inside a frame is an error
  (a cut file), and so is data that is not zstd (trailing junk, a corrupt header), after the frames before it were
  decompressed.
- a 4-byte big-endian length before each message: the Collector's `format: proto`, and its JSON when compressed
  in the legacy mode (`exportMessageAsBuffer`).
- a base-128 varint length before each message: protobuf's `writeDelimitedTo`.
- one bare message.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, cast

import zstandard

from monitor.otlp import Decoded, DecodeError, parse_json, parse_protobuf

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZstdError = zstandard.ZstdError
_SKIPPABLE_TAIL = b"\x2a\x4d\x18"  # a skippable frame's magic is 50..5F 2A 4D 18
_ZSTD_READ_BYTES = 128 * 1024


def starts_zstd(head: bytes) -> bool:
    """Whether data starting with `head` is zstd: a data frame's magic, or a skippable frame's (50..5F 2A 4D 18: a
    stream may open with one, as pzstd's does). Neither starts OTLP JSON, a protobuf request or a framing (as a
    4-byte size, past every bound)."""
    return head[:4] == ZSTD_MAGIC or (len(head) >= 4 and head[0] & 0xF0 == 0x50 and head[1:4] == _SKIPPABLE_TAIL)


class FramingError(ValueError):
    """The framing of a stream is lost at `offset` (a cut file, or a size no message has): the rest is skipped."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset


class _FrameWalker:
    """Follows the frame and block headers of zstd data (no decompression) to tell a whole stream from a cut one."""

    def __init__(self) -> None:
        self._state = "magic"
        self._need = 4
        self._buf = b""
        self._skip = 0
        self._checksum = False
        self.offset = 0  # bytes fed before this chunk
        self.error: ZstdError | None = None  # where the data stopped being zstd: nothing is read past it

    @property
    def at_frame_boundary(self) -> bool:
        return self._state == "magic" and not self._buf and not self._skip

    def feed(self, data: bytes) -> int:
        """Follow `data`; the number of its bytes that are zstd data, all of them unless a header is not a frame's
        or a block's (trailing junk, a corrupt frame): `error` then says what and where, and nothing more is taken.
        """
        if self.error is not None:
            return 0
        pos, end = 0, len(data)
        while pos < end:
            if self._skip:
                k = min(self._skip, end - pos)
                self._skip -= k
                pos += k
                continue
            header_at = pos - len(self._buf)  # negative when the header began in an earlier chunk
            take = min(self._need - len(self._buf), end - pos)
            self._buf += data[pos : pos + take]
            pos += take
            if len(self._buf) == self._need:
                header, self._buf = self._buf, b""
                try:
                    self._advance(header)
                except ZstdError as exc:
                    self.error = ZstdError(f"{exc} at byte {self.offset + header_at} of the zstd data")
                    self.offset += max(header_at, 0)
                    return max(header_at, 0)
        self.offset += end
        return end

    def _expect(self, state: str, need: int) -> None:
        self._state, self._need = state, need

    def _advance(self, h: bytes) -> None:
        state = self._state
        if state == "magic":
            if h == ZSTD_MAGIC:
                self._expect("descriptor", 1)
            elif h[0] & 0xF0 == 0x50 and h[1:] == _SKIPPABLE_TAIL:
                self._expect("skippable", 4)
            else:
                raise ZstdError(f"not a zstd frame (starts {h.hex()})")
        elif state == "descriptor":
            fhd = h[0]
            single_segment = bool(fhd & 0x20)
            self._checksum = bool(fhd & 0x04)
            fcs = (1 if single_segment else 0, 2, 4, 8)[fhd >> 6]
            rest = (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 0x03] + fcs
            if rest:
                self._expect("header", rest)
            else:
                self._expect("block", 3)
        elif state == "header":
            self._expect("block", 3)
        elif state == "block":
            bh = int.from_bytes(h, "little")
            kind, size = (bh >> 1) & 0x03, bh >> 3
            if kind == 3:
                raise ZstdError("reserved zstd block type")
            self._skip = 1 if kind == 1 else size
            if not bh & 1:
                self._expect("block", 3)
            elif self._checksum:
                self._expect("checksum", 4)
            else:
                self._expect("magic", 4)
        elif state == "checksum":
            self._expect("magic", 4)
        else:  # skippable: its size, then that many bytes
            self._skip = int.from_bytes(h, "little")
            self._expect("magic", 4)


class _Walked:
    """The compressed source, read through a frame walker: it ends where the walker found data that is not zstd
    (trailing junk after the last frame, a corrupt header), so the decompressor still gets the valid bytes before
    it; `walker.error` then says why it ended."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source = source
        self.walker = _FrameWalker()

    def read(self, n: int = -1) -> bytes:
        if self.walker.error is not None:
            return b""
        data = self.source.read(n)
        valid = self.walker.feed(data)
        return data if valid == len(data) else data[:valid]


class _ZstdStream(io.RawIOBase):
    """Decompressed zstd data, across frames; the end of the input inside a frame raises EOFError, data that is not
    zstd ZstdError, each once what was decompressed before it has been read."""

    def __init__(self, source: IO[bytes]) -> None:
        self._walked = _Walked(source)
        self._reader = zstandard.ZstdDecompressor().stream_reader(
            cast(IO[bytes], self._walked), read_size=_ZSTD_READ_BYTES, read_across_frames=True, closefd=False
        )

    def readable(self) -> bool:
        return True

    def readinto(self, b: WriteableBuffer) -> int:
        n: int = self._reader.readinto1(b)  # one read of the source: output before an error is not lost
        if not n:
            walker = self._walked.walker
            if walker.error is not None:
                raise walker.error
            if not walker.at_frame_boundary:
                raise EOFError("zstd data ended inside a frame (the file is cut short)")
        return n


def zstd_stream(source: IO[bytes], buffer_bytes: int = io.DEFAULT_BUFFER_SIZE) -> io.BufferedReader:
    """The decompressed content of zstd data read from `source` (one or more frames)."""
    return io.BufferedReader(_ZstdStream(source), buffer_bytes)


def read_at_most(fh: IO[bytes], limit: int) -> bytes | None:
    """All of `fh`, or None when it holds more than `limit` bytes (at most `limit` + 1 are read)."""
    data = fh.read(limit + 1)
    return None if len(data) > limit else data


class ZstdTooLarge(DecodeError):
    """zstd data that decompresses to more than the bound."""


def unzstd(payload: bytes, limit: int) -> bytes:
    """One zstd-compressed message, decompressed as a stream and refused past `limit` bytes (no zstd bomb):
    ZstdTooLarge then, DecodeError for data that is not zstd or is cut short (an empty payload holds no frame)."""
    if not payload:
        raise DecodeError("invalid zstd data: empty, no frame")
    try:
        out = read_at_most(zstd_stream(io.BytesIO(payload)), limit)
    except (ZstdError, EOFError) as exc:
        raise DecodeError(f"invalid zstd data: {exc}") from None
    if out is None:
        raise ZstdTooLarge(f"zstd data decompresses to more than {limit} bytes: skipped")
    return out


def decode_payload(payload: bytes, limit: int) -> Decoded:
    """One framed message: zstd-compressed or not, OTLP protobuf or (a request in OTLP JSON starts with `{`) JSON."""
    if starts_zstd(payload):
        payload = unzstd(payload, limit)
    if payload[:1] == b"{":
        return parse_json(payload)
    return parse_protobuf(payload)


def looks_be32(head: bytes, limit: int) -> bool:
    """Whether content starting with `head` is framed by 4-byte big-endian lengths (the Collector's framing).

    It is when the first 4 bytes give a size from 1 to `limit` and what follows starts as a message does: a
    protobuf request (0x0a, its field 1), OTLP JSON (`{`) or zstd. None of the other framings starts so: a bare
    request starts with 0x0a (as a size, past any limit), JSON with `{`, and a varint-delimited stream only when
    its first message is at most 4 bytes long, which no exporter writes (a request with a span is far longer).
    """
    if len(head) < 5:
        return False
    size = int.from_bytes(head[:4], "big")
    body = head[4:]
    return 0 < size <= limit and (body[:1] in (b"\x0a", b"{") or starts_zstd(body))


def be32_frames(fh: IO[bytes], limit: int) -> Iterator[tuple[int, bytes]]:
    """(offset, message) of each message after its 4-byte big-endian size, read as a stream.

    Raises FramingError at a size over `limit` or a message cut short (the rest cannot be found).
    """
    offset = 0
    while True:
        header = fh.read(4)
        if not header:
            return
        if len(header) < 4:
            raise FramingError(offset, f"cut short: {len(header)} of the 4 bytes of a message size")
        size = int.from_bytes(header, "big")
        if size > limit:
            raise FramingError(
                offset,
                f"a message size of {size} bytes, over the {limit} byte limit: the framing "
                "is lost, the rest of the file is skipped",
            )
        payload = fh.read(size)
        if len(payload) < size:
            raise FramingError(offset, f"cut short: {len(payload)} of the {size} bytes of the message")
        yield offset, payload
        offset += 4 + size


def _read_varint(buf: bytes, pos: int) -> tuple[int, int] | None:
    value = shift = 0
    while pos < len(buf) and shift < 64:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    return None


def varint_frames(buf: bytes, limit: int) -> tuple[list[tuple[int, int]], int]:
    """(start, end) of each message after its varint size, as far as they go, and where they stop.

    They tile `buf` exactly when the position returned is len(buf).
    """
    frames = []
    pos = 0
    while pos < len(buf):
        got = _read_varint(buf, pos)
        if got is None:
            break
        size, start = got
        if size > limit or start + size > len(buf):
            break
        frames.append((start, start + size))
        pos = start + size
    return frames, pos
