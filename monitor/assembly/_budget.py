"""The memory pending turns hold, estimated in bytes, and its bound.

The bound on pending traces bounds their number, not their size: one trace may hold a thousand calls, each with
arguments of megabytes. So turn assembly also bounds what the records it holds weigh, estimated per record as
RECORD_BYTES (the record, its ids, its attributes, its share of its trace's state: the triage agent's spans,
measured, take about 2.2 KB a record all told, 0.8 KB of it the text weighed here) plus its text (a call's name,
id, arguments, result and error type; a turn's input and output), plus DEFINITION_BYTES per tool definition it
carries (a chat span's offered tools, a turn's own), plus, for a turn given with calls, theirs. The text of its
attributes is not weighed one by one: most of it is the same strings as its fields (a call's arguments and result),
and reading every attribute's length cost as much again as assembling the record.

`records_bytes` and `released_bytes` are in C when the assembler's extension is loaded (_cbudget.c, the same
sums), else these Python references. The running estimate adds every record given to the assembler (held or not)
and subtracts every turn released: its calls, and its own record unless turnless (a released turn weighs at most
what its records weighed when given: its definitions are not subtracted, nor the records dropped as copies, late or
reconciled away). It is therefore never below what the pending records weigh; when it passes the bound, the pending
records are weighed one by one (`pending_bytes`) and, if they weigh more than LOW_WATER of it, the oldest traces are
released early (judged, counted as evicted) until they weigh at most that: the next weighing then comes after at
least 1 - LOW_WATER of the bound was added, however close to it the pending weight stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from monitor.records import OfferedTools, ToolCall, Turn

RECORD_BYTES = 1280
DEFINITION_BYTES = 256
LOW_WATER = 0.9  # after a release for the bound, the pending records weigh at most this share of it


def _text(value: object) -> int:
    return len(value) if type(value) is str else 0


def _definitions(defs: object) -> int:
    return DEFINITION_BYTES * len(defs) if type(defs) is tuple else 0


def call_bytes(c: ToolCall) -> int:
    n = RECORD_BYTES + _text(c.name) + _text(c.call_id) + _text(c.arguments) + _text(c.result)
    n += _text(c.error_type)
    if isinstance(c, OfferedTools):
        n += _definitions(c.definitions)
    return n


def _turn_own_bytes(t: Turn) -> int:
    return RECORD_BYTES + _text(t.input_text) + _text(t.output_text)


def record_bytes(r: object) -> int:
    """What one record given to the assembler weighs (0 for a span kept only as a parent link)."""
    if isinstance(r, ToolCall):
        return call_bytes(r)
    if isinstance(r, Turn):
        n = _turn_own_bytes(r) + _definitions(r.tool_definitions)
        calls = r.calls
        return n + (sum(record_bytes(c) for c in calls) if type(calls) is tuple else 0)
    return 0


def records_bytes_py(records: Sequence[object]) -> int:
    return sum(map(record_bytes, records))


def released_bytes_py(turns: Iterable[Turn]) -> int:
    """What released turns take off the estimate: their calls, and their own record unless turnless."""
    n = 0
    for t in turns:
        calls = t.calls
        if type(calls) is tuple:
            n += sum(record_bytes(c) for c in calls)
        if not t.turnless:
            n += _turn_own_bytes(t)
    return n


def pending_bytes_py(traces: Mapping[str, Any]) -> int:
    """What the pending records weigh: each trace's calls and turns."""
    n = 0
    for tr in list(traces.values()):
        n += sum(record_bytes(c) for c in tr.calls)
        n += sum(record_bytes(t) for t in tr.turns.values())
    return n
