"""Span -> ToolCall / Turn for the OpenTelemetry GenAI semantic conventions.

This is the one place that knows span shapes; another convention (OpenInference, OpenLLMetry) is
another `Convention` mapping spans to the same records.
"""

from __future__ import annotations

import json
import json.decoder
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

from monitor.otlp import STATUS_ERROR, Span
from monitor.records import ToolCall, Turn

OP = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
CASE_ID = "toolwatch.case.id"
TRUNCATED = "toolwatch.truncated"  # keys whose values the instrumentation cut (no longer valid JSON)

_MISSING = object()

EXECUTE_TOOL = "execute_tool"
INVOKE_AGENT = "invoke_agent"

# Rejection reasons (label values of toolwatch_spans_rejected_total).
REASON_NO_TOOL_NAME = "missing_tool_name"


class Rejected:
    """A span that looks like a tool call or a turn but cannot be used; `reason` is a fixed label value."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"Rejected({self.reason!r})"


Normalized = ToolCall | Turn | Rejected | None
"""A tool call, a turn (with no calls yet), a rejection, or None for any other span (kept only as a parent link)."""


class Convention(Protocol):
    """Maps one span to a record. `problems` collects the names of attributes that had to be ignored."""

    def normalize(self, span: Span, problems: list[str]) -> Normalized: ...


def _str_attr(attrs: Mapping[str, Any], key: str, problems: list[str]) -> str | None:
    v = attrs.get(key)
    if v is None or isinstance(v, str):
        return v
    problems.append(key)
    return None


def _json_attr(attrs: Mapping[str, Any], key: str, problems: list[str]) -> str | None:
    """JSON text attributes (arguments, results): a structured value is re-encoded as JSON."""
    v = attrs.get(key)
    if v is None or isinstance(v, str):
        return v
    problems.append(key)
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return None


# One message with one text part, as compact JSON (what the toolwatch instrumentation writes), read with
# string operations (and json's own string scanner when the text has escapes). Anything else takes the
# general JSON path.
# json's string scanner (C when available): text from just after an opening quote -> (text, index after the quote).
_scanstring = cast(Callable[[str, int], tuple[str, int]], vars(json.decoder)["scanstring"])
_ROLE_PREFIX = '[{"role":"'
_PARTS = '","parts":[{"type":"text","content":"'
_ENDS = frozenset({'"}]}]', '"}],"finish_reason":"stop"}]', '"}],"finish_reason":"length"}]'})


def _one_text(raw: str) -> tuple[str, str] | None:
    if not raw.startswith(_ROLE_PREFIX):
        return None
    i = raw.find('"', 10)
    if i < 0 or not raw.startswith(_PARTS, i):
        return None
    role = raw[10:i]
    if "\\" in role:
        return None
    start = i + len(_PARTS)
    end = raw.find('"', start)
    if end < 0:
        return None
    text = raw[start:end]
    if "\\" not in text and text.isprintable():  # no escapes, no raw control characters (invalid JSON)
        return (role, text) if raw[end:] in _ENDS else None
    try:
        text, after = _scanstring(raw, start)  # the same decoding (and errors) as json.loads
    except ValueError:
        return None
    return (role, text) if raw[after - 1 :] in _ENDS else None


def message_text(raw: Any, *, roles: tuple[str, ...] | None = None) -> str | None:
    """The text parts of a GenAI messages JSON value, joined by newlines (None when it holds no messages).

    Accepts the structured form (`[{"role", "parts": [{"type": "text", "content"}]}]`) and the plain
    `content` string form some emitters use.
    """
    if not isinstance(raw, str):
        return None
    one = _one_text(raw)
    if one is not None:
        return None if roles is not None and one[0] not in roles else one[1]
    try:
        messages = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        return None
    texts: list[str] = []
    for m in messages:
        if not isinstance(m, dict) or (roles is not None and m.get("role") not in roles):
            continue
        content = m.get("content")
        if isinstance(content, str):
            texts.append(content)
        parts = m.get("parts")
        if isinstance(parts, list):
            for p in parts:
                if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str):
                    texts.append(p["content"])
    return "\n".join(texts) if texts else None


_DEFINITIONS_CACHE: dict[str, tuple[Mapping[str, Any], ...] | None] = {}
_DEFINITIONS_CACHE_MAX = 256
_DEFINITIONS_CACHE_TEXT_MAX = 64 * 1024  # longer texts are parsed every time, not kept (256 x 64 KiB at most)


def _tool_definitions(raw: Any) -> tuple[Mapping[str, Any], ...] | None:
    """The offered tools. An agent offers the same definitions on every turn: parsed once, then shared (read-only)."""
    if not isinstance(raw, str):
        return None
    cached = _DEFINITIONS_CACHE.get(raw, _MISSING)
    if cached is not _MISSING:
        return cached  # type: ignore[return-value]
    try:
        defs = json.loads(raw)
    except (ValueError, RecursionError):
        defs = None
    out = tuple(d for d in defs if isinstance(d, dict)) if isinstance(defs, list) else None
    if len(raw) > _DEFINITIONS_CACHE_TEXT_MAX:
        return out
    if len(_DEFINITIONS_CACHE) >= _DEFINITIONS_CACHE_MAX:
        _DEFINITIONS_CACHE.pop(next(iter(_DEFINITIONS_CACHE)))
    _DEFINITIONS_CACHE[raw] = out
    return out


def _operation(span: Span) -> str | None:
    op = span.attributes.get(OP)
    if isinstance(op, str):
        return op
    name = span.name
    if name.startswith(EXECUTE_TOOL):
        return EXECUTE_TOOL
    if name.startswith(INVOKE_AGENT):
        return INVOKE_AGENT
    return None


class GenAIConvention:
    """The OpenTelemetry GenAI conventions (DESIGN.md, span contract)."""

    def normalize(self, span: Span, problems: list[str]) -> Normalized:
        op = _operation(span)
        if op == EXECUTE_TOOL:
            return self._tool_call(span, problems)
        if op == INVOKE_AGENT:
            return self._turn(span, problems)
        return None

    def _tool_call(self, span: Span, problems: list[str]) -> ToolCall | Rejected:
        attrs = span.attributes
        name = attrs.get(TOOL_NAME)
        if not isinstance(name, str) or not name:
            if name is not None:
                problems.append(TOOL_NAME)
            # The span name is `execute_tool {gen_ai.tool.name}`.
            name = span.name[len(EXECUTE_TOOL) + 1 :].strip() if span.name.startswith(EXECUTE_TOOL + " ") else ""
            if not name:
                return Rejected(REASON_NO_TOOL_NAME)
        error_type = _str_attr(attrs, ERROR_TYPE, problems)
        if error_type is None and span.status_code == STATUS_ERROR:
            error_type = span.status_message or "error"
        call_id = attrs.get(TOOL_CALL_ID)
        if call_id is not None and not isinstance(call_id, str):
            problems.append(TOOL_CALL_ID)
            call_id = str(call_id)
        arguments = _json_attr(attrs, TOOL_ARGS, problems)
        truncated = attrs.get(TRUNCATED)
        if truncated is not None and not isinstance(truncated, str | tuple):
            problems.append(TRUNCATED)  # a list of keys, or one key; anything else says nothing
            truncated = None
        if arguments is not None and truncated is not None and TOOL_ARGS in truncated:
            arguments = None  # a cut argument text is not captured, never "malformed" (METRICS.md)
        return ToolCall(
            name,
            call_id or "",
            arguments,
            _json_attr(attrs, TOOL_RESULT, problems),
            error_type,
            span.trace_id,
            span.span_id,
            span.parent_span_id,
            span.start_ns,
            span.end_ns,
            attrs,
        )

    def _turn(self, span: Span, problems: list[str]) -> Turn:
        attrs = span.attributes
        agent = _str_attr(attrs, AGENT_NAME, problems)
        if agent is None and span.name.startswith(INVOKE_AGENT + " "):
            agent = span.name[len(INVOKE_AGENT) + 1 :].strip()
        raw_in = attrs.get(INPUT_MESSAGES)
        if raw_in is not None and not isinstance(raw_in, str):
            problems.append(INPUT_MESSAGES)
        text = message_text(raw_in, roles=("user",))
        if text is None:
            text = message_text(raw_in) or ""
        raw_out = attrs.get(OUTPUT_MESSAGES)
        if raw_out is not None and not isinstance(raw_out, str):
            problems.append(OUTPUT_MESSAGES)
        case_id = attrs.get(CASE_ID)
        if case_id is not None and not isinstance(case_id, str):
            case_id = str(case_id)
        return Turn(
            input_text=text,
            agent=agent or "",
            trace_id=span.trace_id,
            span_id=span.span_id,
            conversation_id=_str_attr(attrs, CONVERSATION_ID, problems),
            case_id=case_id,
            output_text=message_text(raw_out, roles=("assistant",)) or message_text(raw_out),
            tool_definitions=_tool_definitions(attrs.get(TOOL_DEFINITIONS)),
            start_ns=span.start_ns,
            end_ns=span.end_ns,
            attributes=attrs,
            resource=span.resource,
        )
