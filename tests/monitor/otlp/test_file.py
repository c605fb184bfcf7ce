"""read_jsonl: the Collector file exporter's JSON lines, read with bounded memory."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import pytest

from monitor.otlp import DecodeError, FileLineError, read_jsonl


def _request_line(n: int) -> bytes:
    span = {"traceId": f"{n:032x}", "spanId": f"{n:016x}", "name": "s", "startTimeUnixNano": "1",
            "endTimeUnixNano": "2"}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.GZ"])
def test_a_line_past_the_bound_is_an_error_at_its_line_and_is_never_held_whole(tmp_path: Path, suffix: str) -> None:
    """read_jsonl iterated the file by lines: a line with no newline (a corrupt or foreign file) was read whole into
    memory, however long. It now holds at most the bound (+1 byte) of a line, refuses a longer one at its line number
    and reads on past it."""
    bound = 1 << 20
    content = b"\n".join([_request_line(1), b"x" * (40 * bound), _request_line(2)]) + b"\n"
    path = tmp_path / f"spans{suffix}"
    path.write_bytes(gzip.compress(content, compresslevel=1) if suffix.lower().endswith(".gz") else content)
    errors: list[FileLineError] = []
    tracemalloc.start()
    try:
        got = [d.spans[0].trace_id for d in read_jsonl(path, errors=errors, max_line_bytes=bound)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == [f"{1:032x}", f"{2:032x}"]
    assert [(e.line, e.message) for e in errors] == [(2, f"longer than {bound} bytes")]
    assert peak < 8 * bound, peak
    with pytest.raises(DecodeError, match=r"spans\.jsonl(\.GZ)?:2: longer than"):
        list(read_jsonl(path, max_line_bytes=bound))
