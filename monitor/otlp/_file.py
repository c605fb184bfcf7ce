"""Reader for the OpenTelemetry Collector file exporter: OTLP JSON, one export request per line."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from monitor.otlp._json import parse_json
from monitor.otlp._span import Decoded, DecodeError


@dataclass(slots=True, frozen=True)
class FileLineError:
    """A line of the file that is not a valid request: where it is and why."""

    path: str
    line: int
    message: str


def read_jsonl(path: str | Path, *, errors: list[FileLineError] | None = None) -> Iterator[Decoded]:
    """Yield one Decoded per non-empty line of a file exporter JSON lines file (`.gz` is read compressed).

    A line that is not a valid request raises DecodeError naming the file and line, unless `errors` is
    given, in which case it is appended there and reading goes on.
    """
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield parse_json(line)
            except DecodeError as exc:
                if errors is None:
                    raise DecodeError(f"{p}:{lineno}: {exc}") from None
                errors.append(FileLineError(str(p), lineno, str(exc)))
