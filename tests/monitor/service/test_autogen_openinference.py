"""AutoGen AgentChat traced by its own GenAI spans and by OpenInference beside them: the turns a user means.

openinference-instrumentation-autogen-agentchat wraps AgentChat's methods; AutoGen's own spans (autogen-core, on the
global TracerProvider) are still made, so each agent run is an `invoke_agent {agent}` span (autogen-core; no input,
no arguments) holding the OpenInference AGENT span `{agent}.on_messages_stream` (`graph.node.id` the agent; its
`input.value` JSON of the method's bound arguments, `{"messages": [...], "cancellation_token": ...}`, each message
the repr of AgentChat's message, `id='...' source='user' ... content='...' type='TextMessage'`; no output, its status
OK, an `exception` event of the generator's CancelledError), holding a TOOL span `{agent}.{tool}` (`tool.name`, the
arguments as `tool.parameters` and `input.value`, the result, no call id) that holds autogen-core's `execute_tool`
span (its call id, no arguments). A team's `run_stream` is a root CHAIN span `{team}.run_stream` whose `input.value`
is `{"task": ...}`; the team's runtime starts a new trace for each message it delivers, so the agents' runs are in
other traces than the team's span. No LLM span with a ReplayChatCompletionClient (only OpenAI's clients are wrapped):
nothing requested, no tool offered.

The spans are captures of real runs, offline, as OTLP JSON, one export request a line (exception stack traces
dropped, memory addresses in reprs written `0x0`), of autogen-agentchat / autogen-core / autogen-ext 0.7.5 with
openinference-instrumentation-autogen-agentchat 0.1.22 (openinference-instrumentation 0.1.72, opentelemetry-sdk
1.45.2), made as test_native_producers' autogen_* captures (an AssistantAgent `weather_agent`, one FunctionTool
`get_weather(city)`, a ReplayChatCompletionClient returning FunctionCall `call_1` then the answer; reflect_on_tool_use):
autogen_openinference_tool (`agent.run(task=...)`), autogen_openinference_raises (the tool raises
`RuntimeError("weather service down")`), autogen_openinference_team (the agent in a RoundRobinGroupChat on a
SingleThreadedAgentRuntime given the TracerProvider).

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import pytest

from monitor.records import InputMark, ToolCall, Turn
from tests.monitor.service.captures import call_rows, capture, captured_turns, input_marks, offered_names
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert

QUESTION = "What is the weather in Paris?"
PARIS = {"city": "Paris"}
WEATHER_CALL = ("get_weather", "call_1", PARIS, False, None)
SCOPE = "openinference.instrumentation.autogen_agentchat"


def _rows(turns: list[Turn]) -> list[tuple[object, ...]]:
    return [(t.agent, t.input_text, call_rows(t), offered_names(t)) for t in turns]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("name", "error"), [("tool", None), ("raises", "RuntimeError")])
def test_an_autogen_run_with_openinference_is_one_turn_with_its_input_and_arguments(
    impl: str, name: str, error: str | None
) -> None:
    """autogen-core's `invoke_agent` span is the one turn (the AGENT span under it a step of it, not a second turn);
    its input the user's message the AGENT span records; the call once, with autogen-core's call id and error type
    and OpenInference's arguments (the arguments autogen-core alone lacks)."""
    turns = captured_turns(f"autogen_openinference_{name}", impl)
    assert _rows(turns) == [("weather_agent", QUESTION, [("get_weather", "call_1", PARIS, False, error)], [])]


@pytest.mark.parametrize("impl", IMPLS)
def test_an_autogen_team_with_openinference_is_one_turn_of_its_agent_given_the_task(impl: str) -> None:
    """The team's `run_stream` span (a root CHAIN span in a trace of its own, no call) is no turn; the agent's run is
    the turn, its input the task the team handed it (the gap left by autogen-core alone, test_native_producers)."""
    turns = captured_turns("autogen_openinference_team", impl)
    assert _rows(turns) == [("weather_agent", QUESTION, [WEATHER_CALL], [])]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["tool", "raises", "team"])
def test_autogens_agent_span_under_its_turn_is_a_step_giving_its_input(impl: str, name: str) -> None:
    """Each span read once: autogen-core's turn and its call, OpenInference's TOOL span another record of the same
    call (one call in the turn: the spans nest), the AGENT span a parent link and an InputMark of the question."""
    _impl(impl)
    spans = capture(f"autogen_openinference_{name}")
    records, problems = convert(spans, impl)
    assert problems == []
    agent = next(s for s in spans if s.name == "weather_agent.on_messages_stream")
    assert agent in records
    assert input_marks(records) == [(QUESTION, "", agent.span_id)]
    assert [(type(r).__name__, r.agent) for r in records if isinstance(r, Turn)] == [("Turn", "weather_agent")]
    assert sum(type(r) is ToolCall for r in records) == 2


@pytest.mark.parametrize("impl", IMPLS)
def test_openinferences_autogen_spans_alone_are_one_turn_of_the_agent(impl: str) -> None:
    """Without autogen-core's spans (another TracerProvider than the global one given to the instrumentor), the
    root AGENT span is the turn, named after its agent (`graph.node.id`), given the question; the TOOL span the call,
    with its arguments and no id."""
    _impl(impl)
    spans = [s for s in capture("autogen_openinference_tool") if s.scope == SCOPE]
    for s in spans:
        if s.name == "weather_agent.on_messages_stream":
            s.parent_span_id = ""
    turns, _ = assemble(spans, impl, flush=True)
    assert _rows(turns) == [("weather_agent", QUESTION, [("get_weather", "", PARIS, False, None)], [])]
    assert not any(isinstance(r, InputMark) for r in convert(spans, impl)[0])
