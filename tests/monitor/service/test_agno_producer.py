"""Agno traced through OpenInference (openinference-instrumentation-agno): the turns a user means.

The instrumentation makes `Agent.run` an AGENT span named `{agent}.run` that names its agent (`agent.name`), records
the question as `input.value` (plain text), the answer as `output.value` and the session as `session.id`; each model
request an LLM span (`OpenAIChat.invoke`: the calls it asked for, the tools it offered) and each tool run a TOOL span
whose `input.value` is its arguments (JSON) and which names no call id; a raising tool's span fails (status message
the exception's, no exception event) and Agno hands the error to the model, which answers.

The spans are captures of real runs, offline (agno 3.1.10, openinference-instrumentation-agno 1.0.15,
openinference-instrumentation 0.1.72, opentelemetry-sdk 1.45.2, openai 3.57.0): an Agent `weather_agent` with one
tool `get_weather(city)`, its model OpenAIChat pointed at a fake OpenAI-compatible server on the loopback interface,
as OTLP JSON, one export request a line (the LLM spans' `input.value` / `output.value` dropped):
- agno_tool: the model asks for `get_weather({"city": "Paris"})` (`call_1`), then answers.
- agno_raises: the same asked about Atlantis: `get_weather` raises, the model then answers.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import pytest

from tests.monitor.service.captures import call_rows, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS


@pytest.mark.parametrize("impl", IMPLS)
def test_an_agno_agent_run_is_one_turn_with_its_question_call_and_offered_tool(impl: str) -> None:
    """The run's AGENT span is the turn; the call the model asked for is the call that ran, once (paired by name:
    the TOOL span has no id), with its arguments."""
    [turn] = captured_turns("agno_tool", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == (
        "weather_agent",
        "What is the weather in Paris?",
        "It is sunny in Paris.",
    )
    assert turn.conversation_id == "9ef25670-5d83-4079-b0b7-6d860d9798db"
    assert call_rows(turn) == [("get_weather", "", {"city": "Paris"}, False, None)]
    assert offered_names(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
def test_an_agno_tool_that_raises_is_a_failed_call_of_its_turn(impl: str) -> None:
    [turn] = captured_turns("agno_raises", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == (
        "weather_agent",
        "What is the weather in Atlantis?",
        "I could not find the weather in Atlantis.",
    )
    assert call_rows(turn) == [("get_weather", "", {"city": "Atlantis"}, False, "no such city")]
    assert offered_names(turn) == ["get_weather"]
