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
from contextlib import nullcontext
from typing import Any

import pytest

from monitor.otlp import Span
from monitor.records import InputMark, RequestedCall, RunRoot, ToolCall, Turn
from tests.monitor.service.captures import call_rows, capture, captured_turns, input_marks, offered_names
from tests.monitor.service.spans import new_tracer
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert, decoded

QUESTION = "What is the weather in Paris?"
PARIS = {"city": "Paris"}


# ---- OpenLLMetry: LangGraph, LangChain ---------------------------------------------------------------------------

GRAPHS = [("openllmetry_langgraph_react", "LangGraph"), ("openllmetry_langgraph_named", "weather_agent")]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("name", "agent"), GRAPHS)
def test_an_openllmetry_create_react_agent_run_is_one_turn_with_its_executed_call(
    impl: str, name: str, agent: str
) -> None:
    """The graph run is one turn (its workflow span under the graph span a step of it, as Traceloop's workflow spans
    under another span are); the call the model requested is the call that ran, once, with its arguments and id."""
    turns = captured_turns(name, impl)
    assert [(t.agent, call_rows(t)) for t in turns] == [(agent, [("get_weather", "call_w1", PARIS, False, None)])]
    assert offered_names(turns[0]) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("name", "agent"), GRAPHS)
def test_an_openllmetry_create_react_agent_turn_has_its_input(impl: str, name: str, agent: str) -> None:
    """The graph's `invoke_agent` span records no input: the run's is on the workflow span under it
    (`traceloop.entity.input`, the chain's `inputs`), which gives it (an InputMark joined at release)."""
    [turn] = captured_turns(name, impl)
    assert (turn.agent, turn.input_text) == (agent, QUESTION)


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openllmetry_langchain_tool_span_gives_its_arguments_and_call_id(impl: str) -> None:
    """The tool's arguments are the callback input's `inputs`, its call id `kwargs.tool_call_id`, not the whole
    input; the model's request for it is a requested call of the same id."""
    _impl(impl)
    records, problems = convert(capture("openllmetry_langchain_plain"), impl)
    assert problems == []
    calls = [(r.name, r.call_id, json.loads(r.arguments or "null")) for r in records if type(r) is ToolCall]
    assert calls == [("get_weather", "call_w1", PARIS)]
    assert [(r.name, r.call_id) for r in records if isinstance(r, RequestedCall)] == [("get_weather", "call_w1")]


# ---- a Traceloop workflow span under a turn: the rules, on spans of the real OTel SDK ----------------------------

TL_SCOPE = "opentelemetry.instrumentation.langchain"
GRAPH_INPUT = json.dumps({"inputs": {"messages": [{"role": "user", "content": "weather in Oslo?"},
                                                  {"role": "assistant", "content": "rainy"},
                                                  {"role": "user", "content": QUESTION}]},
                          "tags": [], "metadata": {}, "kwargs": {"name": "G"}})  # fmt: skip


def _graph_run(*, turn_input: str | None = None, workflow_input: str | None = GRAPH_INPUT, graph: str = "received",
               scope: str = TL_SCOPE, turn_output: str | None = None,
               workflow_output: str | None = None) -> list[Span]:  # fmt: skip
    """A LangGraph run as opentelemetry-instrumentation-langchain 0.62.4 records it: `invoke_agent G` (GenAI, its
    input `turn_input` and answer `turn_output` as GenAI messages), the `G.workflow` span under it (Traceloop kind
    workflow, its `traceloop.entity.input` `workflow_input`, its `traceloop.entity.output` `workflow_output`), a task
    span and a tool span under that. The `invoke_agent` span `graph`: "received", "lost" (left out: never received) or
    "none" (not made: the workflow span is the root)."""
    provider, _, memory = new_tracer()
    tracer = provider.get_tracer(scope)
    turn: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "G"}
    if turn_input is not None:
        part = {"type": "text", "content": turn_input}
        turn["gen_ai.input.messages"] = json.dumps([{"role": "user", "parts": [part]}])
    if turn_output is not None:
        part = {"type": "text", "content": turn_output}
        turn["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [part]}])
    workflow: dict[str, Any] = {"traceloop.span.kind": "workflow", "traceloop.entity.name": "G",
                                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "G"}  # fmt: skip
    if workflow_input is not None:
        workflow["traceloop.entity.input"] = workflow_input
    if workflow_output is not None:
        workflow["traceloop.entity.output"] = workflow_output
    task = {"traceloop.span.kind": "task", "traceloop.entity.name": "tools", "gen_ai.operation.name": "execute_task",
            "traceloop.entity.input": GRAPH_INPUT}
    tool = {"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather",
            "gen_ai.operation.name": "execute_tool",
            "traceloop.entity.input": json.dumps({"inputs": PARIS, "kwargs": {"tool_call_id": "c1"}})}  # fmt: skip
    with tracer.start_as_current_span("invoke_agent G", attributes=turn) if graph != "none" else nullcontext():
        with tracer.start_as_current_span("G.workflow", attributes=workflow):
            with tracer.start_as_current_span("execute_task tools", attributes=task):
                with tracer.start_as_current_span("execute_tool get_weather", attributes=tool):
                    pass
    provider.shutdown()
    spans = decoded(memory.get_finished_spans())
    return spans if graph != "lost" else [s for s in spans if s.name != "invoke_agent G"]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_traceloop_workflow_span_under_another_span_gives_its_input(impl: str) -> None:
    """The workflow span under the graph's span is a RunRoot (its parent link; turn assembly makes it a step of the
    graph's turn) and an InputMark (no call, under it) of its input as a turn's is read (the chain's `inputs`: the last
    run of user messages); the task span under it gives none."""
    _impl(impl)
    spans = _graph_run()
    records, problems = convert(spans, impl)
    assert problems == []
    workflow = next(s for s in spans if s.name == "G.workflow")
    [run] = [r for r in records if isinstance(r, RunRoot)]
    assert (run.span_id, run.parent_span_id, run.turn.input_text) == (
        workflow.span_id, workflow.parent_span_id, QUESTION
    )
    assert input_marks(records) == [(QUESTION, "", workflow.span_id)]
    assert [(t.agent, t.input_text) for t in records if isinstance(t, Turn)] == [("G", "")]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("scope", [TL_SCOPE, "tests"])
def test_a_root_traceloop_workflow_span_is_a_turn_and_gives_no_mark(impl: str, scope: str) -> None:
    _impl(impl)
    records, _ = convert(_graph_run(graph="none", scope=scope), impl)
    assert [(t.agent, t.input_text) for t in records if isinstance(t, Turn)] == [("G", QUESTION)]
    assert input_marks(records) == []


@pytest.mark.parametrize("impl", IMPLS)
def test_a_workflow_whose_parent_never_comes_is_the_turn(impl: str) -> None:
    """The graph's span never received: the workflow span under it is the outermost span of the run toolwatch has, as
    a run's root under a remote parent never sent is (monitor.assembly._runs): the turn, with its input and the call,
    once the flush (or the turnless timeout) settles it; its mark dropped."""
    _impl(impl)
    turns, a = assemble(_graph_run(graph="lost"), impl, flush=True)
    assert [(t.turnless, t.agent, t.input_text, [c.name for c in t.calls]) for t in turns] == [
        (False, "G", QUESTION, ["get_weather"])
    ]
    assert a.stats.late_calls == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_a_traceloop_workflow_span_without_input_gives_no_mark(impl: str) -> None:
    """Not captured (no `traceloop.entity.input`): no mark, nothing counted."""
    _impl(impl)
    records, problems = convert(_graph_run(workflow_input=None), impl)
    assert (input_marks(records), problems) == ([], [])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("order", ["as exported", "reversed"])
def test_a_graph_turn_is_given_its_workflows_input_and_keeps_its_own(impl: str, order: str) -> None:
    _impl(impl)
    for turn_input, want in ((None, QUESTION), ("own question", "own question")):
        spans = _graph_run(turn_input=turn_input)
        if order == "reversed":
            spans.reverse()
        turns, a = assemble(spans, impl, flush=True)
        assert [(t.agent, t.input_text, [c.name for c in t.calls]) for t in turns] == [("G", want, ["get_weather"])]
        assert a.stats.duplicates == 0 and a.stats.late_calls == 0


# The graph's state as the workflow span's output (`{"outputs", "kwargs"}`, LangChain's `dumpd` messages): the answer
# is the last AI message asking for no tool call.
_AI = ["langchain", "schema", "messages", "AIMessage"]
GRAPH_OUTPUT = json.dumps({"outputs": {"messages": [
    {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
     "kwargs": {"content": QUESTION, "type": "human"}},
    {"lc": 1, "type": "constructor", "id": _AI, "kwargs": {"content": "", "type": "ai", "tool_calls": [
        {"name": "get_weather", "args": PARIS, "id": "c1", "type": "tool_call"}]}},
    {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
     "kwargs": {"content": "sunny", "type": "tool", "tool_call_id": "c1"}},
    {"lc": 1, "type": "constructor", "id": _AI, "kwargs": {"content": "It is sunny.", "type": "ai"}}]},
    "kwargs": {"tags": []}})  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("order", ["as exported", "reversed"])
def test_a_graph_turn_is_given_its_workflows_answer_and_keeps_its_own(impl: str, order: str) -> None:
    """OpenLLMetry records the run's answer on the workflow span (the chain's `outputs`), not on the graph's
    `invoke_agent` span: the workflow's mark gives it the answer, as it gives the input; a turn's own answer is
    kept."""
    _impl(impl)
    for turn_output, want in ((None, "It is sunny."), ("own answer", "own answer")):
        spans = _graph_run(turn_output=turn_output, workflow_output=GRAPH_OUTPUT)
        if order == "reversed":
            spans.reverse()
        turns, a = assemble(spans, impl, flush=True)
        assert [(t.agent, t.input_text, t.output_text) for t in turns] == [("G", QUESTION, want)]
        assert a.stats.duplicates == 0 and a.stats.late_calls == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_a_workflow_with_an_answer_and_no_input_gives_the_answer_alone(impl: str) -> None:
    """Its input not captured: the mark gives the answer, not an empty input (the turn's own input, or another
    mark's, stays)."""
    _impl(impl)
    records, problems = convert(_graph_run(workflow_input=None, workflow_output=GRAPH_OUTPUT), impl)
    assert problems == []
    assert [(r.arguments, r.result) for r in records if isinstance(r, InputMark)] == [("", "It is sunny.")]
    turns, _ = assemble(_graph_run(turn_input="own question", workflow_input=None, workflow_output=GRAPH_OUTPUT),
                        impl, flush=True)  # fmt: skip
    assert [(t.input_text, t.output_text) for t in turns] == [("own question", "It is sunny.")]
