"""Pydantic Logfire as a span producer: its openai-agents integration and its OpenAI instrumentation.

The spans are captures of real runs, offline, on a fake OpenAI server on the loopback, with logfire 5.4.0
(`logfire.configure(send_to_logfire=False, console=False, additional_span_processors=[...])`, the OTel SDK 1.45.2's
in-memory exporter), openai 3.57.0, as OTLP JSON, one export request a line. Dropped from them: the resource's host,
OS version and process id, and the spans' `logfire.json_schema`, `code.filepath` / `code.lineno`, the model settings
(`model_config`, `model_settings`: they name the server's URL), the usage figures, exception stack traces, and
openai-agents' `request_data` on its chat completion spans (the `input` and `output` beside it again).

- logfire_agents_*: `logfire.instrument_openai_agents()` with openai-agents 0.24.0 (its own trace processors
  removed), the agents' model an OpenAIChatCompletionsModel (`*_chat_*`) or OpenAIResponsesModel (`*_responses_*`).
  `*_tool` runs `weather_agent` (its model calls `get_weather({"city": "Paris"})`, call id `call_1`, then answers
  "It is sunny in Paris."), `*_raises` the same with a tool that raises, `*_handoff` runs `triage_agent`, whose model
  calls `transfer_to_weather_agent` (`call_h`), then `weather_agent` as in `*_tool`. Logfire writes the SDK's spans
  as its own (tracer scope `logfire.openai_agents`), each named after its message template, with no GenAI operation
  but on the Responses model's requests (`chat`) and `logfire.msg` on every one: the run's root `OpenAI Agents
  trace: {name}` and `Task: Agent workflow`, an `Agent run: {name!r}` span per agent's run (`name`, the names of its
  `tools` and `handoffs`; no input, no answer), a `Turn {turn} for agent ...` span per model turn, each model request
  a `Chat completion with ...` span (the chat messages in `input` / `output`) or a `Responses API with ...` span (the
  request's items in `raw_input`, the whole response in `response`: its output items and the tools offered), each tool
  a `Function: {name}` span (`input` the arguments' JSON text, `output` the result; no call id; a raising tool's span
  status ERROR without a message, openai-agents' redacted error in `error`), a handoff a `Handoff: {from_agent} →
  {to_agent}` span. The chat completion spans record no tools offered.
- logfire_openai_*: `logfire.instrument_openai()` (its default semconv version 2) around a plain tool-calling loop in
  toolwatch's own `agent_turn` (`weather-bot`, offering no tools itself) and `@tool` (a ToolExecutor running the
  calls), all through logfire's tracer provider: GenAI `chat` spans (scope `logfire.openai`, the messages in
  `gen_ai.input.messages` / `gen_ai.output.messages`, the tools in `gen_ai.tool.definitions`) beside toolwatch's own
  `invoke_agent` / `execute_tool` spans, to which logfire's span processor adds `logfire.msg` and
  `logfire.span_type`. `*_raises`: the tool raises ValueError (on_error="result": the model is told and answers).
  With `version=1` logfire records the model's calls only in its legacy `response_data`: not read (no requested
  call; the calls that ran are toolwatch's own spans).

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import pytest

from monitor.records import InputMark, OfferedTools, RequestedCall, ToolCall, Turn
from tests.monitor.service.captures import call_rows, capture, captured_turns, cpu_timed, offered_names
from tests.monitor.service.test_requested_calls import IMPLS, _impl, convert

QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris."
PARIS = {"city": "Paris"}
RAN = ("get_weather", "", PARIS, False, None)  # the Function span records no call id
APIS = ["chat", "responses"]

# ---- logfire.instrument_openai_agents() --------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", APIS)
def test_a_logfire_openai_agents_run_is_one_turn_of_its_agent(impl: str, api: str) -> None:
    """The `Agent run` span is the turn, named after its agent, given the question its first model request was
    given (the agent span records none); the model's request for the tool (`call_1`) is the call that ran, once, with
    its arguments. The Responses model's requests record the tools offered; the chat completions' none. The answer
    is not on the agent span: not recorded."""
    turns = captured_turns(f"logfire_agents_{api}_tool", impl)
    assert [(t.agent, t.input_text, t.output_text, call_rows(t)) for t in turns] == [
        ("weather_agent", QUESTION, None, [RAN])
    ]
    assert offered_names(turns[0]) == (["get_weather"] if api == "responses" else [])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", APIS)
def test_logfire_openai_agents_spans_of_other_kinds_are_parent_links(impl: str, api: str) -> None:
    """`logfire.msg` is on every span: the trace, task and model-turn spans are parent links, nothing else; each
    model request gives the input its model was given and the call it asked for (the first one)."""
    _impl(impl)
    records, problems = convert(capture(f"logfire_agents_{api}_tool"), impl)
    assert problems == []
    kinds = sorted(type(r).__name__ for r in records if not isinstance(r, InputMark | OfferedTools))
    assert kinds == ["RequestedCall", "Span", "Span", "Span", "Span", "Span", "Span", "ToolCall", "Turn"]
    assert [r.arguments for r in records if isinstance(r, InputMark)] == [QUESTION, QUESTION]
    assert [(r.name, r.call_id) for r in records if isinstance(r, RequestedCall)] == [("get_weather", "call_1")]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_logfire_openai_agents_raising_tool_is_a_failed_call(impl: str) -> None:
    """The span's status is ERROR without a message: the error is openai-agents' (`error`), its message."""
    turns = captured_turns("logfire_agents_chat_raises", impl)
    assert [(t.agent, t.input_text, call_rows(t)) for t in turns] == [
        ("weather_agent", QUESTION, [("get_weather", "", PARIS, False, "Error running tool (non-fatal)")])
    ]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", APIS)
def test_a_logfire_openai_agents_handoff_is_one_turn_per_agent_and_no_call(impl: str, api: str) -> None:
    """The triage agent's turn holds no call: the transfer its model asked for is the handoff (its span), not a call
    never run; the weather agent's turn holds its call. Both are given the question."""
    turns = captured_turns(f"logfire_agents_{api}_handoff", impl)
    assert [(t.agent, t.input_text, call_rows(t)) for t in turns] == [
        ("triage_agent", QUESTION, []),
        ("weather_agent", QUESTION, [RAN]),
    ]
    want = [["transfer_to_weather_agent"], ["get_weather"]] if api == "responses" else [[], []]
    assert [offered_names(t) for t in turns] == want


# ---- logfire.instrument_openai() beside toolwatch's own spans ---------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
def test_logfire_openai_chat_spans_beside_toolwatchs_spans_make_one_turn(impl: str) -> None:
    """toolwatch's turn and call spans carry `logfire.msg` too: still read by the GenAI rules, once; the call the
    model asked for (`call_1`) is the call that ran; the tools offered are the chat spans'."""
    turns = captured_turns("logfire_openai_tool", impl)
    assert [(t.agent, t.input_text, t.output_text, call_rows(t)) for t in turns] == [
        ("weather-bot", QUESTION, ANSWER, [("get_weather", "call_1", PARIS, False, None)])
    ]
    assert offered_names(turns[0]) == ["get_weather"]
    _impl(impl)
    records, problems = convert(capture("logfire_openai_tool"), impl)
    assert problems == []
    assert sorted(type(r).__name__ for r in records if type(r) in (Turn, ToolCall, RequestedCall)) == [
        "RequestedCall",
        "ToolCall",
        "Turn",
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_logfire_openai_a_raising_tool_is_a_failed_call(impl: str) -> None:
    turns = captured_turns("logfire_openai_raises", impl)
    assert [(t.agent, t.input_text, t.output_text, call_rows(t)) for t in turns] == [
        ("weather-bot", QUESTION, ANSWER, [("get_weather", "call_1", PARIS, False, "ValueError")])
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_responses_request_with_many_attributes_and_calls_is_read_in_linear_time(impl: str) -> None:
    """A Responses request asking for 64 calls (the bound per span) with 400,000 other attributes (about 12 MiB on
    the wire, within a request's 16 MiB): its calls share one copy of its attributes without the request's content,
    not a copy each (about 6 s)."""
    import json

    from monitor.otlp import Span

    _impl(impl)
    items = [{"type": "function_call", "name": f"f{i}", "call_id": f"c{i}", "arguments": "{}"} for i in range(64)]
    attrs: dict[str, object] = {f"k{i:07d}": "v" for i in range(400_000)}
    attrs.update({"logfire.msg_template": "Responses API", "gen_ai.operation.name": "chat", "raw_input": "[]",
                  "response": json.dumps({"output": items, "tools": []})})  # fmt: skip
    span = Span("1" * 32, "2" * 16, "3" * 16, "Responses API", attributes=attrs, scope="logfire.openai_agents")
    (records, _), elapsed = cpu_timed(lambda: convert([span], impl))
    calls = [r for r in records if isinstance(r, RequestedCall)]
    assert [c.name for c in calls] == [f"f{i}" for i in range(64)]
    assert "response" not in calls[0].attributes and calls[0].attributes["k0000000"] == "v"
    assert elapsed < 1.5, elapsed
