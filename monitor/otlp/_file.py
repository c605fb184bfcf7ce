"""Reader for the OpenTelemetry Collector file exporter: OTLP JSON, one export request per line."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from monitor.otlp._json import parse_json
from monitor.otlp._span import Decoded, DecodeError

MAX_LINE_BYTES = 64 * 1024 * 1024  # one export request; a longer line is refused without being held whole


@dataclass(slots=True, frozen=True)
class FileLineError:
    """A line of the file that is not a valid request: where it is and why."""

    path: str
    line: int
    message: str


def bounded_lines(fh: IO[bytes], limit: int) -> Iterator[bytes | None]:
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


def read_jsonl(path: str | Path, *, errors: list[FileLineError] | None = None,
               max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[Decoded]:
    """Yield one Decoded per non-empty line of a file exporter JSON lines file (`.gz` is read compressed).

    A line that is not a valid request, or is longer than `max_line_bytes` (read a piece at a time, never held
    whole), raises DecodeError naming the file and line, unless `errors` is given, in which case it is appended
    there and reading goes on.
    """
    p = Path(path)
    opener = gzip.open if p.suffix.lower() == ".gz" else open
    with opener(p, "rb") as fh:
        for lineno, line in enumerate(bounded_lines(cast(IO[bytes], fh), max_line_bytes), 1):
            try:
                if line is None:
                    raise DecodeError(f"longer than {max_line_bytes} bytes")
                if not line.strip():
                    continue
                yield parse_json(line)
            except DecodeError as exc:
                if errors is None:
                    raise DecodeError(f"{p}:{lineno}: {exc}") from None
                errors.append(FileLineError(str(p), lineno, str(exc)))
