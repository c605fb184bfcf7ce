"""Langfuse's Python SDK (OpenTelemetry based): the turns a user means.

Langfuse 5 records its observations as OpenTelemetry spans of its own tracer scope (`langfuse-sdk`) with its own
attributes only: `langfuse.observation.type` (`agent`, `tool`, `generation`, `span`, ...), `langfuse.observation.input`
/ `.output` (JSON text; a decorated function's input its bound arguments, `{"args": [...], "kwargs": {...}}`), an error
as the span's status (and `langfuse.observation.level` ERROR, `.status_message`), no `gen_ai.*` attribute. A user
sends them to toolwatch beside Langfuse by adding toolwatch's span processor to the tracer provider Langfuse uses.

The spans are captures of real runs, offline (langfuse 5.0.4, openai 3.57.0, opentelemetry-sdk 1.45.2), as OTLP
JSON, one export request a line: the application's TracerProvider (set as the global one) with a BatchSpanProcessor
writing the export requests, and `Langfuse(span_exporter=...)` given an exporter that sends nothing (no Langfuse
server). An agent `@observe(as_type="agent", name="weather_agent")` loops over chat completions of the Langfuse
OpenAI integration (`from langfuse.openai import openai`) against a fake OpenAI server on the loopback interface,
which asks for `get_weather({"city": "Paris"})` (call id `call_1`), then answers; the tool is a function decorated
`@observe(as_type="tool")`:
- langfuse_tool: the tool returns the weather;
- langfuse_raises: the tool raises ValueError (the agent gives the model the error, the model answers).

What Langfuse does not record: the call id on the tool's span (the call the model asked for, on the generation span,
is paired with it by name), an error type (the exception's message is the span's status message).

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json

import pytest

from monitor.otlp import Span
from monitor.records import ToolCall, Turn
from tests.monitor.service.captures import call_rows, captured_turns, cpu_timed, offered_names
from tests.monitor.service.spans import new_tracer
from tests.monitor.service.test_requested_calls import IMPLS, _impl, convert, decoded

QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris."
PARIS = {"city": "Paris"}


@pytest.mark.parametrize("impl", IMPLS)
def test_a_langfuse_agent_run_is_one_turn_with_its_question_call_and_answer(impl: str) -> None:
    """The `agent` observation is the turn (named after it), its input the question it was called with (the bound
    arguments' only string), its answer its output; the `tool` observation the call with its keyword arguments, the
    call the model asked for (`call_1` on the generation span) that call, paired by name; the tools offered those of
    the generation's request."""
    [turn] = captured_turns("langfuse_tool", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", QUESTION, ANSWER)
    assert call_rows(turn) == [("get_weather", "", PARIS, False, None)]
    assert offered_names(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_langfuse_tool_that_raises_is_a_failed_call(impl: str) -> None:
    """Langfuse records no error type: the span's status message (the exception's message) is the call's error."""
    [turn] = captured_turns("langfuse_raises", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", QUESTION, ANSWER)
    assert call_rows(turn) == [("get_weather", "", PARIS, False, "no weather station in Paris")]


def _observations(scope: str) -> list[Span]:
    """An `agent` observation around a `tool` one, on spans of the real OTel SDK of tracer scope `scope`."""
    provider, _, memory = new_tracer()
    tracer = provider.get_tracer(scope)
    agent = {"langfuse.observation.type": "agent", "langfuse.observation.input": json.dumps(
        {"args": [], "kwargs": {"question": QUESTION, "user": "u1"}})}  # fmt: skip
    tool = {"langfuse.observation.type": "tool",
            "langfuse.observation.input": json.dumps({"args": ["Paris"], "kwargs": {}})}  # fmt: skip
    with tracer.start_as_current_span("weather_agent", attributes=agent):
        with tracer.start_as_current_span("get_weather", attributes=tool):
            pass
    provider.shutdown()
    return decoded(memory.get_finished_spans())


@pytest.mark.parametrize("impl", IMPLS)
def test_langfuse_observations_of_another_scope_are_not_read(impl: str) -> None:
    """Langfuse's attributes are read on its own tracer scope only; a positional argument has no name: the call's
    arguments are not captured; the question is the keyword argument named as an input is."""
    _impl(impl)
    records, problems = convert(_observations("langfuse-sdk"), impl)
    assert problems == []
    assert [(r.name, r.arguments) for r in records if isinstance(r, ToolCall)] == [("get_weather", None)]
    assert [(t.agent, t.input_text) for t in records if isinstance(t, Turn)] == [("weather_agent", QUESTION)]
    records, _ = convert(_observations("tests"), impl)
    assert [r for r in records if isinstance(r, ToolCall | Turn)] == []


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("question", [True, False])
def test_an_agent_observation_of_many_positional_arguments_is_read_in_a_fraction_of_a_second(
    impl: str, question: bool
) -> None:
    """An `agent` observation whose input holds 2,000,000 positional arguments (about 10 MB of JSON, within a
    request) and a keyword one named as an input (or none: then no question, two str arguments): the positional ones,
    which have no names, are not renamed one by one and encoded and parsed again (about 3 s)."""

    _impl(impl)
    provider, _, memory = new_tracer()
    kwargs = {"question": QUESTION} if question else {}
    agent = {"langfuse.observation.type": "agent",
             "langfuse.observation.input": json.dumps({"args": ["x"] * 2_000_000, "kwargs": kwargs})}  # fmt: skip
    with provider.get_tracer("langfuse-sdk").start_as_current_span("weather_agent", attributes=agent):
        pass
    provider.shutdown()
    spans = decoded(memory.get_finished_spans())
    (records, problems), elapsed = cpu_timed(lambda: convert(spans, impl))
    assert [(t.agent, t.input_text) for t in records if isinstance(t, Turn)] == [
        ("weather_agent", QUESTION if question else "")
    ]
    assert problems == []
    assert elapsed < 1.0, elapsed
