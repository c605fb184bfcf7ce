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
is read from it, nothing is counted. Strands Agents puts a chat span's output in its span events: read from there
(add_requested_events) when the attribute is not set. Newer OpenLLMetry versions set `gen_ai.operation.name` on their
model request spans (with their `llm.request.type`) and flatten the calls into `gen_ai.completion.*`: when the output
messages hold no tool_call part (not set, cut, not messages, or without one), those are read as for OpenLLMetry's own
spans (monitor.normalize._flat): never both for one span (add_model_request).

The C normalizer (monitor/normalize/_cgenai.c) reads the common output texts itself, to the same records; it hands
this module every other value, and every text holding something it would count as ignored.

google-adk (its tracer scope, _markers.ADK_SCOPE) records no input on its `invoke_agent` spans, nor OpenLLMetry's
openai-agents instrumentation on its `agent` spans (_markers.OTEL_OPENAI_AGENTS_SCOPE, also contrib's, which does): each
model request span of these scopes, and of OpenLIT's (_markers.is_openlit: its LangGraph run records no input on
its root `invoke_workflow` span), yields an InputMark of the latest user message with text of its
`gen_ai.input.messages`, ADK's transcript of another agent left out (add_model_input), joined at release by turn
assembly (monitor.assembly._offered). The C normalizer hands these scopes' spans of another operation to Python, whole.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, TypeVar

from monitor._json import loads_bounded
from monitor.normalize import (
    _genai,  # its attributes are read when called: _genai imports this module
    _markers,
)
from monitor.otlp import Span
from monitor.records import InputMark, RequestedCall, ToolCall, Turn

CHAT = "chat"
TEXT_COMPLETION = "text_completion"
GENERATE_CONTENT = "generate_content"
# The model request operations: their output may ask for calls, and they may offer tools (monitor.normalize._offered).
MODEL_REQUESTS = frozenset({CHAT, TEXT_COMPLETION, GENERATE_CONTENT})
MAX_REQUESTED_PER_SPAN = 64  # tool_call parts read from one chat span; the rest are counted and dropped
TOOL_CALL_MARK = '"tool_call"'  # in the JSON text of any output holding a tool_call part: others are not parsed
_DETAILS = "gen_ai.client.inference.operation.details"  # Strands' event with the messages (latest conventions)
_CHOICE = "gen_ai.choice"  # Strands' event with the model's output content blocks
_TOOL_USE = '"toolUse"'  # in the JSON text of content blocks holding a tool use: others are not parsed

FIRST_REQUESTED = "#00"  # how the span id of a span's first requested call ends (new_requested: `#`, index, 2 digits)

_new = object.__new__
D = TypeVar("D", bound=ToolCall)
# The message contents a requested call does not keep of its chat span's attributes: a pending call would otherwise
# hold the conversation's whole history (and the model's output) until its turn is judged, which never reads them.
CONTENT_KEYS = frozenset({"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                           "gen_ai.tool.definitions"})


def _kept(attrs: Any) -> dict[str, Any]:
    """A chat span's attributes without the message contents (see CONTENT_KEYS), for its requested calls."""
    return {k: v for k, v in attrs.items() if k not in CONTENT_KEYS}


def add_model_request(span: Span, op: str, out: list[ToolCall | Turn | Span], problems: list[str]) -> None:
    """Append to `out` the calls a span of another GenAI operation asked for (nothing for an operation other than a
    model request): those of its output messages (the attribute, else its events: Strands Agents); when they hold no
    tool_call part and the span is OpenLLMetry's too (`llm.request.type`), the calls it flattens."""
    if op not in MODEL_REQUESTS:
        return
    attrs = span.attributes
    if attrs.get(_genai.OUTPUT_MESSAGES) is not None:
        if add_requested(span, op, out, problems):
            return
    elif span.events and add_requested_events(span, op, out, problems):
        return
    if _markers.TL_REQUEST_TYPE in attrs:
        from monitor.normalize._flat import add_flat_of  # imports this module: imported on first use

        add_flat_of(span, out, problems)


def add_requested(span: Span, op: str, out: list[ToolCall | Turn | Span], problems: list[str]) -> bool:
    """Append to `out` the calls a model request span asked for (nothing for any other operation). Whether its output
    messages hold a tool_call part (then they say which calls it asked for, even if none could be read)."""
    if op not in MODEL_REQUESTS:
        return False
    attrs = span.attributes
    key = _genai.OUTPUT_MESSAGES
    truncated = attrs.get(_genai.TRUNCATED)
    if isinstance(truncated, str | tuple) and key in truncated:
        return False  # cut by the instrumentation: not captured
    raw = attrs.get(key)
    messages = _messages(raw, problems)
    if messages is None:
        return False
    obj = isinstance(raw, tuple)  # structured: an empty value (kvlist or array alike) is an object where expected
    kept: dict[str, Any] | None = None  # the attributes the span's requested calls share, made for the first one
    n = 0
    parts_seen = False
    for m in messages:
        parts = m.get("parts") if isinstance(m, dict) else None
        if not isinstance(parts, list):
            if parts is not None or not isinstance(m, dict):
                problems.append(key)
            continue
        for p in parts:
            if not isinstance(p, dict) or p.get("type") != "tool_call":
                continue
            parts_seen = True
            call = _requested(span, p, n, problems, obj) if n < MAX_REQUESTED_PER_SPAN else None
            if call is None:
                problems.append(key)
                continue
            if kept is None:
                kept = _kept(attrs)
            call.attributes = kept
            out.append(call)
            n += 1
    return parts_seen


def add_requested_events(span: Span, op: str, out: list[ToolCall | Turn | Span], problems: list[str]) -> bool:
    """add_requested for a model request span whose output is in its span events (Strands Agents): the
    `gen_ai.output.messages` of its `gen_ai.client.inference.operation.details` event (gen_ai_latest_experimental),
    or the `toolUse` content blocks of its `gen_ai.choice` event's `message` (`{"toolUse": {"toolUseId", "name",
    "input"}}`), read as the attribute is (a block that cannot be read counted as `gen_ai.output.messages`). Whether
    they hold a tool_call part, as add_requested."""
    if op not in MODEL_REQUESTS:
        return False
    key = _genai.OUTPUT_MESSAGES
    raw: Any = None
    for ev in span.events or ():
        attrs = ev.attributes
        if ev.name == _DETAILS and attrs.get(key) is not None:
            raw = attrs[key]
        elif ev.name == _CHOICE and isinstance(attrs.get("message"), str) and _TOOL_USE in attrs["message"]:
            raw = _tool_uses(attrs["message"], problems)
    if raw is None:
        return False
    return add_requested(replace(span, attributes={**span.attributes, key: raw}, events=None), op, out, problems)


def _tool_uses(text: str, problems: list[str]) -> str | None:
    """Strands' content blocks as GenAI output messages: one assistant message of their `toolUse` blocks as
    `tool_call` parts."""
    try:
        blocks = loads_bounded(text)
    except (ValueError, RecursionError):
        blocks = None
    if not isinstance(blocks, list):
        problems.append(_genai.OUTPUT_MESSAGES)
        return None
    parts: list[dict[str, Any]] = []
    for b in blocks:
        use = b.get("toolUse") if isinstance(b, dict) else None
        if use is None:
            continue
        if not isinstance(use, dict):
            problems.append(_genai.OUTPUT_MESSAGES)
            continue
        part = {"type": "tool_call", "id": use.get("toolUseId"), "name": use.get("name"), "arguments": use.get("input")}
        parts.append({k: v for k, v in part.items() if v is not None})
    if not parts:
        return None
    try:
        return json.dumps([{"role": "assistant", "parts": parts}])
    except RecursionError:  # an input json.loads could take but not nested a level deeper, as output messages are
        problems.append(_genai.OUTPUT_MESSAGES)
        return None


def add_requested_of(span: Span, out: list[ToolCall | Turn | Span], problems: list[str]) -> None:
    """add_requested (and the tools it offered: monitor.normalize._offered; the input a google-adk model request was
    given: add_model_input) for a span no convention mapped (Normalizer with several conventions): its operation read
    as the GenAI conventions read it; the calls and tools OpenInference and OpenLLMetry flatten, and handoffs, as
    _foreign reads them (monitor.normalize._flat)."""
    attrs = span.attributes
    genai = attrs.get(_genai.OUTPUT_MESSAGES) is not None or attrs.get(_genai.TOOL_DEFINITIONS) is not None
    op = _genai.operation(span)
    if genai or span.events:
        if op is not None:
            add_model_request(span, op, out, problems)
            if attrs.get(_genai.TOOL_DEFINITIONS) is not None:
                from monitor.normalize._offered import add_offered  # imports this module: imported on first use

                add_offered(span, op, out)
    elif _markers.OI_KIND in attrs or _markers.TL_REQUEST_TYPE in attrs:
        from monitor.normalize._flat import add_flat_of  # imports this module: imported on first use

        add_flat_of(span, out, problems)
    if op is not None:
        add_model_input(span, op, out)


# ADK's transcript of another agent's events, given to the model as a user message: a first text part opening with
# this (`For context:` alone in ADK 1.x, a preamble starting so in 2.x), then a part per event, `[{agent}] ...`.
_ADK_TRANSCRIPT = "For context:"
# The scopes whose model requests give the input their model was given (add_model_input), beside OpenLIT's.
_INPUT_SCOPES = (_markers.ADK_SCOPE, _markers.OTEL_OPENAI_AGENTS_SCOPE, _markers.MLFLOW_SCOPE)


def add_model_input(span: Span, op: str, out: list[ToolCall | Turn | Span]) -> None:
    """A model request span of google-adk, of openai-agents through OpenTelemetry's or OpenLLMetry's instrumentation,
    of MLflow translated to the GenAI conventions or of OpenLIT (their tracer scopes; nothing for another scope or
    operation): an InputMark of the latest user message with text of its `gen_ai.input.messages` (JSON text or the
    structured form), its text parts (and plain `content`) joined by newlines. ADK records no input on its
    `invoke_agent` spans (nor MLflow's GenAI mode on its own, nor OpenLIT on its LangGraph run's `invoke_workflow`
    span): the mark of a turn's first model request is its input (monitor.assembly._offered). Left out, as not the
    user's question: the earlier user messages (a conversation's history), a user message without text (ADK gives
    tool responses as user messages), and ADK's transcript of another agent (after a transfer, the sub-agent's model
    is given the triage agent's call and its result as user messages after the question: a first text part opening
    with `For context:` and a second opening with `[`). Nothing when no user message has text (content capture off, a
    value of another type or not JSON: not captured, not counted)."""
    if op not in MODEL_REQUESTS or (span.scope not in _INPUT_SCOPES and not _markers.is_openlit(span.scope)):
        return
    raw = span.attributes.get(_genai.INPUT_MESSAGES)
    messages: Any
    try:
        if isinstance(raw, str):
            messages = loads_bounded(raw)
        elif isinstance(raw, tuple):
            messages = _genai.structured(raw)
        else:
            return
    except (ValueError, RecursionError):
        return
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        return
    for msg in reversed(messages):
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        text = _genai._texts(msg, None)
        if text and not _adk_transcript(msg):
            add_input_mark(span, text, out)
            return


def _adk_transcript(msg: dict[str, Any]) -> bool:
    """Whether a user message is ADK's transcript of another agent: its first two text parts open with
    _ADK_TRANSCRIPT and `[`."""
    parts = msg.get("parts")
    if not isinstance(parts, list):
        return False
    texts = [p["content"] for p in parts
             if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str)]  # fmt: skip
    return len(texts) > 1 and texts[0].startswith(_ADK_TRANSCRIPT) and texts[1].startswith("[")


def _messages(raw: Any, problems: list[str]) -> list[Any] | None:
    """The output messages as a list; None when they hold no tool_call part or are not messages (counted)."""
    messages: Any
    if isinstance(raw, str):
        if TOOL_CALL_MARK not in raw:
            return None
        try:
            messages = loads_bounded(raw)
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
    key = _genai.OUTPUT_MESSAGES
    named = name_and_id(part, key, problems)
    if named is None:
        return None
    name, call_id = named
    args = part.get("arguments")
    if obj and args == []:
        args = {}
    return new_requested(span, name, call_id, arguments_text(args, key, problems), index)


def arguments_text(args: Any, key: str, problems: list[str]) -> str | None:
    """A requested call's arguments as JSON text: a text (or None) as it is, an object encoded; a value of another
    type encoded too, counted under `key` (the conventions give the arguments as an object); None when it cannot be
    encoded (bytes in a structured value; nested past the stack: json.dumps nests a level deeper than json.loads)."""
    if args is None or isinstance(args, str):
        return args
    if not isinstance(args, dict):
        problems.append(key)
    try:
        return json.dumps(args)
    except (TypeError, ValueError, RecursionError):
        return None


MAX_INDEX_DIGITS = 9  # of an index in a flattened key (OpenInference, OpenLLMetry); past it the key cannot be read


def flat_index(text: str) -> int | None:
    """The index of a flattened key's item (`llm.tools.{i}...`, `gen_ai.completion.{i}...`); None when it is not one."""
    return int(text) if 0 < len(text) <= MAX_INDEX_DIGITS and text.isascii() and text.isdigit() else None


def name_and_id(part: dict[str, Any], key: str, problems: list[str]) -> tuple[str, str] | None:
    """The `name` and `id` of a requested call as a producer gives them (None: no name, no call); an id of another
    type is converted, and counted under `key`."""
    name = part.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    call_id = part.get("id")
    if call_id is None:
        return name, ""
    if not isinstance(call_id, str):
        problems.append(key)
        call_id = str(call_id)
    return name, call_id


def new_requested(span: Span, name: str, call_id: str, arguments: str | None, index: int) -> RequestedCall:
    """The `index`th call a model request span asked for: under the span (its id and the index), at the span's end
    (when the model had asked). Its attributes are set by the caller: the span's without the message contents."""
    call = derived(RequestedCall, span, f"{index:02d}", name, span.end_ns)
    call.call_id = call_id
    call.arguments = arguments
    return call


def add_input_mark(span: Span, text: str, out: list[ToolCall | Turn | Span], answer: str | None = None) -> None:
    """The input `span` was given (and the answer its run gave), for the turn above it when that turn's own span
    records none: an InputMark under the span, from its start, `text` in its `arguments`, `answer` in its `result`
    (monitor.records.InputMark)."""
    mark = derived(InputMark, span, "input", "", span.start_ns)
    mark.arguments = text
    mark.result = answer
    out.append(mark)


def derived(cls: type[D], span: Span, suffix: str, name: str, start_ns: int) -> D:
    """A record a span yields beside itself (a requested call, a handoff mark, the tools offered): under the span (its
    id and `#suffix`) from `start_ns` to the span's end, with no call id, arguments, result or attributes of its own."""
    r = _new(cls)
    r.name = name
    r.call_id = ""
    r.arguments = None
    r.result = None
    r.error_type = None
    r.trace_id = span.trace_id
    r.span_id = f"{span.span_id}#{suffix}"
    r.parent_span_id = span.span_id
    r.start_ns = start_ns
    r.end_ns = span.end_ns
    r.attributes = {}
    return r
