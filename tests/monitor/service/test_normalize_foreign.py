"""Spans of OpenInference, OpenLLMetry (Traceloop) and pydantic-ai 2, built with the real OTel SDK in the attribute
shapes those producers emit, through the real normalizer: the same ToolCall / Turn records as GenAI spans, by the
Python and the C paths alike (monitor/normalize/_foreign.py, reached from _genai._convert_py and _cgenai.c).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.trace import Status, StatusCode

from monitor.normalize import ATTRIBUTE_KEYS, Normalizer, _genai
from monitor.otlp import STATUS_ERROR, Span, SpanEvent, parse_protobuf
from monitor.records import HandoffMark, OfferedTools, RunRoot, ToolCall, Turn
from tests.monitor.service.spans import new_tracer, to_request
from tests.monitor.service.test_normalize_c import assert_same, needs_c

Convert = Callable[[Iterable[Any], list[Any], list[str], dict[str, int]], None]
PATHS: list[Any] = [pytest.param(_genai._convert_py, id="python")]
if _genai._CONVERT_C is not None:
    PATHS.append(pytest.param(_genai._CONVERT_C, id="c"))

AGENT = "incident-triage"
_JSON = "application/json"
ARGS = {"log_excerpt": "token expired", "window_minutes": 5}
SCHEMA = {"type": "function", "function": {"name": "pull_auth_telemetry", "parameters": {"type": "object"}}}


def _spans(build: Callable[[Any], None]) -> list[Span]:
    """What `build(tracer)` records, through OTLP protobuf as `serve` decodes it."""
    provider, tracer, exporter = new_tracer()
    build(tracer)
    provider.shutdown()
    return parse_protobuf(to_request(exporter.get_finished_spans()).SerializeToString()).spans


def _one(attrs: dict[str, Any]) -> list[Span]:
    """One span named `x` with these attributes."""

    def build(tracer: Any) -> None:
        with tracer.start_as_current_span("x", attributes=attrs):
            pass

    return _spans(build)


def _run(convert: Convert, spans: list[Span]) -> tuple[list[Any], list[str], dict[str, int]]:
    out: list[Any] = []
    problems: list[str] = []
    rejected: dict[str, int] = {}
    convert(spans, out, problems, rejected)
    return out, problems, rejected


def _only(out: list[Any], cls: type) -> list[Any]:
    return [r for r in out if isinstance(r, cls)]


def openinference_agent(tracer: Any) -> None:
    """As openinference-instrumentation-openai-agents writes them: an AGENT span, an LLM span, a TOOL span whose
    `input.value` is the arguments' JSON (mime type application/json), a failed TOOL span."""
    agent = {"openinference.span.kind": "AGENT", "agent.name": "incident-triage", "session.id": "conv-7",
             "input.value": "[AUTH] token expired at noon", "output.value": "Result: auth"}  # fmt: skip
    with tracer.start_as_current_span("incident-triage", attributes=agent):
        llm = {"openinference.span.kind": "LLM", "llm.tools.0.tool.json_schema": json.dumps(SCHEMA)}
        with tracer.start_as_current_span("response", attributes=llm):
            pass
        tool = {"openinference.span.kind": "TOOL", "tool.name": "pull_auth_telemetry", "tool_call.id": "call_1",
                "input.value": json.dumps(ARGS), "input.mime_type": "application/json",
                "output.value": "ok"}  # fmt: skip
        with tracer.start_as_current_span("pull_auth_telemetry", attributes=tool):
            pass
        failed = {"openinference.span.kind": "TOOL", "tool.name": "page_oncall", "tool.id": "call_2"}
        with tracer.start_as_current_span("page_oncall", attributes=failed) as s:
            s.set_status(Status(StatusCode.ERROR, "TimeoutError"))


def langchain_chain(tracer: Any) -> None:
    """LangChain through OpenInference: no AGENT span, the root CHAIN is the run (`{"input": ...}`); a nested CHAIN
    is a step; a TOOL span with a JSON object input without mime type, one with a plain string input."""
    root = {"openinference.span.kind": "CHAIN", "input.value": json.dumps({"input": "[AUTH] token expired"}),
            "input.mime_type": "application/json", "output.value": json.dumps({"output": "Result: auth"})}  # fmt: skip
    with tracer.start_as_current_span("AgentExecutor", attributes=root):
        with tracer.start_as_current_span("RunnableSequence", attributes={"openinference.span.kind": "CHAIN"}):
            tool = {"openinference.span.kind": "TOOL", "tool.name": "pull_auth_telemetry",
                    "input.value": json.dumps(ARGS)}  # fmt: skip
            with tracer.start_as_current_span("pull_auth_telemetry", attributes=tool):
                pass
            plain = {"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": "token expired"}
            with tracer.start_as_current_span("search", attributes=plain):
                pass


def traceloop_workflow(tracer: Any) -> None:
    """OpenLLMetry's decorators: @workflow at the root, @agent, @tool with `{"args", "kwargs"}` input, @task."""
    wf = {"traceloop.span.kind": "workflow", "traceloop.entity.name": "triage", "traceloop.workflow.name": "triage"}
    with tracer.start_as_current_span("triage.workflow", attributes=wf):
        agent = {"traceloop.span.kind": "agent", "traceloop.entity.name": "incident-triage",
                 "traceloop.workflow.name": "triage",
                 "traceloop.entity.input": json.dumps({"args": ["[AUTH] token expired"], "kwargs": {}}),
                 "traceloop.entity.output": json.dumps("Result: auth")}  # fmt: skip
        with tracer.start_as_current_span("incident-triage.agent", attributes=agent):
            tool = {"traceloop.span.kind": "tool", "traceloop.entity.name": "pull_auth_telemetry",
                    "traceloop.entity.input": json.dumps({"args": [], "kwargs": ARGS}),
                    "traceloop.entity.output": json.dumps({"status": "ok"})}  # fmt: skip
            with tracer.start_as_current_span("pull_auth_telemetry.tool", attributes=tool):
                pass
            positional = {"traceloop.span.kind": "tool", "traceloop.entity.input": json.dumps({"args": ["x"],
                                                                                               "kwargs": {}})}
            with tracer.start_as_current_span("search.tool", attributes=positional):
                pass
            with tracer.start_as_current_span("plan.task", attributes={"traceloop.span.kind": "task"}):
                pass


def pydantic_v2(tracer: Any) -> None:
    """pydantic-ai with InstrumentationSettings(version=2): `agent run` and `running tool` spans, no operation."""
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "[BILL] an earlier run"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "done"}]},
        {"role": "user", "parts": [{"type": "text", "content": "[AUTH] token expired"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "pull_auth_telemetry"}]},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1", "result": "ok"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Result: auth"}]},
    ]
    run = {"agent_name": "incident-triage", "gen_ai.agent.name": "incident-triage", "logfire.msg": "agent run",
           "pydantic_ai.all_messages": json.dumps(messages), "pydantic_ai.new_message_index": 2,
           "final_result": "Result: auth"}  # fmt: skip
    with tracer.start_as_current_span("agent run", attributes=run):
        chat = {"gen_ai.operation.name": "chat", "gen_ai.agent.name": "incident-triage"}
        with tracer.start_as_current_span("chat gpt-4o", attributes=chat):
            pass
        tool = {"gen_ai.tool.name": "pull_auth_telemetry", "gen_ai.tool.call.id": "c1",
                "tool_arguments": json.dumps(ARGS), "tool_response": "ok", "logfire.msg": "running tool"}  # fmt: skip
        with tracer.start_as_current_span("running tool", attributes=tool):
            pass


def pydantic_current(tracer: Any, version: int) -> None:
    """pydantic-ai's Instrumentation capability: the operation on its spans in every version; version 2 keeps the
    names `agent run` / `running tool` and `tool_arguments` / `tool_response`, version 3 on the GenAI names. The
    input is only in `pydantic_ai.all_messages`, the answer in `final_result`."""
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "[AUTH] token expired"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "pull_auth_telemetry"}]},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1", "result": "ok"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Result: auth"}]},
    ]
    run = {"agent_name": "incident-triage", "gen_ai.agent.name": "incident-triage", "gen_ai.operation.name":
           "invoke_agent", "gen_ai.conversation.id": "conv-1", "logfire.msg": "incident-triage run",
           "pydantic_ai.all_messages": json.dumps(messages), "final_result": "Result: auth"}  # fmt: skip
    args, result = ("tool_arguments", "tool_response") if version == 2 else ("gen_ai.tool.call.arguments",
                                                                             "gen_ai.tool.call.result")  # fmt: skip
    with tracer.start_as_current_span("agent run" if version == 2 else "invoke_agent incident-triage", attributes=run):
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pull_auth_telemetry",
                "gen_ai.tool.call.id": "c1", args: json.dumps(ARGS), result: "ok",
                "logfire.msg": "running tool: pull_auth_telemetry"}  # fmt: skip
        with tracer.start_as_current_span("running tool" if version == 2 else "execute_tool pull_auth_telemetry",
                                          attributes=tool):  # fmt: skip
            pass


def strands(tracer: Any, latest: bool) -> None:
    """Strands Agents' tracer: GenAI spans whose messages, arguments and results are span events (`gen_ai.*.message`,
    `gen_ai.choice`; with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental one details event)."""
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "incident-triage",
             "gen_ai.system": "strands-agents"}  # fmt: skip
    with tracer.start_as_current_span("invoke_agent incident-triage", attributes=agent) as a:
        if latest:
            a.add_event("gen_ai.client.inference.operation.details", {"gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "[AUTH] token expired"}]}])})
        else:
            a.add_event("gen_ai.user.message", {"content": json.dumps([{"text": "[BILL] an earlier question"}])})
            a.add_event("gen_ai.assistant.message", {"content": json.dumps([{"text": "done"}])})
            a.add_event("gen_ai.user.message", {"content": json.dumps([{"text": "[AUTH] token expired"}])})
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pull_auth_telemetry",
                "gen_ai.tool.call.id": "tooluse_1"}  # fmt: skip
        with tracer.start_as_current_span("execute_tool pull_auth_telemetry", attributes=tool) as t:
            if latest:
                t.add_event("gen_ai.client.inference.operation.details", {"gen_ai.input.messages": json.dumps(
                    [{"role": "tool", "parts": [{"type": "tool_call", "name": "pull_auth_telemetry", "id": "tooluse_1",
                                                 "arguments": ARGS}]}])})  # fmt: skip
                t.add_event("gen_ai.client.inference.operation.details", {"gen_ai.output.messages": json.dumps(
                    [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "tooluse_1",
                                                 "response": [{"text": "ok"}]}]}])})  # fmt: skip
            else:
                t.add_event("gen_ai.tool.message", {"role": "tool", "content": json.dumps(ARGS), "id": "tooluse_1"})
                t.add_event("gen_ai.choice", {"message": json.dumps([{"text": "ok"}]), "id": "tooluse_1"})
        if latest:
            a.add_event("gen_ai.client.inference.operation.details", {"gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Result: auth"}]}])})
        else:
            a.add_event("gen_ai.choice", {"message": "Result: auth", "finish_reason": "end_turn"})


BUILDS: dict[str, Callable[[Any], None]] = {
    "openinference": lambda t: openinference_agent(t),
    "langchain": lambda t: langchain_chain(t),
    "traceloop": lambda t: traceloop_workflow(t),
    "traceloop-langchain": lambda t: traceloop_langchain(t),
    "pydantic-2-no-operation": lambda t: pydantic_v2(t),
    "pydantic-2": lambda t: pydantic_current(t, 2),
    "pydantic-3": lambda t: pydantic_current(t, 3),
    "strands": lambda t: strands(t, False),
    "strands-latest": lambda t: strands(t, True),
}


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize("producer", ["pydantic-2", "pydantic-3", "strands", "strands-latest"])
def test_genai_producers_with_values_elsewhere(convert: Convert, producer: str) -> None:
    out, problems, rejected = _run(convert, _spans(BUILDS[producer]))
    assert (problems, rejected) == ([], {})
    (turn,) = _only(out, Turn)
    assert (turn.agent, turn.input_text, turn.output_text) == (AGENT, "[AUTH] token expired", "Result: auth")
    (call,) = _only(out, ToolCall)
    assert (call.name, json.loads(call.arguments or ""), call.parent_span_id) == (
        "pull_auth_telemetry", ARGS, turn.span_id)  # fmt: skip
    assert call.call_id in ("c1", "tooluse_1") and call.result is not None and "ok" in call.result
    if producer.startswith("pydantic"):
        assert turn.conversation_id == "conv-1"


@pytest.mark.parametrize("convert", PATHS)
def test_openinference_hidden_values_are_not_captured(convert: Convert) -> None:
    """OPENINFERENCE_HIDE_INPUTS / _OUTPUTS replace the values with `__REDACTED__`: not captured, never malformed."""
    hidden = "__REDACTED__"

    def build(tracer: Any) -> None:
        agent = {"openinference.span.kind": "AGENT", "input.value": hidden, "output.value": hidden}
        with tracer.start_as_current_span(AGENT, attributes=agent) as s:
            tool = {"openinference.span.kind": "TOOL", "tool.name": "t", "input.value": hidden,
                    "input.mime_type": _JSON, "tool_call.function.arguments": hidden,
                    "output.value": hidden}  # fmt: skip
            with tracer.start_as_current_span("t", attributes=tool):
                pass
            s.set_status(Status(StatusCode.ERROR, "boom"))

    out, problems, _ = _run(convert, _spans(build))
    (turn,) = _only(out, Turn)
    (call,) = _only(out, ToolCall)
    assert (problems, turn.input_text, turn.output_text, call.arguments, call.result) == ([], "", None, None, None)


@pytest.mark.parametrize("convert", PATHS)
def test_pydantic_ai_without_content_is_not_captured(convert: Convert) -> None:
    """InstrumentationSettings(include_content=False): the messages' parts without content, no `final_result`, no
    arguments: a turn whose input was not captured, a call unjudged for arguments, as GenAI spans without content."""
    messages = [{"role": "user", "parts": [{"type": "text"}]}, {"role": "assistant", "parts": [{"type": "text"}]}]

    def build(tracer: Any) -> None:
        run = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT, "logfire.msg": "run",
               "pydantic_ai.all_messages": json.dumps(messages)}  # fmt: skip
        with tracer.start_as_current_span("invoke_agent incident-triage", attributes=run) as s:
            tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.id": "c"}
            with tracer.start_as_current_span("execute_tool t", attributes=tool):
                pass
            s.set_status(Status(StatusCode.ERROR, "boom"))

    out, problems, _ = _run(convert, _spans(build))
    (turn,) = _only(out, Turn)
    (call,) = _only(out, ToolCall)
    assert (problems, turn.input_text, turn.output_text, call.arguments) == ([], "", None, None)


@pytest.mark.parametrize("convert", PATHS)
def test_a_genai_span_with_only_an_exception_event_is_read_as_before(convert: Convert) -> None:
    def build(tracer: Any) -> None:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "page_oncall", "gen_ai.tool.call.id": "c"}
        with tracer.start_as_current_span("execute_tool page_oncall", attributes=attrs) as s:
            s.record_exception(TimeoutError("no answer"))
            s.set_status(Status(StatusCode.ERROR, "TimeoutError"))

    (span,) = _spans(build)
    assert span.events
    bare = replace(span, events=None)
    got, want = _run(convert, [span]), _run(convert, [bare])
    assert got == want
    (call,) = got[0]
    assert (call.name, call.arguments, call.error_type) == ("page_oncall", None, "TimeoutError")


@pytest.mark.parametrize("convert", PATHS)
def test_openinference_agent_and_tool_spans(convert: Convert) -> None:
    spans = _spans(openinference_agent)
    out, problems, rejected = _run(convert, spans)
    assert (problems, rejected) == ([], {})
    (turn,) = _only(out, Turn)
    assert (turn.agent, turn.input_text, turn.output_text, turn.conversation_id) == (
        "incident-triage", "[AUTH] token expired at noon", "Result: auth", "conv-7")  # fmt: skip
    calls = {c.name: c for c in _only(out, ToolCall)}
    ok, failed = calls["pull_auth_telemetry"], calls["page_oncall"]
    assert (ok.call_id, json.loads(ok.arguments or ""), ok.result, ok.error_type) == ("call_1", ARGS, "ok", None)
    assert ok.parent_span_id == turn.span_id
    assert (failed.call_id, failed.arguments, failed.error_type) == ("call_2", None, "TimeoutError")
    assert len(out) == len(spans) + 1  # the LLM span stays, as a parent link, and the tool it offered is read
    assert [s.name for s in out if isinstance(s, Span)] == ["response"]
    assert [r.definitions for r in _only(out, OfferedTools)] == [(SCHEMA,)]


@pytest.mark.parametrize("convert", PATHS)
def test_a_root_chain_is_a_turn_and_a_nested_chain_a_step(convert: Convert) -> None:
    out, problems, _ = _run(convert, _spans(langchain_chain))
    assert problems == []
    (turn,) = _only(out, Turn)
    assert (turn.agent, turn.input_text, turn.output_text) == ("AgentExecutor", "[AUTH] token expired", "Result: auth")
    calls = {c.name: c for c in _only(out, ToolCall)}
    assert json.loads(calls["pull_auth_telemetry"].arguments or "") == ARGS
    assert calls["search"].arguments is None  # a plain string names no argument: not captured, never malformed
    # the nested chain: a RunRoot (its parent link, holding the turn it would be at the root: turn assembly makes it a
    # step of the run above it, test_web_request_producers)
    [nested] = _only(out, RunRoot)
    assert (nested.parent_span_id, nested.turn.agent) == (turn.span_id, "RunnableSequence")
    assert [s.name for s in out if isinstance(s, Span)] == []


LANGGRAPH_INPUTS = [
    {"messages": [{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
                   "kwargs": {"content": "[AUTH] token expired", "type": "human"}}]},
    {"messages": [{"content": "[BILL] earlier", "type": "human"}, {"content": "done", "type": "ai"},
                  {"content": "[AUTH] token expired", "type": "human"}]},
    {"messages": [["user", "[AUTH] token expired"]]},
    {"messages": [{"role": "user", "content": "[AUTH] token expired"}]},
]  # fmt: skip


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize("inputs", LANGGRAPH_INPUTS)
def test_a_langgraph_root_chain_input_is_its_latest_user_message(convert: Convert, inputs: dict[str, Any]) -> None:
    answer = {"messages": [*inputs["messages"], {"content": "Result: auth", "type": "ai"}]}
    attrs = {"openinference.span.kind": "CHAIN", "input.value": json.dumps(inputs), "input.mime_type": _JSON,
             "output.value": json.dumps(answer), "output.mime_type": _JSON}  # fmt: skip
    out, problems, _ = _run(convert, _one(attrs))
    (turn,) = out
    assert (problems, turn.input_text, turn.output_text) == ([], "[AUTH] token expired", "Result: auth")



@pytest.mark.parametrize("convert", PATHS)
def test_a_task_key_is_smolagents_input_not_another_producers(convert: Convert) -> None:
    """smolagents records its run's bound arguments, `{"task": ...}`: its task is the input. Another producer's root
    chain whose state holds a `task` beside its messages (a LangGraph state) is read as before, its latest user
    message; so is a Traceloop function's keyword argument named `task` (not among the keys the README lists)."""
    state = {"messages": [{"role": "user", "content": "[AUTH] token expired"}], "task": "triage"}
    attrs = {"openinference.span.kind": "CHAIN", "input.value": json.dumps(state), "input.mime_type": _JSON}
    out, problems, _ = _run(convert, _one(attrs))
    (turn,) = out
    assert (problems, turn.input_text) == ([], "[AUTH] token expired")
    kwargs = {"args": [], "kwargs": {"task": "triage", "ticket": "[AUTH] token expired"}}
    tl = {"traceloop.span.kind": "workflow", "traceloop.entity.name": "triage",
          "traceloop.entity.input": json.dumps(kwargs)}  # fmt: skip
    out, problems, _ = _run(convert, _one(tl))
    (turn,) = out
    assert (problems, turn.input_text) == ([], json.dumps(kwargs))


def traceloop_langchain(tracer: Any) -> None:
    """OpenLLMetry's LangChain instrumentation: the root chain a `workflow` span, a nested one a `task`, a tool a
    `tool` span; inputs as `{"inputs", "tags", "metadata", "kwargs"}` (tools: `input_str` too), outputs as
    `{"outputs" / "output", "kwargs"}`; `kwargs` are the callback's, not the tool's."""
    root = {"traceloop.span.kind": "workflow", "traceloop.entity.name": "AgentExecutor",
            "traceloop.workflow.name": "AgentExecutor",
            "traceloop.entity.input": json.dumps({"inputs": {"input": "[AUTH] token expired"}, "tags": [],
                                                  "metadata": {}, "kwargs": {"name": "AgentExecutor"}}),
            "traceloop.entity.output": json.dumps({"outputs": {"output": "Result: auth"}, "kwargs": {"tags": []}})}
    with tracer.start_as_current_span("AgentExecutor.workflow", attributes=root):
        task = {"traceloop.span.kind": "task", "traceloop.entity.name": "RunnableSequence"}
        with tracer.start_as_current_span("RunnableSequence.task", attributes=task):
            pass
        tool = {"traceloop.span.kind": "tool", "traceloop.entity.name": "pull_auth_telemetry",
                "traceloop.entity.input": json.dumps({"input_str": str(ARGS), "tags": None, "metadata": None,
                                                      "inputs": ARGS, "kwargs": {"color": "green", "name": "p"}}),
                "traceloop.entity.output": json.dumps({"output": "ok", "kwargs": {}})}
        with tracer.start_as_current_span("pull_auth_telemetry.tool", attributes=tool):
            pass
        old = {"traceloop.span.kind": "tool", "traceloop.entity.name": "search",
               "traceloop.entity.input": json.dumps({"input_str": "q", "tags": None, "metadata": None,
                                                     "inputs": None, "kwargs": {"name": "search"}})}
        with tracer.start_as_current_span("search.tool", attributes=old):
            pass  # fmt: skip


@pytest.mark.parametrize("convert", PATHS)
def test_traceloop_langchain_spans(convert: Convert) -> None:
    out, problems, _ = _run(convert, _spans(traceloop_langchain))
    assert problems == []
    (turn,) = _only(out, Turn)
    assert (turn.agent, turn.input_text, turn.output_text) == ("AgentExecutor", "[AUTH] token expired", "Result: auth")
    calls = {c.name: c for c in _only(out, ToolCall)}
    assert json.loads(calls["pull_auth_telemetry"].arguments or "") == ARGS  # the tool's inputs, not the kwargs
    assert calls["search"].arguments is None  # only a string: no argument names
    assert [s.name for s in out if isinstance(s, Span)] == ["RunnableSequence.task"]


@pytest.mark.parametrize("convert", PATHS)
def test_traceloop_agent_tool_and_root_workflow(convert: Convert) -> None:
    out, problems, _ = _run(convert, _spans(traceloop_workflow))
    assert problems == []
    turns = {t.agent: t for t in _only(out, Turn)}
    assert set(turns) == {"triage", "incident-triage"}
    agent = turns["incident-triage"]
    assert (agent.input_text, agent.output_text) == ("[AUTH] token expired", "Result: auth")
    calls = {c.name: c for c in _only(out, ToolCall)}
    tool = calls["pull_auth_telemetry"]
    assert (json.loads(tool.arguments or ""), json.loads(tool.result or ""), tool.parent_span_id) == (
        ARGS, {"status": "ok"}, agent.span_id)  # fmt: skip
    assert calls["search"].arguments is None  # positional arguments have no names
    assert [s.name for s in out if isinstance(s, Span)] == ["plan.task"]


@pytest.mark.parametrize("convert", PATHS)
def test_pydantic_ai_version_2_spans(convert: Convert) -> None:
    out, problems, _ = _run(convert, _spans(pydantic_v2))
    assert problems == []
    (turn,) = _only(out, Turn)
    assert (turn.agent, turn.input_text, turn.output_text) == (AGENT, "[AUTH] token expired", "Result: auth")
    (call,) = _only(out, ToolCall)
    assert (call.name, call.call_id, json.loads(call.arguments or ""), call.result) == (
        "pull_auth_telemetry", "c1", ARGS, "ok")  # fmt: skip
    assert [s.name for s in out if isinstance(s, Span)] == ["chat gpt-4o"]


def _tool_message(status: str, content: Any, *, js: bool = False, cls: str = "ToolMessage") -> str:
    """A LangChain ToolMessage as openinference-instrumentation-langchain records a tool's output: Python's
    `messages_to_dict` form (json.dumps' separators), or LangChain.js's serialized form under `output`."""
    fields = {"content": content, "tool_call_id": "call_9", "status": status}
    if js:
        msg = {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", cls], "kwargs": fields}
        return json.dumps({"output": msg}, separators=(",", ":"))
    return json.dumps({"type": "tool", "data": {**fields, "type": "tool"}})


LC_SCOPES = ("openinference.instrumentation.langchain", "@arizeai/openinference-instrumentation-langchain")


def _lc_tool(output: str, scope: str = LC_SCOPES[0], **extra: Any) -> list[Span]:
    """A TOOL span of openinference-instrumentation-langchain (Python's, or `scope`) with this output."""
    attrs = {"openinference.span.kind": "TOOL", "tool.name": "t", "output.value": output, **extra}
    return [replace(s, scope=scope) for s in _one(attrs)]


LONG = "no such city " * 2000  # 26000 characters


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize("js", [False, True], ids=["py", "js"])
@pytest.mark.parametrize(
    ("status", "content", "error"),
    [
        ("success", "sunny", None),
        ("error", "no such city", "no such city"),
        ("error", [{"type": "text", "text": "no such "}, "city"], "no such city"),  # content blocks: their text
        ("error", "", "error"),  # no text: failed all the same
        ("error", [{"type": "image_url"}], "error"),
        ("error", LONG, LONG[:16384]),  # cut as toolwatch's SDK cuts a status message (its content limit)
    ],
)  # fmt: skip
def test_a_langchain_tool_message_names_the_call_and_its_error(convert: Convert, js: bool, status: str,
                                                               content: Any, error: str | None) -> None:  # fmt: skip
    out, problems, rejected = _run(convert, _lc_tool(_tool_message(status, content, js=js)))
    assert (problems, rejected) == ([], {})
    [call] = out
    assert (call.call_id, call.error_type) == ("call_9", error)


@pytest.mark.parametrize("convert", PATHS)
def test_a_tool_message_error_gives_way_to_the_spans_own(convert: Convert) -> None:
    """The span's own error (its status, its `error.type`) is the call's; the message's id is still read; an id of
    the span's own is kept."""
    output = _tool_message("error", "no such city", js=True)
    [span] = _lc_tool(output)
    span.status_code, span.status_message = STATUS_ERROR, "boom"
    assert [(c.call_id, c.error_type) for c in _run(convert, [span])[0]] == [("call_9", "boom")]
    [span] = _lc_tool(output, **{"error.type": "ToolException"})
    assert [(c.call_id, c.error_type) for c in _run(convert, [span])[0]] == [("call_9", "ToolException")]
    [span] = _lc_tool(output, **{"tool_call.id": "own"})
    assert [(c.call_id, c.error_type) for c in _run(convert, [span])[0]] == [("own", "no such city")]


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize(
    "output",
    [
        _tool_message("error", "x", js=True, cls="AIMessage"),  # another class: no ToolMessage
        _tool_message("error", "x", js=True).replace('"lc":1,', ""),  # another form
        " " + _tool_message("error", "x"),  # not opening with the form: not parsed
        _tool_message("error", "x", js=True)[:-2],  # cut: no JSON
        '{"output":{"lc":1,"type":"constructor","id":["langchain_core","messages","ToolMessage"],"kwargs":[]}}',
        '{"type": "tool", "data": {"tool_call_id": 3, "status": ["error"]}}',  # wrong types
    ],
)  # fmt: skip
def test_what_is_no_tool_message_names_nothing(convert: Convert, output: str) -> None:
    out, problems, _ = _run(convert, _lc_tool(output))
    assert [(c.call_id, c.error_type, c.result) for c in out] == [("", None, output)] and problems == []


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize("js", [False, True], ids=["py", "js"])
@pytest.mark.parametrize(
    "scope",
    ["openinference.instrumentation.llama_index", "openinference.instrumentation.smolagents", "tests", ""],
)
def test_a_tool_message_text_of_another_frameworks_tool_names_nothing(convert: Convert, js: bool, scope: str) -> None:
    """Another framework's tool records its output as the text it returned: a text that opens with a ToolMessage's
    form (a fetched page, a file: what the tool read) is that text, not the id of a call nor its error."""
    output = _tool_message("error", "no such city", js=js)
    out, problems, _ = _run(convert, _lc_tool(output, scope))
    assert [(c.call_id, c.error_type, c.result) for c in out] == [("", None, output)] and problems == []
    for lc_scope in LC_SCOPES:  # LangChain's, Python's and LangChain.js': read
        [call] = _run(convert, _lc_tool(output, lc_scope))[0]
        assert (call.call_id, call.error_type) == ("call_9", "no such city")


@needs_c
@pytest.mark.parametrize("js", [False, True])
def test_tool_messages_read_the_same_in_c_and_python(js: bool) -> None:
    assert_same([*_lc_tool(_tool_message("error", "no", js=js)), *_lc_tool(_tool_message("success", "ok", js=js))])


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize("js", [False, True], ids=["py", "js"])
@pytest.mark.parametrize(("mime", "read"), [("text/plain", False), (_JSON, True), (None, True), ("text/html", True)])
def test_a_text_plain_output_is_never_a_tool_message(convert: Convert, js: bool, mime: str | None, read: bool) -> None:
    """OpenInference tags a tool's output `text/plain` only when it is a text that is no JSON (LangChain.js's; Python's
    leaves the mime type out then): such an output is the tool's text, whatever it opens with. A ToolMessage is tagged
    `application/json`; an output without a mime type (older versions, captures that drop it) is read as before."""
    output = _tool_message("error", "no such city", js=js)
    extra = {} if mime is None else {"output.mime_type": mime}
    [call] = _run(convert, _lc_tool(output, LC_SCOPES[js], **extra))[0]
    assert (call.call_id, call.error_type, call.result) == (("call_9", "no such city") if read else ("", None)) + (
        output,)


# LangChain's text of a raised exception (its tracer's `run.error`): Python's `repr(e)` then the traceback, as
# openinference-instrumentation-langchain records it as the span's status message, with an `exception` event.
_PY_TB = ("NoSuchCity('no such city: Atlantis')Traceback (most recent call last):\n\n\n  File \"/app/agent.py\", "
          'line 31, in get_weather\n    raise NoSuchCity(f"no such city: {{city}}")\n\n\n{last}')
_JS_STACK = "\n    at get_weather (file:///app/agent.mjs:24:35)\n    at process.processTicksAndRejections (node:x)"
_LONG_NAME = "E" * 129
# A message that holds an error's text as LangChain.js writes it (a wrapped error's `{message}\n\n{stack}`, or a
# model's argument echoed into the message): the stack that follows the whole message is the raised error's.
_WRAPPED = "boom\n\nTypeError: boom" + _JS_STACK
_ECHOED = "no such city: x\n\nFake: no such city: x\n"


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize(
    ("status", "event_type", "error"),
    [
        (_PY_TB.format(last="NoSuchCity: no such city: Atlantis"), "__main__.NoSuchCity", "NoSuchCity"),
        (_PY_TB.format(last="NoSuchCity: no such city: Atlantis"), None, "NoSuchCity"),  # the traceback names it
        (_PY_TB.format(last="app.errors.NoSuchCity: no such city"), None, "NoSuchCity"),  # by its module too
        (_PY_TB.format(last="NoSuchCity"), None, "NoSuchCity"),  # an exception without a message
        (_PY_TB.format(last="OtherError: no such city"), None, None),  # the traceback names another: as it is
        ("ValueError('no such city: Atlantis')", "ValueError", "ValueError"),  # the repr alone, the event names it
        ("ValueError('no such city: Atlantis')", None, None),  # nothing says it is a repr: as it is
        ("ValueError('no such city: Atlantis')", "KeyError", None),
        ("no such city\n\nError: no such city" + _JS_STACK, None, "Error"),  # LangChain.js: `{message}\n\n{stack}`
        ("no such city\n\nError: no such city", None, "Error"),
        ("no such city\n\nNoSuchCity: no such city" + _JS_STACK, None, "NoSuchCity"),  # an error class's `name`
        ("\n\nError" + _JS_STACK, None, "Error"),  # an empty message: the stack opens with the name alone
        ("a\n\nb\n\nTypeError: a\n\nb" + _JS_STACK, None, "TypeError"),  # a message holding a blank line
        (f"{_WRAPPED}\n\nToolError: {_WRAPPED}" + _JS_STACK, None, "ToolError"),  # not the wrapped error's type
        (f"{_ECHOED}\n\nError: {_ECHOED}" + _JS_STACK, None, "Error"),  # nor a name the message holds
        ("no such city\n\nError: another city" + _JS_STACK, None, None),  # the stack is another error's
        ("no such city\n\nError: no such city: x" + _JS_STACK, None, None),  # another's, its message longer
        ("no such city\n\n" + _JS_STACK, None, None),
        ("boom", None, None),  # a plain message: as it is
        (f"{_LONG_NAME}('x')", _LONG_NAME, None),  # a name past the bound: as it is
        (f"x\n\n{_LONG_NAME}: x" + _JS_STACK, None, None),
    ],
)  # fmt: skip
def test_a_langchain_tools_raised_exception_is_its_type(convert: Convert, status: str, event_type: str | None,
                                                        error: str | None) -> None:  # fmt: skip
    """The error of a LangChain tool's span that failed with LangChain's text of the exception it raised (see _PY_TB,
    and LangChain.js's `{message}\\n\\n{stack}`) is the exception's type, as the text names it (and, for Python's,
    the traceback's last line or the `exception` event's `exception.type` confirms it); any other status message is
    the error as it is (None in the table: the status message itself)."""
    for scope in LC_SCOPES:
        [span] = _lc_tool("", scope)
        span.attributes = {k: v for k, v in span.attributes.items() if k != "output.value"}
        span.status_code, span.status_message = STATUS_ERROR, status
        if event_type is not None:
            span.events = [SpanEvent("exception", 1, {"exception.type": event_type, "exception.message": "x"})]
        [call] = _run(convert, [span])[0]
        assert call.error_type == (status if error is None else error)
        span.scope = "openinference.instrumentation.crewai"  # another producer's: its status message as it is
        [call] = _run(convert, [span])[0]
        assert call.error_type == status


WRONG_TYPES = [
    ({"openinference.span.kind": 3}, "openinference.span.kind", Span),
    ({"openinference.span.kind": "TOOL", "tool.name": 3}, "tool.name", ToolCall),
    ({"openinference.span.kind": "TOOL", "tool.name": "t", "tool_call.id": 7}, "tool_call.id", ToolCall),
    ({"openinference.span.kind": "TOOL", "tool.name": "t", "output.value": 1.5}, "output.value", ToolCall),
    ({"openinference.span.kind": "AGENT", "input.value": 3}, "input.value", Turn),
    ({"openinference.span.kind": "AGENT", "session.id": 3}, "session.id", Turn),
    ({"traceloop.span.kind": True}, "traceloop.span.kind", Span),
    ({"traceloop.span.kind": "tool", "traceloop.entity.input": 3}, "traceloop.entity.input", ToolCall),
    ({"traceloop.span.kind": "agent", "traceloop.entity.name": 3}, "traceloop.entity.name", Turn),
]


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize(("attrs", "key", "kind"), WRONG_TYPES)
def test_wrong_typed_attributes_are_ignored_and_counted(convert: Convert, attrs: dict[str, Any], key: str,
                                                        kind: type) -> None:  # fmt: skip
    out, problems, rejected = _run(convert, _one(attrs))
    assert (problems, rejected) == ([key], {})
    assert key in ATTRIBUTE_KEYS  # a bounded label value of toolwatch_span_attributes_ignored_total
    assert type(out[0]) is kind


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize(
    ("attrs", "kind", "key"),
    [
        # A turn span whose pydantic-ai messages cannot be read, with another operation's key set: it went back and
        # forth between the GenAI path and the relabelling until a RecursionError lost the whole batch.
        ({"gen_ai.operation.name": "invoke_agent", "pydantic_ai.all_messages": 3, "gen_ai.tool.call.arguments": ""},
         Turn, "pydantic_ai.all_messages"),
        ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "tool_arguments": 3,
          "gen_ai.input.messages": "[]"}, ToolCall, "gen_ai.tool.call.arguments"),
    ],
)  # fmt: skip
def test_a_producers_value_that_cannot_be_read_is_counted_once(convert: Convert, attrs: dict[str, Any],
                                                                kind: type, key: str) -> None:  # fmt: skip
    (span,) = _one(attrs)
    out, problems, rejected = _run(convert, [span])
    assert [type(r) for r in out] == [kind] and (problems, rejected) == ([key], {})


@pytest.mark.parametrize("convert", PATHS)
def test_a_tool_span_without_any_name_is_rejected(convert: Convert) -> None:
    span = _spans(openinference_agent)[0]
    span.name = ""
    span.attributes = {"openinference.span.kind": "TOOL", "tool.name": ""}
    assert _run(convert, [span])[1:] == ([], {"missing_tool_name": 1})


@pytest.mark.parametrize("convert", PATHS)
def test_an_openai_agents_handoff_is_no_call(convert: Convert) -> None:
    """openai-agents through OpenInference: a handoff is a TOOL span named `handoff to {agent}` without `tool.name`."""
    (span,) = _one({"openinference.span.kind": "TOOL", "llm.system": "openai"})
    span.name = "handoff to Billing agent"
    out, problems, rejected = _run(convert, [span])
    assert (out[0], problems, rejected) == (span, [], {})  # a parent link, and a mark for its turn (no call)
    (mark,) = out[1:]
    assert isinstance(mark, HandoffMark)
    assert (mark.name, mark.span_id, mark.parent_span_id) == ("transfer_to_billing_agent", f"{span.span_id}#handoff",
                                                             span.span_id)  # fmt: skip


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize("kind", ["AGENT", "CHAIN"])
def test_a_value_nested_to_the_recursion_limit_never_raises(convert: Convert, kind: str) -> None:
    """An input or output value nested as deep as json parses, at every depth (wherever the stack is, some depth
    parses and is then too deep to encode again): a turn, its input the text itself, never a RecursionError that would
    lose the whole batch."""
    (span,) = _one({"openinference.span.kind": kind})
    for depth in range(1, sys.getrecursionlimit() + 1):
        text = "[" * depth + "]" * depth
        span.attributes = {"openinference.span.kind": kind, "input.value": text, "output.value": text}
        out, problems, rejected = _run(convert, [span])
        assert (len(out), problems, rejected) == (1, [], {}), depth
        assert type(out[0]) is Turn and out[0].input_text == text, depth


def test_python_and_c_give_the_same_records() -> None:
    if _genai._CONVERT_C is None:
        pytest.skip("the C normalizer is not loaded")
    spans = [s for build in BUILDS.values() for s in _spans(build)]
    py, c = _run(_genai._convert_py, spans), _run(_genai._CONVERT_C, spans)
    assert py == c
    assert [type(r) for r in py[0]] == [type(r) for r in c[0]]


def test_the_normalizer_counts_foreign_problems() -> None:
    n = Normalizer()
    _, rejected = n.split(_one({"openinference.span.kind": 1}))
    assert (rejected, n.ignored_attributes) == ({}, {"openinference.span.kind": 1})


# ---- C and Python on any mix -----------------------------------------------------------------------------------

FOREIGN_VALUES = st.one_of(
    st.sampled_from([None, "", "x", 3, True, 1.5, ("x",), (("k", 1),), json.dumps(ARGS), '{"input": "q"}', "[1",
                     json.dumps([{"role": "user", "content": "q"}]), json.dumps({"args": ["q"], "kwargs": {}}),
                     json.dumps({"args": [], "kwargs": {"query": "q"}}), json.dumps([{"text": "t"}])]),
    st.text(max_size=4),
)  # fmt: skip
EVENTS = st.sampled_from(
    [None, [], [SpanEvent("exception", 1, {"exception.type": "E"})],
     [SpanEvent("gen_ai.tool.message", 1, {"content": json.dumps(ARGS)}),
      SpanEvent("gen_ai.choice", 2, {"message": 3})],
     [SpanEvent("gen_ai.user.message", 1, {"content": "[1"}), SpanEvent("gen_ai.choice", 2, {"message": "a"})],
     [SpanEvent("gen_ai.client.inference.operation.details", 1, {"gen_ai.input.messages": "[{]"})]]
)  # fmt: skip


@st.composite
def foreign_spans(draw: st.DrawFn) -> Span:
    attrs: dict[str, Any] = {}
    keys = {
        "gen_ai.operation.name": st.sampled_from([None, "execute_tool", "invoke_agent", "chat", 5]),
        "openinference.span.kind": st.sampled_from([None, "TOOL", "AGENT", "CHAIN", "LLM", "tool", 1]),
        "traceloop.span.kind": st.sampled_from([None, "tool", "agent", "workflow", "task", False]),
        "logfire.msg": st.sampled_from([None, "m"]),
        "input.mime_type": st.sampled_from([None, "application/json", "text/plain"]),
        "pydantic_ai.new_message_index": st.sampled_from([None, 0, 1, -1, "1", True]),
        **{k: FOREIGN_VALUES for k in ("tool.name", "tool.id", "tool_call.id", "tool_call.function.arguments",
                                        "input.value", "output.value", "agent.name", "session.id",
                                        "traceloop.entity.name", "traceloop.entity.input", "traceloop.entity.output",
                                        "tool_arguments", "tool_response", "pydantic_ai.all_messages", "final_result",
                                        "gen_ai.tool.name", "gen_ai.tool.call.arguments", "gen_ai.input.messages",
                                        "agent_name")},
    }  # fmt: skip
    for key, strategy in keys.items():
        v = draw(strategy)
        if v is not None and draw(st.integers(0, 3)) == 0:  # a few keys each time
            attrs[key] = v
    name = draw(st.sampled_from(["", "x", "running tool", "agent run", "execute_tool t", "invoke_agent a", "t.tool"]))
    parent = draw(st.sampled_from(["", "00f067aa0ba902b7"]))
    span = Span("0af7651916cd43dd8448eb211c80319c", f"{draw(st.integers(0, 99)):016x}", parent, name, 1, 5, 9)
    span.status_code = draw(st.sampled_from([0, STATUS_ERROR]))
    span.attributes, span.events = attrs, draw(EVENTS)
    return span


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.lists(foreign_spans(), max_size=5))
def test_c_and_python_agree_on_any_mix(batch: list[Span]) -> None:
    _, problems, _, _ = assert_same(batch)
    assert set(problems) <= ATTRIBUTE_KEYS  # the label values stay the conventions' keys
