"""The Vercel AI SDK (TypeScript) traced by its own telemetry, and through OpenInference's Vercel span processor: the
turns a user means.

With `experimental_telemetry: {isEnabled: true, functionId}` the SDK records, on its global tracer (tracer scope
`ai`), each `generateText` / `streamText` call as a span `ai.generateText` / `ai.streamText` (its
`ai.telemetry.functionId` the function id, `ai.prompt` the call's prompt as JSON: `{"system", "prompt"}` or `{"system",
"messages"}`, the messages' parts `{"type": "text", "text"}`; `ai.response.text` the answer), each model request of
its steps as a span `ai.generateText.doGenerate` / `ai.streamText.doStream` (`ai.prompt.tools`: the tools offered,
an array of JSON texts `{"type": "function", "name", "description", "inputSchema"}`; `ai.response.toolCalls`: the
calls asked for, JSON `[{"toolCallId", "toolName", "input"}]`, `input` JSON text when generated, an object when
streamed) and each tool's run as a span `ai.toolCall` (`ai.toolCall.name`, `.id`, `.args`, `.result`; a raising
tool's span fails with the error's message and an exception event). Every span has `ai.operationId` and no GenAI
operation: none was read. Now the `ai.generateText` / `ai.streamText` span is the turn, of agent
`ai.telemetry.functionId`, its input the latest user text of `ai.prompt`; an `ai.toolCall` span a call; a model
request span a parent link with the calls it asked for and the tools it offered (monitor.normalize._vercel). All is
gated on the tracer scope `ai` (the SDK's default tracer; one passed as `experimental_telemetry.tracer` names its own
scope, which is not read).

OpenInference's span processor (`OpenInferenceBatchSpanProcessor`) adds its attributes to the same spans, names them
`{operation} {functionId}`, makes the `ai.generateText` span an AGENT span (no `agent.name`; `input.value` the
`ai.prompt` JSON), the model requests LLM spans (their requested calls' `tool_call.function.arguments` encoded twice:
JSON text of the JSON text; no `llm.tools`) and the tool runs TOOL spans. It was read as OpenInference (a turn named
after the span, no tools offered); now, for the `ai` scope, the turn is named after the function id and given the
tools offered and the calls asked for as the SDK recorded them (`ai.prompt.tools`, `ai.response.toolCalls`).

The spans are captures of real runs, offline (ai 6.0.326, @ai-sdk/openai 3.0.141 (`openai.chat(...)`),
@arizeai/openinference-vercel 2.8.1, @opentelemetry/sdk-trace-node 2.12.1, @opentelemetry/exporter-trace-otlp-http
0.223.1, Node 20): `generateText` (or `streamText`) with one tool `get_weather({city})`, `stopWhen: stepCountIs(5)`,
`functionId: 'weather_agent'`, its model pointed at a fake OpenAI-compatible server on the loopback interface that asks
for `get_weather` (`call_1`) then answers; exported by the OTLP/HTTP JSON exporter to a local receiver, one export
request a line (stack traces dropped: machine paths):
- vercel_ai_tool: `generateText`, asked about Paris.
- vercel_ai_raises: asked about Atlantis: `get_weather` throws `Error('no such city')`; the model answers it could not
  find it.
- vercel_ai_history: `messages` with an earlier exchange about London before the question about Paris.
- vercel_ai_stream: `streamText`, asked about Paris.
- vercel_openinference_tool, vercel_openinference_raises: the first two through OpenInference's span processor.
- vercel_ai_object, vercel_ai_stream_object, vercel_openinference_object: `generateObject` / `streamObject` (a zod
  schema `{city, forecast}`, no tools) asked about Paris, the server answering `{"city":"Paris","forecast":"sunny"}`;
  the last through OpenInference's span processor (@arizeai/openinference-vercel 2.8.1,
  `OpenInferenceSimpleSpanProcessor`). The run's span records the object as JSON text, `ai.response.object` (no
  `ai.response.text`), and OpenInference copies it to `output.value`: the turn's answer is that text.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.normalize import REASON_NO_TOOL_NAME, _genai
from monitor.records import OfferedTools, RequestedCall, ToolCall, Turn
from tests.monitor.service.captures import call_rows, captured_turns, offered_names
from tests.monitor.service.spans import new_tracer
from tests.monitor.service.test_requested_calls import IMPLS, _impl, convert, decoded

PARIS = {"city": "Paris"}
SUNNY = "It is sunny in Paris."
SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city."}},
    "required": ["city"],
    "additionalProperties": False,
}
OFFERED = {"type": "function", "name": "get_weather", "description": "The weather in a city.", "inputSchema": SCHEMA}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("capture", ["vercel_ai_tool", "vercel_ai_stream", "vercel_openinference_tool"])
def test_a_generate_text_call_is_one_turn_with_its_question_call_and_tools(impl: str, capture: str) -> None:
    """The call's span is the turn of its function id, its input the prompt, its answer the response's text; the
    call the model asked for is the tool run of its id, with its arguments; the tool offered is the SDK's definition,
    its `inputSchema` the schema the catalog reads."""
    [turn] = captured_turns(capture, impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", "What is the weather in Paris?", SUNNY)
    assert call_rows(turn) == [("get_weather", "call_1", PARIS, False, None)]
    assert [call.result for call in turn.calls] == [json.dumps(SUNNY)]
    assert list(turn.tool_definitions or ()) == [OFFERED]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("capture", ["vercel_ai_raises", "vercel_openinference_raises"])
def test_a_throwing_tool_is_a_failed_call_of_its_turn(impl: str, capture: str) -> None:
    [turn] = captured_turns(capture, impl)
    assert (turn.agent, turn.input_text) == ("weather_agent", "What is the weather in Atlantis?")
    assert turn.output_text == "I could not find the weather in Atlantis."
    assert call_rows(turn) == [("get_weather", "call_1", {"city": "Atlantis"}, False, "no such city")]
    assert offered_names(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
def test_the_input_is_the_latest_user_message_not_the_history(impl: str) -> None:
    """`messages` with an earlier exchange: the input is the last user message's text parts, not London's."""
    [turn] = captured_turns("vercel_ai_history", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", "What is the weather in Paris?", SUNNY)
    assert call_rows(turn) == [("get_weather", "call_1", PARIS, False, None)]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("capture", ["vercel_ai_object", "vercel_ai_stream_object", "vercel_openinference_object"])
def test_a_generate_object_call_answers_its_object(impl: str, capture: str) -> None:
    """`generateObject` / `streamObject`: the run is the turn, its answer the object the model gave, as the JSON text
    the SDK recorded (what the turn's `respond` checks read)."""
    [turn] = captured_turns(capture, impl)
    assert (turn.agent, turn.input_text) == ("weather_agent", "weather in Paris?")
    assert turn.output_text == '{"city":"Paris","forecast":"sunny"}'
    assert not turn.calls


# ---- spans of the SDK's shapes, on the real OTel SDK -------------------------------------------------------------

SCOPE = "ai"


def _spans(scope: str, build: Any) -> list[Any]:
    provider, _, memory = new_tracer()
    build(provider.get_tracer(scope))
    provider.shutdown()
    return decoded(memory.get_finished_spans())


def _model_request(tracer: Any, calls: Any, *, op: str = "ai.generateText.doGenerate", tools: Any = None) -> None:
    attrs = {"ai.operationId": op, "ai.telemetry.functionId": "weather_agent", "gen_ai.system": "openai.chat",
             "ai.response.toolCalls": calls if isinstance(calls, str) else json.dumps(calls)}  # fmt: skip
    if tools is not None:
        attrs["ai.prompt.tools"] = tools
    with tracer.start_as_current_span(op, attributes=attrs):
        pass


@pytest.mark.parametrize("impl", IMPLS)
def test_each_call_asked_for_is_a_requested_call_the_unrun_ones_too(impl: str) -> None:
    """Each `ai.response.toolCalls` item is a call the model asked for: `input` JSON text (generated) or an object
    (streamed), `args` (SDK 4); one whose run is missing stays a requested call not run."""
    _impl(impl)
    calls = [
        {"toolCallId": "call_1", "toolName": "get_weather", "input": '{"city": "Paris"}'},
        {"type": "tool-call", "toolCallId": "call_2", "toolName": "get_weather", "input": {"city": "Rome"}},
        {"toolCallId": "call_3", "toolName": "get_time", "args": '{"zone": "CET"}'},
    ]

    def build(tracer: Any) -> None:
        attrs = {"ai.operationId": "ai.generateText", "ai.telemetry.functionId": "weather_agent",
                 "ai.prompt": json.dumps({"prompt": "What is the weather in Paris and Rome?"})}  # fmt: skip
        with tracer.start_as_current_span("ai.generateText", attributes=attrs):
            _model_request(tracer, calls, tools=(json.dumps(OFFERED),))
            run = {"ai.operationId": "ai.toolCall", "ai.toolCall.name": "get_weather", "ai.toolCall.id": "call_1",
                   "ai.toolCall.args": json.dumps(PARIS), "ai.toolCall.result": json.dumps(SUNNY)}  # fmt: skip
            with tracer.start_as_current_span("ai.toolCall", attributes=run):
                pass

    records, problems = convert(_spans(SCOPE, build), impl)
    requested = [(r.name, r.call_id, json.loads(r.arguments or "null")) for r in records if type(r) is RequestedCall]
    assert requested == [("get_weather", "call_1", PARIS), ("get_weather", "call_2", {"city": "Rome"}),
                         ("get_time", "call_3", {"zone": "CET"})]  # fmt: skip
    assert [r.definitions for r in records if isinstance(r, OfferedTools)] == [(OFFERED,)]
    [turn] = [r for r in records if isinstance(r, Turn)]
    assert (turn.agent, turn.input_text) == ("weather_agent", "What is the weather in Paris and Rome?")
    assert turn.output_text is None
    assert problems == []
    for r in records:
        if type(r) is RequestedCall:  # the request's prompt and tools are not kept by its pending calls
            assert "ai.prompt.tools" not in r.attributes and "ai.response.toolCalls" not in r.attributes


@pytest.mark.parametrize("impl", IMPLS)
def test_a_requested_call_through_openinference_keeps_its_arguments_object(impl: str) -> None:
    """OpenInference's span processor encodes a requested call's arguments twice (`"{\\"city\\": ...}"`): read from
    `ai.response.toolCalls` instead, the arguments are the object the model gave."""
    _impl(impl)

    def build(tracer: Any) -> None:
        attrs = {"ai.operationId": "ai.generateText.doGenerate", "openinference.span.kind": "LLM",
                 "ai.response.toolCalls": json.dumps([{"toolCallId": "call_9", "toolName": "get_weather",
                                                       "input": '{"city": "Paris"}'}]),
                 "llm.output_messages.0.message.role": "assistant",
                 "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_9",
                 "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
                 "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
                     json.dumps('{"city": "Paris"}')}  # fmt: skip
        with tracer.start_as_current_span("ai.generateText.doGenerate weather_agent", attributes=attrs):
            pass

    records, problems = convert(_spans(SCOPE, build), impl)
    requested = [(r.name, r.call_id, r.arguments) for r in records if type(r) is RequestedCall]
    assert (requested, problems) == ([("get_weather", "call_9", '{"city": "Paris"}')], [])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("calls", "tools", "ignored"),
    [
        ("not json", None, ["ai.response.toolCalls"]),
        ([{"toolCallId": "c", "input": "{}"}, 3], None, ["ai.response.toolCalls", "ai.response.toolCalls"]),
        ([{"toolCallId": 7, "toolName": "f", "input": "{}"}], None, ["ai.response.toolCalls"]),  # id made a str
        ([{"toolCallId": "c", "toolName": "f", "input": 5}], None, ["ai.response.toolCalls"]),  # no arguments
        ([], ("not json", json.dumps({"description": "no name"}), "[1]"), ["ai.prompt.tools", "ai.prompt.tools"]),
    ],
)
def test_what_cannot_be_read_is_ignored_and_counted(impl: str, calls: Any, tools: Any, ignored: list[str]) -> None:
    _impl(impl)
    records, problems = convert(_spans(SCOPE, lambda t: _model_request(t, calls, tools=tools)), impl)
    assert [type(r).__name__ for r in records if not type(r).__name__ == "Span"] == (
        ["RequestedCall"] if calls and isinstance(calls, list) and calls[0].get("toolName") else []
    )
    assert sorted(problems) == sorted(ignored)


@pytest.mark.parametrize("impl", IMPLS)
def test_another_scopes_ai_spans_are_parent_links(impl: str) -> None:
    """The same attributes under another tracer scope (a tracer of the application's, passed to the SDK, or another
    producer's `ai.*` keys): not read, parent links, nothing counted."""
    _impl(impl)

    def build(tracer: Any) -> None:
        with tracer.start_as_current_span("ai.generateText", attributes={"ai.operationId": "ai.generateText",
                                                                          "ai.prompt": '{"prompt": "q"}'}):  # fmt: skip
            with tracer.start_as_current_span("ai.toolCall", attributes={"ai.operationId": "ai.toolCall",
                                                                          "ai.toolCall.name": "f"}):  # fmt: skip
                pass

    records, problems = convert(_spans("my.app", build), impl)
    assert ([type(r).__name__ for r in records], problems) == (["Span", "Span"], [])


@pytest.mark.parametrize("impl", IMPLS)
def test_an_answer_that_is_no_text_is_ignored_and_counted(impl: str) -> None:
    """A run's `ai.response.text` of another type is counted and `ai.response.object` read; one of another type is
    counted too, and the turn has no answer."""
    _impl(impl)

    def build(tracer: Any) -> None:
        base = {"ai.operationId": "ai.generateObject", "ai.prompt": '{"prompt": "q"}'}
        with tracer.start_as_current_span("ai.generateObject", attributes=base | {
                "ai.response.text": 3, "ai.response.object": '{"a": 1}'}):  # fmt: skip
            pass
        with tracer.start_as_current_span("ai.generateObject", attributes=base | {"ai.response.object": 4}):
            pass

    records, problems = convert(_spans(SCOPE, build), impl)
    assert [r.output_text for r in records if isinstance(r, Turn)] == ['{"a": 1}', None]
    assert sorted(problems) == ["ai.response.object", "ai.response.text"]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_tool_run_without_a_name_is_rejected_and_the_operation_id_must_be_text(impl: str) -> None:
    _impl(impl)

    def build(tracer: Any) -> None:
        with tracer.start_as_current_span("ai.toolCall", attributes={"ai.operationId": "ai.toolCall"}):
            pass
        with tracer.start_as_current_span("ai.toolCall", attributes={"ai.operationId": 3, "ai.toolCall.name": "f"}):
            pass
        with tracer.start_as_current_span("ai.embed", attributes={"ai.operationId": "ai.embed"}):
            pass

    out: list[Any] = []
    problems: list[str] = []
    rejected: dict[str, int] = {}
    conv = _genai._CONVERT_C if impl == "c" else _genai._convert_py
    assert conv is not None
    conv(_spans(SCOPE, build), out, problems, rejected)
    assert [type(r).__name__ for r in out] == ["Span", "Span"]
    assert not any(isinstance(r, ToolCall) for r in out)
    assert (problems, rejected) == (["ai.operationId"], {REASON_NO_TOOL_NAME: 1})


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("openinference", [False, True], ids=["sdk", "openinference"])
def test_a_call_without_a_function_id_is_an_unnamed_turn_on_both_paths(impl: str, openinference: bool) -> None:
    """Without `functionId` the turn is unnamed, alone or through OpenInference's span processor (which names the
    span `ai.generateText`): the agent was the span's name there, an operation's name as an agent's in every
    metric's `agent` label."""
    _impl(impl)

    def build(tracer: Any) -> None:
        attrs = {"ai.operationId": "ai.generateText", "ai.prompt": json.dumps({"prompt": "What is the weather?"})}
        if openinference:
            attrs |= {"openinference.span.kind": "AGENT", "input.value": attrs["ai.prompt"],
                      "input.mime_type": "application/json"}  # fmt: skip
        with tracer.start_as_current_span("ai.generateText", attributes=attrs):
            pass

    records, problems = convert(_spans(SCOPE, build), impl)
    [turn] = [r for r in records if isinstance(r, Turn)]
    assert (turn.agent, turn.input_text, problems) == ("", "What is the weather?", [])
