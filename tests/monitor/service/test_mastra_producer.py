"""Mastra (TypeScript) traced by its own observability, exported by @mastra/otel-exporter: what toolwatch reads.

Mastra's exporter (tracer scope `@mastra/otel-exporter`) writes GenAI spans beside its own `mastra.*` attributes: an
agent's run is an `invoke_agent {agent}` span (`gen_ai.agent.name`; its input `mastra.agent_run.input`, its answer
`mastra.agent_run.output` `{"text", ...}`, no `gen_ai.input.messages` / `gen_ai.output.messages`; its tools as
`gen_ai.tool.definitions` holding their names only, `["get_weather"]`, not definitions), each step an `agent_step`
span (the calls asked for in `mastra.model_step.output`, `{"text", "toolCalls": [{"toolCallId", "toolName",
"args"}]}`), each model request a `chat {model}` span (its `gen_ai.output.messages` hold the text only, no `tool_call`
part) and each tool's run an `execute_tool {tool}` span with the call's id, arguments and result; a throwing tool's
span fails with `error.type` `unknown` (Mastra's error id, `unknown` when the error has none: a tool's thrown error has
none), the message in `error.message`, in the status and in an `exception` event whose `exception.type` is always
`Error` (the thrown class is recorded nowhere). The error read is the status message, as the Vercel AI SDK's for the
same thrown `Error`; an error id of Mastra's own is read as it is.

Read as GenAI the turn of the agent and its calls were right, but its input and answer were not read (an expectation
keyed on the input matched nothing: every Mastra turn was unjudged), nor the tools offered, nor the calls its model
asked for. Now, for Mastra's scope only (monitor.normalize._mastra; the C path hands its turn spans without input
messages and its spans of another operation to Python): the turn's input is the latest user text of
`mastra.agent_run.input` (the text itself, or JSON of a list of strings or messages, of one message, or of an object
holding `messages`), its answer the `text` of `mastra.agent_run.output`, its tools offered the names of
`gen_ai.tool.definitions` (offered by name, as Strands' `gen_ai.agent.tools`), and each `agent_step` span gives the
calls its model asked for. A value of another type, or one that cannot be read, is ignored and counted under its key.

The spans are captures of real runs, offline (@mastra/core 1.71.0, @mastra/observability 1.17.9, @mastra/otel-exporter
1.4.0 with a custom OTLP/HTTP JSON endpoint, @ai-sdk/openai 3.0.141 (`openai.chat(...)`), Node 20): an `Agent`
`weather_agent` with one `createTool` `get_weather({city})`, `generate(question, {maxSteps: 5})`, its model pointed at a
fake OpenAI-compatible server on the loopback interface that asks for `get_weather` (`call_1`) then answers; one
export request a line (the exporter's log records, sent apart, left out):
- mastra_agent_tool: asked about Paris.
- mastra_agent_raises: asked about Atlantis: `get_weather` throws `Error('no such city')`, the model answers it could
  not find it.
The other forms of its values are spans of the same shapes made on the real OTel SDK. Replayed through the real
normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import Status, StatusCode

from monitor.judge import Judge
from monitor.normalize import _markers as m
from monitor.records import RequestedCall, Turn
from monitor.rules import load_rules
from tests.monitor.service.captures import call_rows, capture, captured_turns, offered_names
from tests.monitor.service.spans import new_tracer
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert, decoded

SCOPE = "@mastra/otel-exporter"
PARIS_Q = "What is the weather in Paris?"
SUNNY = "It is sunny in Paris."
NAMED = {"type": "function", "name": "get_weather"}


@pytest.mark.parametrize("impl", IMPLS)
def test_an_agent_run_is_one_turn_of_the_agent_with_its_calls(impl: str) -> None:
    [turn] = captured_turns("mastra_agent_tool", impl)
    assert turn.agent == "weather_agent"
    assert call_rows(turn) == [("get_weather", "call_1", {"city": "Paris"}, False, None)]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_throwing_tool_is_a_failed_call_of_its_turn(impl: str) -> None:
    [turn] = captured_turns("mastra_agent_raises", impl)
    assert turn.agent == "weather_agent"
    assert call_rows(turn) == [("get_weather", "call_1", {"city": "Atlantis"}, False, "no such city")]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("name", "question", "answer"),
    [
        ("mastra_agent_tool", PARIS_Q, SUNNY),
        ("mastra_agent_raises", "What is the weather in Atlantis?", "I could not find the weather in Atlantis."),
    ],
)
def test_the_turns_input_answer_and_tools_offered_are_read(impl: str, name: str, question: str, answer: str) -> None:
    [turn] = captured_turns(name, impl)
    assert (turn.input_text, turn.output_text) == (question, answer)
    assert offered_names(turn) == ["get_weather"]
    assert list(turn.tool_definitions or ()) == [NAMED]


@pytest.mark.parametrize("impl", IMPLS)
def test_each_step_gives_the_calls_its_model_asked_for(impl: str) -> None:
    """The first step asked for `get_weather` (`call_1`): a requested call under it, with its arguments; the second
    asked for none. At release it is the call that ran (one call, not two)."""
    _impl(impl)
    records, problems = convert(capture("mastra_agent_tool"), impl)
    requested = [(r.name, r.call_id, json.loads(r.arguments or "null"), r.parent_span_id) for r in records
                 if type(r) is RequestedCall]  # fmt: skip
    assert requested == [("get_weather", "call_1", {"city": "Paris"}, "78dd69d88a3d1fe5")]
    assert problems == []
    for r in records:
        if type(r) is RequestedCall:  # the step's messages and output are not kept by its pending calls
            assert not {m.MASTRA_STEP_INPUT, m.MASTRA_STEP_OUTPUT, m.MASTRA_RESPONSE_BODY} & set(r.attributes)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_mastra_turn_is_judged_by_its_question(impl: str, tmp_path: Path) -> None:
    """An expectation keyed on the question matches the Mastra turn: judged, its call correct, its argument the city
    of the question; its answer passes the response check."""
    rules = tmp_path / "weather.yaml"
    rules.write_text(
        "version: 1\ncatalog:\n  tools:\n    - name: get_weather\nexpect:\n  - id: weather\n"
        "    when: {regex: 'weather in (\\w+)\\?'}\n    call:\n      - tool: get_weather\n        args:\n"
        "          city: {from_input: 'in (\\w+)\\?'}\n    respond:\n      - contains: sunny\n",
        encoding="utf-8",
    )
    [turn] = captured_turns("mastra_agent_tool", impl)
    verdict = Judge(load_rules([rules])).judge(turn)
    assert (verdict.judged, verdict.rule, verdict.end_to_end) == (True, "weather", True)
    assert [(c.name, c.outcome.value, c.args_ok) for c in verdict.calls] == [("get_weather", "correct", True)]


# ---- spans of Mastra's shapes, on the real OTel SDK ------------------------------------------------------------


def _spans(scope: str, build: Any) -> list[Any]:
    provider, _, memory = new_tracer()
    build(provider.get_tracer(scope))
    provider.shutdown()
    return decoded(memory.get_finished_spans())


def _run(tracer: Any, attrs: dict[str, Any], body: Any = None, *, error: bool = False) -> None:
    base = {"gen_ai.operation.name": "invoke_agent", "mastra.span.type": "agent_run",
            "gen_ai.agent.id": "weather_agent", "gen_ai.agent.name": "weather_agent"}  # fmt: skip
    with tracer.start_as_current_span("invoke_agent weather_agent", attributes={**base, **attrs}) as span:
        if body is not None:
            body(tracer)
        if error:
            span.set_status(Status(StatusCode.ERROR, "boom"))


def _step(tracer: Any, output: Any, body: Any = None) -> None:
    attrs = {"gen_ai.operation.name": "agent_step", "mastra.span.type": "model_step",
             "mastra.model_step.input": json.dumps([{"role": "user", "content": PARIS_Q}])}  # fmt: skip
    if output is not None:
        attrs["mastra.model_step.output"] = output
    with tracer.start_as_current_span("agent_step weather_agent", attributes=attrs):
        if body is not None:
            body(tracer)


def _tool(tracer: Any, call_id: str, city: str) -> None:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": call_id,
             "gen_ai.tool.call.arguments": json.dumps({"city": city}), "gen_ai.tool.call.result": SUNNY}  # fmt: skip
    with tracer.start_as_current_span("execute_tool get_weather", attributes=attrs):
        pass


def _turn(impl: str, scope: str, attrs: dict[str, Any], **kw: Any) -> tuple[Turn, list[str]]:
    _impl(impl)
    records, problems = convert(_spans(scope, lambda t: _run(t, attrs, **kw)), impl)
    [turn] = [r for r in records if isinstance(r, Turn)]
    return turn, problems


def _user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text}


HISTORY = [_user("What is the weather in London?"), {"role": "assistant", "content": "Rainy."}, _user(PARIS_Q)]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("value", "text"),
    [
        (PARIS_Q, PARIS_Q),  # generate("...")
        (json.dumps(["Hello.", PARIS_Q]), PARIS_Q),  # generate([...]): each string a user message
        (json.dumps(HISTORY), PARIS_Q),  # a history: the latest user message, not London's
        (json.dumps([_user(PARIS_Q), {"role": "assistant", "content": "Let me look."}]), PARIS_Q),
        (json.dumps([_user([{"type": "text", "text": "What is the weather"}, {"type": "image", "image": "x"},
                            {"type": "text", "text": "in Paris?"}])]), "What is the weather\nin Paris?"),
        (json.dumps([{"id": "m1", "role": "user", "parts": [{"type": "text", "text": PARIS_Q}]}]), PARIS_Q),  # UI
        (json.dumps([{"id": "m1", "role": "user", "content": {"format": 2, "parts": [{"type": "text",
                                                                                      "text": PARIS_Q}]}}]),
         PARIS_Q),  # Mastra's stored message
        (json.dumps(_user(PARIS_Q)), PARIS_Q),  # one message
        (json.dumps({"messages": HISTORY}), PARIS_Q),  # an object holding the messages
        ("42", "42"),  # a question JSON reads as a number: the text as written
        ('{"city": "Paris"', '{"city": "Paris"'),  # no JSON: the text itself
        ('{"city": "Paris"}', '{"city": "Paris"}'),  # JSON given as the question, no message in it: the text itself
        ('["Paris", 3]', "Paris"),  # a list holding a string: a user message
        ("[1, 2]", "[1, 2]"),
        ('[{"city": "Paris"}]', '[{"city": "Paris"}]'),
        ("[]", ""),  # no message: no user text
        (json.dumps([{"role": "system", "content": "Be brief."}]), ""),  # captured, no user text
        ("[" * 100_000, "[" * 100_000),  # too deep for JSON: the text itself, never an error
    ],
)
def test_the_input_is_the_latest_user_text_of_each_form(impl: str, value: str, text: str) -> None:
    turn, problems = _turn(impl, SCOPE, {m.MASTRA_AGENT_INPUT: value})
    assert (turn.agent, turn.input_text, problems) == ("weather_agent", text, [])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("value", "text"),
    [
        (json.dumps({"text": SUNNY, "files": []}), SUNNY),
        (SUNNY, SUNNY),  # an answer recorded as text
        (json.dumps({"object": {"city": "Paris"}}), None),  # structured output: no text answer
        (None, None),  # not recorded
    ],
)
def test_the_answer_is_the_text_of_the_output(impl: str, value: str | None, text: str | None) -> None:
    attrs = {m.MASTRA_AGENT_INPUT: PARIS_Q} | ({m.MASTRA_AGENT_OUTPUT: value} if value is not None else {})
    turn, problems = _turn(impl, SCOPE, attrs)
    assert (turn.output_text, problems) == (text, [])


@pytest.mark.parametrize("impl", IMPLS)
def test_a_failed_run_without_an_answer_fails_its_response_checks(impl: str) -> None:
    """As a GenAI turn whose messages were captured: the input recorded, no answer, status ERROR: the answer is ""."""
    turn, _ = _turn(impl, SCOPE, {m.MASTRA_AGENT_INPUT: PARIS_Q}, error=True)
    assert (turn.input_text, turn.output_text) == (PARIS_Q, "")
    turn, _ = _turn(impl, SCOPE, {}, error=True)
    assert (turn.input_text, turn.output_text) == ("", None)  # nothing captured: not checked


@pytest.mark.parametrize("impl", IMPLS)
def test_the_genai_values_are_read_where_recorded(impl: str) -> None:
    """An answer and tool definitions recorded as the conventions say are read as such, beside Mastra's input; a run
    recording its input messages is read as any GenAI turn span (Mastra's keys not read)."""
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "A"}]}])
    defs = json.dumps([{"type": "function", "name": "get_time"}])
    attrs = {m.MASTRA_AGENT_INPUT: PARIS_Q, m.MASTRA_AGENT_OUTPUT: json.dumps({"text": SUNNY}),
             "gen_ai.output.messages": answer, "gen_ai.tool.definitions": defs}  # fmt: skip
    turn, problems = _turn(impl, SCOPE, attrs)
    assert (turn.input_text, turn.output_text, problems) == (PARIS_Q, "A", [])
    assert list(turn.tool_definitions or ()) == [{"type": "function", "name": "get_time"}]
    attrs = {"gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Q"}]}]),
             m.MASTRA_AGENT_INPUT: PARIS_Q, m.MASTRA_AGENT_OUTPUT: json.dumps({"text": SUNNY}),
             "gen_ai.tool.definitions": json.dumps(["get_weather"])}  # fmt: skip
    turn, problems = _turn(impl, SCOPE, attrs)
    assert (turn.input_text, turn.output_text, turn.tool_definitions, problems) == ("Q", None, (), [])


@pytest.mark.parametrize("impl", IMPLS)
def test_the_calls_asked_for_and_not_run_are_requested_calls_of_the_turn(impl: str) -> None:
    """A step asking for two calls of which one ran: at release the turn has the one that ran and the other as a
    requested call not run; a step asking for none gives none."""
    _impl(impl)
    calls = [{"toolCallId": "call_1", "toolName": "get_weather", "args": {"city": "Paris"}},
             {"toolCallId": "call_2", "toolName": "get_weather", "args": {"city": "Rome"}}]  # fmt: skip

    def build(tracer: Any) -> None:
        def steps(t: Any) -> None:
            _step(t, json.dumps({"text": "", "toolCalls": calls}), lambda t: _tool(t, "call_1", "Paris"))
            _step(t, json.dumps({"text": SUNNY, "toolCalls": []}))

        _run(tracer, {m.MASTRA_AGENT_INPUT: "What is the weather in Paris and Rome?"}, steps)

    [turn], _ = assemble(_spans(SCOPE, build), impl, flush=True)
    assert call_rows(turn) == [("get_weather", "call_1", {"city": "Paris"}, False, None),
                               ("get_weather", "call_2", {"city": "Rome"}, True, None)]  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS)
def test_the_arguments_asked_for_are_the_models(impl: str) -> None:
    """An object is the arguments' JSON; text (what did not parse) is kept as it is; none is not captured."""
    _impl(impl)
    calls = [{"toolCallId": "a", "toolName": "f", "args": {"x": [1, "y"]}},
             {"toolCallId": "b", "toolName": "f", "args": '{"x": '},
             {"toolCallId": "c", "toolName": "f"}]  # fmt: skip
    records, problems = convert(_spans(SCOPE, lambda t: _step(t, json.dumps({"toolCalls": calls}))), impl)
    got = [(r.call_id, r.arguments) for r in records if type(r) is RequestedCall]
    assert (got, problems) == ([("a", '{"x": [1, "y"]}'), ("b", '{"x": '), ("c", None)], [])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("attrs", "ignored"),
    [
        ({m.MASTRA_AGENT_INPUT: 3}, [m.MASTRA_AGENT_INPUT]),
        ({m.MASTRA_AGENT_INPUT: ("a", "b")}, [m.MASTRA_AGENT_INPUT]),
        ({m.MASTRA_AGENT_INPUT: PARIS_Q, m.MASTRA_AGENT_OUTPUT: True}, [m.MASTRA_AGENT_OUTPUT]),
        ({m.MASTRA_AGENT_INPUT: PARIS_Q, "gen_ai.tool.definitions": 3}, []),  # as any GenAI turn: not read
    ],
)
def test_a_wrong_typed_turn_value_is_ignored_and_counted(impl: str, attrs: dict[str, Any], ignored: list[str]) -> None:
    turn, problems = _turn(impl, SCOPE, attrs)
    assert turn.input_text == (PARIS_Q if attrs.get(m.MASTRA_AGENT_INPUT) == PARIS_Q else "")
    assert turn.output_text is None
    assert not turn.tool_definitions
    assert problems == ignored


KEY = m.MASTRA_STEP_OUTPUT


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("output", "n", "ignored"),
    [
        (3, 0, [KEY]),
        (("toolName",), 0, [KEY]),
        ('{"toolCalls": [{"toolName": "f", ', 0, [KEY]),  # cut: not JSON
        (json.dumps([{"toolName": "f"}]), 0, [KEY]),  # not an object
        (json.dumps({"toolCalls": {"toolName": "f"}}), 0, [KEY]),
        (json.dumps({"toolCalls": [{"toolName": "f"}, 3, {"toolName": 4}, {"toolName": " "}]}), 1, [KEY, KEY, KEY]),
        (json.dumps({"toolCalls": [{"toolName": "f", "toolCallId": 7}]}), 1, [KEY]),  # id made a str
        (json.dumps({"toolCalls": [{"toolName": "f", "args": 3}]}), 1, [KEY]),  # arguments not captured
        (json.dumps({"text": "no call", "toolCalls": []}), 0, []),
        ("not json, names no tool", 0, []),  # asks for no call: not read
    ],
)
def test_a_step_output_that_cannot_be_read_is_ignored_and_counted(impl: str, output: Any, n: int,
                                                                   ignored: list[str]) -> None:  # fmt: skip
    _impl(impl)
    records, problems = convert(_spans(SCOPE, lambda t: _step(t, output)), impl)
    assert [type(r).__name__ for r in records] == ["Span"] + ["RequestedCall"] * n
    assert problems == ignored


@pytest.mark.parametrize("impl", IMPLS)
def test_the_requested_calls_of_a_step_are_bounded(impl: str) -> None:
    from monitor.normalize._requested import MAX_REQUESTED_PER_SPAN

    _impl(impl)
    calls = [{"toolCallId": f"c{i}", "toolName": "f", "args": {}} for i in range(MAX_REQUESTED_PER_SPAN + 2)]
    records, problems = convert(_spans(SCOPE, lambda t: _step(t, json.dumps({"toolCalls": calls}))), impl)
    assert sum(type(r) is RequestedCall for r in records) == MAX_REQUESTED_PER_SPAN
    assert problems == [KEY, KEY]


@pytest.mark.parametrize("impl", IMPLS)
def test_another_scopes_spans_of_these_shapes_are_read_as_genai(impl: str) -> None:
    """The same attributes under another tracer scope: read as any GenAI span, the `mastra.*` keys not read, nothing
    counted (no input, no answer, no tools offered, no requested call)."""
    _impl(impl)
    calls = [{"toolCallId": "call_1", "toolName": "get_weather", "args": {"city": "Paris"}}]
    attrs = {m.MASTRA_AGENT_INPUT: PARIS_Q, m.MASTRA_AGENT_OUTPUT: json.dumps({"text": SUNNY}),
             "gen_ai.tool.definitions": json.dumps(["get_weather"])}  # fmt: skip
    spans = _spans("my.app", lambda t: _run(t, attrs, lambda t: _step(t, json.dumps({"toolCalls": calls}))))
    records, problems = convert(spans, impl)
    [turn] = [r for r in records if isinstance(r, Turn)]
    assert (turn.input_text, turn.output_text, turn.tool_definitions, problems) == ("", None, (), [])
    assert not any(type(r) is RequestedCall for r in records)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("scope", "error_type", "message", "expected"),
    [
        (SCOPE, "unknown", "no such city", "no such city"),  # Mastra's error without an id: its message
        (SCOPE, "unknown", "", "unknown"),  # no message: what was written
        (SCOPE, "TOOL_EXECUTION_FAILED", "no such city", "TOOL_EXECUTION_FAILED"),  # an id of Mastra's own
        ("my.app", "unknown", "no such city", "unknown"),  # another scope's `unknown` is its own
    ],
)
def test_a_failed_tool_spans_error_is_its_message_when_mastra_names_none(
    impl: str, scope: str, error_type: str, message: str, expected: str
) -> None:
    _impl(impl)

    def build(tracer: Any) -> None:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                 "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.arguments": '{"city": "Atlantis"}',
                 "error.type": error_type}  # fmt: skip
        with tracer.start_as_current_span("execute_tool get_weather", attributes=attrs) as span:
            span.set_status(Status(StatusCode.ERROR, message or None))

    records, problems = convert(_spans(scope, build), impl)
    assert ([r.error_type for r in records], problems) == ([expected], [])
