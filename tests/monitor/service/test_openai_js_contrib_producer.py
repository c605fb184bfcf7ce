"""OpenTelemetry JS contrib's OpenAI instrumentation (`@opentelemetry/instrumentation-openai`, GenAI conventions) in a
hand-written agent loop on the `openai` package: what toolwatch is given.

The instrumentation makes each `chat.completions.create` a CLIENT span `chat {model}` (`gen_ai.operation.name` chat,
the model, the finish reasons, the usage) and records the messages, the calls the model asked for and the tools offered
only as log records (`gen_ai.*.message`, `gen_ai.choice` events through the Logs API), never on the span, even with
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: toolwatch, which receives spans, reads its chat spans as
parent links with no requested call and no tool offered. The turn and the tool runs are the application's own spans,
made with the OpenTelemetry API by the GenAI conventions as a user of a bare loop would (`invoke_agent weather_agent`
with its input and output messages; `execute_tool get_weather` with the call's id, arguments and result, a throwing
tool's span failed with `error.type`), read as GenAI.

The spans are captures of real runs, offline (@opentelemetry/instrumentation-openai 0.21.0, openai 6.49.0 (loaded by
`require`: the instrumentation hooks CommonJS loading), @opentelemetry/sdk-trace-node 2.12.1,
@opentelemetry/exporter-trace-otlp-http 0.223.1, Node 20): the loop asks a fake OpenAI-compatible server on the
loopback interface, which asks for `get_weather` (`call_1`) then answers; exported by the OTLP/HTTP JSON exporter to a
local receiver, one export request a line:
- openai_js_contrib_loop: asked about Paris.
- openai_js_contrib_loop_raises: asked about Atlantis: `get_weather` throws `Error('no such city')`, the loop hands the
  model the error, the model answers it could not find it.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import pytest

from monitor.records import OfferedTools, RequestedCall
from tests.monitor.service.captures import call_rows, capture, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS, _impl, convert

SCOPE = "@opentelemetry/instrumentation-openai"


@pytest.mark.parametrize("impl", IMPLS)
def test_the_loops_turn_holds_its_tool_runs(impl: str) -> None:
    [turn] = captured_turns("openai_js_contrib_loop", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == (
        "weather_agent",
        "What is the weather in Paris?",
        "It is sunny in Paris.",
    )
    assert call_rows(turn) == [("get_weather", "call_1", {"city": "Paris"}, False, None)]
    assert offered_names(turn) == []


@pytest.mark.parametrize("impl", IMPLS)
def test_a_throwing_tool_is_a_failed_call_of_its_turn(impl: str) -> None:
    [turn] = captured_turns("openai_js_contrib_loop_raises", impl)
    assert (turn.agent, turn.input_text) == ("weather_agent", "What is the weather in Atlantis?")
    assert turn.output_text == "I could not find the weather in Atlantis."
    assert call_rows(turn) == [("get_weather", "call_1", {"city": "Atlantis"}, False, "Error")]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["openai_js_contrib_loop", "openai_js_contrib_loop_raises"])
def test_its_chat_spans_are_parent_links_with_no_requested_call(impl: str, name: str) -> None:
    """Two model requests per run, each a parent link only: their calls and tools are in log records."""
    _impl(impl)
    spans = capture(name)
    chats = [s for s in spans if s.scope == SCOPE]
    assert [(s.name, s.attributes["gen_ai.operation.name"]) for s in chats] == [("chat gpt-4o-mini", "chat")] * 2
    records, problems = convert(chats, impl)
    assert records == chats
    assert not any(isinstance(r, RequestedCall | OfferedTools) for r in records)
    assert problems == []
