"""The C normalizer against its reference, _genai._convert_py, on the real producers' captures
(tests/monitor/service/data) and on those spans mutated: their tracer scope swapped for another producer's, an agent
name or input removed or retyped, so that every scope gate of both paths meets every kind of span."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.normalize import _markers as m
from monitor.otlp import Span
from monitor.records import HandoffMark, OfferedTools, RequestedCall
from tests.monitor.service import test_normalize_c as tc
from tests.monitor.service.captures import DATA, capture
from tests.monitor.service.test_normalize_c import S, needs_c

CAPTURES = sorted(p.stem for p in Path(DATA).glob("*.jsonl"))
SCOPES = [
    m.OTEL_OPENAI_AGENTS_SCOPE,
    m.ADK_SCOPE,
    m.OI_SMOLAGENTS_SCOPE,
    m.OI_DSPY_SCOPE,
    m.OI_HAYSTACK_SCOPE,
    m.OI_OPENAI_AGENTS_SCOPE,
    m.OI_LLAMA_INDEX_SCOPE,
    m.OTEL_CREWAI_SCOPE,
    "openinference.instrumentation.crewai",
    m.LANGFUSE_SCOPE,
    m.OI_AUTOGEN_SCOPE,
    m.MLFLOW_SCOPE,
    m.LOGFIRE_OPENAI_AGENTS_SCOPE,
    m.VERCEL_AI_SCOPE,
    m.MASTRA_SCOPE,
    S(m.MASTRA_SCOPE),
    "openlit.instrumentation.langgraph",
    "openlit.instrumentation.langchain",
    "openlit.instrumentation.",
    "openlit.instrumentation",
    "openlit.instrumentation.\u0101",  # a scope of two-byte characters past OpenLIT's prefix
    "openlit.instrumentation.\U0001f600",  # of four-byte ones
    "",
    "other.scope",
    S(m.OTEL_OPENAI_AGENTS_SCOPE),
    S(m.ADK_SCOPE),
    S(m.OTEL_CREWAI_SCOPE),
    S(m.LOGFIRE_OPENAI_AGENTS_SCOPE),
    S("openlit.instrumentation.langchain"),
]
KEYS = ["gen_ai.agent.name", "gen_ai.input.messages", "gen_ai.operation.name", "traceloop.span.kind",
        "openinference.span.kind", "tool.name", "llm.request.type", "gen_ai.output.messages",
        m.LF_TYPE, m.MLFLOW_SPAN_TYPE, "gen_ai.workflow.input", "gen_ai.tool.call.arguments", "gen_ai.agent.tools",
        "gen_ai.tool.definitions", m.OI_TOOL_DESCRIPTION, "message.tool_calls.0.tool_call.function.name",
        m.LOGFIRE_TEMPLATE, "logfire.msg", "name", "input", "output", "raw_input", "response", "error", "to_agent",
        m.PA_MESSAGES, m.OI_INPUT, "gen_ai.tool.name", "error.type", m.AI_OPERATION_ID, m.AI_PROMPT, m.AI_TOOL_NAME,
        m.AI_RESPONSE_CALLS, m.AI_PROMPT_TOOLS, m.MASTRA_AGENT_INPUT, m.MASTRA_AGENT_OUTPUT,
        m.MASTRA_STEP_OUTPUT, m.OI_OUTPUT, m.TL_INPUT, m.TL_OUTPUT]  # fmt: skip
VALUES: list[Any] = [None, "", "x", 3, S("s"), ("a",), "invoke_agent", "agent", "workflow", "TOOL", "AGENT",
                     "invoke_workflow", "{'a': 1}", '{"messages": ["content=\'q\' id=\'1\'", {"role": "user"}]}',
                     '["get_weather", 1]', '[{"name": "t"}]', "Tool Name: t\nx",
                     # Logfire's openai-agents templates and values
                     "Agent run: {name!r}", "Function: {name}", "Handoff: {from_agent} \u2192 {to_agent}",
                     "Chat completion with {gen_ai.request.model!r}", "Responses API", "Responses API with x",
                     '[{"role": "user", "content": "q"}]', '{"message": "boom"}',
                     '{"output": [{"type": "function_call", "name": "f", "call_id": "c", "arguments": "{}"}],'
                     ' "tools": [{"type": "function", "name": "f"}]}',
                     '[{"role":"user","parts":[{"type":"text","content":"q"}]}]', "chat", "execute_tool",
                     # the Vercel AI SDK's operations and values
                     "ai.generateText", "ai.toolCall", "ai.streamText.doStream", '{"prompt": "q"}',
                     '{"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]}',
                     '[{"toolCallId": "c", "toolName": "f", "input": {}}]',
                     # Mastra's operation and values
                     "agent_step", '["q", "r"]', '{"text": "a", "files": []}',
                     '{"text": "", "toolCalls": [{"toolCallId": "c", "toolName": "f", "args": {"x": 1}}]}',
                     '{"toolCalls": [{"toolName": 3}, "toolName"]}',
                     # LangChain's serialized messages (a LangGraph state): messages_to_dict's, dumpd's, malformed ones
                     '{"messages": [{"type": "human", "data": {"content": "q"}}, {"type": "ai", "data": {"content": '
                     '[{"type": "text", "text": "a"}], "tool_calls": []}}, {"type": "ai", "data": {"content": "t", '
                     '"tool_calls": [{"name": "f"}]}}]}',
                     '{"outputs": {"messages": [{"lc": 1, "type": "constructor", "id": ["AIMessage"], "kwargs": '
                     '{"content": "a"}}, {"type": "ai", "data": 3}, 7]}, "kwargs": {}}',
                     # a LangGraph ToolNode task's input (its call), whole and cut short, and its output of an error
                     '{"__type": "tool_call_with_context", "tool_call": {"name": "f", "args": {}, "id": "c", '
                     '"type": "tool_call"}, "state": {}}', '{"__type": "tool_call_with_context", "tool_call": {"name"',
                     '{"messages": [{"type": "tool", "data": {"tool_call_id": "c", "status": "error"}}]}']  # fmt: skip
ALL_SPANS = [s for name in CAPTURES for s in capture(name)]


def assert_same(spans: list[Any]) -> None:
    """test_normalize_c.assert_same, a HandoffMark (new on each path) compared field by field."""
    assert tc.C is not None
    py, c = tc.run(tc.PY, spans, {}), tc.run(tc.C, spans, {})
    assert c[3] == py[3]
    assert len(c[0]) == len(py[0])
    for p, r in zip(py[0], c[0], strict=True):
        if type(p) is HandoffMark and type(r) is HandoffMark:
            assert tc.fields(p) == tc.fields(r)
        else:
            tc.assert_same_record(p, r)
    assert c[1:3] == py[1:3]


@needs_c
@pytest.mark.parametrize("name", CAPTURES)
def test_each_capture_is_read_alike(name: str) -> None:
    assert_same(capture(name))


@needs_c
@pytest.mark.parametrize("scope", ["openlit.instrumentation.\u0101", "openlit.instrumentation.\U0001f600"])
@pytest.mark.parametrize("name", ["openlit_langgraph_tool", "openlit_openai_tool"])
def test_openlit_scopes_of_wide_characters_are_read_alike(name: str, scope: str) -> None:
    """OpenLIT's prefix followed by characters past Latin-1 (a str of 2 or 4 bytes per character): one of OpenLIT's
    scopes on both paths."""
    spans = [copy.copy(s) for s in capture(name)]
    for s in spans:
        if s.scope.startswith(m.OPENLIT_SCOPE_PREFIX):
            s.scope = scope
    assert_same(spans)


NAMES = [None, "get_weather.__call__", "x.acall", ".__call__", "agent.run", "ReAct.forward", "invoke_agent a", "chat m",
         "invoke_workflow g", "Agent run: {name!r}", "Function: {name}", "Responses API with {gen_ai.request.model!r}",
         "agent run", "execute_tool f", "ai.generateText weather_agent"]


def _mutated(span: Span, scope: Any, edits: list[tuple[str, Any]], name: str | None = None, root: bool = False) -> Span:
    s = copy.copy(span)
    s.attributes = dict(span.attributes)
    s.scope = scope
    if name is not None:
        s.name = name
    if root:
        s.parent_span_id = ""
    for key, value in edits:
        if value is None:
            s.attributes.pop(key, None)
        else:
            s.attributes[key] = value
    return s


@needs_c
@settings(max_examples=3000, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(ALL_SPANS),
            st.sampled_from(SCOPES),
            st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES)), max_size=3),
            st.sampled_from(NAMES),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_mutated_capture_spans_are_read_alike(batch: list[tuple[Span, Any, list[tuple[str, Any]], Any, bool]]) -> None:
    assert_same([_mutated(*args) for args in batch])


@needs_c
@pytest.mark.parametrize("scope", ["openinference.instrumentation.agno", m.OTEL_OPENAI_AGENTS_SCOPE])
def test_a_relabelled_span_read_as_a_model_request_is_its_own_parent_link(scope: str) -> None:
    """A span read again with relabelled attributes (pydantic-ai's `agent run` key set) that turns out a model request
    (an OpenInference LLM span): its parent link is the span itself, with its attributes as received, on both paths
    (a relabelled copy was appended, and the span's attributes given to the last record, its offered tools)."""
    agno = "openinference.instrumentation.agno"
    llm = next(s for s in ALL_SPANS if s.name == "OpenAIChat.invoke" and s.scope == agno)
    span = _mutated(llm, scope, [(m.PA_MESSAGES, "")], name="agent run")
    assert_same([span])
    records = tc.run(tc.PY, [span], {})[0]
    for r in records:
        if type(r) is Span:
            assert r is span
        elif type(r) is not OfferedTools and type(r) is not RequestedCall:
            assert r.attributes is span.attributes
