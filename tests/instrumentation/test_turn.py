"""`agent_turn`: the `invoke_agent` span, sync and async, with its exact attributes."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import instrumentation as tw
from tests.instrumentation.conftest import Recorded


@tw.tool
def lookup(term: str) -> str:
    """Look a term up."""
    return term


DEFINITION = {
    "type": "function",
    "name": "lookup",
    "description": "Look a term up.",
    "parameters": {"type": "object", "properties": {"term": {"type": "string"}}, "required": ["term"],
                   "additionalProperties": False},
}


def test_turn_span_exact(recorded: Recorded) -> None:
    with tw.agent_turn("[AUTH] login fails", agent="triage", conversation_id="conv-1", case_id="case-7",
                       tools=[lookup]) as turn:
        lookup("auth")
        turn.set_output("Result: auth")
    span = recorded.named("invoke_agent triage")
    assert span.kind is SpanKind.INTERNAL
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "triage",
        "gen_ai.conversation.id": "conv-1",
        "toolwatch.case.id": "case-7",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "[AUTH] login fails"}]}], separators=(",", ":")),
        "gen_ai.tool.definitions": json.dumps([DEFINITION], separators=(",", ":")),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Result: auth"}], "finish_reason": "stop"}],
            separators=(",", ":")),
    }
    assert turn.output == "Result: auth"
    call = recorded.named("execute_tool lookup")
    assert call.parent is not None and call.parent.span_id == span.context.span_id
    assert span.parent is None


async def test_async_turn_with_executor_tools(recorded: Recorded) -> None:
    executor = tw.ToolExecutor([lookup])
    async with tw.agent_turn("hello", agent="bot", tools=executor) as turn:
        executor.execute("lookup", '{"term": "x"}', call_id="c1")
        turn.set_output("done", finish_reason="length")
    span = recorded.named("invoke_agent bot")
    attrs = dict(span.attributes or {})
    assert json.loads(str(attrs["gen_ai.tool.definitions"])) == [DEFINITION]
    assert json.loads(str(attrs["gen_ai.output.messages"]))[0]["finish_reason"] == "length"
    assert "gen_ai.conversation.id" not in attrs and "toolwatch.case.id" not in attrs
    call = recorded.named("execute_tool lookup")
    assert call.parent is not None and call.parent.span_id == span.context.span_id


def test_turn_error_propagates(recorded: Recorded) -> None:
    with pytest.raises(RuntimeError, match="model down"), tw.agent_turn("q", agent="bot"):
        raise RuntimeError("model down")
    span = recorded.named("invoke_agent bot")
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "RuntimeError"


def test_turn_messages_can_be_left_out(recorded: Recorded) -> None:
    tw.configure_content(capture_turn_messages=False)
    with tw.agent_turn("secret question", agent="bot", tools=[DEFINITION]) as turn:
        turn.set_output("secret answer")
    attrs = dict(recorded.named("invoke_agent bot").attributes or {})
    assert "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs
    assert json.loads(str(attrs["gen_ai.tool.definitions"])) == [DEFINITION]


def test_input_as_messages_and_bad_arguments(recorded: Recorded) -> None:
    messages = [{"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
                {"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
    with tw.agent_turn(messages, agent="bot"):
        pass
    attrs = dict(recorded.named("invoke_agent bot").attributes or {})
    assert json.loads(str(attrs["gen_ai.input.messages"])) == messages
    with pytest.raises(ValueError, match="agent name"):
        tw.agent_turn("x", agent="")
    with pytest.raises(TypeError, match="tools must be"):
        tw.agent_turn("x", agent="a", tools=[42])


def test_nested_turns_and_separate_traces(recorded: Recorded) -> None:
    with tw.agent_turn("one", agent="a"):
        pass
    with tw.agent_turn("two", agent="b"):
        pass
    a, b = recorded.named("invoke_agent a"), recorded.named("invoke_agent b")
    assert a.context.trace_id != b.context.trace_id


def test_a_cut_answer_keeps_the_mark_of_the_cut_input(recorded: Recorded) -> None:
    """Input and answer both over the content limit: the answer's mark replaced the input's, so the span listed
    only `gen_ai.output.messages` in `toolwatch.truncated` while its input was cut too."""
    tw.configure_content(max_content_length=40)
    with tw.agent_turn("q" * 60, agent="bot") as turn:
        turn.set_output("a" * 60)
    attrs = dict(recorded.named("invoke_agent bot").attributes or {})
    assert len(str(attrs["gen_ai.input.messages"])) == len(str(attrs["gen_ai.output.messages"])) == 40
    assert attrs["toolwatch.truncated"] == ("gen_ai.input.messages", "gen_ai.output.messages")
