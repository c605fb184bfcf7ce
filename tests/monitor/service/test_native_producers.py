"""Frameworks that trace themselves with GenAI spans: Strands Agents and Microsoft AutoGen AgentChat, the turns a
user means.

The spans are captures of real runs, offline, as OTLP JSON, one export request a line (exception stack traces
dropped: no machine path), opentelemetry-sdk 1.45.1:
- strands_*: strands-agents 1.62.0, an Agent `weather_agent` with one @tool `get_weather(city)`, its model a Model
  subclass that streams a tool use `get_weather({"city": "Paris"})` (id `call_1`), then an answer. Strands' tracer
  on the global TracerProvider, OTEL_SEMCONV_STABILITY_OPT_IN:
  - strands_default (unset: the messages in `gen_ai.*.message` / `gen_ai.choice` events) and strands_latest
    (`gen_ai_latest_experimental`: `gen_ai.client.inference.operation.details` events, the tool span's arguments
    as attributes): two runs of the agent, the second `And in Oslo?` (`get_weather({"city": "Oslo"})`, `call_2`).
  - strands_latest_tools: one run, `gen_ai_latest_experimental,gen_ai_tool_definitions`.
  - strands_attributes: one run, `...,gen_ai_tool_definitions,gen_ai_span_attributes_only` (no events: the
    messages as span attributes).
  - strands_raises: default conventions, the tool raises `RuntimeError("weather service down")`; the model answers.
  - strands_unknown: latest conventions, the model asks for `get_forecast`, which the agent lacks.
- autogen_*: autogen-agentchat / autogen-core / autogen-ext 0.7.5, an AssistantAgent `weather_agent` with one
  FunctionTool `get_weather(city)`, its model a ReplayChatCompletionClient returning a FunctionCall
  (`get_weather`, `call_1`) then the answer; the global TracerProvider. autogen_tool: `agent.run(task=...)`;
  autogen_raises: the same, the tool raising; autogen_team: the agent in a RoundRobinGroupChat on a
  SingleThreadedAgentRuntime given the TracerProvider (its `autogen process/publish/...` spans around the agent's).
  AutoGen 0.7.5 records no messages, no arguments and no model spans.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import pytest

from monitor.records import RequestedCall
from tests.monitor.service.captures import call_rows, capture, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert

QUESTION = "What is the weather in Paris?"
PARIS = {"city": "Paris"}
WEATHER_CALL = ("get_weather", "call_1", PARIS, False, None)
NAMED_ONLY = ({"type": "function", "name": "get_weather"},)


# ---- Strands Agents ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("mode", ["default", "latest"])
def test_each_strands_run_is_one_turn_with_its_input_answer_and_executed_call(impl: str, mode: str) -> None:
    """Each `invoke_agent` span is a turn of its agent (the event loop cycles and chat spans under it are not), its
    input the run's own question (the second run's model sees the first as history), its answer the agent's; the
    call the model asked for on its chat span is the call that ran, once, with its arguments."""
    turns = captured_turns(f"strands_{mode}", impl)
    assert [(t.agent, t.input_text, (t.output_text or "").strip(), call_rows(t)) for t in turns] == [
        ("weather_agent", QUESTION, "It is sunny in Paris.", [WEATHER_CALL]),
        ("weather_agent", "And in Oslo?", "It is sunny in Oslo.", [("get_weather", "call_2", {"city": "Oslo"},
                                                                     False, None)]),
    ]  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["strands_default", "strands_latest", "strands_latest_tools", "strands_attributes"])
def test_the_strands_model_request_is_read_and_reconciled_with_the_call_that_ran(impl: str, name: str) -> None:
    """The chat spans' tool uses (in their events, or in `gen_ai.output.messages` when Strands writes attributes
    only) are requested calls with their arguments: reconciled with the calls that ran, none left as never run."""
    _impl(impl)
    records, problems = convert(capture(name), impl)
    requested = [(r.name, r.call_id, r.arguments) for r in records if isinstance(r, RequestedCall)]
    assert requested[0] == ("get_weather", "call_1", '{"city": "Paris"}')
    assert problems == []
    for turn in captured_turns(name, impl):
        assert [row[3] for row in call_rows(turn)] == [False]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["strands_latest_tools", "strands_attributes"])
def test_strands_tool_definitions_are_the_tools_offered(impl: str, name: str) -> None:
    """With `gen_ai_tool_definitions`, Strands records the agent's tools on its `invoke_agent` span."""
    [turn] = captured_turns(name, impl)
    assert (turn.agent, turn.input_text, call_rows(turn)) == ("weather_agent", QUESTION, [WEATHER_CALL])
    assert offered_names(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("mode", ["default", "latest"])
def test_strands_tool_names_are_the_tools_offered(impl: str, mode: str) -> None:
    """Without `gen_ai_tool_definitions` Strands records only the tools' names, as JSON text of a list in its own
    `gen_ai.agent.tools` on the invoke_agent span: each is a tool offered, by name only (no description, no
    parameters: no schema to check against)."""
    turns = captured_turns(f"strands_{mode}", impl)
    assert [t.tool_definitions for t in turns] == [({"type": "function", "name": "get_weather"},)] * 2


@pytest.mark.parametrize("impl", IMPLS)
def test_strands_tool_names_are_offered_when_its_messages_are_attributes_too(impl: str) -> None:
    """`gen_ai_span_attributes_only` puts the messages on the span (the turn is read where the conventions put
    them); without its definitions the names are the tools offered there too. Definitions, when recorded, win."""
    spans = capture("strands_attributes")
    [with_defs] = captured_turns("strands_attributes", impl)
    assert offered_names(with_defs) == ["get_weather"] and with_defs.tool_definitions != NAMED_ONLY
    for span in spans:
        if "gen_ai.tool.definitions" in span.attributes:
            span.attributes = {k: v for k, v in span.attributes.items() if k != "gen_ai.tool.definitions"}
            span.attributes["gen_ai.agent.tools"] = '["get_weather", "get_forecast", 7]'
    turns, _ = assemble(spans, impl, flush=True)
    [turn] = turns
    assert (turn.agent, turn.input_text) == ("weather_agent", QUESTION)
    assert turn.tool_definitions == (*NAMED_ONLY, {"type": "function", "name": "get_forecast"})


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("value", ["not json", '{"get_weather": 1}', "[[1]]", 3, "[]"])
def test_strands_tool_names_that_are_no_list_of_names_offer_nothing(impl: str, value: object) -> None:
    spans = capture("strands_attributes")
    for span in spans:
        if "gen_ai.tool.definitions" in span.attributes:
            span.attributes = {k: v for k, v in span.attributes.items() if k != "gen_ai.tool.definitions"}
            span.attributes["gen_ai.agent.tools"] = value
    turns, _ = assemble(spans, impl, flush=True)
    assert [offered_names(t) for t in turns] == [[]]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_strands_tool_that_raised_is_one_failed_call(impl: str) -> None:
    """Strands fails the tool span (status ERROR, its message the exception's, an `exception` event, no
    `error.type`): one failed call with its arguments, not also a requested call never run; the run goes on."""
    [turn] = captured_turns("strands_raises", impl)
    assert (turn.agent, turn.input_text) == ("weather_agent", QUESTION)
    assert call_rows(turn) == [("get_weather", "call_1", PARIS, False, "weather service down")]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_strands_call_of_a_tool_the_agent_lacks_is_one_failed_call_of_that_name(impl: str) -> None:
    [turn] = captured_turns("strands_unknown", impl)
    assert call_rows(turn) == [("get_forecast", "call_1", PARIS, False, "Unknown tool: get_forecast")]


# ---- AutoGen AgentChat -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["autogen_tool", "autogen_team"])
def test_an_autogen_run_is_one_turn_of_its_agent_with_its_call(impl: str, name: str) -> None:
    """The agent's `invoke_agent` span is the turn (`create_agent`, and the runtime's messaging spans of a team, are
    not); its `execute_tool` span the call, with its id. AutoGen records no arguments (unknown, not wrong), no model
    span (nothing requested, no tools offered) and no input on its spans."""
    [turn] = captured_turns(name, impl)
    assert turn.agent == "weather_agent"
    assert call_rows(turn) == [("get_weather", "call_1", None, False, None)]
    assert offered_names(turn) == []


@pytest.mark.parametrize("impl", IMPLS)
def test_an_autogen_tool_that_raised_is_one_failed_call_of_its_error_type(impl: str) -> None:
    [turn] = captured_turns("autogen_raises", impl)
    assert call_rows(turn) == [("get_weather", "call_1", None, False, "RuntimeError")]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_lone_autogen_agent_run_has_no_input_to_read(impl: str) -> None:
    """`AssistantAgent.run(task=...)` records the task nowhere: the turn's input is empty, not another text."""
    [turn] = captured_turns("autogen_tool", impl)
    assert turn.input_text == ""


@pytest.mark.xfail(
    strict=True,
    reason="a team's task is only in the AutoGen runtime's own `message` attribute (JSON of its GroupChatStart"
    " event) on an `autogen process` span, no GenAI attribute: reading AutoGen's runtime payloads is a design"
    " decision",
)
@pytest.mark.parametrize("impl", IMPLS)
def test_an_autogen_team_turn_has_its_task_as_input(impl: str) -> None:
    [turn] = captured_turns("autogen_team", impl)
    assert turn.input_text == QUESTION
