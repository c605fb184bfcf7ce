"""Tools offered to the model on model request spans (chat spans) join their turn's offered tools.

The GenAI conventions put `gen_ai.tool.definitions` on inference spans (chat / text_completion / generate_content),
OpenInference on its LLM spans as `llm.tools.{i}.tool.json_schema`, OpenLLMetry on its chat spans as
`llm.request.functions.{i}.name` / `.description` / `.parameters`. The normalizer reads them into an OfferedTools
record under the chat span; turn assembly adds them to the turn's `tool_definitions` at release (the turn span's own
first, then the chat spans' in arrival order, one definition per tool name, at most MAX_OFFERED_PER_TURN).

Real OTel SDK spans, encoded as OTLP and decoded by the monitor, through the real normalizer and assembler: the C
paths and their Python references, which must agree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.trace import Tracer

from monitor.assembly import TurnAssembler
from monitor.assembly._offered import MAX_OFFERED_PER_TURN
from monitor.normalize import GenAIConvention, Normalizer
from monitor.otlp import Span
from monitor.records import OfferedTools, RequestedCall, ToolCall, Turn
from tests.monitor.service.test_requested_calls import (
    IMPLS,
    Req,
    S,
    _add_poll,
    _impl,
    _one,
    _spied,
    assemble,
    convert,
    ran,
    record,
)

DEFS = "gen_ai.tool.definitions"
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather", "parameters": PARAMS}
TIME = {"type": "function", "name": "get_time", "parameters": {"type": "object"}}
CLOCK = {"type": "function", "name": "get_clock"}
OPENAI_WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": PARAMS}}


def chat(tracer: Tracer, defs: Any = None, *reqs: Req, op: str = "chat", history: str | None = None) -> None:
    """A model request span offering `defs` (a list is sent as JSON text, a str as it is, a tuple as the structured
    value: the SDK makes a list of dicts an arrayValue of kvlistValues), asking for `reqs`."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": op, "gen_ai.request.model": "m"}
    if isinstance(defs, list):
        attrs[DEFS] = json.dumps(defs)
    elif isinstance(defs, tuple):
        attrs[DEFS] = list(defs)
    elif defs is not None:
        attrs[DEFS] = defs
    if history is not None:
        attrs["gen_ai.input.messages"] = json.dumps([{"role": "user", "parts": [{"type": "text", "content": history}]}])
    if reqs:
        parts = [{"type": "tool_call", "id": r.id, "name": r.name} for r in reqs]
        attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
    with tracer.start_as_current_span(f"{op} m", attributes=attrs):
        pass


@contextmanager
def agent_turn(
    tracer: Tracer, text: str = "[W] weather", agent: str = "a", defs: list[Any] | None = None
) -> Iterator[None]:
    msgs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent, "gen_ai.input.messages": msgs}
    if defs is not None:
        attrs[DEFS] = json.dumps(defs)
    with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attrs):
        yield


def names(t: Turn) -> list[str | None]:
    return [d.get("name") or d.get("function", {}).get("name") for d in t.tool_definitions or ()]


# ---- the normalizer: GenAI -----------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("form", ["text", "structured"])
def test_a_chat_span_gives_itself_and_its_offered_tools(impl: str, form: str) -> None:
    _impl(impl)
    defs: Any = [WEATHER, OPENAI_WEATHER] if form == "text" else (WEATHER, OPENAI_WEATHER)
    (span,) = spans = record(lambda t: chat(t, defs, history="hello " * 10_000))
    out, problems = convert(spans, impl)
    assert problems == [] and out[0] is span and [type(r) for r in out] == [Span, OfferedTools]
    offered = out[1]
    assert offered.definitions == (WEATHER, OPENAI_WEATHER)
    assert (offered.trace_id, offered.span_id, offered.parent_span_id) == (
        span.trace_id,
        f"{span.span_id}#tools",
        span.span_id,
    )
    assert (offered.start_ns, offered.end_ns) == (span.start_ns, span.end_ns)
    assert offered.name == "" and offered.call_id == "" and offered.arguments is None
    assert offered.attributes == {}  # none of the span's contents (its input messages) is held


@pytest.mark.parametrize("impl", IMPLS)
def test_an_agent_repeating_its_definitions_shares_one_parsed_value(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        for _ in range(3):
            chat(tracer, [WEATHER, TIME])

    out, _ = convert(record(build), impl)
    offered = [r for r in out if isinstance(r, OfferedTools)]
    assert len(offered) == 3 and offered[0].definitions == (WEATHER, TIME)
    assert offered[1].definitions is offered[0].definitions is offered[2].definitions


@pytest.mark.parametrize("impl", IMPLS)
def test_requested_calls_and_offered_tools_of_one_chat_span(impl: str) -> None:
    _impl(impl)
    (span,) = spans = record(lambda t: chat(t, [WEATHER], Req("get_weather", "call_1")))
    out, problems = convert(spans, impl)
    assert problems == [] and [type(r) for r in out] == [Span, RequestedCall, OfferedTools]
    assert DEFS not in out[1].attributes  # the requested call does not hold the definitions either


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("op", ["text_completion", "generate_content"])
def test_every_model_operation_is_read_and_no_other(impl: str, op: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        chat(tracer, [WEATHER], op=op)
        chat(tracer, [WEATHER], op="embeddings")
        chat(tracer, [WEATHER], op="execute_tool_x")

    out, problems = convert(record(build), impl)
    assert [type(r).__name__ for r in out] == ["Span", "OfferedTools", "Span", "Span"] and problems == []


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("raw", ["[", '{"name": "f"}', "[]", "[1, 2]", '"tools"'])
def test_definitions_that_name_no_tools_give_no_record(impl: str, raw: str) -> None:
    """As on a turn span: what is not a JSON list of objects offers nothing (and rejects nothing)."""
    _impl(impl)
    spans = record(lambda t: chat(t, raw))
    assert convert(spans, impl) == (spans, [])


# ---- the normalizer: OpenInference and OpenLLMetry -----------------------------------------------------------

OI_TOOLS = "llm.tools"
TL_FUNCTIONS = "llm.request.functions"


def oi_llm(tracer: Tracer, tools: list[Any]) -> None:
    """An OpenInference LLM span offering `tools` (each JSON text as is when a str, else encoded)."""
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.model_name": "m", "input.value": "the history"}
    for i, tool in enumerate(tools):
        attrs[f"llm.tools.{i}.tool.json_schema"] = tool if isinstance(tool, str | int) else json.dumps(tool)
    with tracer.start_as_current_span("ChatCompletion", attributes=attrs):
        pass


def tl_chat(tracer: Tracer, functions: list[dict[str, Any]]) -> None:
    """An OpenLLMetry chat span offering `functions` (name, description, parameters as given)."""
    attrs: dict[str, Any] = {"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.prompt.0.content": "hi"}
    for i, f in enumerate(functions):
        for field, v in f.items():
            attrs[f"llm.request.functions.{i}.{field}"] = v
    with tracer.start_as_current_span("openai.chat", attributes=attrs):
        pass


@pytest.mark.parametrize("impl", IMPLS)
def test_openinference_llm_tools_are_offered_tools(impl: str) -> None:
    _impl(impl)
    anthropic = {"name": "get_time", "input_schema": {"type": "object"}}
    tools: list[Any] = [OPENAI_WEATHER, "not json", anthropic, 7, {"type": "function"}, "[1]"]
    (span,) = spans = record(lambda t: oi_llm(t, tools))
    out, problems = convert(spans, impl)
    assert out[0] is span and [type(r) for r in out] == [Span, OfferedTools]
    # In index order; what is not a JSON object is counted (`7` is an int attribute: not JSON text either); an object
    # that names no tool offers nothing, as in the GenAI attribute.
    assert out[1].definitions == (OPENAI_WEATHER, anthropic)
    assert out[1].span_id == f"{span.span_id}#tools" and out[1].attributes == {}
    assert problems == [OI_TOOLS] * 3


@pytest.mark.parametrize("impl", IMPLS)
def test_openinference_tools_past_ten_are_read_in_index_order(impl: str) -> None:
    _impl(impl)
    tools = [{"type": "function", "function": {"name": f"t{i}"}} for i in range(12)]
    out, problems = convert(record(lambda t: oi_llm(t, tools)), impl)
    assert [d["function"]["name"] for d in out[1].definitions] == [f"t{i}" for i in range(12)] and problems == []


@pytest.mark.parametrize("impl", IMPLS)
def test_openllmetry_request_functions_are_offered_tools(impl: str) -> None:
    _impl(impl)
    functions: list[dict[str, Any]] = [
        {"name": "get_weather", "description": "Weather", "parameters": json.dumps(PARAMS)},
        {"name": "get_time"},
        {"description": "no name"},
        {"name": "get_clock", "parameters": "{cut"},
        {"name": 5},
    ]
    (span,) = spans = record(lambda t: tl_chat(t, functions))
    out, problems = convert(spans, impl)
    assert out[0] is span and [type(r) for r in out] == [Span, OfferedTools]
    assert out[1].definitions == (
        {"type": "function", "name": "get_weather", "description": "Weather", "parameters": PARAMS},
        {"type": "function", "name": "get_time"},
        {"type": "function", "name": "get_clock"},  # its parameters could not be read: the tool is still offered
    )
    assert problems == [TL_FUNCTIONS] * 2  # the parameters that are not JSON, the name that is no str


class _Nothing:
    def normalize(self, span: Span, problems: list[str]) -> None:
        return None


def test_several_conventions_read_offered_tools_as_the_genai_one_alone() -> None:
    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, [WEATHER])
            oi_llm(tracer, [OPENAI_WEATHER, "bad"])
            tl_chat(tracer, [{"name": "get_time"}])
            ran(tracer, "get_weather", "call_1")

    spans = record(build)
    alone, several = Normalizer(), Normalizer([_Nothing(), GenAIConvention()])
    (got, _), (want, _) = several.split(spans), alone.split(spans)
    assert [type(r) for r in got] == [type(r) for r in want]
    assert [r.definitions for r in got if isinstance(r, OfferedTools)] == [
        (WEATHER,),
        (OPENAI_WEATHER,),
        ({"type": "function", "name": "get_time"},),
    ]
    assert several.ignored_attributes == alone.ignored_attributes == {OI_TOOLS: 1}


# ---- turn assembly -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("flush", [False, True], ids=["poll", "flush"])
def test_a_turn_gets_the_tools_its_chat_spans_offered(impl: str, flush: bool) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, [WEATHER, TIME], Req("get_weather", "call_1"))
            ran(tracer, "get_weather", "call_1")
            chat(tracer, [WEATHER, TIME])  # the final answer: it asked for no call, and offered the same tools

    turns, a = assemble(record(build), impl, flush=flush)
    t = _one(turns)
    assert t.tool_definitions == (WEATHER, TIME)
    assert [(type(c), c.name) for c in t.calls] == [(ToolCall, "get_weather")]  # no OfferedTools among the calls
    assert a.pending_traces == 0 and a.stats.duplicates == a.stats.late_calls == 0


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("offered", [False, True], ids=["requested-only", "offered-too"])
def test_a_chat_span_offering_tools_takes_the_python_release_with_the_same_calls(impl: str, offered: bool) -> None:
    """The C assembler releases a turn whose chat spans only requested calls (reconciled by id) itself; one whose chat
    spans also offered tools goes to _release_turn, which joins them: the same calls either way."""
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, [WEATHER, TIME] if offered else None, Req("get_weather", "call_1"), Req("get_time", "call_2"))
            ran(tracer, "get_weather", "call_1")
            chat(tracer, [WEATHER, TIME] if offered else None)

    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    handed = _spied(a)
    add, poll = _add_poll(a, impl)
    t = _one(add(convert(record(build), impl)[0], 0) + poll(10 * S))
    assert [(type(c), c.name, c.call_id) for c in t.calls] == [
        (RequestedCall, "get_time", "call_2"),  # when the model asked: before the call that ran
        (ToolCall, "get_weather", "call_1"),
    ]
    assert t.tool_definitions == ((WEATHER, TIME) if offered else None)
    assert handed == ([t.span_id] if offered or impl == "python" else [])


@pytest.mark.parametrize("impl", IMPLS)
def test_the_turn_spans_tools_first_then_the_chat_spans_in_arrival_order_one_per_name(impl: str) -> None:
    _impl(impl)
    other_weather = {**WEATHER, "description": "another weather"}

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer, defs=[TIME]):
            chat(tracer, [OPENAI_WEATHER, {"type": "function", "name": "get_time", "description": "2nd"}])
            chat(tracer, [CLOCK, other_weather, {"description": "no name"}])

    t = _one(assemble(record(build), impl)[0])
    assert t.tool_definitions == (TIME, OPENAI_WEATHER, CLOCK)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_turn_whose_chat_spans_offer_nothing_new_keeps_its_own_definitions(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer, defs=[WEATHER, TIME]):
            chat(tracer, [WEATHER, TIME])
            chat(tracer, [TIME])
            ran(tracer, "get_time")

    spans = record(build)
    records, _ = convert(spans, impl)
    own = next(r for r in records if isinstance(r, Turn)).tool_definitions
    t = _one(assemble(spans, impl)[0])
    assert t.tool_definitions is own  # not copied


@pytest.mark.parametrize("impl", IMPLS)
def test_the_definitions_a_turn_keeps_are_bounded(impl: str) -> None:
    _impl(impl)
    half = MAX_OFFERED_PER_TURN // 2 + 3
    first = [{"name": f"a{i}"} for i in range(half)]
    second = [{"name": f"b{i}"} for i in range(half)]

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer, defs=[{"name": "own"}]):
            chat(tracer, first)
            chat(tracer, second)

    t = _one(assemble(record(build), impl)[0])
    assert len(t.tool_definitions or ()) == MAX_OFFERED_PER_TURN
    rest = MAX_OFFERED_PER_TURN - half - 1
    assert names(t) == ["own", *[f"a{i}" for i in range(half)], *[f"b{i}" for i in range(rest)]]


@pytest.mark.parametrize("impl", IMPLS)
def test_nested_turns_each_get_their_own_chat_spans_tools(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer, "[OUTER] delegate", "outer"):
            chat(tracer, [{"name": "delegate"}])
            with agent_turn(tracer, "[W] inner", "inner"):
                chat(tracer, [WEATHER])
                ran(tracer, "get_weather")
            chat(tracer, [{"name": "delegate"}, CLOCK])

    turns, _ = assemble(record(build), impl)
    assert sorted((t.agent, tuple(names(t))) for t in turns) == [
        ("inner", ("get_weather",)),
        ("outer", ("delegate", "get_clock")),
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_late_chat_span_of_a_released_turn_changes_nothing_and_is_not_a_late_call(impl: str) -> None:
    """Its turn was judged with what it had: the offered tools arriving after are dropped, not counted (they are no
    call), and the trace they make is dropped at the turnless timeout without a turn."""
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            ran(tracer, "get_weather")
            chat(tracer, [WEATHER])

    spans = record(build)
    chat_span = next(s for s in spans if s.name == "chat m")
    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    python = impl == "python"
    add, poll = (a._add_records_py, a._poll_py) if python else (a.add_records, a.poll)
    turns = add(convert([s for s in spans if s is not chat_span], impl)[0], 0) + poll(2 * S)
    assert [(t.agent, t.tool_definitions) for t in turns] == [("a", None)]
    assert add(convert([chat_span], impl)[0], 3 * S) == []
    assert poll(10 * S) == [] and poll(20 * S) == []
    assert a.pending_traces == 0
    assert (a.stats.late_calls, a.stats.duplicates, a.stats.turnless_completed) == (0, 0, 0)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_chat_span_offering_tools_sent_again_counts_as_the_calls_it_requested(impl: str, n: int) -> None:
    """The drop counts count spans that carry calls: a chat span sent again (an exporter retry) is one duplicate when
    it requested calls, however many, and none when it only offered tools (as a chat span offering nothing)."""
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, [WEATHER, TIME], *[Req(f"f{i}", f"call_{i}") for i in range(n)])

    spans = record(build)
    turns, a = assemble(spans + spans[:1], impl)  # the chat span twice
    t = _one(turns)
    assert t.tool_definitions == (WEATHER, TIME)
    assert [c.call_id for c in t.calls] == [f"call_{i}" for i in range(n)]
    assert (a.stats.duplicates, a.stats.late_calls) == (1 if n else 0, 0)


@pytest.mark.parametrize("impl", IMPLS)
def test_turnless_calls_get_the_tools_offered_beside_them(impl: str) -> None:
    """Calls with no turn span are judged alone: with the tools their trace's chat spans offered (so that calls of
    offered tools are catalog calls there too)."""
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with tracer.start_as_current_span("session"):
            chat(tracer, [WEATHER], Req("get_weather", "call_1"))
            ran(tracer, "get_weather", "call_1")
            chat(tracer, [WEATHER, TIME])

    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    records, _ = convert(record(build), impl)
    python = impl == "python"
    assert (a._add_records_py if python else a.add_records)(records, 0) == []
    t = _one((a._poll_py if python else a.poll)(6 * S))
    assert t.turnless and t.tool_definitions == (WEATHER, TIME)
    assert [(type(c), c.name) for c in t.calls] == [(ToolCall, "get_weather")]


@pytest.mark.parametrize("impl", IMPLS)
def test_offered_tools_alone_make_no_turnless_turn_and_leave_their_turn_to_be_judged(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, [WEATHER])

    spans = record(build)
    turn_span = next(s for s in spans if s.name.startswith("invoke_agent"))
    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    python = impl == "python"
    add, poll = (a._add_records_py, a._poll_py) if python else (a.add_records, a.poll)
    assert add(convert([s for s in spans if s is not turn_span], impl)[0], 0) == [] and poll(6 * S) == []
    turns = add(convert([turn_span], impl)[0], 7 * S) + poll(9 * S)
    assert [(t.turnless, t.tool_definitions) for t in turns] == [(False, None)]  # judged, not a late turn
    assert a.stats.late_turns == a.stats.late_calls == a.stats.turnless_completed == 0
