"""Captured span files: OTLP JSON lines, OTLP protobuf files (however framed, zstd or not), and directories of them.

Formats (chosen by `detect_format`, or forced with `fmt`):
- `jsonl`: the OpenTelemetry Collector file exporter's `format: json`: one ExportTraceServiceRequest in OTLP JSON
  per line.
- `pb`: OTLP protobuf, framed in one of three ways, told apart from the first bytes and the sizes (see
  `_framing.looks_be32`):
  - `pb-be32`: each message after its size as a 4-byte big-endian integer, as the Collector file exporter's
    `format: proto` writes (and its `format: json` with `compression: zstd` in the legacy mode: JSON messages);
  - `pb-varint`: each message after its size as a base-128 varint (protobuf's `writeDelimitedTo`);
  - `pb-single`: one bare ExportTraceServiceRequest filling the whole file.
  A file whose varint-prefixed sizes tile it exactly is read as a varint stream, otherwise as one message; one
  that tiles but starts with 0x0a (as a bare request does) and decodes as one message is read as one message. One
  that does not tile, holds whole varint-prefixed messages and does not start with 0x0a is a varint stream cut
  short: its whole messages are read, and the rest is a read error.
Compression: gzip by the `.gz` suffix or by its magic bytes (standard input, a file not named .gz); zstd (the
Collector's `compression: zstd`) by its magic bytes, for the whole file (the Collector's native compression) and
for each framed message (its legacy mode). Decompressed sizes are bounded: a line or message is at most
MAX_MESSAGE_BYTES, a file read whole at most MAX_SINGLE_FILE_BYTES.

`-` reads standard input, detected the same way, e.g. `zcat spans.gz | toolwatch replay -`; so is a FIFO or a
character device given by name (`toolwatch replay <(zcat spans.gz)`, a named pipe). Standard input that is a terminal
is refused (nothing would end the wait for input); a socket or a block device is named for what it is.

Each item yielded is (Decoded, bytes consumed so far in that file) so callers can show progress. A file that
cannot be read to its end (a cut or corrupt `.gz` or zstd file, a framed file cut short or whose framing is lost,
JSON lines cut inside the last line, an I/O error) raises SourceError after what was read before the error was
yielded, naming the file and the offset in its content.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from monitor.otlp import Decoded, DecodeError, bounded_lines, parse_json, parse_protobuf
from monitor.replay._framing import (
    ZSTD_MAGIC,
    FramingError,
    ZstdError,
    be32_frames,
    decode_payload,
    looks_be32,
    starts_zstd,
    varint_frames,
    zstd_stream,
)
from monitor.replay._rotation import capture_order, rotated_without_suffix
from monitor.replay._walk import regular_files

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

JSON_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson"})
PB_SUFFIXES = frozenset({".pb", ".bin", ".otlp", ".protobuf", ".binpb"})
COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd")  # after a span file suffix (.gz by suffix, zstd by content)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # one export request (decompressed); larger is refused as corrupt
MAX_SINGLE_FILE_BYTES = 512 * 1024 * 1024  # a varint-delimited or bare protobuf file is read whole (decompressed)
GZIP_MAGIC = b"\x1f\x8b\x08"  # gzip, deflate: no OTLP JSON, protobuf request or framing starts so (0x1f is field 3
# of an invalid wire type; as a 4-byte size, past MAX_MESSAGE_BYTES)
_FIELD_1_LEN = 0x0A  # the first byte of a bare ExportTraceServiceRequest: field 1 (resource_spans), length-delimited
LINE_BUFFER_BYTES = 4 * 1024 * 1024
READ_CHUNK_BYTES = 4 * 1024 * 1024
HEAD_BYTES = 64  # read ahead to tell the format
UTF8_BOM = b"\xef\xbb\xbf"  # before JSON, as some Windows tools write it (JSON decoding takes it)
FORMATS = ("auto", "jsonl", "pb", "pb-be32", "pb-varint", "pb-single")
STDIN = Path("-")
# What reading a file can raise once it is open: I/O errors (a cut .gz: EOFError), corrupt deflate data in a .gz
# (zlib.error, not an OSError), corrupt or cut zstd data.
READ_ERRORS: tuple[type[Exception], ...] = (OSError, EOFError, ZstdError, zlib.error)
# and a framed file cut short or misframed: not read to its end either
_ENDS_A_FILE: tuple[type[Exception], ...] = (*READ_ERRORS, FramingError)


class SourceError(ValueError):
    """A source that cannot be read (missing, over a bound, cut short): the message names the file and where."""


@dataclass(slots=True, frozen=True)
class BadRecord:
    """One unusable line or message, with its place; replay goes on past it."""

    path: str
    where: str  # "line 12" or "message 3 at byte 4096"
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.where}: {self.message}"


class BadRecords(list[BadRecord]):
    """The first `keep` unusable records, and the count of all of them (memory stays bounded)."""

    def __init__(self, keep: int = 100) -> None:
        super().__init__()
        self.keep = keep
        self.total = 0

    def append(self, item: BadRecord) -> None:
        self.total += 1
        if len(self) < self.keep:
            super().append(item)


def _is_span_file(p: Path) -> bool:
    suffix = Path(_unwrapped_name(p)).suffix
    return suffix in JSON_SUFFIXES or suffix in PB_SUFFIXES


def is_stream(p: Path) -> bool:
    """Whether `p` is read once, front to back, with no size: standard input, a FIFO, a character device."""
    return p == STDIN or not p.is_file()


def _mode(p: Path) -> int:
    """The file type and mode of source `p` (links followed); SourceError naming it when there is none to read."""
    try:
        return p.stat().st_mode
    except FileNotFoundError:
        raise SourceError(f"{p}: no such file or directory") from None
    except OSError as exc:  # a symlink loop, a directory that cannot be searched, a name too long
        raise SourceError(f"{p}: cannot read: {exc.strerror or exc}") from None


def _check_stream(p: Path, mode: int) -> None:
    """A source that is neither a regular file nor a directory: a FIFO or a character device is read as a stream;
    anything else raises SourceError saying what it is."""
    if stat.S_ISCHR(mode) and _is_terminal(p):
        raise SourceError(f"{p}: is a terminal: nothing would end the wait for input; give a capture")
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return
    what = "a socket" if stat.S_ISSOCK(mode) else "a block device" if stat.S_ISBLK(mode) else "not a regular file"
    raise SourceError(f"{p}: is {what}; give a file, a directory of them, a FIFO or - (standard input)")


def _is_terminal(p: Path) -> bool:
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return False  # said when it is read
    try:
        return os.isatty(fd)
    finally:
        os.close(fd)


def _check_stdin() -> None:
    if sys.stdin is None:
        raise SourceError("standard input (-) is closed")
    if sys.stdin.isatty():
        raise SourceError("standard input (-) is a terminal: pipe a capture into it (zcat spans.jsonl.gz | "
                          "toolwatch replay - ...) or give the files")


def expand_sources(paths: Sequence[str | Path]) -> list[Path]:
    """Files given, plus span files found under directories, recursively (by suffix, and the Collector's rotated
    files: see _rotation), in the order written; `-` (standard input), FIFOs and character devices as given.

    A file reached twice (given twice, in a directory given and given too, by a link to it) is refused: read twice,
    its spans would be judged again past what turn assembly remembers of the turns it released."""
    out: list[Path] = []
    given = _Given(paths)
    for i, raw in enumerate(paths):
        p = Path(raw)
        if str(raw) == "-":
            if STDIN in out:
                raise SourceError("standard input (-) given twice")
            _check_stdin()
            found = [STDIN]
        elif stat.S_ISDIR(mode := _mode(p)):
            found = _span_files(p)
        elif stat.S_ISREG(mode):
            found = [p]
        else:
            _check_stream(p, mode)
            if p in out:  # opened again once read, a FIFO waits for a writer that is gone
                raise SourceError(f"{p}: a stream (FIFO or device) given twice: it can be read once")
            found = [p]
        for f in found:
            given.once(f, i)
        out += found
    return out


def _span_files(d: Path) -> list[Path]:
    """The span files under directory `d`, in the order they were written (see expand_sources)."""
    try:
        files = regular_files(d)
    except OSError as exc:
        raise SourceError(f"{exc.filename or d}: cannot list: {exc.strerror or exc}") from None
    rotated = rotated_without_suffix(files)
    found = capture_order((f for f in files if _is_span_file(f) or f in rotated), COMPRESSED_SUFFIXES)
    if not found:
        exts = ", ".join(sorted(JSON_SUFFIXES | PB_SUFFIXES))
        raise SourceError(f"{d}: directory holds no span files ({exts}, optionally .gz, .zst, or the Collector's "
                          "rotated files)")
    return found


class _Given:
    """The files the sources reach, by device and inode: one reached by two sources raises SourceError naming both."""

    def __init__(self, sources: Sequence[str | Path]) -> None:
        self.sources = sources
        self.seen: dict[tuple[int, int], tuple[Path, int]] = {}  # -> the path, and the index of its source

    def once(self, f: Path, source: int) -> None:
        try:
            st = os.fstat(sys.stdin.fileno()) if f == STDIN else f.stat()
        except (OSError, ValueError):  # read then, and said then if it cannot be; a standard input with no file
            return
        if not st.st_ino:  # a file system with no inode numbers: nothing to tell the file by
            return
        first, by = self.seen.setdefault((st.st_dev, st.st_ino), (f, source))
        if by == source:
            return
        name = "standard input (-)" if f == STDIN else str(f)
        old, new = str(self.sources[by]), str(self.sources[source])
        if old == new:  # one source given twice: the file itself, or in a directory
            ways = "given twice" if str(f) == old else f"given twice (in {old}, given twice)"
        else:
            ways = f"given twice: by {old} and by {new}"
        alias = "" if first == f or str(first) == old else f" (as {first})"
        raise SourceError(f"{name}: {ways}{alias}: each file is read once, or its spans would be judged twice; give "
                          "it once")


def _unwrapped_name(p: Path) -> str:
    name = p.name.lower()
    for suffix in COMPRESSED_SUFFIXES:
        name = name.removesuffix(suffix)
    return name


@dataclass(slots=True)
class _Opened:
    fh: IO[bytes]  # the content, decompressed
    pos: Callable[[], int]  # bytes of the file itself read so far (progress)
    size: int  # the file's size (0 for standard input)
    compressed: bool


@dataclass(slots=True)
class _Cursor:
    """How far the content was read, for the error when it cannot be read further."""

    offset: int = 0
    records: int = 0  # lines or messages read
    unit: str = "messages"
    compressed: bool = False


class _Raw(io.RawIOBase):
    """`head` (already read from `rest`), then the rest, each read taking what one read of `rest` gives (`read1`):
    what was decompressed before an error (a cut .gz) reaches the reader before the error does."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = head
        self._rest = rest
        self._read = getattr(rest, "read1", rest.read)

    def readable(self) -> bool:
        return True

    def readinto(self, b: WriteableBuffer) -> int:
        view = memoryview(b).cast("B")
        if self._head:
            n = min(len(view), len(self._head))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._read(len(view))
        view[: len(data)] = data
        return len(data)


def _peek(fh: IO[bytes], n: int) -> tuple[bytes, IO[bytes]]:
    """The first `n` bytes of `fh` (fewer at its end), and a stream that still starts with them."""
    peek = getattr(fh, "peek", None)
    if peek is not None:
        head = bytes(peek(n)[:n])
        if len(head) >= n:
            return head, fh
    head = fh.read(n)
    return head, (io.BufferedReader(_Raw(head, fh), LINE_BUFFER_BYTES) if head else fh)


@contextmanager
def _open_source(p: Path, cursor: _Cursor | None = None) -> Iterator[_Opened]:
    """The content of `p`, decompressed; `cursor` (for the error of a file that cannot be read) is told it is
    compressed as soon as that is known, before the first bytes are read from the decompressor."""
    cursor = cursor or _Cursor()
    with ExitStack() as stack:
        if p == STDIN:
            opened = _Opened(sys.stdin.buffer, lambda: 0, 0, False)
        else:
            # Lines of file-exporter captures are whole export requests (often close to 1 MiB): read through a
            # large buffer, not the default 8 KiB one (about 6x less time reading in bench_replay).
            raw = stack.enter_context(open(p, "rb", buffering=LINE_BUFFER_BYTES))
            info = os.fstat(raw.fileno())
            if stat.S_ISREG(info.st_mode):
                opened = _Opened(raw, raw.tell, info.st_size, False)
            else:  # a FIFO or a device: no size, no position (as standard input)
                opened = _Opened(raw, lambda: 0, 0, False)
            if p.suffix.lower() == ".gz":
                gz = cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
                opened.fh, opened.compressed = io.BufferedReader(_Raw(b"", gz), LINE_BUFFER_BYTES), True
                cursor.compressed = True
        magic, opened.fh = _peek(opened.fh, len(ZSTD_MAGIC))
        if magic.startswith(GZIP_MAGIC) and not opened.compressed:  # standard input, a gzip file not named .gz
            gz = cast(IO[bytes], gzip.GzipFile(fileobj=opened.fh, mode="rb"))
            opened.fh, opened.compressed = io.BufferedReader(_Raw(b"", gz), LINE_BUFFER_BYTES), True
            cursor.compressed = True
            magic, opened.fh = _peek(opened.fh, len(ZSTD_MAGIC))
        if starts_zstd(magic):
            opened.fh, opened.compressed = zstd_stream(opened.fh, LINE_BUFFER_BYTES), True
            cursor.compressed = True
        yield opened


def _kind(p: Path, head: bytes) -> str:
    """`jsonl` or `pb` from the name and the first bytes of the content."""
    suffix = Path(_unwrapped_name(p)).suffix
    if suffix in PB_SUFFIXES or looks_be32(head, MAX_MESSAGE_BYTES):  # a Collector file named .json holds
        return "pb"  # 4-byte framed messages when it compresses them (the legacy mode)
    if suffix in JSON_SUFFIXES:
        return "jsonl"
    return "jsonl" if head.removeprefix(UTF8_BOM).lstrip()[:1] in (b"{", b"") else "pb"


def _is_utf16_json(head: bytes) -> bool:
    """Whether content starting with `head` is JSON in UTF-16 after its byte order mark (as Windows PowerShell 5.1
    redirects output). No protobuf framing starts so: as a varint size, FF FE or FE FF, then `{` in UTF-16, puts a
    byte 00 first in a message or in its size."""
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        if head.startswith(bom):
            text = head[2 : len(head) & ~1].decode(codec, "replace")
            return text.lstrip()[:1] == "{"
    return False


def detect_format(p: Path) -> str:
    """`jsonl` or `pb`: by suffix, else by the first non-blank byte of the content (`{` means JSON); a file that
    starts as 4-byte framed messages is `pb` whatever its name. SourceError for content that cannot be read (a cut
    or corrupt .gz or zstd file, an I/O error)."""
    cursor = _Cursor()
    try:
        with _open_source(p, cursor) as src:
            head, _ = _peek(src.fh, HEAD_BYTES)
    except READ_ERRORS as exc:
        raise SourceError(_read_error("standard input" if p == STDIN else str(p), cursor, exc)) from exc
    return _kind(p, head)


def _protobuf_records(name: str, src: _Opened, head: bytes, framing: str, errors: list[BadRecord],
                      cursor: _Cursor) -> Iterator[tuple[Decoded, int]]:
    if framing == "be32" or (framing == "auto" and looks_be32(head, MAX_MESSAGE_BYTES)):
        for n, (start, payload) in enumerate(be32_frames(src.fh, MAX_MESSAGE_BYTES), 1):  # FramingError: cut
            cursor.offset, cursor.records = start + 4 + len(payload), n
            try:
                decoded = decode_payload(payload, MAX_MESSAGE_BYTES)
            except DecodeError as exc:
                errors.append(BadRecord(name, f"message {n} at byte {start}", str(exc)))
                continue
            yield decoded, src.pos()
        return
    yield from _whole_file_records(name, src, framing, errors, cursor)


def _read_whole(name: str, src: _Opened) -> tuple[bytes, Exception | None]:
    """The content, up to MAX_SINGLE_FILE_BYTES, and the error that cut it short (a cut .gz) if any."""
    over = SourceError(f"{name}: over the {MAX_SINGLE_FILE_BYTES} byte limit of a protobuf file read whole "
                       "(varint-delimited or one message, decompressed); split it into smaller files")
    if not src.compressed:
        if src.size > MAX_SINGLE_FILE_BYTES:
            raise over
        buf = src.fh.read(MAX_SINGLE_FILE_BYTES + 1)  # standard input has no size to check first
        if len(buf) > MAX_SINGLE_FILE_BYTES:
            raise over
        return buf, None
    # A piece at a time, to keep what was decompressed before an error, into a buffer that grows in place and
    # whose getvalue() hands it over without a copy (pieces joined were held twice at the peak).
    held = io.BytesIO()
    read = getattr(src.fh, "read1", src.fh.read)
    try:
        while chunk := read(min(READ_CHUNK_BYTES, MAX_SINGLE_FILE_BYTES + 1 - held.tell())):
            held.write(chunk)
            if held.tell() > MAX_SINGLE_FILE_BYTES:
                raise over
    except READ_ERRORS as exc:
        return held.getvalue(), exc
    return held.getvalue(), None


def _whole_file_records(name: str, src: _Opened, framing: str, errors: list[BadRecord], cursor: _Cursor
                        ) -> Iterator[tuple[Decoded, int]]:
    buf, cut = _read_whole(name, src)
    frames, tiled_to = varint_frames(buf, MAX_MESSAGE_BYTES) if framing != "single" else ([], 0)
    single: Decoded | None = None
    if cut is not None:  # keep the whole messages of a cut varint stream; a cut single message is lost
        frames = frames if framing == "varint" or (framing == "auto" and buf[:1] != b"\x0a") else []
        tiled_to = len(buf)
    elif framing == "auto" and tiled_to == len(buf) and frames and buf[0] == _FIELD_1_LEN:
        # A bare request starts with this byte too, and its bytes often also tile as a stream whose first message
        # is 10 bytes long: read as one message when it decodes as one.
        try:
            single = parse_protobuf(buf)
        except DecodeError:
            pass
    # `auto`: content that does not tile is one message, unless it has whole frames and does not start as a bare
    # request does (0x0a): then it is a varint stream cut short (a writer stopped mid-message), read up to the cut.
    cut_stream = framing == "auto" and tiled_to < len(buf) and bool(frames) and buf[0] != _FIELD_1_LEN
    if framing == "single" or single is not None or (framing == "auto" and tiled_to < len(buf) and not cut_stream):
        frames, tiled_to = ([(0, len(buf))] if buf else []), len(buf)
    scale = src.size / max(len(buf), 1)  # progress: the share of the content read, in bytes of the file
    for n, (start, end) in enumerate(frames, 1):
        cursor.offset, cursor.records = end, n
        try:
            decoded = single if single is not None else decode_payload(buf[start:end], MAX_MESSAGE_BYTES)
        except DecodeError as exc:
            errors.append(BadRecord(name, f"message {n} at byte {start}", str(exc)))
            continue
        yield decoded, int(end * scale)
    if tiled_to < len(buf):  # a forced varint stream, or one `auto` found cut short
        raise FramingError(tiled_to, f"no varint message size fits the rest of the file ({len(buf) - tiled_to} "
                                     "bytes): the framing is lost")
    if cut is not None:
        raise cut


def _jsonl_lines(name: str, fh: IO[bytes], errors: list[BadRecord], pos: Callable[[], int], cursor: _Cursor
                 ) -> Iterator[tuple[Decoded, int]]:
    for lineno, line in enumerate(bounded_lines(fh, MAX_MESSAGE_BYTES), 1):
        cursor.records = lineno
        if line is None:
            errors.append(BadRecord(name, f"line {lineno}", f"longer than {MAX_MESSAGE_BYTES} bytes: skipped"))
            cursor.offset = -1  # unknown past an over-long line
            continue
        start = cursor.offset
        if cursor.offset >= 0:
            cursor.offset += len(line)
        if not line.removeprefix(UTF8_BOM).strip():  # a blank line (a byte order mark starts the text of a file)
            continue
        try:
            decoded = parse_json(line)
        except DecodeError as exc:
            if not line.endswith(b"\n") and not _is_json(line):  # the last line, and not whole: the file is cut
                cursor.offset, cursor.records = start, lineno - 1
                raise FramingError(max(start, 0), f"cut short: the last line ({len(line)} bytes) has no newline "
                                                  f"and is not a whole request: {exc}") from None
            errors.append(BadRecord(name, f"line {lineno}", str(exc)))
            continue
        yield decoded, pos()


def _is_json(line: bytes) -> bool:
    """Whether `line` is a whole JSON value (of any shape): a line cut short by its writer is not."""
    try:
        json.loads(line)
    except RecursionError:  # whole, but nested past what can be decoded
        return True
    except ValueError:
        return False
    return True


_FRAMINGS = {"pb": "auto", "pb-be32": "be32", "pb-varint": "varint", "pb-single": "single"}


def _records(p: Path, errors: list[BadRecord], fmt: str) -> Iterator[tuple[Decoded, int]]:
    name = "standard input" if p == STDIN else str(p)
    cursor = _Cursor()
    try:
        with _open_source(p, cursor) as src:
            head, src.fh = _peek(src.fh, HEAD_BYTES)
            if fmt in ("auto", "jsonl") and _is_utf16_json(head):
                raise FramingError(0, "UTF-16 text (it starts with a byte order mark): OTLP JSON is UTF-8; convert it "
                                      "first (iconv -f UTF-16 -t UTF-8)")
            kind = _kind(p, head) if fmt == "auto" else fmt
            if kind == "jsonl":
                cursor.unit = "lines"
                yield from _jsonl_lines(name, src.fh, errors, src.pos, cursor)
            else:
                yield from _protobuf_records(name, src, head, _FRAMINGS[kind], errors, cursor)
    except _ENDS_A_FILE as exc:
        raise SourceError(_read_error(name, cursor, exc)) from exc


def _read_error(name: str, cursor: _Cursor, exc: BaseException) -> str:
    content = "decompressed content" if cursor.compressed else "content"
    if not cursor.records:  # where the first record starts (a cut .gz: 0) unless the error knows better
        offset = exc.offset if isinstance(exc, FramingError) else cursor.offset
        where = f" at byte {offset} of its {content}" if offset >= 0 else ""
        return f"{name}: cannot read{where}: {exc}"
    where = f"past byte {cursor.offset} of its {content}" if cursor.offset >= 0 else "to its end"
    return f"{name}: cannot read {where} (after {cursor.records} {cursor.unit}, which were replayed): {exc}"


def read_source(p: Path, errors: list[BadRecord], fmt: str = "auto") -> Iterator[tuple[Decoded, int]]:
    """Decoded export requests of one file; unusable lines or messages go to `errors`."""
    if fmt not in FORMATS:
        raise SourceError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    return _records(p, errors, fmt)


def total_bytes(paths: Sequence[Path]) -> int | None:
    """The bytes to read, or None when standard input or another stream is among the sources (unknown length)."""
    if any(map(is_stream, paths)):
        return None
    return sum(os.path.getsize(p) for p in paths)
