"""LangGraph and LangChain traced by OpenLLMetry (opentelemetry-instrumentation-langchain): the turns a user means.

OpenLLMetry's LangChain instrumentation now writes GenAI attributes beside its Traceloop ones: the graph run is an
`invoke_agent {graph}` span (no Traceloop kind, no input), the LangChain root run under it a `{graph}.workflow` span
(`traceloop.span.kind=workflow`, also `gen_ai.operation.name=invoke_agent`, the input in `traceloop.entity.input`),
the nodes `execute_task` spans, each tool an `execute_tool {tool}` span whose `gen_ai.tool.call.arguments` is the
callback's whole input (`{"input_str", "tags", "metadata", "inputs", "kwargs"}`: the arguments are `inputs`, the
call id `kwargs.tool_call_id`), each model request a `chat` span with GenAI messages and tool definitions.

The spans are captures of real runs, offline (langgraph 1.2.24, langgraph-prebuilt 1.1.3, langchain-core 1.8.3,
opentelemetry-instrumentation-langchain 0.62.4, opentelemetry-sdk 1.45.2; a fake chat model binding its tools as
OpenAI tools, answering with a call of `get_weather(city)`, then text), as OTLP JSON, one export request a line
(LangGraph's association properties, the `gen_ai.task.*` copies and the `task` spans' inputs and outputs dropped):
- openllmetry_langgraph_react: one `create_react_agent` run (the graph named `LangGraph`);
- openllmetry_langgraph_named: the same, the agent named `weather_agent`;
- openllmetry_langchain_plain: no graph: the model bound to the tool invoked, the tool run on its call, the model
  again (each span the root of its own trace: no run around them).

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.otlp import Span, parse_json
from monitor.records import RequestedCall, ToolCall, Turn
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
    return [d.get("name") or d["function"]["name"] for d in t.tool_definitions or ()]


# ---- OpenLLMetry: LangGraph, LangChain ---------------------------------------------------------------------------

GRAPHS = [("openllmetry_langgraph_react", "LangGraph"), ("openllmetry_langgraph_named", "weather_agent")]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("name", "agent"), GRAPHS)
def test_an_openllmetry_create_react_agent_run_is_one_turn_with_its_executed_call(
    impl: str, name: str, agent: str
) -> None:
    """The graph run is one turn (its workflow span under the graph span a step of it, as Traceloop's workflow spans
    under another span are); the call the model requested is the call that ran, once, with its arguments and id."""
    turns = _turns(name, impl)
    assert [(t.agent, _calls(t)) for t in turns] == [(agent, [("get_weather", "call_w1", PARIS, False, None)])]
    assert _offered(turns[0]) == ["get_weather"]


NO_INPUT = (
    "opentelemetry-instrumentation-langchain 0.62.4 records no input on the graph's `invoke_agent` span, the turn:"
    " the run's input is on the workflow span under it (`traceloop.entity.input`), a step, which no turn reads"
)


@pytest.mark.xfail(strict=True, reason=NO_INPUT)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("name", "agent"), GRAPHS)
def test_an_openllmetry_create_react_agent_turn_has_its_input(impl: str, name: str, agent: str) -> None:
    [turn] = _turns(name, impl)
    assert (turn.agent, turn.input_text) == (agent, QUESTION)


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openllmetry_langchain_tool_span_gives_its_arguments_and_call_id(impl: str) -> None:
    """The tool's arguments are the callback input's `inputs`, its call id `kwargs.tool_call_id`, not the whole
    input; the model's request for it is a requested call of the same id."""
    _impl(impl)
    records, problems = convert(_spans("openllmetry_langchain_plain"), impl)
    assert problems == []
    calls = [(r.name, r.call_id, json.loads(r.arguments or "null")) for r in records if type(r) is ToolCall]
    assert calls == [("get_weather", "call_w1", PARIS)]
    assert [(r.name, r.call_id) for r in records if isinstance(r, RequestedCall)] == [("get_weather", "call_w1")]
