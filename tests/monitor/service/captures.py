"""Real producers' spans captured as OTLP JSON lines (tests/monitor/service/data): reading them, assembling their
turns on the C or Python path, and what the tests compare of a turn."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from monitor.otlp import Span, parse_json
from monitor.records import InputMark, RequestedCall, Turn
from tests.monitor.service.test_requested_calls import _impl, assemble

DATA = Path(__file__).parent / "data"
R = TypeVar("R")


def capture(name: str) -> list[Span]:
    """The spans of data/`name`.jsonl, one export request a line."""
    spans: list[Span] = []
    for line in (DATA / f"{name}.jsonl").read_text().splitlines():
        spans.extend(parse_json(line.encode()).spans)
    return spans


def captured_turns(name: str, impl: str) -> list[Turn]:
    """The turns of a capture, assembled on the `impl` path and flushed (the captures' times are long past), by
    start time."""
    _impl(impl)
    turns, _ = assemble(capture(name), impl, flush=True)
    return sorted(turns, key=lambda t: t.start_ns)


def call_rows(t: Turn) -> list[tuple[str, str, object, bool, str | None]]:
    """Each call: (name, call id, arguments as JSON, whether a requested call that did not run, error type)."""
    return [
        (c.name, c.call_id, c.arguments and json.loads(c.arguments), isinstance(c, RequestedCall), c.error_type)
        for c in t.calls
    ]


def offered_names(t: Turn) -> list[str]:
    """The names of the tools the turn's model was offered (OpenAI's nested form or the flat one)."""
    return [d.get("name") or d["function"]["name"] for d in t.tool_definitions or ()]


def input_marks(records: list[Any]) -> list[tuple[str | None, str, str]]:
    """The InputMarks among normalized records: (text, name, parent span id)."""
    return [(r.arguments, r.name, r.parent_span_id) for r in records if isinstance(r, InputMark)]


def cpu_timed(fn: Callable[[], R]) -> tuple[R, float]:
    """`fn()` and the CPU seconds it took: a worst-case guard's bound holds however loaded the machine is (wall time
    did not, at 4 test files in parallel on 2 cores)."""
    start = time.process_time()
    result = fn()
    return result, time.process_time() - start
