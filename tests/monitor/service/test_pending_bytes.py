"""The bound on what pending records weigh (monitor/assembly/_budget.py, `--max-pending-bytes`).

The bound on pending traces counts traces, not bytes: a few hundred traces holding calls with megabytes of arguments
held that much memory until their turn's grace period or the turnless timeout ended. Past the bytes bound the oldest
traces are now judged early (counted as evicted), until the pending records weigh 90% of it; the weights are the
same in C as in Python, and the running estimate is never below what is pending. What a record holds in its
attributes is weighed too: a turn's `gen_ai.input.messages` with a long history (the turn's input text is only its
last user message) held 3000 turns of 100 KB each (RSS 67 -> 370 MiB) under a 64 MiB bound, the gauge reading 7.5 MiB.
"""

from __future__ import annotations

import json
import random
import sys
import threading
from types import MappingProxyType
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from monitor.assembly import TurnAssembler, _assembler, _budget
from monitor.otlp import Span, decode_json
from monitor.records import HandoffMark, InputMark, OfferedTools, RequestedCall, RunRoot, ToolCall, Turn
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.spans import new_tracer
from tests.monitor.service.test_assembly import S, call, turn

C_LOADED = _assembler._RECORDS_BYTES is not _budget.records_bytes_py
T = "ab" * 16
BIG = 100_000  # characters of arguments per call


class OddCall(ToolCall):
    """A subclass the C code does not know: weighed by Python."""


def _records() -> list[Any]:
    args, given = '{"q": "' + "w" * 40 + '"}', "[AUTH] login"
    c1 = ToolCall("f", call_id="id1", arguments='{"a": 1}', result="ok", trace_id=T, span_id="c1", parent_span_id="t")
    return [
        c1,
        ToolCall("g", arguments=None, result=None, error_type="Timeout", trace_id=T, span_id="c2"),
        ToolCall("h", arguments=123, trace_id=T, span_id="c3"),  # type: ignore[arg-type]  # not text: weighs 0
        RequestedCall("f", call_id="id1", arguments="{}", trace_id=T, span_id="m#00", parent_span_id="m"),
        HandoffMark("transfer_to_b", trace_id=T, span_id="h#handoff"),
        InputMark("", arguments="[AUTH] login failure", trace_id=T, span_id="m#input", parent_span_id="m"),
        OfferedTools("", trace_id=T, span_id="m#tools", definitions=({"name": "f"}, {"name": "g"})),
        OfferedTools("", trace_id=T, span_id="m2#tools", definitions=[{"name": "f"}]),  # type: ignore[arg-type]
        OddCall("odd", arguments="x" * 50, trace_id=T, span_id="o1"),
        Turn("[AUTH] é " * 20, trace_id=T, span_id="t", output_text="done", tool_definitions=({"name": "f"},)),
        Turn("with calls", calls=(c1, OddCall("o", result="r")), trace_id=T, span_id="t2"),
        Turn("odd calls", calls=[c1], trace_id=T, span_id="t3"),  # type: ignore[arg-type]
        Turn(b"bytes", trace_id=T, span_id="t4"),  # type: ignore[arg-type]
        Turn("", calls=(c1,), trace_id=T, turnless=True),
        Span(T, "s", "t", "chat", 1, 1, 2),
        # attributes: the fields' own objects (not weighed again), other text, arrays, a str subclass (not text),
        # a mapping that is not a dict (weighed by Python)
        ToolCall("f", arguments=args, trace_id=T, span_id="a1", attributes=_attrs(args)),
        ToolCall("f", arguments=args, trace_id=T, span_id="a2", attributes=MappingProxyType(_attrs(args))),
        Turn(given, trace_id=T, span_id="t5", attributes={"gen_ai.input.messages": f"[{given}]", "in": given}),
        Turn("x", calls=(ToolCall("f", attributes=_attrs("y")),), trace_id=T, span_id="t6", attributes=_attrs("x")),
        # a run's root under another span: its record and the turn it holds (one weighed by Python too)
        RunRoot("", trace_id=T, span_id="r1", parent_span_id="w", turn=Turn(given, output_text="o", attributes=_attrs(
            given))),
        RunRoot("", trace_id=T, span_id="r2", parent_span_id="w", turn=Turn("x", attributes=MappingProxyType({}))),
    ]


class Text(str):
    """A str subclass: not weighed as text, in C as in Python."""


def _attrs(field: str) -> dict[str, Any]:
    return {"same": field, "other": "o" * 7, "tags": ("ab", Text("cd"), 3, "e"), "odd": Text("z" * 9), "n": 1.5}


@pytest.mark.skipif(not C_LOADED, reason="the C weights (_cbudget) are not loaded")
def test_c_weighs_every_record_as_python_does() -> None:
    records = _records()
    for r in records:
        assert _assembler._RECORDS_BYTES([r]) == _budget.record_bytes(r), r
    assert _assembler._RECORDS_BYTES(records) == _budget.records_bytes_py(records)
    assert _assembler._RECORDS_BYTES(tuple(records)) == _budget.records_bytes_py(records)
    turns = [r for r in records if isinstance(r, Turn)]
    assert _assembler._RELEASED_BYTES(turns) == _budget.released_bytes_py(turns)
    # a turnless turn takes off its calls only; a turn also its own record, not its definitions
    t = turns[0]
    assert _budget.released_bytes_py([t]) == _budget.record_bytes(t) - _budget.DEFINITION_BYTES
    turnless = next(t for t in turns if t.turnless)
    assert _budget.released_bytes_py([turnless]) == _budget.record_bytes(records[0])


def test_the_weights_follow_the_text() -> None:
    small = ToolCall("f", arguments="{}", trace_id=T, span_id="a")
    big = ToolCall("f", arguments="{" + " " * 998 + "}", trace_id=T, span_id="a")
    assert _budget.record_bytes(big) - _budget.record_bytes(small) == 998
    assert _budget.record_bytes(small) == _budget.RECORD_BYTES + len("f") + len("{}")
    assert _budget.record_bytes(Span(T, "s", "", "x", 1, 1, 2)) == 0


def _history_trace(n: int) -> list[Span]:
    """Trace n: one turn span whose input messages carry BIG characters of system prompt before a short user
    message (the turn's input text), and one light call under it."""
    tid = f"{n:032x}"
    t = turn(tid, "t", start=n * S, end=n * S + 3)
    messages = [
        {"role": "system", "parts": [{"type": "text", "content": "x" * BIG}]},
        {"role": "user", "parts": [{"type": "text", "content": f"[AUTH] login failure {n}"}]},
    ]
    t.attributes = {**t.attributes, "gen_ai.input.messages": json.dumps(messages), "custom.blob": ("y" * BIG,)}
    return [t, call(tid, "c", "t", "f", start=n * S + 1, end=n * S + 2)]


def test_attribute_text_is_weighed_once() -> None:
    """What a record holds beyond its fields, in its attributes (a turn's whole message history, the producer's own
    attributes), is weighed too; an attribute that is the very text of a field is not weighed twice."""
    records = TurnAssembler().normalizer.split(_history_trace(1))[0]
    t = next(r for r in records if isinstance(r, Turn))
    assert len(t.input_text) < 100
    assert _budget.record_bytes(t) >= 2 * BIG
    args = "{}" + " " * 500
    c = ToolCall("f", arguments=args, trace_id=T, span_id="a")
    plain = _budget.record_bytes(c)
    assert plain == _budget.RECORD_BYTES + len("f") + len(args)
    c.attributes = {"gen_ai.tool.name": c.name, "gen_ai.tool.call.arguments": args, "n": 3, "flag": True}
    assert _budget.record_bytes(c) == plain  # the same objects as its fields, and no text
    c.attributes = {**c.attributes, "tags": ("ab", "cde", 4), "note": "z" * 10, "copy": "".join(["{}", " " * 500])}
    assert _budget.record_bytes(c) == plain + 2 + 3 + 10 + len(args)  # an equal copy is held twice
    # A release takes off the fields only: the estimate stays above what is pending, until the next weighing.
    assert _budget.released_bytes_py([Turn("", calls=(c,), turnless=True)]) == plain
    assert _budget.released_bytes_py([t]) == _budget.RECORD_BYTES + len(t.input_text)


def _kvlist(**fields: Any) -> dict[str, Any]:
    return {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in fields.items()]}}


def _structured_history_body(n: int) -> bytes:
    """An OTLP JSON request of one turn span whose `gen_ai.input.messages` is structured (an array of kvlists, as
    the conventions allow), with BIG characters of system prompt."""
    def message(role: str, content: str) -> dict[str, Any]:
        part = _kvlist(type={"stringValue": "text"}, content={"stringValue": content})
        return _kvlist(role={"stringValue": role}, parts={"arrayValue": {"values": [part]}})

    messages = {"arrayValue": {"values": [message("system", "x" * BIG), message("user", f"[AUTH] login {n}")]}}
    span = {
        "traceId": f"{n:032x}", "spanId": "00000000000000a1", "name": "invoke_agent triage", "kind": 1,
        "startTimeUnixNano": "1", "endTimeUnixNano": "2",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
            {"key": "gen_ai.input.messages", "value": messages},
        ],
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def test_structured_attributes_are_weighed_to_their_text() -> None:
    """Arrays of kvlists (structured messages) decode to nested tuples: their text is weighed at every level, in C
    as in Python; nesting past the depth weighed is not followed."""
    records = TurnAssembler().normalizer.split(decode_json(_structured_history_body(1)))[0]
    (t,) = [r for r in records if isinstance(r, Turn)]
    assert isinstance(t.attributes["gen_ai.input.messages"], tuple)
    assert BIG <= _budget.record_bytes(t) - _budget.RECORD_BYTES < BIG + 200
    assert _assembler.records_bytes([t]) == _budget.records_bytes_py([t])
    deep: Any = "y" * 10
    for _ in range(_budget.MAX_DEPTH):
        deep = (deep, "z")
    c = ToolCall("f", trace_id=T, span_id="a", attributes={"deep": deep})  # MAX_DEPTH tuples deep: all weighed
    assert _budget.record_bytes(c) == _budget.RECORD_BYTES + len("f") + 10 + _budget.MAX_DEPTH
    c.attributes = {"deep": (deep, "z")}  # one level more: the innermost tuple is not opened
    assert _budget.record_bytes(c) == _budget.RECORD_BYTES + len("f") + _budget.MAX_DEPTH
    assert _assembler.records_bytes([c]) == _budget.records_bytes_py([c])


def _python_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_assembler, "_RECORDS_BYTES", _budget.records_bytes_py)
    monkeypatch.setattr(_assembler, "_RELEASED_BYTES", _budget.released_bytes_py)
    monkeypatch.setattr(_assembler, "_PENDING_BYTES", _budget.pending_bytes_py)
    monkeypatch.setattr(_assembler, "_ADD_C", None)
    monkeypatch.setattr(_assembler, "_POLL_C", None)


def _heavy_trace(n: int) -> list[Span]:
    """Trace n: one turn span and one call under it with BIG characters of arguments."""
    tid = f"{n:032x}"
    c = call(tid, "c", "t", "f", start=n * S + 1, end=n * S + 2)
    c.attributes = {**c.attributes, "gen_ai.tool.call.arguments": json.dumps({"doc": "x" * BIG})}
    return [turn(tid, "t", start=n * S, end=n * S + 3), c]


@pytest.mark.parametrize("python", [False, True], ids=["c", "python"])
@pytest.mark.parametrize("heavy", ["arguments", "history"])
def test_past_the_bound_the_oldest_traces_are_judged_early(
    heavy: str, python: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if python:
        _python_weights(monkeypatch)
    make = _heavy_trace if heavy == "arguments" else _history_trace
    bound = 1_000_000  # about 9 of the traces with heavy arguments, 4 of those with a heavy history
    a = TurnAssembler(grace_s=600, turnless_timeout_s=600, max_pending_bytes=bound)
    out: list[Turn] = []
    for n in range(1, 31):
        out += a.add(make(n), n * S)
        assert a.pending_bytes <= bound
        assert a._bytes >= a.pending_bytes
    # The oldest first, each turn with its heavy call or history: nothing judged without its calls, nothing lost.
    released = [int(t.trace_id, 16) for t in out]
    assert released == list(range(1, len(out) + 1))
    assert all(len(t.calls) == 1 for t in out)
    if heavy == "arguments":
        assert all(len(t.calls[0].arguments or "") > BIG for t in out)
    else:
        assert all(len(str(t.attributes["gen_ai.input.messages"])) > BIG for t in out)
    assert a.stats.evicted == a.stats.evicted_for_bytes == len(out) > 0
    assert len(out) + a.pending_turns == 30
    assert a.pending_bytes > 0.8 * _budget.LOW_WATER * bound  # released down to the low water mark, not emptied
    assert [int(t.trace_id, 16) for t in a.flush()] == list(range(len(out) + 1, 31))


def test_light_traces_under_the_bound_stay_pending() -> None:
    a = TurnAssembler(grace_s=600, turnless_timeout_s=600)  # the default bound: 512 MiB
    for n in range(1, 201):
        assert a.add([turn(f"{n:032x}", "t"), call(f"{n:032x}", "c", "t", "f")], n * S) == []
    assert a.pending_turns == 200 and a.stats.evicted == 0
    assert 200 * 2 * _budget.RECORD_BYTES <= a.pending_bytes <= a._bytes < 2 * 200 * 2 * _budget.RECORD_BYTES


@pytest.mark.parametrize("mode", ["as loaded", "python", "odd records"])
def test_the_estimate_is_never_below_what_is_pending(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies, late calls, calls whose turn never comes, requested calls reconciled away, polls: after every step
    the running estimate is at least the weight of what is pending, and a flush leaves nothing. In C when loaded,
    in Python, and with a record C hands to Python in every batch (the rest of the batch is added there)."""
    if mode == "python":
        _python_weights(monkeypatch)
    rng = random.Random(7)
    a = TurnAssembler(grace_s=2, turnless_timeout_s=5, max_pending_bytes=40_000)
    now = 0
    sent: list[list[Any]] = []
    for step in range(400):
        now += rng.randint(0, 2) * S // 2
        tid = f"{rng.randint(1, 40):032x}"
        kind = rng.random()
        if kind < 0.3:
            batch: list[Any] = [turn(tid, f"t{step}", start=now, end=now + S)]
        elif kind < 0.6:
            batch = [call(tid, f"c{step}", f"t{rng.randint(0, step)}", "f", start=now, end=now + S)]
            batch[0].attributes = {**batch[0].attributes, "gen_ai.tool.call.arguments": "x" * rng.randint(0, 3000)}
        elif kind < 0.75 and sent:
            batch = rng.choice(sent)  # a copy (an exporter retry)
        else:
            batch = [
                Span(tid, f"m{step}", f"t{step - 1}", "chat", 1, now, now + 1),
                RequestedCall("f", call_id=f"id{step}", arguments="{}", trace_id=tid, span_id=f"m{step}#00",
                              parent_span_id=f"m{step}", start_ns=now, end_ns=now),
            ]
            a.add_records(batch, now)
            assert a._bytes >= a.pending_bytes
            continue
        sent.append(batch)
        records, _ = a.normalizer.split(batch)
        if mode == "odd records":
            records.append(OddCall("odd", arguments="o" * 500, trace_id=tid, span_id=f"o{step}", parent_span_id="t0"))
        a.add_records(records, now)
        assert a._bytes >= a.pending_bytes == _budget.pending_bytes_py(a._traces)  # in C when loaded: the same sum
        a.poll(now)
        assert a._bytes >= a.pending_bytes
    a.flush()
    assert a.pending_bytes == 0 == a._bytes


@pytest.mark.parametrize("heavy", ["arguments", "history"])
def test_serve_judges_heavy_turns_early_past_the_bound(serve: ServeFactory, heavy: str) -> None:
    """Through the real OTLP/HTTP exporter: turns whose calls carry 100 KB of arguments, or whose input messages
    carry 100 KB of system prompt before the user's message, held for a minute's grace, under a bound of about ten
    of them. The oldest are judged early; the gauge stays under the bound."""
    bound = 1_200_000
    _, server = serve(max_pending_bytes=bound, grace_s=60, turnless_timeout_s=600)
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    provider, tracer, memory = new_tracer()
    system = [{"role": "system", "parts": [{"type": "text", "content": "x" * BIG}]}] if heavy == "history" else []
    excerpt = "x" * BIG if heavy == "arguments" else "login failure"
    for i in range(30):
        with tracer.start_as_current_span(
            "invoke_agent incident-triage",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "incident-triage",
                        "gen_ai.input.messages": json.dumps([*system, {"role": "user", "parts": [
                            {"type": "text", "content": f"[AUTH] login failure {i}"}]}])},
        ), tracer.start_as_current_span(
            "execute_tool pull_auth_telemetry",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pull_auth_telemetry",
                        "gen_ai.tool.call.arguments": json.dumps({"log_excerpt": excerpt})},
        ):
            pass
    provider.shutdown()
    assert exporter.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS
    p = server.pipeline
    wait_for(lambda: p.queued == 0 and p.turns_judged > 0)
    metrics = scrape(server)
    judged = p.turns_judged
    assert value(metrics, "toolwatch_turns_evicted_total") == judged
    assert 0 < (value(metrics, "toolwatch_pending_bytes") or 0) <= bound
    assert judged + p.assembler.pending_turns == 30
    assert sum(v for (name, _), v in metrics.items() if name == "toolwatch_turns_total") == judged


def test_a_weight_held_just_under_the_bound_is_not_weighed_at_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten heavy traces pending, the bound a few bytes above them; then copies of a small call (dropped as duplicates,
    but on the estimate until a weighing). Each weighing walks every pending trace: it must not come at every copy
    while the weight stays just under the bound, so the first one also releases the oldest trace (to 90%)."""
    weighings = 0
    pending = _assembler._PENDING_BYTES

    def counting(traces: Any) -> int:
        nonlocal weighings
        weighings += 1
        return pending(traces)

    monkeypatch.setattr(_assembler, "_PENDING_BYTES", counting)
    heavy = [TurnAssembler().normalizer.split(_heavy_trace(n))[0] for n in range(1, 11)]
    bound = sum(map(_budget.records_bytes_py, heavy)) + 10
    a = TurnAssembler(grace_s=600, turnless_timeout_s=600, max_pending_bytes=bound)
    for n, records in enumerate(heavy, start=1):
        assert a.add_records(records, n * S) == []
    small = a.normalizer.split([call(f"{1:032x}", "c", "t", "f")])[0]
    out: list[Turn] = []
    for _ in range(50):
        out += a.add_records(small, 11 * S)
    assert weighings == 1
    assert [int(t.trace_id, 16) for t in out] == [1] and a.stats.evicted_for_bytes == 1


def _yield_point() -> None:
    pass


def test_weighing_from_another_thread_while_turns_come_and_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """/metrics is served from its own thread: weighing the pending traces there (in Python) while the event loop
    adds and releases turns must not fail on a dict changing size."""
    _python_weights(monkeypatch)
    a = TurnAssembler(grace_s=600, turnless_timeout_s=600)
    a.add([turn(T, f"t{k}") for k in range(1000)], 0)
    turns = next(iter(a._traces.values())).turns
    extra = next(iter(turns.values()))
    stop = threading.Event()
    errors: list[BaseException] = []

    def scrape_loop() -> None:
        try:
            while not stop.is_set():
                a.pending_bytes  # noqa: B018 - the weighing is the point
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns often
    scraper = threading.Thread(target=scrape_loop)
    scraper.start()
    try:
        for k in range(200_000):
            turns[f"x{k}"] = extra
            _yield_point()  # a Python call: the interpreter may switch threads here, with one turn more
            del turns[f"x{k}"]
            if errors:
                break
    finally:
        stop.set()
        scraper.join()
        sys.setswitchinterval(interval)
    assert errors == []
