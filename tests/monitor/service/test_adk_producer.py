"""Google's Agent Development Kit (google-adk), which traces itself with the GenAI conventions: the turns a user means.

The spans are captures of real runs, offline, as OTLP JSON, one export request a line (exception stack traces
dropped: no machine path): google-adk 2.13.0 (opentelemetry-sdk 1.44.0), an LlmAgent `weather_agent` with one
FunctionTool `get_weather(city)` run by the InMemoryRunner, its model a BaseLlm subclass that asks for
`get_weather({"city": "Paris"})` (call id `call_1`), then answers. ADK's default telemetry schema (2: `invoke_workflow`
/ `invoke_agent` / `generate_content` / `execute_tool` spans), the content captured
(`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`) unless said otherwise:
- adk_tool: that run. adk_nocontent: the same without content capture (ADK's default).
- adk_unknown: the model asks for `get_forecast`, which the agent does not have: ADK runs an `execute_tool` span that
  fails (`ValueError`) and tells the model, which answers.
- adk_raises: `get_weather` raises: the span fails, ADK records no call id (`<not specified>`) and the run fails.
- adk_transfer: `triage_agent` (sub-agent `weather_agent`) whose model calls ADK's `transfer_to_agent` tool
  (`{"agent_name": "weather_agent"}`, id `call_0`); `weather_agent` then runs as in adk_tool.
- adk_legacy, adk_legacy_transfer: adk_tool and adk_transfer in ADK's legacy schema
  (`ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`, supported until 2027-03-31): `call_llm` spans with ADK's own
  `gcp.vertex.agent.llm_request` / `llm_response`, the arguments in `gcp.vertex.agent.tool_call_args`.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.normalize import GenAIConvention, Normalizer
from monitor.otlp import Span
from monitor.records import Turn
from tests.monitor.service.captures import call_rows, captured_turns, input_marks, offered_names
from tests.monitor.service.spans import new_tracer
from tests.monitor.service.test_normalize_c import assert_same, handed_to_python, needs_c
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert, decoded

QUESTION = "What is the weather in Paris?"
PARIS = {"city": "Paris"}
WEATHER_CALL = ("get_weather", "call_1", PARIS, False, None)


@pytest.mark.parametrize("impl", IMPLS)
def test_an_adk_run_is_one_turn_of_its_agent_with_its_executed_call_once(impl: str) -> None:
    """The `invoke_agent` span is the turn (the `invoke_workflow` span above it a parent link); the call the model
    asked for on its `generate_content` span is the call that ran, once, with its arguments; the tools offered are
    the model spans' `gen_ai.tool.definitions`."""
    [turn] = captured_turns("adk_tool", impl)
    assert turn.agent == "weather_agent"
    assert turn.conversation_id == "s1"
    assert call_rows(turn) == [WEATHER_CALL]
    assert sorted(offered_names(turn)) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
def test_without_content_capture_the_call_is_there_its_arguments_not_captured(impl: str) -> None:
    """ADK's default: no messages, arguments or tool definitions; the call ran, its arguments unknown (None)."""
    [turn] = captured_turns("adk_nocontent", impl)
    assert turn.agent == "weather_agent"
    assert call_rows(turn) == [("get_weather", "call_1", None, False, None)]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_call_of_a_tool_the_agent_lacks_is_one_failed_call_of_that_name(impl: str) -> None:
    """ADK fails the call of an unknown tool in an `execute_tool` span: the call as the model made it, failed, once
    (the requested call is that call), the tools offered without it."""
    [turn] = captured_turns("adk_unknown", impl)
    assert call_rows(turn) == [("get_forecast", "call_1", PARIS, False, "ValueError")]
    assert sorted(offered_names(turn)) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_tool_that_raised_is_one_failed_call_not_also_one_never_run(impl: str) -> None:
    """A raising tool's span has no call id (ADK writes `<not specified>`): the failed call is the call the model
    asked for (`call_1`), paired by name, not a second call that never ran."""
    [turn] = captured_turns("adk_raises", impl)
    assert turn.agent == "weather_agent"
    assert call_rows(turn) == [("get_weather", "", PARIS, False, "RuntimeError")]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_transfer_is_the_call_that_ran_in_the_first_agent_and_the_sub_agent_its_own_turn(impl: str) -> None:
    """ADK transfers by a tool that runs (`transfer_to_agent`, an `execute_tool` span): a call of the triage turn with
    the agent it named; the sub-agent's `invoke_agent` span (a sibling under the workflow span) is a turn of its own,
    with its call once. Each turn's requested calls are its calls that ran."""
    turns = captured_turns("adk_transfer", impl)
    assert [(t.agent, call_rows(t)) for t in turns] == [
        ("triage_agent", [("transfer_to_agent", "call_0", {"agent_name": "weather_agent"}, False, None)]),
        ("weather_agent", [WEATHER_CALL]),
    ]
    # A sub-agent may transfer back to its parent: ADK offers it the transfer tool too.
    assert [sorted(offered_names(t)) for t in turns] == [["transfer_to_agent"], ["get_weather", "transfer_to_agent"]]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["adk_tool", "adk_transfer"])
def test_an_adk_turn_has_its_input(impl: str, name: str) -> None:
    """ADK's `invoke_agent` span records no input: each turn's is the user's question its first model request was
    given, the sub-agent's too (its model's latest user messages are ADK's transcript of the triage agent's call,
    which are not the user's)."""
    assert {t.input_text for t in captured_turns(name, impl)} == {QUESTION}


LEGACY = (
    "ADK's legacy schema (opt-in) puts the arguments in gcp.vertex.agent.tool_call_args, which holds '{}' when"
    " content capture is off (no way to tell from a call without arguments), and the model's calls in call_llm's"
    " gcp.vertex.agent.llm_response (Gemini content, not GenAI messages): neither is read"
)


@pytest.mark.xfail(strict=True, reason=LEGACY)
@pytest.mark.parametrize("impl", IMPLS)
def test_a_legacy_adk_run_has_its_call_with_its_arguments(impl: str) -> None:
    [turn] = captured_turns("adk_legacy", impl)
    assert call_rows(turn) == [WEATHER_CALL]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_legacy_adk_run_is_one_turn_per_agent_with_its_calls(impl: str) -> None:
    """What the legacy schema gives today: the turns and the calls that ran, their arguments not captured."""
    assert [(t.agent, call_rows(t)) for t in captured_turns("adk_legacy", impl)] == [
        ("weather_agent", [("get_weather", "call_1", None, False, None)])
    ]
    assert [(t.agent, call_rows(t)) for t in captured_turns("adk_legacy_transfer", impl)] == [
        ("triage_agent", [("transfer_to_agent", "call_0", None, False, None)]),
        ("weather_agent", [("get_weather", "call_1", None, False, None)]),
    ]


# ---- the input of an ADK turn: the rules, on spans of the real OTel SDK ------------------------------------------

ADK_SCOPE = "gcp.vertex.agent"
# ADK's transcript of another agent's event, given to the model as a user message (2.x; 1.x: "For context:" alone).
PREAMBLE = "For context: below is a transcript of what another agent did, quoted between <<<BEGIN_QUOTED_AGENT_"


def _user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": t} for t in texts]}


TRANSCRIPT = _user(PREAMBLE, "[triage_agent] called tool `transfer_to_agent` with parameters: {}")
OLD_TRANSCRIPT = _user("For context:", "[triage_agent] said: over to you")
TOOL_RESPONSE = {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1", "response": {"ok": True}}]}
CALL = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": PARIS}]}
# A later turn of a conversation, after a transfer: history, the question, the transcript, a call and its response.
LATER = [_user("weather in Oslo?"), {"role": "assistant", "parts": [{"type": "text", "content": "rainy"}]},
         _user("and in Paris?"), TRANSCRIPT, OLD_TRANSCRIPT, CALL, TOOL_RESPONSE]  # fmt: skip


def _adk_run(scope: str, *requests: list[dict[str, Any]] | None) -> list[Span]:
    """A run as google-adk 2.13.0 records it, under the tracer scope `scope`: `invoke_workflow`, `invoke_agent a` (no
    input), a `generate_content` span per request (its messages as `gen_ai.input.messages`, None: not captured) and
    an `execute_tool` span."""
    provider, _, memory = new_tracer()
    tracer = provider.get_tracer(scope)
    with tracer.start_as_current_span("invoke_workflow a", attributes={"gen_ai.operation.name": "invoke_workflow"}):
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
        with tracer.start_as_current_span("invoke_agent a", attributes=agent):
            for messages in requests:
                model: dict[str, Any] = {"gen_ai.operation.name": "generate_content", "gen_ai.agent.name": "a"}
                if messages is not None:
                    model["gen_ai.input.messages"] = json.dumps(messages)
                with tracer.start_as_current_span("generate_content m", attributes=model):
                    pass
            tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": json.dumps(PARIS)}  # fmt: skip
            with tracer.start_as_current_span("execute_tool get_weather", attributes=tool):
                pass
    provider.shutdown()
    return decoded(memory.get_finished_spans())


@pytest.mark.parametrize("impl", IMPLS)
def test_each_adk_model_request_gives_the_latest_user_text_it_was_given(impl: str) -> None:
    """Each `generate_content` span of ADK's scope yields an InputMark (no call, under it) of its latest user message
    with text: not a tool response (a user message of ADK's without text), not ADK's transcript of another agent
    (a user message opening with its `For context:` preamble), not the history before it."""
    _impl(impl)
    spans = _adk_run(ADK_SCOPE, [_user("What is", "the weather?")], LATER, [TRANSCRIPT, TOOL_RESPONSE])
    records, problems = convert(spans, impl)
    assert problems == []
    model = [s.span_id for s in spans if s.name == "generate_content m"]
    assert input_marks(records) == [("What is\nthe weather?", "", model[0]), ("and in Paris?", "", model[1])]
    assert [(t.agent, t.input_text) for t in records if isinstance(t, Turn)] == [("a", "")]


@pytest.mark.parametrize("impl", IMPLS)
def test_other_scopes_model_requests_give_no_input_mark(impl: str) -> None:
    _impl(impl)
    records, _ = convert(_adk_run("tests", [_user("q")], LATER), impl)
    assert input_marks(records) == []


@pytest.mark.parametrize("impl", IMPLS)
def test_an_adk_model_request_without_user_text_gives_no_mark(impl: str) -> None:
    """Content capture off (ADK's default), no messages, or none of the user's with text: no mark, nothing counted."""
    _impl(impl)
    for messages in (None, [], [TOOL_RESPONSE], [TRANSCRIPT, OLD_TRANSCRIPT], [CALL], "not json", {"role": "user"}):
        records, problems = convert(_adk_run(ADK_SCOPE, messages), impl)  # type: ignore[arg-type]
        assert (input_marks(records), problems) == ([], []), messages


@pytest.mark.parametrize("impl", IMPLS)
def test_an_adk_model_requests_structured_messages_give_its_mark(impl: str) -> None:
    """The structured form (an OTLP arrayValue of kvlistValues, as decoded) is read as the JSON text is."""
    _impl(impl)
    [span] = [s for s in _adk_run(ADK_SCOPE, []) if s.name == "generate_content m"]
    part = (("type", "text"), ("content", "q"))
    span.attributes = {**span.attributes, "gen_ai.input.messages": ((("role", "user"), ("parts", (part,))),)}
    records, problems = convert([span], impl)
    assert (input_marks(records), problems) == ([("q", "", span.span_id)], [])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("order", ["as exported", "reversed"])
def test_an_adk_turn_is_given_the_question_of_its_first_model_request(impl: str, order: str) -> None:
    """The earliest mark by start time gives the turn its input, whatever the arrival order; marks are no calls."""
    _impl(impl)
    spans = _adk_run(ADK_SCOPE, LATER, [_user("a later question")])
    if order == "reversed":
        spans.reverse()
    turns, a = assemble(spans, impl, flush=True)
    assert [(t.agent, t.input_text, [c.name for c in t.calls]) for t in turns] == [("a", "and in Paris?",
                                                                                   ["get_weather"])]  # fmt: skip
    assert a.stats.duplicates == 0 and a.stats.late_calls == 0


@needs_c
def test_c_hands_the_model_requests_of_adks_scope_to_python_and_no_other() -> None:
    """The C normalizer gives the same records (it hands ADK's model request spans to Python, which reads the mark);
    another scope's spans stay in C."""
    adk, other = _adk_run(ADK_SCOPE, LATER), _adk_run("tests", LATER)
    with handed_to_python() as handed:
        assert_same(adk)
        assert_same(other)
    assert [s.name for s in handed] == ["generate_content m", "invoke_workflow a"]
    assert all(s.scope == ADK_SCOPE for s in handed)


def test_several_conventions_read_an_adk_model_requests_input_as_the_genai_one_alone() -> None:
    class Nothing:
        def normalize(self, span: Span, problems: list[str]) -> None:
            return None

    spans = _adk_run(ADK_SCOPE, LATER)
    (got, _), (want, _) = Normalizer([Nothing(), GenAIConvention()]).split(spans), Normalizer().split(spans)
    assert input_marks(got) == input_marks(want) == [("and in Paris?", "", spans[0].span_id)]
