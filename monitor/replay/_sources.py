"""Captured span files: OTLP JSON lines, OTLP protobuf files, and directories of them.

Formats (chosen by `detect_format`, or forced with `fmt`):
- `jsonl`: the OpenTelemetry Collector file exporter's format: one ExportTraceServiceRequest in OTLP JSON
  per line (`.gz` compressed files too).
- `pb`: OTLP protobuf: either a stream of length-delimited ExportTraceServiceRequest messages (each
  preceded by its size as a base-128 varint, as protobuf's `writeDelimitedTo` and the Collector file
  exporter's `format: proto` write them) or one bare ExportTraceServiceRequest filling the whole file.
  A file whose varint-prefixed sizes tile it exactly is read as a stream, otherwise as one message; one that tiles
  but starts with 0x0a (as a bare request does) and decodes as one message is read as one message.

`-` reads standard input (JSON lines, or protobuf with `fmt="pb"`), e.g. `zcat spans.gz | toolwatch replay -`.

Each item yielded is (Decoded, bytes consumed so far in that file) so callers can show progress.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, cast

from monitor.otlp import Decoded, DecodeError, parse_json, parse_protobuf

JSON_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson"})
PB_SUFFIXES = frozenset({".pb", ".bin", ".otlp", ".protobuf", ".binpb"})
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # one export request; larger is refused as corrupt
MAX_SINGLE_FILE_BYTES = 512 * 1024 * 1024  # a bare (undelimited) protobuf file is read whole
_FIELD_1_LEN = 0x0A  # the first byte of a bare ExportTraceServiceRequest: field 1 (resource_spans), length-delimited
# Lines of file-exporter captures are whole export requests (often close to 1 MiB): read them through a large
# buffer, not the default 8 KiB one (about 6x less time reading in bench_replay).
LINE_BUFFER_BYTES = 4 * 1024 * 1024
FORMATS = ("auto", "jsonl", "pb")
STDIN = Path("-")


class SourceError(ValueError):
    """A source that cannot be read at all (missing, unknown format, corrupt framing)."""


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
    suffixes = [s.lower() for s in p.suffixes[-2:]]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return bool(suffixes) and (suffixes[-1] in JSON_SUFFIXES or suffixes[-1] in PB_SUFFIXES)


def expand_sources(paths: Sequence[str | Path]) -> list[Path]:
    """Files given, plus span files (by suffix) found under directories, recursively, in sorted order."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if str(raw) == "-":
            if STDIN in out:
                raise SourceError("standard input (-) given twice")
            out.append(STDIN)
        elif p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and _is_span_file(f))
            if not found:
                exts = ", ".join(sorted(JSON_SUFFIXES | PB_SUFFIXES))
                raise SourceError(f"{p}: directory holds no span files ({exts}, optionally .gz)")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise SourceError(f"{p}: no such file or directory")
    return out


def _open(p: Path) -> IO[bytes]:
    if p.suffix.lower() == ".gz":
        return cast(BinaryIO, gzip.open(p, "rb"))
    return open(p, "rb")  # noqa: SIM115


def detect_format(p: Path) -> str:
    """`jsonl` or `pb`: by suffix, else by the first non-blank byte (`{` means JSON)."""
    name = p.name.lower().removesuffix(".gz")
    if Path(name).suffix in JSON_SUFFIXES:
        return "jsonl"
    if Path(name).suffix in PB_SUFFIXES:
        return "pb"
    with _open(p) as fh:
        head = fh.read(64).lstrip()
    return "jsonl" if head[:1] in (b"{", b"") else "pb"


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


def _delimited_frames(buf: bytes) -> list[tuple[int, int]] | None:
    """(start, end) of each message when varint-prefixed sizes tile `buf` exactly, else None."""
    frames = []
    pos = 0
    while pos < len(buf):
        got = _read_varint(buf, pos)
        if got is None:
            return None
        size, start = got
        if size > MAX_MESSAGE_BYTES or start + size > len(buf):
            return None
        frames.append((start, start + size))
        pos = start + size
    return frames


def read_protobuf_file(p: Path, errors: list[BadRecord]) -> Iterator[tuple[Decoded, int]]:
    size = 0 if p == STDIN else p.stat().st_size
    if size > MAX_SINGLE_FILE_BYTES:
        raise SourceError(f"{p}: {size} bytes is over the {MAX_SINGLE_FILE_BYTES} byte limit of a protobuf file; "
                          "split it into length-delimited files")
    if p == STDIN:
        buf = sys.stdin.buffer.read(MAX_SINGLE_FILE_BYTES + 1)
        if len(buf) > MAX_SINGLE_FILE_BYTES:
            raise SourceError(f"standard input: over the {MAX_SINGLE_FILE_BYTES} byte limit of a protobuf stream")
        size = len(buf)
    else:
        with _open(p) as fh:
            buf = fh.read(MAX_SINGLE_FILE_BYTES + 1)
    frames = _delimited_frames(buf)
    single: Decoded | None = None
    if frames and buf[0] == _FIELD_1_LEN:
        # A bare request starts with this byte too, and its bytes often also tile as a stream whose first message
        # is 10 bytes long: read as one message when it decodes as one.
        try:
            single = parse_protobuf(buf)
        except DecodeError:
            pass
    if single is not None or not frames:
        frames = [(0, len(buf))] if buf else []
    for n, (start, end) in enumerate(frames, 1):
        try:
            decoded = single if single is not None else parse_protobuf(buf[start:end])
        except DecodeError as exc:
            errors.append(BadRecord(str(p), f"message {n} at byte {start}", str(exc)))
            continue
        yield decoded, min(end, size) if p.suffix.lower() != ".gz" else int(size * end / max(len(buf), 1))


def _lines(fh: IO[bytes], limit: int) -> Iterator[bytes | None]:
    """The lines of `fh`, each read with at most `limit` + 1 bytes held; None for a longer line (skipped)."""
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        while line and not line.endswith(b"\n"):  # the rest of the over-long line, a piece at a time
            line = fh.readline(limit)
        yield None


def _jsonl_lines(name: str, fh: IO[bytes], errors: list[BadRecord], pos: Callable[[], int]
                 ) -> Iterator[tuple[Decoded, int]]:
    for lineno, line in enumerate(_lines(fh, MAX_MESSAGE_BYTES), 1):
        if line is None:
            errors.append(BadRecord(name, f"line {lineno}", f"longer than {MAX_MESSAGE_BYTES} bytes: skipped"))
            continue
        if not line.strip():
            continue
        try:
            decoded = parse_json(line)
        except DecodeError as exc:
            errors.append(BadRecord(name, f"line {lineno}", str(exc)))
            continue
        yield decoded, pos()


def read_jsonl_file(p: Path, errors: list[BadRecord]) -> Iterator[tuple[Decoded, int]]:
    if p == STDIN:
        yield from _jsonl_lines("standard input", sys.stdin.buffer, errors, lambda: 0)
        return
    raw = open(p, "rb", buffering=LINE_BUFFER_BYTES)  # noqa: SIM115 - closed below; progress reads its position
    try:
        fh = (
            io.BufferedReader(cast(io.RawIOBase, gzip.GzipFile(fileobj=raw, mode="rb")), LINE_BUFFER_BYTES)
            if p.suffix.lower() == ".gz"
            else raw
        )
        yield from _jsonl_lines(str(p), fh, errors, raw.tell)
    finally:
        raw.close()


def read_source(p: Path, errors: list[BadRecord], fmt: str = "auto") -> Iterator[tuple[Decoded, int]]:
    """Decoded export requests of one file; unusable lines or messages go to `errors`."""
    if fmt not in FORMATS:
        raise SourceError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    if p == STDIN:
        kind = "pb" if fmt == "pb" else "jsonl"
    else:
        kind = detect_format(p) if fmt == "auto" else fmt
    if kind == "jsonl":
        return read_jsonl_file(p, errors)
    return read_protobuf_file(p, errors)


def total_bytes(paths: Sequence[Path]) -> int | None:
    """The bytes to read, or None when standard input is among the sources (unknown length)."""
    if STDIN in paths:
        return None
    return sum(os.path.getsize(p) for p in paths)
