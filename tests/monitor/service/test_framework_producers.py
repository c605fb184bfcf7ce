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
from pathlib import Path

import pytest

from monitor.otlp import Span, parse_json
from monitor.records import HandoffMark, RequestedCall, Turn
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert

DATA = Path(__file__).parent / "data"
QUESTION = "What is the weather in Paris?"
PARIS = {"city": "Paris"}


def _spans(name: str) -> list[Span]:
    spans: list[Span] = []
    for line in (DATA / f"{name}.jsonl").read_text().splitlines():
        spans.extend(parse_json(line.encode()).spans)
    return spans


def _turns(name: str, impl: str) -> list[Turn]:
    _impl(impl)
    turns, _ = assemble(_spans(name), impl, flush=True)  # the captures' times are long past
    return sorted(turns, key=lambda t: t.start_ns)


def _calls(t: Turn) -> list[tuple[str, str, object, bool, str | None]]:
    """Each call: (name, call id, arguments as JSON, whether a requested call that did not run, error type)."""
    return [
        (c.name, c.call_id, c.arguments and json.loads(c.arguments), isinstance(c, RequestedCall), c.error_type)
        for c in t.calls
    ]


def _offered(t: Turn) -> list[str]:
    """The names of the tools the turn's model was offered (OpenAI's nested form or the flat one)."""
    return [d.get("name") or d["function"]["name"] for d in t.tool_definitions or ()]


# ---- pydantic-ai -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", ["default", "v2", "v6"])
def test_a_pydantic_ai_run_is_one_turn_with_its_executed_call(impl: str, version: str) -> None:
    """The agent span is the turn (its input from `pydantic_ai.all_messages`, its answer `final_result`); the call
    the model requested is the call that ran, once, with its arguments; the tools offered are the chat spans'."""
    [turn] = _turns(f"pydantic_ai_{version}_call", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", QUESTION, "It is sunny in Paris.")
    assert _calls(turn) == [("get_weather", "call_1", PARIS, False, None)]
    assert _offered(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("version", ["default", "v2"])
def test_a_pydantic_ai_call_with_invalid_arguments_is_a_failed_call_then_the_retry_another(
    impl: str, version: str
) -> None:
    """The call pydantic-ai refused on validation ran as far as pydantic-ai let it: a call with its (bad) arguments
    and an error; the retried call is the second; both requested calls are these, none counted as never run."""
    [turn] = _turns(f"pydantic_ai_{version}_retry", impl)
    assert (turn.agent, turn.input_text) == ("weather_agent", QUESTION)
    assert _calls(turn) == [
        ("get_weather", "call_1", {"town": 3}, False, "error"),
        ("get_weather", "call_2", PARIS, False, None),
    ]


# ---- openai-agents through OpenInference -------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_openai_agents_run_holds_its_executed_call_once(impl: str, api: str) -> None:
    """The function span (a TOOL span without a call id) is the call the model requested: paired by name, once,
    with its arguments. The Responses model's span records the tools it offered; the chat model's records none."""
    [turn] = _turns(f"openai_agents_{api}_tool", impl)
    assert _calls(turn) == [("get_weather", "", PARIS, False, None)]
    assert _offered(turn) == (["get_weather"] if api == "responses" else [])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_openai_agents_handoff_is_recognised_and_no_call(impl: str, api: str) -> None:
    """The handoff span is a handoff mark named as the tool the model called (`transfer_to_weather_agent`): the
    requested transfer is no call, neither run nor counted as never run; the sub-agent's call is there once."""
    _impl(impl)
    records, _ = convert(_spans(f"openai_agents_{api}_handoff"), impl)
    assert [r.name for r in records if isinstance(r, HandoffMark)] == ["transfer_to_weather_agent"]
    requested = sorted(r.name for r in records if isinstance(r, RequestedCall))
    assert requested == ["get_weather", "transfer_to_weather_agent"]
    turns = _turns(f"openai_agents_{api}_handoff", impl)
    assert [_calls(t) for t in turns] == [[("get_weather", "", PARIS, False, None)]]
    if api == "responses":
        assert sorted(_offered(turns[0])) == ["get_weather", "transfer_to_weather_agent"]


NO_INPUT = (
    "openinference-instrumentation-openai-agents 2.6.0 records no input on any AGENT span: the run's input is only"
    " in its LLM spans' user message, which no turn reads"
)
ONE_TURN = (
    "the agent spans under the trace's root AGENT span are steps of one turn named after the workflow"
    " ('Agent workflow'), not a turn per agent"
)


@pytest.mark.xfail(strict=True, reason=NO_INPUT)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_openai_agents_run_is_one_turn_of_its_agent_with_its_input(impl: str, api: str) -> None:
    [turn] = _turns(f"openai_agents_{api}_tool", impl)
    assert (turn.agent, turn.input_text) == ("weather_agent", QUESTION)


@pytest.mark.xfail(strict=True, reason=ONE_TURN)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_openai_agents_handoff_is_one_turn_per_agent(impl: str, api: str) -> None:
    turns = _turns(f"openai_agents_{api}_handoff", impl)
    assert [(t.agent, _calls(t)) for t in turns] == [
        ("triage_agent", []),
        ("weather_agent", [("get_weather", "", PARIS, False, None)]),
    ]
