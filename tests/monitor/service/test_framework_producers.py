"""pydantic-ai's own instrumentation and the OpenAI Agents SDK through OpenInference: the turns a user means.

The spans are captures of real runs, offline, as OTLP JSON, one export request a line (the code and process
attributes, exception stack traces and the model client's base URL dropped: no machine path or address):
- pydantic_ai_*: pydantic-ai-slim 2.68.0 (opentelemetry-sdk 1.45.2), an agent `weather_agent` whose FunctionModel
  calls `get_weather(city)` once, then answers; instrumentation version 5 (the default: `default_*`), 2 (`running
  tool` / `agent run` spans, `tool_arguments`) and 6. `*_retry`: the model first calls the tool with invalid
  arguments (`{"town": 3}`), pydantic-ai fails the call on validation and the model calls it again, well.
- openai_agents_*: openai-agents 0.24.0 traced by openinference-instrumentation-openai-agents 2.6.0 (openai 3.57.0),
  the agents' model an OpenAIResponsesModel (`responses_*`) or OpenAIChatCompletionsModel (`chat_*`) on a fake
  OpenAI server on the loopback: `*_tool` runs `weather_agent` (a call of `get_weather`, then an answer);
  `*_handoff` runs `triage_agent`, whose model hands off to `weather_agent`, which runs the same way.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.otlp import Span
from monitor.records import HandoffMark, InputMark, RequestedCall, Turn
from tests.monitor.service.captures import call_rows, capture, captured_turns, offered_names
from tests.monitor.service.spans import new_tracer
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert, decoded

QUESTION = "What is the weather in Paris?"
PARIS = {"city": "Paris"}


# ---- pydantic-ai -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", ["default", "v2", "v6"])
def test_a_pydantic_ai_run_is_one_turn_with_its_executed_call(impl: str, version: str) -> None:
    """The agent span is the turn (its input from `pydantic_ai.all_messages`, its answer `final_result`); the call
    the model requested is the call that ran, once, with its arguments; the tools offered are the chat spans'."""
    [turn] = captured_turns(f"pydantic_ai_{version}_call", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", QUESTION, "It is sunny in Paris.")
    assert call_rows(turn) == [("get_weather", "call_1", PARIS, False, None)]
    assert offered_names(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", ["default", "v2"])
def test_a_pydantic_ai_call_with_invalid_arguments_is_a_failed_call_then_the_retry_another(
    impl: str, version: str
) -> None:
    """The call pydantic-ai refused on validation ran as far as pydantic-ai let it: a call with its (bad) arguments
    and an error; the retried call is the second; both requested calls are these, none counted as never run."""
    [turn] = captured_turns(f"pydantic_ai_{version}_retry", impl)
    assert (turn.agent, turn.input_text) == ("weather_agent", QUESTION)
    assert call_rows(turn) == [
        ("get_weather", "call_1", {"town": 3}, False, "error"),
        ("get_weather", "call_2", PARIS, False, None),
    ]


# ---- openai-agents through OpenInference -------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_openai_agents_run_holds_its_executed_call_once(impl: str, api: str) -> None:
    """The function span (a TOOL span without a call id) is the call the model requested: paired by name, once,
    with its arguments. The Responses model's span records the tools it offered; the chat model's records none."""
    [turn] = captured_turns(f"openai_agents_{api}_tool", impl)
    assert call_rows(turn) == [("get_weather", "", PARIS, False, None)]
    assert offered_names(turn) == (["get_weather"] if api == "responses" else [])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_openai_agents_handoff_is_recognised_and_no_call(impl: str, api: str) -> None:
    """The handoff span is a handoff mark named as the tool the model called (`transfer_to_weather_agent`): the
    requested transfer is no call, neither run nor counted as never run; the sub-agent's call is there once."""
    _impl(impl)
    records, _ = convert(capture(f"openai_agents_{api}_handoff"), impl)
    assert [r.name for r in records if isinstance(r, HandoffMark)] == ["transfer_to_weather_agent"]
    requested = sorted(r.name for r in records if isinstance(r, RequestedCall))
    assert requested == ["get_weather", "transfer_to_weather_agent"]
    turns = captured_turns(f"openai_agents_{api}_handoff", impl)
    assert [call_rows(t) for t in turns] == [[], [("get_weather", "", PARIS, False, None)]]
    if api == "responses":
        assert [offered_names(t) for t in turns] == [["transfer_to_weather_agent"], ["get_weather"]]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_openai_agents_run_is_one_turn_of_its_agent_with_its_input(impl: str, api: str) -> None:
    """The agent span is the turn (the workflow's root span above it only a parent link); its input is the first
    user message its model saw, which openinference-instrumentation-openai-agents 2.6.0 records on the LLM spans
    only."""
    [turn] = captured_turns(f"openai_agents_{api}_tool", impl)
    assert (turn.agent, turn.input_text) == ("weather_agent", QUESTION)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_openai_agents_handoff_is_one_turn_per_agent(impl: str, api: str) -> None:
    """Each agent span is a turn of its agent, given the question its model saw: the triage agent's (its handoff no
    call), then the weather agent's with its call."""
    turns = captured_turns(f"openai_agents_{api}_handoff", impl)
    assert [(t.agent, t.input_text, call_rows(t)) for t in turns] == [
        ("triage_agent", QUESTION, []),
        ("weather_agent", QUESTION, [("get_weather", "", PARIS, False, None)]),
    ]


# ---- openai-agents through OpenInference: the rules, on spans of the real OTel SDK -------------------------------

OA_SCOPE = "openinference.instrumentation.openai_agents"


def _oa_run(scope: str, users: tuple[str, ...] = ("first", "second"), *, root_input: str | None = None,
            agent_input: str | None = None, agents: bool = True) -> list[Span]:  # fmt: skip
    """A run as openinference-instrumentation-openai-agents 2.6.0 records it (under the tracer scope `scope`): the
    workflow's root AGENT span (`root_input` its input.value), a CHAIN, the agent span `a` (`agent_input` its
    input.value), a CHAIN `turn` per model request (an LLM span whose first user message is each of `users`), and a
    TOOL span. Without `agents`, the root and agent spans are left out (never received)."""
    provider, _, memory = new_tracer()
    tracer = provider.get_tracer(scope)
    root: dict[str, Any] = {"openinference.span.kind": "AGENT"}
    if root_input is not None:
        root["input.value"] = root_input
    agent: dict[str, Any] = {"openinference.span.kind": "AGENT", "agent.name": "a", "graph.node.id": "a"}
    if agent_input is not None:
        agent["input.value"] = agent_input
    with tracer.start_as_current_span("Agent workflow", attributes=root):
        with tracer.start_as_current_span("Agent workflow", attributes={"openinference.span.kind": "CHAIN"}):
            with tracer.start_as_current_span("a", attributes=agent):
                for text in users:
                    with tracer.start_as_current_span("turn", attributes={"openinference.span.kind": "CHAIN"}):
                        llm = {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "system",
                               "llm.input_messages.0.message.content": "be brief",
                               "llm.input_messages.1.message.role": "user",
                               "llm.input_messages.1.message.content": text,
                               "input.value": json.dumps([{"role": "user", "content": text}])}  # fmt: skip
                        with tracer.start_as_current_span("response", attributes=llm):
                            pass
                tool = {"openinference.span.kind": "TOOL", "tool.name": "get_weather", "input.value": json.dumps(PARIS)}
                with tracer.start_as_current_span("get_weather", attributes=tool):
                    pass
    provider.shutdown()
    spans = decoded(memory.get_finished_spans())
    return spans if agents else [s for s in spans if s.attributes["openinference.span.kind"] != "AGENT"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("root_input", [None, "hello"])
def test_the_workflow_span_of_openai_agents_is_a_parent_link_and_each_agent_span_a_turn(
    impl: str, root_input: str | None
) -> None:
    """Of openai-agents' spans (their tracer scope), the root AGENT span (the workflow, whether or not a version
    records the run's input on it) is a parent link, the agent span a turn of its agent; each LLM span gives the user
    message its model saw (InputMark, no call)."""
    _impl(impl)
    spans = _oa_run(OA_SCOPE, root_input=root_input)
    records, problems = convert(spans, impl)
    assert problems == []
    assert [(t.agent, t.input_text) for t in records if isinstance(t, Turn)] == [("a", "")]
    root = next(s for s in spans if not s.parent_span_id)
    assert root in records
    assert [(r.arguments, r.parent_span_id) for r in records if isinstance(r, InputMark)] == [
        ("first", spans[0].span_id),
        ("second", spans[2].span_id),
    ]
    assert not [r for r in records if isinstance(r, InputMark) and r.name]


@pytest.mark.parametrize("impl", IMPLS)
def test_other_openinference_producers_keep_the_root_agent_span_as_their_turn(impl: str) -> None:
    """The same shape from another tracer scope: the root AGENT span is the turn (its input, if any), the agent span
    under it a step; the LLM spans give no input."""
    _impl(impl)
    records, _ = convert(_oa_run("tests", root_input="hello"), impl)
    assert [(t.agent, t.input_text) for t in records if isinstance(t, Turn)] == [("Agent workflow", "hello")]
    assert not [r for r in records if isinstance(r, InputMark)]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("order", ["as exported", "reversed"])
def test_an_openai_agents_turn_is_given_the_user_message_of_its_first_model_request(
    impl: str, flush: bool, order: str
) -> None:
    """The turn's input is the user message of its first LLM span by start time (whatever the arrival order); the
    input marks leave its calls."""
    _impl(impl)
    spans = _oa_run(OA_SCOPE)
    if order == "reversed":
        spans.reverse()
    turns, a = assemble(spans, impl, flush=flush)
    assert [(t.agent, t.input_text, [c.name for c in t.calls]) for t in turns] == [("a", "first", ["get_weather"])]
    assert a.stats.duplicates == 0 and a.stats.late_calls == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_an_agent_span_with_its_own_input_keeps_it(impl: str) -> None:
    _impl(impl)
    turns, _ = assemble(_oa_run(OA_SCOPE, agent_input="own question"), impl)
    assert [(t.agent, t.input_text) for t in turns] == [("a", "own question")]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("users", [("first",), ()])
def test_input_marks_without_their_turn_make_no_turn_and_are_no_call(impl: str, users: tuple[str, ...]) -> None:
    """The agent spans never received: the call is judged alone (turnless, no input), the marks dropped; marks alone
    make no turn."""
    _impl(impl)
    spans = _oa_run(OA_SCOPE, users, agents=False)
    turns, a = assemble(spans, impl, flush=True)
    assert [(t.turnless, t.input_text, [c.name for c in t.calls]) for t in turns] == [(True, "", ["get_weather"])]
    marks_only = [s for s in spans if s.attributes["openinference.span.kind"] != "TOOL"]
    turns, a = assemble(marks_only, impl, flush=True)
    assert turns == [] and a.stats.late_calls == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openai_agents_turn_of_a_conversation_is_given_its_own_question_not_the_first_of_the_history(
    impl: str,
) -> None:
    """A later turn of a conversation (the session's history given to the model): the model's messages start with the
    earlier questions and answers; the turn's input is the user message that started it, the latest one its first
    model request saw."""
    _impl(impl)
    provider, _, memory = new_tracer()
    tracer = provider.get_tracer(OA_SCOPE)
    agent = {"openinference.span.kind": "AGENT", "agent.name": "a", "graph.node.id": "a"}
    history = [("system", "be brief"), ("user", "weather in Oslo?"), ("assistant", "rainy"),
               ("user", "and in Paris?")]  # fmt: skip
    llm: dict[str, Any] = {"openinference.span.kind": "LLM"}
    for i, (role, text) in enumerate(history):
        llm[f"llm.input_messages.{i}.message.role"] = role
        llm[f"llm.input_messages.{i}.message.content"] = text
    with tracer.start_as_current_span("Agent workflow", attributes={"openinference.span.kind": "AGENT"}):
        with tracer.start_as_current_span("a", attributes=agent):
            with tracer.start_as_current_span("response", attributes=llm):
                pass
    provider.shutdown()
    turns, _ = assemble(decoded(memory.get_finished_spans()), impl, flush=True)
    assert [(t.agent, t.input_text) for t in turns] == [("a", "and in Paris?")]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("form", ["content", "contents"])
def test_an_openai_agents_turn_whose_model_input_text_is_hidden_has_no_input(impl: str, form: str) -> None:
    """OPENINFERENCE_HIDE_INPUT_TEXT leaves `__REDACTED__` as the text of each input message (its content, or each
    content part's text): not captured, as a hidden `input.value` is; the turn is not given `__REDACTED__` as its
    input (rules and cases routed by input text would take it for the user's question)."""
    _impl(impl)
    provider, _, memory = new_tracer()
    tracer = provider.get_tracer(OA_SCOPE)
    agent = {"openinference.span.kind": "AGENT", "agent.name": "a", "graph.node.id": "a"}
    llm: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user"}
    if form == "content":
        llm["llm.input_messages.0.message.content"] = "__REDACTED__"
    else:
        llm["llm.input_messages.0.message.contents.0.message_content.type"] = "text"
        llm["llm.input_messages.0.message.contents.0.message_content.text"] = "__REDACTED__"
    with tracer.start_as_current_span("Agent workflow", attributes={"openinference.span.kind": "AGENT"}):
        with tracer.start_as_current_span("a", attributes=agent):
            with tracer.start_as_current_span("response", attributes=llm):
                pass
    provider.shutdown()
    spans = decoded(memory.get_finished_spans())
    records, _ = convert(spans, impl)
    assert not [r for r in records if isinstance(r, InputMark)]
    turns, _ = assemble(spans, impl, flush=True)
    assert [(t.agent, t.input_text) for t in turns] == [("a", "")]
