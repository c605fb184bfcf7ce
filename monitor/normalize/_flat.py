"""The calls a model requested as OpenInference and OpenLLMetry (Traceloop) record them: flattened attributes of the
model request span, mapped to the RequestedCall records of the GenAI `tool_call` parts (monitor.normalize._requested);
and openai-agents' handoffs through OpenInference, which are no calls (HandoffMark), and the input the LLM spans of
openai-agents and LlamaIndex were given (InputMark, add_openinference_input).

- OpenInference LLM span: `llm.output_messages.{i}.message.tool_calls.{j}.tool_call.id`, `.tool_call.function.name`,
  `.tool_call.function.arguments` (JSON text; openai-agents leaves out `{}`: then not captured). LangChain.js'
  (_markers.OI_LANGCHAIN_SCOPES) leaves the id out: a call without one is given the id its run's output names for it
  (`output.value`, the AIMessage serialized: _lcmessages.output_calls), so that it pairs with the tool's run by id
  (two calls of one tool in one step alike). It flattens only the message's `additional_kwargs.tool_calls`
  (OpenAI's form), which @langchain/anthropic, @langchain/google-genai and @langchain/ollama leave empty: a message
  with none flattened gives the calls of its `tool_calls` (LangChain's form, `{"name", "args", "id"}`, the arguments
  an object, given as JSON text) and `invalid_tool_calls` (the arguments' text) in the run's output. google-genai's
  (openinference-instrumentation-google-genai) records the calls of the SDK's automatic function calling, which
  happen inside the one span, as top-level `message.tool_calls.{j}.tool_call.function.name` / `.arguments` (no id):
  read before the output messages' calls, without the first K, K the calls of its input messages
  (`llm.input_messages.{i}.message.tool_calls.{j}`: the SDK's history starts with the request's contents, a chat's
  earlier turns).
- OpenLLMetry chat span (`llm.request.type`; newer versions set `gen_ai.operation.name` too, and then these are read
  when its `gen_ai.output.messages` hold no tool_call part, see _requested.add_model_request):
  `gen_ai.completion.{i}.tool_calls.{j}.id`, `.name`, `.arguments`; and the legacy single function call,
  `gen_ai.completion.{i}.function_call.name`, `.arguments` (no id), read as call (i, -1): LiteLLM's OpenTelemetry
  callback writes each tool call so, i the call's index, and leaves the calls out of its GenAI output messages.

The calls are read in (i, j) order, at most MAX_REQUESTED_PER_SPAN per span, each placed as _requested places a
`tool_call` part (span id: the span's id and the call's index; parent: the span; start and end: the span's end),
keeping the span's attributes without the message contents. What cannot be read (a call without a str name, an id
or arguments of another type, a call past the bound, a call's key whose index is none) is ignored and counted under
one key per producer (`llm.output_messages`, `gen_ai.completion`); it never rejects the span.
"""

from __future__ import annotations

import re
from typing import Any

from monitor.normalize import _lcmessages as lc
from monitor.normalize import _markers as m
from monitor.normalize._offered import add_openinference_tools, add_traceloop_tools
from monitor.normalize._requested import (
    CONTENT_KEYS,
    MAX_REQUESTED_PER_SPAN,
    add_input_mark,
    arguments_text,
    derived,
    flat_index,
    name_and_id,
    new_requested,
)
from monitor.otlp import Span
from monitor.records import HandoffMark, RequestedCall, ToolCall, Turn

Out = list[ToolCall | Turn | Span]

_OI_PREFIX = m.OI_OUTPUT_MESSAGES + "."
_OI_CALLS = "message.tool_calls."
_OI_FIELDS = {"tool_call.id": "id", "tool_call.function.name": "name", "tool_call.function.arguments": "arguments"}
_OI_HISTORY = "message.tool_calls."  # top-level: google-genai's automatic function calling history
_OI_INPUT_CALLS = m.OI_INPUT_MESSAGES + "."
_OI_CALL_NAME = ".tool_call.function.name"
_TL_PREFIX = m.TL_COMPLETION + "."
_TL_CALLS = "tool_calls."
_TL_FIELDS = {"id": "id", "name": "name", "arguments": "arguments"}
_TL_FUNCTION_CALL = "function_call."  # `gen_ai.completion.{i}.function_call.{name,arguments}`: one call, no id
# The message contents a requested call does not keep of its span's attributes (the GenAI ones too: a span may have
# both, see _requested.add_model_request).
_CONTENT_PREFIXES = (
    *sorted(CONTENT_KEYS),
    "llm.input_messages.",
    _OI_PREFIX,
    _OI_HISTORY,
    "llm.tools.",
    "llm.prompts",
    "llm.prompt_template.",
    "input.",
    "output.",
    "gen_ai.prompt.",
    _TL_PREFIX,
    "llm.request.functions.",
    "traceloop.entity.input",
    "traceloop.entity.output",
)
_HANDOFF_PREFIX = "handoff to "  # openai-agents through OpenInference names a handoff span `handoff to {agent}`
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")


def add_openinference(span: Span, out: Out, problems: list[str]) -> None:
    """The calls an OpenInference LLM span's output messages hold, after those of google-genai's history (and, of a
    LangChain LLM span, those its run's output holds that its output messages leave out)."""
    attrs = span.attributes
    slots, bad = _slots(attrs, _OI_PREFIX, _OI_CALLS, _OI_FIELDS)
    if span.scope in m.OI_LANGCHAIN_SCOPES:
        _langchain_calls(attrs, slots, problems, js=span.scope == m.OI_LANGCHAIN_JS_SCOPE)
    bad += _history(attrs, slots)
    problems.extend([m.OI_OUTPUT_MESSAGES] * bad)
    _emit(span, slots, m.OI_OUTPUT_MESSAGES, out, problems)


def _langchain_calls(attrs: Any, slots: dict[tuple[int, int], dict[str, Any]], problems: list[str], *,
                     js: bool) -> None:  # fmt: skip
    """What a LangChain LLM span's run output (`output.value`, _lcmessages.output_calls) adds to the calls of its
    output messages, read only when there is some (parsed with loads_bounded; an output that cannot be read adds
    nothing, not counted):
    - each call without an id (absent or empty) is given the id the output names for it (_lcmessages.call_id); none
      when it names no call of that tool at that place;
    - a message none of whose calls were flattened (`additional_kwargs.tool_calls` empty: an integration that fills
      only the parsed `tool_calls`) gives the calls of its `tool_calls` and `invalid_tool_calls`
      (_lcmessages.parsed_calls) as calls (i, j), read as a flattened call is (_parsed_slot); only when the output
      holds a list of calls, valid or invalid, that is not empty (as the instrumentation's JSON writes its start,
      LangChain.js' (`js`) or Python's: _lcmessages.CALLS_LIST_MARKS) and a message its output messages give has no
      call among them."""
    text = attrs.get(m.OI_OUTPUT)
    if not isinstance(text, str):
        return
    listed = (_CALLS_LIST_JS if js else _CALLS_LIST_PY) in text  # one search of the text: an answer's is not parsed
    if not slots:
        if listed:
            _add_parsed(lc.output_calls(text), slots, problems)
        return
    missing = [at for at, slot in slots.items() if not slot.get("id") and isinstance(slot.get("name"), str)]
    if not missing and not (listed and _uncovered(attrs, slots)):
        return  # every call with its id, every message with its calls (Python's instrumentation)
    messages = lc.output_calls(text)
    for i, j in missing:
        if i < len(messages):
            cid = lc.call_id(messages[i], j, slots[i, j]["name"])
            if cid is not None:
                slots[i, j]["id"] = cid
    if listed:
        _add_parsed(messages, slots, problems)


_CALLS_LIST_JS, _CALLS_LIST_PY = lc.CALLS_LIST_MARKS


def _add_parsed(messages: list[lc.OutputCalls], slots: dict[tuple[int, int], dict[str, Any]],
                problems: list[str]) -> None:  # fmt: skip
    """Into `slots`, the parsed calls of each message none of whose calls are there; those after the
    MAX_REQUESTED_PER_SPAN-th call with a name in (i, j) order (flattened ones too), which _emit would not give, are
    counted under llm.output_messages as it counts them, without being built (an output within loads_bounded's
    budget may hold hundreds of thousands)."""
    named: dict[int, int] = {}  # of each message whose calls were flattened, its calls with a name
    for (i, _), slot in slots.items():
        named[i] = named.get(i, 0) + _named(slot)
    before = 0  # calls with a name before the message read
    for i, calls in enumerate(messages):
        if i in named:
            before += named[i]
            continue
        parsed = lc.parsed_calls(calls)
        for j, call in enumerate(parsed):
            if before >= MAX_REQUESTED_PER_SPAN:
                problems.extend([m.OI_OUTPUT_MESSAGES] * (len(parsed) - j))
                break
            slot = slots[i, j] = _parsed_slot(call, problems)
            before += _named(slot)


def _named(slot: dict[str, Any]) -> bool:
    """Whether a call's slot has a name (_emit gives it, name_and_id: counting it against MAX_REQUESTED_PER_SPAN)."""
    name = slot.get("name")
    return isinstance(name, str) and bool(name.strip())


def _uncovered(attrs: Any, slots: dict[tuple[int, int], dict[str, Any]]) -> bool:
    """Whether an output message is given (any attribute under its index) that has none of the calls in `slots`."""
    flattened = {i for i, _ in slots}
    n = len(_OI_PREFIX)
    for key in attrs:
        if key.startswith(_OI_PREFIX):
            i = flat_index(key[n:].partition(".")[0])
            if i is not None and i not in flattened:
                return True
    return False


def _parsed_slot(call: Any, problems: list[str]) -> dict[str, Any]:
    """A call in LangChain's form (`{"name", "args", "id"}`) as a flattened call's slot: its arguments an object
    given as JSON text (json.dumps, as a GenAI tool_call part's), a text as it is; arguments of another type given
    as JSON text too, counted. No object: an empty slot (a call without a name, counted when emitted)."""
    if not isinstance(call, dict):
        return {}
    args = arguments_text(call.get("args"), m.OI_OUTPUT_MESSAGES, problems)
    return {"name": call.get("name"), "id": call.get("id"), "arguments": args}


def _history(attrs: Any, slots: dict[tuple[int, int], dict[str, Any]]) -> int:
    """google-genai's automatic function calling history into `slots` as calls (-1, j), without the first K (the
    calls of the input messages); the number of keys whose index is none."""
    history: dict[int, dict[str, Any]] = {}
    bad = 0
    n = len(_OI_HISTORY)
    for key, value in attrs.items():
        if not key.startswith(_OI_HISTORY):
            continue
        j_text, _, field = key[n:].partition(".")
        name = _OI_FIELDS.get(field)
        if name is None:
            continue
        j = flat_index(j_text)
        if j is None:
            bad += 1
            continue
        history.setdefault(j, {})[name] = value
    if not history:
        return bad
    skip = sum(1 for k in attrs if k.startswith(_OI_INPUT_CALLS) and k.endswith(_OI_CALL_NAME) and _OI_CALLS in k)
    for j in sorted(history)[skip:]:
        slots[-1, j] = history[j]
    return bad


def add_traceloop(span: Span, out: Out, problems: list[str]) -> None:
    """The calls an OpenLLMetry chat span's completions hold."""
    _add(span, _TL_PREFIX, _TL_CALLS, _TL_FIELDS, m.TL_COMPLETION, out, problems, single=_TL_FUNCTION_CALL)


def add_handoff(span: Span, out: Out) -> None:
    """openai-agents' handoff span (an OpenInference TOOL span without `tool.name`, named `handoff to {agent}`): a
    HandoffMark named as openai-agents names the handoff's tool by default (`transfer_to_{agent}`, lower case, any
    character but a letter, digit or `_` made `_`)."""
    name = span.name
    if not name.startswith(_HANDOFF_PREFIX) or len(name) == len(_HANDOFF_PREFIX):
        return
    add_handoff_to(span, name[len(_HANDOFF_PREFIX) :], out)


def add_handoff_to(span: Span, agent: str, out: Out) -> None:
    """A handoff span's HandoffMark of the handoff to `agent` (a non-empty name), named as openai-agents names the
    handoff's tool by default (see add_handoff)."""
    name = _NOT_NAME.sub("_", "transfer_to_" + agent).lower()
    out.append(derived(HandoffMark, span, "handoff", name, span.start_ns))


_OI_INPUT_PREFIX = m.OI_INPUT_MESSAGES + "."
_ROLE = ".message.role"
_CONTENT = ".message.content"
_CONTENTS = ".message.contents."  # `.{k}.message_content.text`: a message of several content parts
_PART_TEXT = ".message_content.text"


def add_openinference_input(span: Span, out: Out) -> None:
    """An LLM span of openai-agents, LlamaIndex or Haystack through OpenInference (their tracer scopes,
    _markers.OI_INPUT_SCOPES):
    an InputMark of the latest user message its
    model was given (`llm.input_messages.{i}.message.role` `user`, the highest index i: the earlier ones, in a
    conversation's later turn, are its history), its `.message.content`, else its
    `.message.contents.{k}.message_content.text` parts joined by newlines in k order. openai-agents records no input
    on its agent spans, LlamaIndex's workflow span the workflow's start state (no question, see _foreign), Haystack's
    run span its messages as Python reprs: the mark
    of a turn's first LLM span with one is its input (monitor.assembly._offered). Nothing when no
    user message has text (content capture off, text hidden as `__REDACTED__`, a value of another type: not captured,
    not counted)."""
    if span.scope not in m.OI_INPUT_SCOPES:
        return
    attrs = span.attributes
    n = len(_OI_INPUT_PREFIX)
    latest: int | None = None
    for key, value in attrs.items():
        if key.startswith(_OI_INPUT_PREFIX) and key.endswith(_ROLE) and value == "user":
            i = flat_index(key[n : -len(_ROLE)])
            if i is not None and (latest is None or i > latest):
                latest = i
    if latest is None:
        return
    at = f"{_OI_INPUT_PREFIX}{latest}"
    text = attrs.get(at + _CONTENT)
    if not isinstance(text, str):
        parts: list[tuple[int, str]] = []
        prefix = at + _CONTENTS
        for key, value in attrs.items():
            if key.startswith(prefix) and key.endswith(_PART_TEXT) and isinstance(value, str):
                k = flat_index(key[len(prefix) : -len(_PART_TEXT)])
                if k is not None and value != m.OI_REDACTED:
                    parts.append((k, value))
        text = "\n".join(v for _, v in sorted(parts)) if parts else None
    if text and text != m.OI_REDACTED:  # hidden (OPENINFERENCE_HIDE_INPUT_TEXT): not captured
        add_input_mark(span, text, out)


def add_flat_of(span: Span, out: Out, problems: list[str]) -> None:
    """add_openinference / add_traceloop / add_handoff / add_openinference_input, and the tools an LLM or chat span
    offers (monitor.normalize._offered), for a span no convention mapped (Normalizer with several conventions), as
    _foreign reads it."""
    attrs = span.attributes
    kind = attrs.get(m.OI_KIND)
    if isinstance(kind, str):
        kind = kind.upper()
        if kind == "LLM":
            add_openinference(span, out, problems)
            add_openinference_tools(span, out, problems)
            add_openinference_input(span, out)
        elif kind == "TOOL" and m.OI_TOOL_NAME not in attrs:
            add_handoff(span, out)
    elif kind is None and m.TL_KIND not in attrs and m.TL_REQUEST_TYPE in attrs:
        add_traceloop(span, out, problems)
        add_traceloop_tools(span, out, problems)



def _slots(
    attrs: Any, prefix: str, calls: str, fields: dict[str, str], single: str | None = None
) -> tuple[dict[tuple[int, int], dict[str, Any]], int]:
    """The flattened calls: (message index, call index) -> {"id" / "name" / "arguments": value}; and the number of
    keys of a call's field whose index is none (not digits, or past MAX_INDEX_DIGITS): calls that cannot be read.
    A message's `single` call (`{i}.{single}{field}`, no call index) is call (i, -1)."""
    slots: dict[tuple[int, int], dict[str, Any]] = {}
    bad = 0
    n = len(prefix)
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        i_text, _, rest = key[n:].partition(".")
        if single is not None and rest.startswith(single):
            name = fields.get(rest[len(single) :])
            if name is None:
                continue
            i = flat_index(i_text)
            if i is None:
                bad += 1
                continue
            slots.setdefault((i, -1), {})[name] = value
            continue
        if not rest.startswith(calls):
            continue
        j_text, _, field = rest[len(calls) :].partition(".")
        name = fields.get(field)
        if name is None:
            continue
        i, j = flat_index(i_text), flat_index(j_text)
        if i is None or j is None:
            bad += 1
            continue
        slots.setdefault((i, j), {})[name] = value
    return slots, bad


def _add(
    span: Span,
    prefix: str,
    calls: str,
    fields: dict[str, str],
    key: str,
    out: Out,
    problems: list[str],
    *,
    single: str | None = None,
) -> None:
    slots, bad = _slots(span.attributes, prefix, calls, fields, single)
    problems.extend([key] * bad)
    _emit(span, slots, key, out, problems)


def _emit(span: Span, slots: dict[tuple[int, int], dict[str, Any]], key: str, out: Out, problems: list[str]) -> None:
    """The requested calls of `slots`, in (i, j) order, at most MAX_REQUESTED_PER_SPAN."""
    if not slots:
        return
    attrs = span.attributes
    kept: dict[str, Any] | None = None
    n = 0
    for at in sorted(slots):
        call = _requested(span, slots[at], n, key, problems) if n < MAX_REQUESTED_PER_SPAN else None
        if call is None:
            problems.append(key)
            continue
        if kept is None:
            kept = {k: v for k, v in attrs.items() if not k.startswith(_CONTENT_PREFIXES)}
        call.attributes = kept
        out.append(call)
        n += 1


def _requested(span: Span, slot: dict[str, Any], index: int, key: str, problems: list[str]) -> RequestedCall | None:
    """The call of one flattened tool call; None when it has no name."""
    named = name_and_id(slot, key, problems)
    if named is None:
        return None
    name, call_id = named
    arguments = slot.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        problems.append(key)  # JSON text in every producer: anything else says nothing
        arguments = None
    return new_requested(span, name, call_id, arguments, index)  # its attributes set by _add
