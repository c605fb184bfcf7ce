"""The memory pending turns hold, estimated in bytes, and its bound.

The bound on pending traces bounds their number, not their size: one trace may hold a thousand calls, each with
arguments of megabytes. So turn assembly also bounds what the records it holds weigh, estimated per record as
RECORD_BYTES (the record, its ids, its attribute dict and keys, its share of its trace's state: the triage agent's
spans, measured, take about 2.2 KB a record all told, 0.8 KB of it the text weighed here) plus its text (a call's
name, id, arguments, result and error type; a turn's input and output), plus the text of its attribute values (str,
and the text in arrays and kvlists: _nested) that are not the very objects of those fields (a call's arguments are its
`gen_ai.tool.call.arguments`, weighed once; a turn's input text is a part of its `gen_ai.input.messages`, which holds
the whole history, weighed too), plus DEFINITION_BYTES per tool definition it carries (a chat span's offered tools, a
turn's own), plus, for a turn given with calls, theirs. A span's resource attributes are not weighed: one dict is
shared by the spans of a resource in a request.

`records_bytes`, `released_bytes` and `pending_bytes` are in C when the assembler's extension is loaded (_cbudget.c,
the same sums), else these Python references. The running estimate adds every record given to the assembler (held or
not) and subtracts every turn released: its calls, and its own record unless turnless, weighed without their
attributes' text (a released turn weighs at most what its records weighed when given: its attributes' text, its
definitions and the records dropped as copies, late, reconciled away or taken at release (offered tools, an input
mark, whose text a turn without input takes: it weighed it when given) are not subtracted). The attribute values of
a turn released seconds after it came are rarely in cache: reading them again cost ~0.6 µs a tool span in
bench_serve, while at add time, just decoded, they cost ~0.05 µs a record. The estimate is therefore never below
what the pending records weigh, and above it by what they do not subtract; when it passes the bound, the pending
records are weighed one by one (`pending_bytes`, which sets the estimate to what they weigh) and, if they weigh more
than LOW_WATER of it, the oldest traces are released early (judged, counted as evicted) until they weigh at most
that: the next weighing then comes after at least 1 - LOW_WATER of the bound was added, however close to it the
pending weight stays. With no trace pending the estimate is 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from monitor.records import OfferedTools, RunRoot, ToolCall, Turn

RECORD_BYTES = 1280
DEFINITION_BYTES = 256
LOW_WATER = 0.9  # after a release for the bound, the pending records weigh at most this share of it
MAX_DEPTH = 16  # levels of nested tuples whose text is weighed (structured messages take 6, tool arguments more)


def _text(value: object) -> int:
    return len(value) if type(value) is str else 0


def _definitions(defs: object) -> int:
    return DEFINITION_BYTES * len(defs) if type(defs) is tuple else 0


def _nested(items: tuple[object, ...], depth: int) -> int:
    """The text in a tuple at `depth` (an attribute's value is at 1): its str items, and those of the tuples in it,
    MAX_DEPTH levels of tuples at most (arrays, and kvlists, which decode to tuples of (key, value) tuples)."""
    n = 0
    for x in items:
        if type(x) is str:
            n += len(x)
        elif type(x) is tuple and depth < MAX_DEPTH:
            n += _nested(x, depth + 1)
    return n


def _attributes(attrs: object, *fields: object) -> int:
    """The text of attribute values: each str that is not one of `fields` (the same object), and the text in
    tuples (_nested)."""
    if not isinstance(attrs, Mapping):
        return 0
    n = 0
    for v in attrs.values():
        if type(v) is str:
            if not any(v is f for f in fields):
                n += len(v)
        elif type(v) is tuple:
            n += _nested(v, 1)
    return n


def call_bytes(c: ToolCall, attributes: bool = True) -> int:
    """What a call weighs; with `attributes` False, without its attributes' text (what its release takes off)."""
    name, call_id, arguments, result, error = c.name, c.call_id, c.arguments, c.result, c.error_type
    n = RECORD_BYTES + _text(name) + _text(call_id) + _text(arguments) + _text(result) + _text(error)
    if attributes:
        n += _attributes(c.attributes, name, call_id, arguments, result, error)
    if isinstance(c, OfferedTools):
        n += _definitions(c.definitions)
    return n


def _turn_own_bytes(t: Turn, attributes: bool = True) -> int:
    given, output = t.input_text, t.output_text
    n = RECORD_BYTES + _text(given) + _text(output)
    return n + _attributes(t.attributes, given, output) if attributes else n


def record_bytes(r: object) -> int:
    """What one record given to the assembler weighs (0 for a span kept only as a parent link; a RunRoot its record and
    the turn it holds)."""
    if isinstance(r, RunRoot):
        return RECORD_BYTES + record_bytes(r.turn)
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
    """What released turns take off the estimate: their calls, and their own record unless turnless, without their
    attributes' text."""
    n = 0
    for t in turns:
        calls = t.calls
        if type(calls) is tuple:
            n += sum(call_bytes(c, False) if isinstance(c, ToolCall) else record_bytes(c) for c in calls)
        if not t.turnless:
            n += _turn_own_bytes(t, False)
    return n


def pending_bytes_py(traces: Mapping[str, Any]) -> int:
    """What the pending records weigh: each trace's calls and turns. The traces, calls and turns are copied before
    they are read (each copy is made without a thread switch): /metrics reads this from its own thread while the
    event loop adds and releases records."""
    n = 0
    for tr in list(traces.values()):
        n += sum(map(record_bytes, list(tr.calls)))
        n += sum(map(record_bytes, list(tr.turns.values())))
    return n
