"""The Vercel AI SDK's own telemetry (TypeScript; `experimental_telemetry: {isEnabled: true}`), mapped to the GenAI
records; and the same spans through OpenInference's Vercel span processor, where they are read as OpenInference with
what that processor leaves out or misreads taken from the SDK's attributes.

The SDK records on its tracer (scope _markers.VERCEL_AI_SCOPE, `ai`) spans with `ai.operationId` (a FOREIGN_MARKERS
key: they have no GenAI operation) and its own attributes:
- a top-level call (`ai.generateText`, `ai.streamText`, `ai.generateObject`, `ai.streamObject`: _RUNS) is the turn,
  named after `ai.telemetry.functionId` (unnamed without it), its input the latest user text of `ai.prompt` (JSON of
  the call's `{"system", "prompt"}` or `{"system", "messages"}`: a prompt string, or messages whose content is a string
  or parts `{"type": "text", "text"}`), its answer `ai.response.text`, else (`generateObject`, `streamObject`)
  `ai.response.object`, the object the model gave as JSON text, as it is;
- `ai.toolCall` is a call: `ai.toolCall.name`, `.id`, `.args` (JSON text), `.result` (JSON text); a throwing tool's
  span fails with the error's message;
- a model request (`ai.generateText.doGenerate`, `ai.streamText.doStream`, ...: an operation id ending in _REQUEST
  suffixes) is a parent link with the calls the model asked for, `ai.response.toolCalls` (JSON `[{"toolCallId",
  "toolName", "input"}]`, `input` JSON text or, streamed, an object; `args` in SDK 4), and the tools it offered,
  `ai.prompt.tools` (an array of JSON texts, `{"type": "function", "name", "description", "inputSchema"}`, kept as
  they are: the catalog reads `inputSchema`);
- any other (`ai.embed`, ...) a parent link.
A value of another type than these is ignored and counted under its key (_markers.FOREIGN_ATTRIBUTE_KEYS). Spans of
another scope are not read here (a tracer passed as `experimental_telemetry.tracer` names its own scope).

Through OpenInference (`OpenInferenceSpanProcessor`: the spans named `{operation} {functionId}`, with
`openinference.span.kind`; monitor.normalize._foreign reads them as OpenInference), for the `ai` scope: the AGENT
span's agent is the function id (it records no `agent.name`), its input read from `ai.prompt` as above; an LLM span's
requested calls and offered tools are read from the SDK's attributes (`model_request`): OpenInference encodes a
requested call's arguments twice (JSON text of the JSON text) and records no `llm.tools`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from monitor._json import loads_bounded
from monitor.normalize import _markers as m
from monitor.normalize._foreign import _add_requested, _call, _openinference, _parsed, _result, _str, _turn
from monitor.normalize._genai import REASON_NO_TOOL_NAME
from monitor.normalize._offered import new_offered
from monitor.normalize._requested import name_and_id
from monitor.otlp import Span
from monitor.records import ToolCall, Turn, definition_name

Out = list[ToolCall | Turn | Span]

_RUNS = frozenset({"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"})
_TOOL_CALL = "ai.toolCall"
_REQUESTS = (".doGenerate", ".doStream")  # a model request's operation id ends so
# The request's contents its requested calls do not keep (as _requested.CONTENT_KEYS): the messages, tools, output.
_CONTENT = frozenset({m.AI_PROMPT, m.AI_PROMPT_MESSAGES, m.AI_PROMPT_TOOLS, m.AI_RESPONSE_TEXT, m.AI_RESPONSE_CALLS,
                      m.OI_INPUT, m.OI_OUTPUT})  # fmt: skip


def convert(span: Span, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """One span of the SDK's scope carrying `ai.operationId` (see the module docstring)."""
    attrs = span.attributes
    op = attrs.get(m.AI_OPERATION_ID)
    if not isinstance(op, str):
        problems.append(m.AI_OPERATION_ID)
        out.append(span)
    elif op in _RUNS:
        _turn(span, out, problems, agent=agent(attrs, problems), input_text=prompt_text(attrs, problems),
              output_text=_response_text(attrs, problems), conversation_id=None)  # fmt: skip
    elif op == _TOOL_CALL:
        name = _str(attrs, m.AI_TOOL_NAME, problems)
        if not name:
            rejected[REASON_NO_TOOL_NAME] = rejected.get(REASON_NO_TOOL_NAME, 0) + 1
            return
        call_id = _str(attrs, m.AI_TOOL_ID, problems)
        _call(span, name, out, problems, rejected, call_id=call_id, arguments=_result(attrs, m.AI_TOOL_ARGS, problems),
              result=_result(attrs, m.AI_TOOL_RESULT, problems))  # fmt: skip
    else:
        out.append(span)
        if op.endswith(_REQUESTS):
            model_request(span, out, problems)


def openinference(span: Span, kind: Any, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """A span of the SDK's scope that OpenInference's span processor made an OpenInference span: an LLM span is a
    parent link with the calls and tools the SDK recorded (`model_request`: not OpenInference's, see the module
    docstring); any other is read as OpenInference, and a turn it makes is named after the function id (without
    `agent.name`; unnamed without either) and given the latest user text of `ai.prompt` (when it has one)."""
    if isinstance(kind, str) and kind.upper() == "LLM":
        out.append(span)
        model_request(span, out, problems)
        return
    n = len(out)
    _openinference(span, kind, out, problems, rejected)
    turn = out[-1] if len(out) == n + 1 else None
    if isinstance(turn, Turn) and turn.span_id == span.span_id:
        attrs = span.attributes
        if m.OI_AGENT_NAME not in attrs:
            turn.agent = agent(attrs, problems)  # unnamed without it, as alone (not the span's name)
        text = prompt_text(attrs, problems)
        if text:
            turn.input_text = text


def agent(attrs: Any, problems: list[str]) -> str:
    """The function id the call was given, the agent's name ("" without it)."""
    return _str(attrs, m.AI_FUNCTION_ID, problems)


def prompt_text(attrs: Any, problems: list[str]) -> str | None:
    """The latest user text of `ai.prompt` (None when not captured or holding none): its `prompt` when a string, else
    the last user message of its `prompt` or `messages` (its content a string, or its text parts joined by
    newlines)."""
    raw = attrs.get(m.AI_PROMPT)
    if raw is None:
        return None
    if not isinstance(raw, str):
        problems.append(m.AI_PROMPT)
        return None
    try:
        value = loads_bounded(raw)
    except (ValueError, RecursionError):
        return raw or None
    if not isinstance(value, dict):
        return None
    prompt = value.get("prompt")
    if isinstance(prompt, str):
        return prompt or None
    messages = prompt if isinstance(prompt, list) else value.get("messages")
    for msg in reversed(messages) if isinstance(messages, list) else ():
        if isinstance(msg, dict) and msg.get("role") == "user":
            text = _content_text(msg.get("content"))
            if text:
                return text
    return None


def _content_text(content: Any) -> str | None:
    """A message's content as text: a string itself, its `text` parts joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get(
        "text"), str)]  # fmt: skip
    return "\n".join(texts) if texts else None


def _response_text(attrs: Any, problems: list[str]) -> str | None:
    """A run's answer: `ai.response.text`, else `ai.response.object` (an object run's, JSON text kept as it is)."""
    for key in (m.AI_RESPONSE_TEXT, m.AI_RESPONSE_OBJECT):
        v = attrs.get(key)
        if isinstance(v, str):
            return v
        if v is not None:
            problems.append(key)
    return None


def model_request(span: Span, out: Out, problems: list[str]) -> None:
    """The calls a model request asked for (`ai.response.toolCalls`) and the tools it offered (`ai.prompt.tools`)."""
    attrs = span.attributes
    raw = attrs.get(m.AI_RESPONSE_CALLS)
    if raw is not None:
        problems.extend([m.AI_RESPONSE_CALLS] * _add_requested(span, _requested(raw, problems), _CONTENT, out))
    tools = attrs.get(m.AI_PROMPT_TOOLS)
    if tools is not None:
        _offered(span, tools, out, problems)


def _requested(raw: Any, problems: list[str]) -> Iterator[tuple[str, str, str | None]]:
    """(name, call id, arguments as JSON text) of each call of `ai.response.toolCalls`; what cannot be read counted."""
    key = m.AI_RESPONSE_CALLS
    calls = _parsed(raw)
    if not isinstance(calls, list):
        problems.append(key)
        return
    yield from sdk_calls(calls, key, problems)


def sdk_calls(calls: list[Any], key: str, problems: list[str]) -> Iterator[tuple[str, str, str | None]]:
    """(name, call id, arguments as JSON text) of each AI SDK tool call of `calls`, `{"toolCallId", "toolName",
    "input"}` (`args` before SDK 5, and in Mastra's step output), arguments an object or JSON text; what cannot be
    read counted under `key`."""
    for c in calls:
        named = name_and_id({"name": c.get("toolName"), "id": c.get("toolCallId")}, key, problems) if isinstance(
            c, dict) else None  # fmt: skip
        if named is None:
            problems.append(key)
            continue
        args = c.get("input", c.get("args"))
        if isinstance(args, dict):
            try:
                args = json.dumps(args)
            except (ValueError, RecursionError):
                args = None
        elif args is not None and not isinstance(args, str):
            problems.append(key)
            args = None
        yield named[0], named[1], args


def _offered(span: Span, tools: Any, out: Out, problems: list[str]) -> None:
    """The tools of `ai.prompt.tools` (an array of JSON texts, each one tool) that name one; a value that is not
    JSON text of an object is counted."""
    items = tools if isinstance(tools, tuple) else (tools,)
    definitions: list[dict[str, Any]] = []
    for text in items:
        tool = _parsed(text)
        if not isinstance(tool, dict):
            problems.append(m.AI_PROMPT_TOOLS)
        elif definition_name(tool) is not None:
            definitions.append(tool)
    if definitions:
        out.append(new_offered(span, tuple(definitions)))
