"""The calls a model requested: the `tool_call` parts of a chat span's `gen_ai.output.messages` (GenAI conventions).

A model request span (`gen_ai.operation.name` chat / text_completion / generate_content) whose output messages were
captured may hold `tool_call` parts (`{"type": "tool_call", "id", "name", "arguments"}`, the arguments an object or
JSON text): the calls the model asked for. Each becomes a `RequestedCall` placed under its chat span (span id: the
chat span's id and the part's index; parent: the chat span; start and end: the chat span's end, when the model had
asked). Turn assembly reconciles them with the calls that ran (monitor.assembly._reconcile).

Every part of every output message is read, at most MAX_REQUESTED_PER_SPAN per span. What cannot be read (a value
that is not JSON messages, a tool_call part without a name, a part past the bound, an id or arguments of another
type) is ignored and counted as an ignored `gen_ai.output.messages` (once per span for the value, once per part);
it never rejects the span. An output cut by the instrumentation (`toolwatch.truncated`) was not captured: no call
is read from it, nothing is counted.
"""

from __future__ import annotations

import json
from typing import Any

from monitor.normalize import (
    _genai,  # its attributes are read when called: _genai imports this module
    _markers,
)
from monitor.otlp import Span
from monitor.records import RequestedCall, ToolCall, Turn

CHAT = "chat"
TEXT_COMPLETION = "text_completion"
GENERATE_CONTENT = "generate_content"
MAX_REQUESTED_PER_SPAN = 64  # tool_call parts read from one chat span; the rest are counted and dropped
_MARK = '"tool_call"'  # in the JSON text of any output holding a tool_call part: others are not parsed

_new = object.__new__
# The message contents a requested call does not keep of its chat span's attributes: a pending call would otherwise
# hold the conversation's whole history (and the model's output) until its turn is judged, which never reads them.
_CONTENT_KEYS = frozenset({"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                           "gen_ai.tool.definitions"})


def _kept(attrs: Any) -> dict[str, Any]:
    """A chat span's attributes without the message contents (see _CONTENT_KEYS), for its requested calls."""
    return {k: v for k, v in attrs.items() if k not in _CONTENT_KEYS}


def add_requested(span: Span, op: str, out: list[ToolCall | Turn | Span], problems: list[str]) -> None:
    """Append to `out` the calls a model request span asked for (nothing for any other operation)."""
    if not (op == CHAT or op == TEXT_COMPLETION or op == GENERATE_CONTENT):
        return
    attrs = span.attributes
    key = _genai.OUTPUT_MESSAGES
    truncated = attrs.get(_genai.TRUNCATED)
    if isinstance(truncated, str | tuple) and key in truncated:
        return  # cut by the instrumentation: not captured
    raw = attrs.get(key)
    messages = _messages(raw, problems)
    if messages is None:
        return
    obj = isinstance(raw, tuple)  # structured: an empty value (kvlist or array alike) is an object where expected
    kept: dict[str, Any] | None = None  # the attributes the span's requested calls share, made for the first one
    n = 0
    for m in messages:
        parts = m.get("parts") if isinstance(m, dict) else None
        if not isinstance(parts, list):
            if parts is not None or not isinstance(m, dict):
                problems.append(key)
            continue
        for p in parts:
            if not isinstance(p, dict) or p.get("type") != "tool_call":
                continue
            call = _requested(span, p, n, problems, obj) if n < MAX_REQUESTED_PER_SPAN else None
            if call is None:
                problems.append(key)
                continue
            if kept is None:
                kept = _kept(attrs)
            call.attributes = kept
            out.append(call)
            n += 1


def add_requested_of(span: Span, out: list[ToolCall | Turn | Span], problems: list[str]) -> None:
    """add_requested for a span no convention mapped (Normalizer with several conventions): its operation read as
    the GenAI conventions read it; the calls OpenInference and OpenLLMetry flatten, and handoffs, as _foreign reads
    them (monitor.normalize._flat)."""
    attrs = span.attributes
    if attrs.get(_genai.OUTPUT_MESSAGES) is not None:
        op = _genai.operation(span)
        if op is not None:
            add_requested(span, op, out, problems)
    elif _markers.OI_KIND in attrs or _markers.TL_REQUEST_TYPE in attrs:
        from monitor.normalize._flat import add_flat_of  # imports this module: imported on first use

        add_flat_of(span, out, problems)


def _messages(raw: Any, problems: list[str]) -> list[Any] | None:
    """The output messages as a list; None when they hold no tool_call part or are not messages (counted)."""
    messages: Any
    if isinstance(raw, str):
        if _MARK not in raw:
            return None
        try:
            messages = json.loads(raw)
        except (ValueError, RecursionError):
            messages = None
    elif isinstance(raw, tuple):
        try:
            messages = _genai.structured(raw)
        except RecursionError:
            messages = None
    else:
        messages = None
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        problems.append(_genai.OUTPUT_MESSAGES)
        return None
    return messages


def _requested(span: Span, part: dict[str, Any], index: int, problems: list[str], obj: bool) -> RequestedCall | None:
    """The call of one tool_call part; None when it has no name. `obj`: the part was read from the structured form,
    where empty arguments are `{}` (as a tool span's, see _genai.structured)."""
    name = part.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    key = _genai.OUTPUT_MESSAGES
    call_id = part.get("id")
    if call_id is None:
        call_id = ""
    elif not isinstance(call_id, str):
        problems.append(key)
        call_id = str(call_id)
    args = part.get("arguments")
    if obj and args == []:
        args = {}
    arguments: str | None
    if args is None or isinstance(args, str):
        arguments = args
    else:
        if not isinstance(args, dict):
            problems.append(key)  # the conventions give the arguments as an object
        try:
            arguments = json.dumps(args)
        except (TypeError, ValueError):  # bytes in a structured value
            arguments = None
    call = _new(RequestedCall)
    call.name = name
    call.call_id = call_id
    call.arguments = arguments
    call.result = None
    call.error_type = None
    call.trace_id = span.trace_id
    call.span_id = f"{span.span_id}#{index:02d}"
    call.parent_span_id = span.span_id
    call.start_ns = span.end_ns
    call.end_ns = span.end_ns
    call.attributes = {}  # set by add_requested: the span's attributes without the message contents
    return call
