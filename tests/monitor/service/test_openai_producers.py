"""OpenAI chat completions traced by the OpenTelemetry OpenAI instrumentations: the turns a user means.

The spans are captures of one real agent run each (openai SDK against a local OpenAI-compatible HTTP server that
answers with a tool call, then text; opentelemetry-sdk 1.45.2), as OTLP JSON, one export request a line: the turn is
toolwatch's `agent_turn` (`invoke_agent weather-bot`, offering no tool definitions itself, so that those the turn
holds are the producer's), the tool toolwatch's `@tool` (`execute_tool get_weather`), between two model calls:
- openai_v2_default: opentelemetry-instrumentation-openai-v2 2.4b0 (opentelemetry-util-genai 1.1b0, openai 3.57.0),
  no environment: the chat spans hold no message content (nor does the tool span: content capture is off);
- openai_v2_latest_experimental: the same with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (this version takes no `true` there): the messages in
  `gen_ai.input.messages` / `gen_ai.output.messages`; no `gen_ai.tool.definitions`;
- openllmetry_openai: OpenLLMetry's opentelemetry-instrumentation-openai 0.62.4 (openai 3.57.0): GenAI attributes,
  `gen_ai.tool.definitions` included, no `llm.request.type`;
- openllmetry_openai_legacy: its 0.52.6 (openai 1.109.1): `llm.request.type`, the flattened `gen_ai.prompt.*` /
  `gen_ai.completion.*` and `llm.request.functions.*`.
The last three with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT set, so that the tool span holds its arguments.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json

import pytest

from monitor.otlp import Span
from monitor.records import RequestedCall, Turn
from tests.monitor.service.captures import capture
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert

QUESTION = "What is the weather in Paris?"
ANSWER = "It is 21 C and sunny in Paris."
ARGS = {"city": "Paris", "unit": "celsius"}
WITH_CONTENT = ["openai_v2_latest_experimental", "openllmetry_openai", "openllmetry_openai_legacy"]
OFFERING = ["openllmetry_openai", "openllmetry_openai_legacy"]


def _turn(spans: list[Span], impl: str) -> Turn:
    _impl(impl)
    turns, _ = assemble(spans, impl, flush=True)  # the captures' times are long past
    assert len(turns) == 1, turns
    return turns[0]


def _without_tool_span(name: str) -> list[Span]:
    spans = capture(name)
    kept = [s for s in spans if not s.name.startswith("execute_tool")]
    assert len(kept) == len(spans) - 1
    return kept


@pytest.mark.parametrize("impl", IMPLS)
def test_openai_v2_by_default_one_turn_with_the_call_that_ran(impl: str) -> None:
    """No content captured: the call is known by name and id, unjudged for arguments; the model's requests are not
    on the chat spans, so nothing is counted as requested and not run."""
    t = _turn(capture("openai_v2_default"), impl)
    assert (t.agent, t.input_text, t.output_text) == ("weather-bot", QUESTION, ANSWER)
    [call] = t.calls
    assert (call.name, call.call_id, call.arguments) == ("get_weather", "call_abc123", None)
    assert not isinstance(call, RequestedCall)
    assert not t.tool_definitions


@pytest.mark.parametrize("name", WITH_CONTENT)
@pytest.mark.parametrize("impl", IMPLS)
def test_one_turn_whose_requested_call_is_the_call_that_ran(name: str, impl: str) -> None:
    t = _turn(capture(name), impl)
    assert (t.agent, t.input_text, t.output_text) == ("weather-bot", QUESTION, ANSWER)
    [call] = t.calls
    assert (call.name, call.call_id) == ("get_weather", "call_abc123")
    assert call.arguments is not None and json.loads(call.arguments) == ARGS
    assert not isinstance(call, RequestedCall)


@pytest.mark.parametrize("name", WITH_CONTENT)
@pytest.mark.parametrize("impl", IMPLS)
def test_the_model_request_is_read_from_the_first_chat_span(name: str, impl: str) -> None:
    """The call the model asked for, with its id and arguments, from the chat span that asked; the second chat span
    (the model's answer, the call in its input history) asks for none."""
    _impl(impl)
    records, problems = convert(capture(name), impl)
    assert problems == []
    requested = [r for r in records if isinstance(r, RequestedCall)]
    assert [(r.name, r.call_id, json.loads(r.arguments or "null")) for r in requested] == [
        ("get_weather", "call_abc123", ARGS)
    ]


@pytest.mark.parametrize("name", WITH_CONTENT)
@pytest.mark.parametrize("impl", IMPLS)
def test_a_requested_call_that_did_not_run_is_counted_as_such(name: str, impl: str) -> None:
    """The same run without its tool span (a framework that refused the call): the turn holds the requested call,
    marked not run, with the model's arguments."""
    t = _turn(_without_tool_span(name), impl)
    [call] = t.calls
    assert isinstance(call, RequestedCall)
    assert (call.name, call.call_id) == ("get_weather", "call_abc123")
    assert call.arguments is not None and json.loads(call.arguments) == ARGS


@pytest.mark.parametrize("name", OFFERING)
@pytest.mark.parametrize("impl", IMPLS)
def test_the_tools_openllmetry_records_as_offered_are_the_turns(name: str, impl: str) -> None:
    """Both chat spans offer get_weather: the turn holds it once, with its description and parameters."""
    t = _turn(capture(name), impl)
    assert t.tool_definitions is not None
    [d] = t.tool_definitions
    assert (d["name"], d["description"]) == ("get_weather", "Current weather for a city.")
    assert d["parameters"]["properties"] == {"city": {"type": "string"}, "unit": {"type": "string"}}
    assert d["parameters"]["required"] == ["city"]


@pytest.mark.parametrize("impl", IMPLS)
def test_openai_v2_offers_no_tools_of_its_own(impl: str) -> None:
    """openai-v2 2.4b0 records no `gen_ai.tool.definitions` on its chat spans: the turn has none from it."""
    assert not _turn(capture("openai_v2_latest_experimental"), impl).tool_definitions
