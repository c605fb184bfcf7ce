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
from pathlib import Path

import pytest

from monitor.otlp import Span, parse_json
from monitor.records import RequestedCall, Turn
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble

DATA = Path(__file__).parent / "data"
QUESTION = "What is the weather in Paris?"
PARIS = {"city": "Paris"}
WEATHER_CALL = ("get_weather", "call_1", PARIS, False, None)


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
    return sorted(d["name"] for d in t.tool_definitions or ())


@pytest.mark.parametrize("impl", IMPLS)
def test_an_adk_run_is_one_turn_of_its_agent_with_its_executed_call_once(impl: str) -> None:
    """The `invoke_agent` span is the turn (the `invoke_workflow` span above it a parent link); the call the model
    asked for on its `generate_content` span is the call that ran, once, with its arguments; the tools offered are
    the model spans' `gen_ai.tool.definitions`."""
    [turn] = _turns("adk_tool", impl)
    assert turn.agent == "weather_agent"
    assert turn.conversation_id == "s1"
    assert _calls(turn) == [WEATHER_CALL]
    assert _offered(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
def test_without_content_capture_the_call_is_there_its_arguments_not_captured(impl: str) -> None:
    """ADK's default: no messages, arguments or tool definitions; the call ran, its arguments unknown (None)."""
    [turn] = _turns("adk_nocontent", impl)
    assert turn.agent == "weather_agent"
    assert _calls(turn) == [("get_weather", "call_1", None, False, None)]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_call_of_a_tool_the_agent_lacks_is_one_failed_call_of_that_name(impl: str) -> None:
    """ADK fails the call of an unknown tool in an `execute_tool` span: the call as the model made it, failed, once
    (the requested call is that call), the tools offered without it."""
    [turn] = _turns("adk_unknown", impl)
    assert _calls(turn) == [("get_forecast", "call_1", PARIS, False, "ValueError")]
    assert _offered(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_tool_that_raised_is_one_failed_call_not_also_one_never_run(impl: str) -> None:
    """A raising tool's span has no call id (ADK writes `<not specified>`): the failed call is the call the model
    asked for (`call_1`), paired by name, not a second call that never ran."""
    [turn] = _turns("adk_raises", impl)
    assert turn.agent == "weather_agent"
    assert _calls(turn) == [("get_weather", "", PARIS, False, "RuntimeError")]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_transfer_is_the_call_that_ran_in_the_first_agent_and_the_sub_agent_its_own_turn(impl: str) -> None:
    """ADK transfers by a tool that runs (`transfer_to_agent`, an `execute_tool` span): a call of the triage turn with
    the agent it named; the sub-agent's `invoke_agent` span (a sibling under the workflow span) is a turn of its own,
    with its call once. Each turn's requested calls are its calls that ran."""
    turns = _turns("adk_transfer", impl)
    assert [(t.agent, _calls(t)) for t in turns] == [
        ("triage_agent", [("transfer_to_agent", "call_0", {"agent_name": "weather_agent"}, False, None)]),
        ("weather_agent", [WEATHER_CALL]),
    ]
    # A sub-agent may transfer back to its parent: ADK offers it the transfer tool too.
    assert [_offered(t) for t in turns] == [["transfer_to_agent"], ["get_weather", "transfer_to_agent"]]


NO_INPUT = (
    "ADK's invoke_agent span carries no gen_ai.input.messages: the run's input is only in its generate_content spans'"
    " input messages (with the history and, after a transfer, a transcript of the other agent), which no turn reads"
)


@pytest.mark.xfail(strict=True, reason=NO_INPUT)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["adk_tool", "adk_transfer"])
def test_an_adk_turn_has_its_input(impl: str, name: str) -> None:
    assert [t.input_text for t in _turns(name, impl)][0] == QUESTION


LEGACY = (
    "ADK's legacy schema (opt-in) puts the arguments in gcp.vertex.agent.tool_call_args, which holds '{}' when"
    " content capture is off (no way to tell from a call without arguments), and the model's calls in call_llm's"
    " gcp.vertex.agent.llm_response (Gemini content, not GenAI messages): neither is read"
)


@pytest.mark.xfail(strict=True, reason=LEGACY)
@pytest.mark.parametrize("impl", IMPLS)
def test_a_legacy_adk_run_has_its_call_with_its_arguments(impl: str) -> None:
    [turn] = _turns("adk_legacy", impl)
    assert _calls(turn) == [WEATHER_CALL]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_legacy_adk_run_is_one_turn_per_agent_with_its_calls(impl: str) -> None:
    """What the legacy schema gives today: the turns and the calls that ran, their arguments not captured."""
    assert [(t.agent, _calls(t)) for t in _turns("adk_legacy", impl)] == [
        ("weather_agent", [("get_weather", "call_1", None, False, None)])
    ]
    assert [(t.agent, _calls(t)) for t in _turns("adk_legacy_transfer", impl)] == [
        ("triage_agent", [("transfer_to_agent", "call_0", None, False, None)]),
        ("weather_agent", [("get_weather", "call_1", None, False, None)]),
    ]
