"""pydantic-ai traced by its own instrumentation and read again by OpenInference's span processor: the turns a user
means, the same as without it.

openinference-instrumentation-pydantic-ai is no tracer of its own: its OpenInferenceSpanProcessor, added before the
exporting processor, adds OpenInference attributes to pydantic-ai's spans as they end (and sets an unset status OK).
Each span is then both pydantic-ai's GenAI span and an OpenInference one: the agent span `invoke_agent {agent}` an
AGENT span (no `agent.name`; `input.value` the *last* user text message of `pydantic_ai.all_messages`, `output.value`
`final_result`), the `chat` spans LLM spans (`llm.output_messages.*.tool_calls`, `llm.tools.*` beside
`gen_ai.output.messages` and `gen_ai.tool.definitions`), the `execute_tool` spans TOOL spans (`tool.name`,
`tool_call.id`, `tool.parameters` beside the GenAI ones).

The spans are captures of real runs, offline, as OTLP JSON, one export request a line (exception stack traces
dropped: no machine path), of pydantic-ai-slim 2.68.0 with `Agent.instrument_all()` (instrumentation version 5, the
default) and openinference-instrumentation-pydantic-ai 0.1.30 (openinference-instrumentation 0.1.72,
opentelemetry-sdk 1.45.2): an agent `weather_agent` whose FunctionModel calls `get_weather({"city": "Paris"})`
(`call_1`), then answers:
- pydantic_ai_openinference_tool: the tool returns, the model answers "It is sunny in Paris.";
- pydantic_ai_openinference_raises: the tool raises `RuntimeError("weather service down")`, which pydantic-ai lets
  out of the run (the tool span and the agent span failed, an `exception` event each; no `error.type`, the tool
  span's status without a message);
- pydantic_ai_openinference_validated: the model first answers "It is sunny.", an output validator refuses it
  (ModelRetry, a user message of pydantic-ai's retry feedback), the model answers again. OpenInference's
  `input.value` is then that feedback, not the question.

Replayed through the real normalizer (C and Python) and turn assembler, beside pydantic-ai's own capture of the same
version (pydantic_ai_default_call, test_framework_producers).
"""

from __future__ import annotations

import pytest

from monitor.records import InputMark, OfferedTools, RequestedCall, ToolCall, Turn
from tests.monitor.service.captures import call_rows, capture, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert

QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris."
PARIS = {"city": "Paris"}
WEATHER_CALL = ("get_weather", "call_1", PARIS, False, None)


def _summary(turn: Turn) -> tuple[object, ...]:
    return (turn.agent, turn.input_text, turn.output_text, call_rows(turn), offered_names(turn), turn.conversation_id
            is not None)  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS)
def test_a_pydantic_ai_run_read_by_openinference_is_the_same_turn_as_pydantic_ais_own(impl: str) -> None:
    """The agent span is one turn of `weather_agent` (pydantic-ai's `gen_ai.agent.name`, not the span's name), its
    input the question, its answer `final_result`, its call once with its arguments and id, the tool offered: as
    the same run traced by pydantic-ai alone reads."""
    [turn] = captured_turns("pydantic_ai_openinference_tool", impl)
    assert _summary(turn) == ("weather_agent", QUESTION, ANSWER, [WEATHER_CALL], ["get_weather"], True)
    [native] = captured_turns("pydantic_ai_default_call", impl)
    assert _summary(turn) == _summary(native)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["tool", "raises", "validated"])
def test_pydantic_ai_spans_with_openinference_attributes_are_counted_once(impl: str, name: str) -> None:
    """Each span is read once, by one convention: one call per tool span, one requested call and one offer per
    model request that made them (not again from the `llm.*` copies), one turn, no input read from the LLM spans."""
    _impl(impl)
    records, problems = convert(capture(f"pydantic_ai_openinference_{name}"), impl)
    assert problems == []
    chats = 3 if name == "validated" else 2 if name == "tool" else 1
    assert [type(r) for r in records if isinstance(r, Turn | ToolCall | InputMark)].count(ToolCall) == 1
    assert sum(isinstance(r, Turn) for r in records) == 1
    assert [(r.name, r.call_id) for r in records if isinstance(r, RequestedCall)] == [("get_weather", "call_1")]
    assert sum(isinstance(r, OfferedTools) for r in records) == chats
    assert not any(isinstance(r, InputMark) for r in records)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_pydantic_ai_tool_that_raised_is_one_failed_call_in_its_turn(impl: str) -> None:
    """The tool span failed without a message or `error.type`: a failed call (`error`), with its arguments and id,
    the requested call it was; the run failed with it: no answer."""
    [turn] = captured_turns("pydantic_ai_openinference_raises", impl)
    assert _summary(turn) == ("weather_agent", QUESTION, "", [("get_weather", "call_1", PARIS, False, "error")],
                              ["get_weather"], True)  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS)
def test_a_pydantic_ai_run_with_a_validator_retry_keeps_the_question_as_its_input(impl: str) -> None:
    """OpenInference's `input.value` is the last user text of the history, here pydantic-ai's retry feedback: the
    turn's input is read as pydantic-ai's own span gives it (its run's first user message), the question."""
    [turn] = captured_turns("pydantic_ai_openinference_validated", impl)
    assert _summary(turn) == ("weather_agent", QUESTION, ANSWER, [WEATHER_CALL], ["get_weather"], True)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", ["default", "v2"])
def test_a_pydantic_ai_agent_span_made_an_openinference_agent_span_is_still_pydantic_ais(
    impl: str, version: str
) -> None:
    """pydantic-ai's agent span (`invoke_agent`, or `agent run` of instrumentation version 2, which sets no
    operation) given OpenInference's kind and another `input.value` is read as pydantic-ai's: same turn."""
    _impl(impl)
    spans = capture(f"pydantic_ai_{version}_call")
    for span in spans:
        if "pydantic_ai.all_messages" in span.attributes:
            span.attributes = {**span.attributes, "openinference.span.kind": "AGENT", "input.value": "feedback"}
    turns, _ = assemble(spans, impl, flush=True)
    assert [_summary(t) for t in turns] == [_summary(t) for t in captured_turns(f"pydantic_ai_{version}_call", impl)]
    assert [(t.agent, t.input_text) for t in turns] == [("weather_agent", QUESTION)]
