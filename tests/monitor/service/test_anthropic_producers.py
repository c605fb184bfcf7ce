"""The `anthropic` SDK traced by OpenInference and by OpenLLMetry, in a turn of toolwatch's own instrumentation: the
calls the model requested, read with their ids and arguments and reconciled with the calls that ran.

The spans are captures of real runs, offline, as OTLP JSON, one export request a line (exception stack traces
dropped: no machine path): anthropic 2.14.0 against a fake Messages API on the loopback that answers the question
with a `tool_use` block (id `call_1`, `{"city": "Paris"}`), then, given the `tool_result`, with text; the loop inside
`agent_turn(question, agent="weather_agent", tools=[get_weather, get_forecast])`, each `tool_use` run as a `@tool`
under `use_tool_call_id(block.id)` (opentelemetry-sdk 1.45.2):
- anthropic_openinference_*: openinference-instrumentation-anthropic 3.1.0: a `messages.create` LLM span, the
  requested call in `llm.output_messages.0.message.tool_calls.0.tool_call.*` and listed again as
  `llm.output_messages.0.message.contents.1.tool_call.*` (one call, not two), the tools in
  `llm.tools.N.tool.json_schema` (Anthropic's `{name, description, input_schema}`);
- anthropic_openllmetry_*: opentelemetry-instrumentation-anthropic 0.62.4: an `anthropic.chat` span with GenAI
  `gen_ai.output.messages` (a `tool_call` part, its arguments an object) and `gen_ai.tool.definitions` in Anthropic's
  form.
`*_tool` runs `get_weather`; `*_raises` has the model ask for `get_forecast`, which raises (the model is given the
error as an `is_error` tool result). anthropic 2.14 also traces itself: an `anthropic.messages.create` CLIENT span
(`gen_ai.operation.name=chat`, no content) beside each of the instrumentation's.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json

import pytest

from monitor.records import RequestedCall
from tests.monitor.service.captures import call_rows, capture, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert

QUESTION = "What is the weather in Paris?"
PARIS = {"city": "Paris"}
PRODUCERS = ["openinference", "openllmetry"]
OFFERED = ["get_weather", "get_forecast"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize(
    ("run", "call"),
    [("tool", ("get_weather", "call_1", PARIS, False, None)),
     ("raises", ("get_forecast", "call_1", PARIS, False, "RuntimeError"))],
)  # fmt: skip
def test_an_anthropic_tool_use_is_the_call_that_ran_in_its_turn(
    impl: str, producer: str, run: str, call: tuple[str, str, object, bool, str | None]
) -> None:
    """One turn with its input, answer and tools offered; the `tool_use` the model asked for and the `@tool` run of
    the same id are one call, with its arguments (a raising one with its error)."""
    [turn] = captured_turns(f"anthropic_{producer}_{run}", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", QUESTION, "It is sunny in Paris.")
    assert call_rows(turn) == [call]
    assert offered_names(turn) == OFFERED


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_an_anthropic_model_span_gives_the_requested_call_once_with_its_id_and_arguments(
    impl: str, producer: str
) -> None:
    """The first model request's `tool_use` is one requested call (OpenInference lists it twice on the message);
    the second request, whose input repeats it, requests none."""
    _impl(impl)
    records, problems = convert(capture(f"anthropic_{producer}_tool"), impl)
    assert problems == []
    requested = [r for r in records if isinstance(r, RequestedCall)]
    assert [(r.name, r.call_id, json.loads(r.arguments or "null")) for r in requested] == [
        ("get_weather", "call_1", PARIS)
    ]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_an_anthropic_tool_use_whose_run_was_not_received_is_a_requested_call(impl: str, producer: str) -> None:
    """The `execute_tool` span left out (lost, or the tool never run): the turn keeps the call the model asked for, as
    a requested call that did not run, with its id and arguments."""
    _impl(impl)
    spans = [s for s in capture(f"anthropic_{producer}_tool") if not s.name.startswith("execute_tool")]
    turns, _ = assemble(spans, impl, flush=True)
    assert [(t.agent, call_rows(t)) for t in turns] == [
        ("weather_agent", [("get_weather", "call_1", PARIS, True, None)])
    ]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_an_anthropic_model_spans_tool_definitions_are_the_tools_offered(impl: str, producer: str) -> None:
    """A turn span offering no tools (one written without `tools=`): the model request's definitions, in Anthropic's
    `{name, description, input_schema}` form, are the tools offered."""
    _impl(impl)
    spans = capture(f"anthropic_{producer}_tool")
    for s in spans:
        if s.name == "invoke_agent weather_agent":
            del s.attributes["gen_ai.tool.definitions"]
    turns, _ = assemble(spans, impl, flush=True)
    assert [offered_names(t) for t in turns] == [OFFERED]
