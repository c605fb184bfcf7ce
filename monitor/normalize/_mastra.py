"""Mastra's own observability (TypeScript) exported by @mastra/otel-exporter: GenAI spans whose values are partly in
Mastra's attributes, read for its tracer scope only (_markers.MASTRA_SCOPE): the GenAI path (_genai._convert_py, to
which the C normalizer hands them) sends here its `invoke_agent` spans without `gen_ai.input.messages` and its
`agent_step` spans; its `execute_tool` spans are GenAI tool spans, read as such.

- An agent's run (`invoke_agent {agent}`) is the turn, read by the GenAI path as any turn span with, where the GenAI
  keys are not set: its input the latest user text of `mastra.agent_run.input` (`input_text`: Mastra records the
  input as given, text as it is (JSON holding no message, a question given as JSON, too), anything else as JSON: a
  list of strings, each a user message; a list of messages, their content a string, text parts `{"type": "text",
  "text"}`, Mastra's stored form `{"format": 2, "parts": [...]}` or, a UI message, its `parts`; one message; an object
  holding `messages`), its answer the `text` of
  `mastra.agent_run.output` (JSON of the run's result; text as it is). Its tools offered: `gen_ai.tool.definitions`
  holds their names only (`["get_weather"]`), each offered by name, as Strands' `gen_ai.agent.tools`
  (_genai._named_tools); definitions recorded as the conventions say are read as such.
- A step (`agent_step`) is a parent link with the calls its model asked for: `mastra.model_step.output`, JSON `{"text",
  "toolCalls": [{"toolCallId", "toolName", "args"}]}`, `args` the arguments the model gave (an object; text when they
  did not parse, kept as it is). A step output naming no `toolName` asks for none and is not parsed. The requested
  calls keep the step's attributes without its messages, output and the model's raw response.
Its other spans (`chat`, `model_generation`, `model_chunk`, ...) are read by the GenAI path as any span.
A value of another type, or one that cannot be read as said, is ignored and counted under its key
(_markers.FOREIGN_ATTRIBUTE_KEYS). The same keys under another scope are not read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from monitor._json import loads_bounded
from monitor.normalize import _markers as m
from monitor.normalize._foreign import _add_requested, _one_message, _parsed, _read_as_genai
from monitor.normalize._genai import INPUT_MESSAGES, OUTPUT_MESSAGES, TOOL_DEFINITIONS, _named_tools
from monitor.normalize._vercel import sdk_calls
from monitor.otlp import Span
from monitor.records import ToolCall, Turn

Out = list[ToolCall | Turn | Span]

# A step's contents its requested calls do not keep (as _requested.CONTENT_KEYS): its messages, output, raw response.
_CONTENT = frozenset({m.MASTRA_STEP_INPUT, m.MASTRA_STEP_OUTPUT, m.MASTRA_RESPONSE_BODY})
_NAMES_A_TOOL = '"toolName"'  # in a step output asking for a call


def turn(span: Span, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """An agent's run: read by the GenAI path with Mastra's input and answer where the GenAI keys are not set; its
    tools offered by name when its definitions are names (see the module docstring)."""
    attrs = span.attributes
    extra: dict[str, Any] = {}
    if attrs.get(INPUT_MESSAGES) is None:
        text = input_text(attrs.get(m.MASTRA_AGENT_INPUT), problems)
        if text is not None:
            extra[INPUT_MESSAGES] = _one_message("user", text)
    if attrs.get(OUTPUT_MESSAGES) is None:
        answer = output_text(attrs.get(m.MASTRA_AGENT_OUTPUT), problems)
        if answer is not None:
            extra[OUTPUT_MESSAGES] = _one_message("assistant", answer)
    n = len(out)
    # The copy's scope left out: the GenAI path reads it as any turn span, and does not send it back here.
    _read_as_genai(span, replace(span, attributes={**attrs, **extra} if extra else attrs, scope=""), out, problems,
                   rejected)  # fmt: skip
    record = out[-1] if len(out) == n + 1 else None
    raw = attrs.get(TOOL_DEFINITIONS)
    if isinstance(record, Turn) and record.tool_definitions == () and isinstance(raw, str):
        names = _named_tools(raw)  # a list of no definition: the names it holds, if any
        if names:
            record.tool_definitions = names


def step(span: Span, out: Out, problems: list[str]) -> None:
    """A step of the run: a parent link, with the calls its model asked for (see the module docstring)."""
    out.append(span)
    raw = span.attributes.get(m.MASTRA_STEP_OUTPUT)
    if raw is None or (isinstance(raw, str) and _NAMES_A_TOOL not in raw):
        return
    problems.extend([m.MASTRA_STEP_OUTPUT] * _add_requested(span, _requested(raw, problems), _CONTENT, out))


def input_text(raw: Any, problems: list[str]) -> str | None:
    """The latest user text of `mastra.agent_run.input` (None when not recorded or not a str, counted; "" when it holds
    no user text). Text that is no JSON list or object, or JSON holding no message (neither a string in a list nor an
    object naming its role), is itself (a question as given)."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        problems.append(m.MASTRA_AGENT_INPUT)
        return None
    try:
        value = loads_bounded(raw)
    except (ValueError, RecursionError):
        return raw
    if isinstance(value, dict):
        value = value.get("messages", value)
        if isinstance(value, dict):
            value = [value]
    if not isinstance(value, list) or (value and not any(_a_message(x) for x in value)):
        return raw  # JSON given as the question (no message in it): the text itself
    for msg in reversed(value):
        if isinstance(msg, str):
            return msg
        if isinstance(msg, dict) and msg.get("role") == "user":
            text = _message_text(msg)
            if text:
                return text
    return ""


def _a_message(x: Any) -> bool:
    """A user message as a string, or a message (an object naming its role)."""
    return isinstance(x, str) or (isinstance(x, dict) and "role" in x)


def _message_text(msg: dict[str, Any]) -> str | None:
    """A message's text: its content a string, its content's text parts (or those of Mastra's stored content,
    `{"format": 2, "parts"}`), else those of its `parts` (a UI message); parts joined by newlines."""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = content.get("parts")
    text = _parts_text(content)
    return text if text is not None else _parts_text(msg.get("parts"))


def _parts_text(parts: Any) -> str | None:
    if not isinstance(parts, list):
        return None
    texts = [p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"),
                                                                                                     str)]  # fmt: skip
    return "\n".join(texts) if texts else None


def output_text(raw: Any, problems: list[str]) -> str | None:
    """The answer of `mastra.agent_run.output`: the `text` of its JSON object (None without one: structured output);
    text that is no JSON object is itself. None when not recorded or not a str (counted)."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        problems.append(m.MASTRA_AGENT_OUTPUT)
        return None
    try:
        value = loads_bounded(raw)
    except (ValueError, RecursionError):
        return raw
    if not isinstance(value, dict):
        return raw
    text = value.get("text")
    return text if isinstance(text, str) else None


def _requested(raw: Any, problems: list[str]) -> Iterator[tuple[str, str, str | None]]:
    """(name, call id, arguments as JSON text) of each call of a step output's `toolCalls`; what cannot be read
    counted."""
    key = m.MASTRA_STEP_OUTPUT
    value = _parsed(raw)
    if not isinstance(value, dict):
        problems.append(key)
        return
    calls = value.get("toolCalls")
    if calls is None:  # none recorded
        return
    if not isinstance(calls, list):
        problems.append(key)
        return
    yield from sdk_calls(calls, key, problems)
