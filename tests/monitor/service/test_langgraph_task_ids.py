"""The call id a LangGraph ToolNode task's span holds, given to the call of a tool that raised under it (CallIdMark).

LangGraph 1.x's ToolNode runs each call the model asked for as a task of its own (a `Send` of `ToolCallWithContext`):
through OpenInference a `tools` CHAIN span whose `input.value` is `{"__type": "tool_call_with_context", "tool_call":
{...}, "state": {...}}`, around the tool's TOOL span. A tool that returned names its call id in its own span's output
(the ToolMessage); one that raised has no output and no id, and was paired by name. The task's span gives a CallIdMark
(monitor.normalize._foreign), which reconcile gives to the call without an id of its name right under that span
(monitor.assembly._reconcile). Pairing of the real captures: test_langgraph_openinference.

The task spans here are langgraph_traceback's (a real run), some of their attributes changed; reconcile and assembly
are given records as the normalizer makes them.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from monitor._json import BUDGET, PLAIN_CHARS, estimate
from monitor.assembly import TurnAssembler
from monitor.assembly._reconcile import reconcile
from monitor.normalize import _markers as m
from monitor.otlp import STATUS_ERROR, STATUS_OK, Span
from monitor.records import CallIdMark, RequestedCall, ToolCall, Turn
from tests.monitor.service.captures import capture, cpu_timed
from tests.monitor.service.test_requested_calls import IMPLS, S, _impl, assemble, convert

ATLANTIS_TASK = "6aadb211c7a96732"  # its tool raised NoSuchCity; the ToolNode handled it (a ToolMessage, error)
PARIS_TASK = "df0a264f69956d27"  # its tool returned


def _marks(records: list[Any]) -> list[tuple[str, str, str, str]]:
    return [(r.name, r.call_id, r.span_id, r.parent_span_id) for r in records if type(r) is CallIdMark]


def _task(sid: str = ATLANTIS_TASK, *, status: int | None = None, **attrs: Any) -> Span:
    """A task span of langgraph_traceback, its attributes changed (a None value removes the key)."""
    [span] = [s for s in capture("langgraph_traceback_openinference") if s.span_id == sid]
    span = copy.copy(span)
    span.attributes = dict(span.attributes)
    for key, value in attrs.items():
        key = {"input": m.OI_INPUT, "output": m.OI_OUTPUT}.get(key, key)
        if value is None:
            span.attributes.pop(key, None)
        else:
            span.attributes[key] = value
    if status is not None:
        span.status_code = status
    return span


def _call_input(call: str, state: str = '{"messages": []}') -> str:
    return '{"__type": "tool_call_with_context", "tool_call": ' + call + ', "state": ' + state + "}"


DEEP = '{"name": "get_weather", "id": "call_w2", "args": ' + "[" * 100_000 + "]" * 100_000 + "}"


# ---- the normalizer ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
def test_the_task_of_a_call_that_raised_gives_its_id(impl: str) -> None:
    """Each task span whose output holds a ToolMessage of status `error` (the ToolNode handled what its tool raised)
    is a parent link followed by a CallIdMark under it: the call's name and id, from the task's start to its end, no
    attributes. The task whose tool returned gives none (its TOOL span names the id)."""
    _impl(impl)
    spans = capture("langgraph_traceback_openinference")
    out, problems = convert(spans, impl)
    assert problems == []
    assert _marks(out) == [
        ("get_weather", "call_w2", f"{ATLANTIS_TASK}#call", ATLANTIS_TASK),
        ("get_weather", "call_w3", "fba1350acd8404bf#call", "fba1350acd8404bf"),
    ]
    for i, r in enumerate(out):
        if type(r) is CallIdMark:
            task = out[i - 1]
            assert type(task) is Span and task.span_id == r.parent_span_id
            assert (r.trace_id, r.start_ns, r.end_ns, r.attributes) == (task.trace_id, task.start_ns, task.end_ns, {})
            assert (r.arguments, r.result, r.error_type) == (None, None, None)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("changes", "marked"),
    [
        ({"status": STATUS_ERROR, "output": None}, True),  # the ToolNode handled no error: the task failed
        ({"output": m.OI_REDACTED}, True),  # outputs hidden: the task may hold a tool that raised
        ({"output": None}, True),
        ({"output": 3}, True),
        ({"status": STATUS_OK}, True),
        ({"input": m.OI_REDACTED}, False),  # inputs hidden
        ({"input": None}, False),
        ({"input": 3}, False),
        ({"output": '{"messages": [{"type": "tool", "data": {"status": "success"}}]}'}, False),  # the tool returned
        ({"input": _call_input('{"name": "get_weather", "id": "call_w2"}')}, True),
        ({"input": _call_input('{"name": "get_weather", "id": "call_w2"', "")}, False),  # cut short
        ({"input": _call_input('{"name": "get_weather", "id": ""}')}, False),
        ({"input": _call_input('{"name": "get_weather", "id": 2}')}, False),
        ({"input": _call_input('{"name": "get_weather"}')}, False),
        ({"input": _call_input('{"name": "", "id": "call_w2"}')}, False),
        ({"input": _call_input('{"name": null, "id": "call_w2"}')}, False),
        ({"input": _call_input(DEEP)}, False),  # nested too deep to parse
        # Another serialization of the input (not OpenInference's json.dumps of LangGraph's ToolCallWithContext)
        ({"input": '{"__type":"tool_call_with_context","tool_call":{"name":"get_weather","id":"call_w2"}}'}, False),
        ({"input": '{"tool_call": {"name": "get_weather", "id": "call_w2"}}'}, False),
    ],
)
def test_a_task_spans_mark_needs_its_call_and_an_output_that_may_hide_a_raise(
    impl: str, changes: dict[str, Any], marked: bool
) -> None:
    _impl(impl)
    out, _ = convert([_task(**changes)], impl)
    assert _marks(out) == ([("get_weather", "call_w2", f"{ATLANTIS_TASK}#call", ATLANTIS_TASK)] if marked else [])
    assert out[0].span_id == ATLANTIS_TASK


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("scope", [m.OI_OPENAI_AGENTS_SCOPE, m.OI_LLAMA_INDEX_SCOPE, "other.scope"])
def test_only_langchains_scopes_read_a_task(impl: str, scope: str) -> None:
    """Another framework's span holding such an input is no ToolNode's. (LangChain.js' scope is read as Python's, but
    its ToolNode runs the calls of a step in one task given the state, no call of its own: its JSON.stringify text
    never opens so.)"""
    _impl(impl)
    span = _task()
    span.scope = scope
    out, _ = convert([span], impl)
    assert _marks(out) == []
    tool: dict[str, Any] = {m.OI_KIND: "TOOL"}
    out, _ = convert([_task(**tool)], impl)
    assert _marks(out) == []  # a TOOL span is a call, whatever its input


@pytest.mark.parametrize("impl", IMPLS)
def test_a_task_whose_tool_returned_is_not_parsed(impl: str) -> None:
    """The gate: a task span whose output holds no ToolMessage of status `error` gives no mark and its input is not
    parsed (a state of 2 MiB costs a few substring searches)."""
    _impl(impl)
    state = json.dumps(["x" * 64] * 32_768)
    big = _task(PARIS_TASK, input=_call_input('{"name": "get_weather", "id": "call_w1"}', state))
    (out, _), cpu = cpu_timed(lambda: [convert([big], impl) for _ in range(20)][-1])
    assert _marks(out) == []
    assert cpu < 0.2


@pytest.mark.parametrize("impl", IMPLS)
def test_only_the_call_of_a_tasks_input_is_parsed_within_the_budget(impl: str) -> None:
    """The call is parsed, not the state after it: a state of 8 MiB costs its budget estimate only. A text whose
    estimate is past the budget (monitor._json) is not parsed at all: no mark."""
    _impl(impl)
    call = '{"name": "get_weather", "args": {"city": "Atlantis"}, "id": "call_w2", "type": "tool_call"}'
    state = json.dumps({"messages": ["x" * 1024] * 8192})
    (out, _), cpu = cpu_timed(lambda: [convert([_task(input=_call_input(call, state))], impl) for _ in range(5)][-1])
    assert _marks(out) == [("get_weather", "call_w2", f"{ATLANTIS_TASK}#call", ATLANTIS_TASK)]
    assert cpu < 0.5
    costly = _call_input(call, "[" + "{}," * 1_500_000 + "{}]")
    assert len(costly) > PLAIN_CHARS and estimate(costly) > BUDGET
    (out, _), cpu = cpu_timed(lambda: convert([_task(input=costly)], impl))
    assert _marks(out) == []
    assert cpu < 0.5


# ---- reconcile -----------------------------------------------------------------------------------------------


def _requested(name: str, cid: str, i: int) -> RequestedCall:
    return RequestedCall(name, call_id=cid, arguments=json.dumps({"i": i}), span_id=f"llm#{i}", parent_span_id="llm",
                         start_ns=i)  # fmt: skip


def _ran(name: str, task: str, cid: str = "", start: int = 10) -> ToolCall:
    return ToolCall(name, call_id=cid, span_id=f"tool-{task}-{start}", parent_span_id=task, start_ns=start,
                    error_type=None if cid else "ValueError")  # fmt: skip


def _mark(name: str, task: str, cid: str) -> CallIdMark:
    return CallIdMark(name, call_id=cid, span_id=f"{task}#call", parent_span_id=task, start_ns=5)


def _rows(calls: list[ToolCall]) -> list[tuple[str, str, str, bool]]:
    return [(type(c).__name__, c.name, c.call_id, c.span_id.startswith("tool-")) for c in calls]


def test_a_mark_gives_its_id_to_the_call_under_its_span_and_is_dropped() -> None:
    """Two calls of f asked for; the second's task ran, its tool raised; the first never ran. By name the raised call
    took the first's place; by its task's id it is the second, and the first is the call never run."""
    raised = _ran("f", "k2")
    calls: list[ToolCall] = [_requested("f", "c1", 0), _requested("f", "c2", 1), _mark("f", "k2", "c2"), raised]
    gone: list[ToolCall] = []
    kept = reconcile(calls, gone)
    assert _rows(kept) == [("RequestedCall", "f", "c1", False), ("ToolCall", "f", "c2", True)]
    assert kept[1] is not raised and raised.call_id == ""  # a copy: the record received is left as it was
    assert (kept[1].span_id, kept[1].error_type) == (raised.span_id, "ValueError")
    assert _rows(gone) == [("RequestedCall", "f", "c2", False), ("CallIdMark", "f", "c2", False)]
    assert _rows(reconcile([_requested("f", "c1", 0), _requested("f", "c2", 1), raised])) == [
        ("RequestedCall", "f", "c2", False),  # by name (no mark): the wrong call left as never run
        ("ToolCall", "f", "", True),
    ]


@pytest.mark.parametrize(
    "calls",
    [
        [_mark("f", "k2", "c2"), _ran("f", "k2", start=10), _ran("f", "k2", start=11)],  # two calls of f under it
        [_mark("f", "k2", "c2"), _mark("f", "k2", "c1"), _ran("f", "k2")],  # its marks name two ids
        [_mark("f", "k2", "c2"), _ran("g", "k2")],  # another tool's call
        [_mark("f", "k2", "c2"), _ran("f", "k3")],  # under another span
        [_mark("f", "k2", "c2"), _ran("f", "k2"), _ran("f", "k1", "c2")],  # a call that ran holds the id
        [_mark("f", "k2", ""), _ran("f", "k2")],
    ],
)
def test_a_mark_gives_no_id_it_cannot_tell_whose(calls: list[ToolCall]) -> None:
    kept = reconcile([_requested("f", "c1", 0), _requested("f", "c2", 1), *calls])
    assert "CallIdMark" not in [type(c).__name__ for c in kept]
    assert {c.call_id for c in kept if c.span_id.startswith("tool-") and c.error_type} == {""}


def test_marks_alone_are_dropped() -> None:
    """A task's mark whose call has an id of its own (a ToolException the tool returned), or whose call never arrived:
    no call, the rest as it is."""
    ran = _ran("f", "k1", "c1")
    assert reconcile([_mark("f", "k1", "c1"), ran]) == [ran]
    assert reconcile([_mark("f", "k1", "c1")]) == []


# ---- assembly ------------------------------------------------------------------------------------------------

T = "0af7651916cd43dd8448eb211c80319c"


def _in_trace(*records: Any) -> list[Any]:
    for r in records:
        r.trace_id = T
    return list(records)


def test_a_mark_after_its_turn_is_no_late_call_nor_a_duplicate(asm_impl: str) -> None:
    """A task's span arriving after its turn was released (its mark under a span the turn's call sat under), or
    again: dropped, counted as no call."""
    a = TurnAssembler(grace_s=1, turnless_timeout_s=5)
    turn = Turn("hi", trace_id=T, span_id="t", start_ns=0, end_ns=20)
    out = a.add_records(_in_trace(turn, Span(T, "k2", "t", "tools", 1, 1, 12), _ran("f", "k2", "c2")), 0)
    out += a.poll(2 * S)
    assert [(t.span_id, [c.call_id for c in t.calls]) for t in out] == [("t", ["c2"])]
    assert a.add_records(_in_trace(_mark("f", "k2", "c2")), 3 * S) == []
    assert a.poll(20 * S) == []
    assert (a.stats.late_calls, a.stats.duplicates, a.stats.turnless_completed) == (0, 0, 0)
    assert a.pending_traces == 0


@pytest.mark.parametrize("again", ["task", "mark"])
def test_a_mark_judged_alone_sent_again_is_dropped_at_once(asm_impl: str, again: str) -> None:
    """A task's mark released with its raising call as a turnless turn (no turn span) is remembered as judged, as the
    call is: the request sent again (the task's span, its mark, its tool's span), or the mark alone, holds nothing,
    no pending turnless trace waiting a timeout to release nothing (nor counted as a call)."""

    def request() -> list[Any]:
        return _in_trace(Span(T, "k", "r", "tools", 1, 1, 12), _mark("f", "k", "c1"), _ran("f", "k"))

    a = TurnAssembler(grace_s=1, turnless_timeout_s=5)
    out = a.add_records(request(), 0) + a.poll(10 * S)
    assert [(t.turnless, [c.call_id for c in t.calls]) for t in out] == [(True, ["c1"])]
    assert a.add_records(request() if again == "task" else request()[1:2], 11 * S) == []
    assert a.pending_turnless == 0 and a.pending_bytes == 0  # only the task span's link, if any
    assert a.poll(30 * S) == [] and a.pending_traces == 0
    s = a.stats
    assert (s.turnless_completed, s.duplicates, s.late_calls) == (1, 1 if again == "task" else 0, 0)


def test_marks_past_a_traces_bound_are_no_oversized_calls(asm_impl: str) -> None:
    a = TurnAssembler(grace_s=1, turnless_timeout_s=5, max_calls_per_trace=1)
    out = a.add_records(_in_trace(_ran("f", "k1", "c1"), _mark("f", "k2", "c2"), _ran("f", "k3", "c3")), 0)
    out += a.flush()
    assert [[c.call_id for c in t.calls] for t in out] == [["c1"]]
    assert a.stats.oversized_calls == 1  # the call, not the mark


# ---- LangChain.js ------------------------------------------------------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    reason="LangGraph.js' ToolNode runs the calls of a step in one task given the state (its `tools` span's input the "
    "messages, its output a ToolMessage per call, the id of each, its TOOL spans under it naming none of their own): "
    "no span names which call raised; by name a raising call takes the place of the first call of its tool left, "
    "here one its schema refused (never run, no TOOL span)",
)
@pytest.mark.parametrize("impl", IMPLS)
def test_langgraphjs_a_raising_call_beside_a_refused_one_of_its_tool(impl: str) -> None:
    """langgraphjs_react_openinference_invalid, its Paris call (call_2) made to raise (no output, a failed span): the
    first call (call_1, `{"city": 42}`) was refused by the tool's schema and never ran."""
    _impl(impl)
    spans = [copy.copy(s) for s in capture("langgraphjs_react_openinference_invalid")]
    [paris] = [s for s in spans if s.span_id == "e091c23f857cbd47"]
    paris.attributes = {k: v for k, v in paris.attributes.items() if not k.startswith("output.")}
    paris.status_code, paris.status_message = STATUS_ERROR, "no such city\n\nError: no such city"
    [turn], _ = assemble(spans, impl, flush=True)
    rows = sorted((c.call_id, type(c).__name__) for c in turn.calls)
    assert rows == [("call_1", "RequestedCall"), ("call_2", "ToolCall")]
