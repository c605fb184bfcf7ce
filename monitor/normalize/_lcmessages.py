"""Chat messages in the forms LangChain and LangGraph runs are recorded with, read as `{"role", "content"}` messages;
and a run's answer among them.

A LangGraph run's state (OpenInference's `input.value` / `output.value`, OpenLLMetry's `traceloop.entity.input` /
`.output` `inputs` / `outputs`, OpenLIT's `gen_ai.workflow.input`) holds its `messages` as:
- a message with a `role` (OpenAI's dict, as a run may be given its input): its text content read (`chat_messages`);
- LangChain's `messages_to_dict` form, `{"type": "ai", "data": {fields}}` (openinference-instrumentation-langchain
  0.1.80 with langchain-core 1.x);
- `dumpd`'s, `{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {fields}}` (OpenLLMetry's; an older
  langchain-core leaves `type` out of the kwargs: the class named last in `id` says it);
- the message's own fields, `{"type": "ai", "content": ...}` (pydantic's `model_dump`);
- a `[role, content]` pair (LangChain's message-like tuples).
The fields read: `type` (`human`, `ai`, `system`, `tool`, `function`, `chat` with its `role`, and the chunks' class
names, `AIMessageChunk`...), `content` (a str, or a list of content blocks: its strings and `{"type": "text", "text"}`
blocks, joined as LangChain's `.text` joins them, with nothing between), and whether the message asks for tool calls
(`tool_calls`, `invalid_tool_calls`, `additional_kwargs.tool_calls` / `.function_call` not empty).

A run's answer (`answer`) is the text of the last assistant message that asks for no tool call, after the last user
message: text beside tool calls is what the model said before calling them (langgraph-supervisor's handoff back,
"Transferring back to supervisor"); the messages before the last user message are earlier turns' (a thread's history).

The calls a LangChain model run asked for, in its output as openinference-instrumentation-langchain records it
(`output.value`, the run's `generations`: `{"generations": [[{"text", "message": {AIMessage}}, ...]], ...}`), name
their ids (`output_calls`, `call_id`): LangChain.js' instrumentation flattens each message's
`additional_kwargs.tool_calls` (OpenAI's form, `{"id", "function": {"name", ...}}`) into its `llm.output_messages`
without their ids (monitor.normalize._flat reads them there); the message's own `tool_calls` (LangChain's form,
`{"name", "args", "id"}`) hold them too. An integration that fills only those (@langchain/anthropic,
@langchain/google-genai, @langchain/ollama: no `additional_kwargs.tool_calls`) has none flattened: its calls are
read there (`parsed_calls`, with the message's `invalid_tool_calls`).

Wrong-typed or malformed messages are passed over and counted (`chat_messages` says how many: the caller counts the
value's key), never raised on: an element that is no message (not an object, an object of no type or role, a known type
without text content), a content block that is neither a str nor an object. A type this module does not know (a later
version's, LangGraph's `remove`) is no message of the conversation: passed over, not counted.
"""

from __future__ import annotations

from typing import Any

from monitor._json import loads_bounded
from monitor.normalize._genai import _texts

# LangChain's message types (and its classes' names, as `dumpd` gives them in `id`) as chat roles.
_ROLES = {
    "human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool", "user": "user",
    "assistant": "assistant", "developer": "system",
    "HumanMessage": "user", "AIMessage": "assistant", "SystemMessage": "system", "ToolMessage": "tool",
    "FunctionMessage": "tool", "HumanMessageChunk": "user", "AIMessageChunk": "assistant",
    "SystemMessageChunk": "system", "ToolMessageChunk": "tool", "FunctionMessageChunk": "tool",
}  # fmt: skip
_CHAT = frozenset({"chat", "ChatMessage", "ChatMessageChunk"})  # a message of any role, named in its `role`
_ASKS = "tool_calls"  # the key a read message has when it asks for tool calls
_TOOL_MESSAGE = '{"type": "tool", "data": {'  # a ToolMessage in `messages_to_dict`'s form, as json.dumps writes it
# A LangChain.js ToolMessage, serialized (its `toJSON`) under a tool run's `output`, as JSON.stringify writes it.
_JS_TOOL_MESSAGE = '{"output":{"lc":1,"type":"constructor","id":["langchain_core","messages","ToolMessage"],"kwargs":{'
# The characters of a ToolMessage's error text kept: toolwatch's SDK cuts a failed call's status message there (the
# default of its content limit, TOOLWATCH_MAX_CONTENT_LENGTH); the text is the call's result too, kept whole.
MAX_ERROR_CHARS = 16384


def chat_messages(value: list[Any]) -> tuple[list[Any], int]:
    """Each message of `value` as `{"role", "content"}` (its text content, None when it has none; `tool_calls` too
    when it asks for them), a message with `parts` (GenAI's) as it is, anything else (no message) as it is; and how
    many elements were malformed."""
    out: list[Any] = []
    bad = 0
    for msg in value:
        if isinstance(msg, dict):
            read, wrong = _message(msg)
            out.append(msg if read is None else read)
            bad += wrong
        elif isinstance(msg, list) and len(msg) == 2 and isinstance(msg[0], str):
            content, wrong = _content(msg[1])
            out.append({"role": _ROLES.get(msg[0], msg[0]), "content": content})
            bad += wrong
        else:
            out.append(msg)
            bad += 1
    return out, bad


def _message(msg: dict[str, Any]) -> tuple[dict[str, Any] | None, int]:
    """A message object read (None: kept as it is) and whether it was malformed."""
    role = msg.get("role")
    if isinstance(role, str):
        if "parts" in msg and "content" not in msg:
            return None, 0  # GenAI's: read as such
        content, wrong = _content(msg.get("content"), none_ok=True)
        return _read(_ROLES.get(role, role), content, msg, msg.get("additional_kwargs")), wrong
    body = msg.get("kwargs")
    if isinstance(body, dict):  # dumpd's
        kind = body.get("type")
        if not isinstance(kind, str):
            ident = msg.get("id")
            kind = ident[-1] if isinstance(ident, list) and ident else None
    else:
        body = msg.get("data")
        kind = msg.get("type")
        if not isinstance(body, dict):  # the fields themselves, or `data` missing or of another type
            body = msg
    if not isinstance(kind, str):
        return None, 1
    if kind in _CHAT:
        role = body.get("role")
    else:
        role = _ROLES.get(kind)
    if not isinstance(role, str):
        return None, 0 if kind not in _CHAT else 1  # a type not known: no message of the conversation
    if "content" not in body:
        return None, 1
    content, wrong = _content(body["content"])
    return _read(_ROLES.get(role, role), content, body, body.get("additional_kwargs")), wrong


def _read(role: str, content: str | None, fields: dict[str, Any], extra: Any) -> dict[str, Any]:
    read: dict[str, Any] = {"role": role, "content": content}
    if _asks(fields) or (isinstance(extra, dict) and _asks(extra)):
        read[_ASKS] = True
    return read


def _asks(fields: dict[str, Any]) -> bool:
    return any(fields.get(k) for k in ("tool_calls", "invalid_tool_calls", "function_call"))


def _content(content: Any, *, none_ok: bool = False) -> tuple[str | None, int]:
    """A message's text and whether it was malformed: a str itself; a list of content blocks its strings and `text`
    blocks joined (other blocks, a tool use, an image, are no text: None when there is no text block), a block neither
    a str nor an object malformed; anything else None, malformed (unless None where `none_ok`: an OpenAI assistant
    message asking for tools has no content)."""
    if isinstance(content, str):
        return content, 0
    if isinstance(content, list):
        texts: list[str] = []
        wrong = 0
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict):
                text = block.get("text")
                if block.get("type") == "text" and isinstance(text, str):
                    texts.append(text)
            else:
                wrong = 1
        return ("".join(texts) if texts else None), wrong
    return None, int(not (none_ok and content is None))


def is_message(msg: Any) -> bool:
    """Whether a read message (of `chat_messages`) is a chat message (has a role)."""
    return isinstance(msg, dict) and isinstance(msg.get("role"), str)


def answer(messages: list[Any]) -> str | None:
    """The answer among read messages (see the module docstring): the text of the last assistant message asking for no
    tool call after the last user message; None when there is none, or its content is not text."""
    for msg in reversed(messages):
        if not is_message(msg):
            continue
        role = msg["role"]
        if role == "user":
            return None
        if role != "assistant" or msg.get(_ASKS):
            continue
        if "parts" in msg and "content" not in msg:  # GenAI's: its text parts; a tool call part asks for one
            parts = msg["parts"]
            if isinstance(parts, list) and any(isinstance(p, dict) and p.get("type") == "tool_call" for p in parts):
                continue
            return _texts([msg], None)
        content = msg.get("content")
        return content if isinstance(content, str) else None
    return None


def tool_message(text: str) -> tuple[str | None, str | None]:
    """The call id and the error of a ToolMessage: the output openinference-instrumentation-langchain records of a
    tool's run (`output.value`) when LangGraph's ToolNode runs it for a call the model asked for, in Python's
    `messages_to_dict` form, `{"type": "tool", "data": {fields}}`, or LangChain.js's serialized one under `output`,
    `{"output":{"lc":1,"type":"constructor","id":["langchain_core","messages","ToolMessage"],"kwargs":{fields}}}`.
    The id is its `tool_call_id`, the model's id of the call (None when it is no text). The error, when its `status`
    is `error` (a tool that returned its error: Python's `handle_tool_error`, a LangChain.js tool returning such a
    ToolMessage), is its text content, cut at MAX_ERROR_CHARS ("error" when it has no text); None otherwise. Only a
    text opening with either form, as json.dumps / JSON.stringify write it, is parsed: (None, None) for any other."""
    if text.startswith(_TOOL_MESSAGE):
        outer = "data"
    elif text.startswith(_JS_TOOL_MESSAGE):
        outer = "output"
    else:
        return None, None
    try:
        value = loads_bounded(text)
    except (ValueError, RecursionError):
        return None, None
    fields = value.get(outer) if isinstance(value, dict) else None
    if outer == "output" and isinstance(fields, dict):
        fields = fields.get("kwargs")
    if not isinstance(fields, dict):
        return None, None
    cid = fields.get("tool_call_id")
    error = None
    if fields.get("status") == "error":
        content = _content(fields.get("content"))[0]
        error = content[:MAX_ERROR_CHARS] if content else "error"
    return (cid if isinstance(cid, str) and cid else None), error


_CALLS_MARK = '"tool_calls"'  # in the JSON text of any run output naming a call: others are not parsed
# In the JSON text of a run output whose message holds a call (a list of calls, `tool_calls` or `invalid_tool_calls`,
# not empty: a message whose every call is invalid has `"tool_calls":[]`), as JSON.stringify (LangChain.js'
# instrumentation) and json.dumps (Python's) write it: an answer's serialized message holds `"tool_calls":[]` and
# `"invalid_tool_calls":[]` (both serializations write the keys always).
CALLS_LIST_MARKS = ('tool_calls":[{', 'tool_calls": [{')
# A message's `additional_kwargs.tool_calls`, `tool_calls` and `invalid_tool_calls`.
OutputCalls = tuple[list[Any], list[Any], list[Any]]


def output_calls(text: str) -> list[OutputCalls]:
    """The calls each message of a LangChain model run's output (`output.value`, see the module docstring) holds, in
    the order the instrumentation numbers its output messages: the first set of generations, those with a message
    object (in any of the forms `_message` reads); each message's `additional_kwargs.tool_calls`, `tool_calls` and
    `invalid_tool_calls` ([] when not a list). [] for a text that holds no call, is no JSON (or past loads_bounded's
    budget) or no output of that shape."""
    if _CALLS_MARK not in text:
        return []
    try:
        value = loads_bounded(text)
    except (ValueError, RecursionError):
        return []
    generations = value.get("generations") if isinstance(value, dict) else None
    first = generations[0] if isinstance(generations, list) and generations else None
    if not isinstance(first, list):
        return []
    out: list[OutputCalls] = []
    for generation in first:
        msg = generation.get("message") if isinstance(generation, dict) else None
        if not isinstance(msg, dict):
            continue
        body = msg.get("kwargs")
        if not isinstance(body, dict):
            body = msg.get("data")
            if not isinstance(body, dict):
                body = msg
        extra = body.get("additional_kwargs")
        raw = extra.get("tool_calls") if isinstance(extra, dict) else None
        parsed = body.get("tool_calls")
        invalid = body.get("invalid_tool_calls")
        out.append((raw if isinstance(raw, list) else [], parsed if isinstance(parsed, list) else [],
                    invalid if isinstance(invalid, list) else []))  # fmt: skip
    return out


def parsed_calls(calls: OutputCalls) -> list[Any]:
    """A message's calls in LangChain's own form (of `output_calls`): its `tool_calls`, `{"name", "args" (an object),
    "id"}`, then its `invalid_tool_calls`, `{"name", "args" (the text the model gave, no JSON object), "id", "error"}`:
    asked for and never run (LangGraph's ToolNode runs `tool_calls` only). The elements as they are."""
    return calls[1] + calls[2]


def call_id(calls: OutputCalls, j: int, name: str) -> str | None:
    """The id of a message's `j`th call (of `output_calls`) when it is a call of tool `name`: its
    `additional_kwargs.tool_calls[j]`'s, else its `tool_calls[j]`'s; None when neither names that tool with an id (a
    non-empty str)."""
    raw, parsed, _ = calls
    for listed, nested in ((raw, True), (parsed, False)):
        call = listed[j] if j < len(listed) else None
        if not isinstance(call, dict):
            continue
        named = call.get("function") if nested else call
        cid = call.get("id")
        if isinstance(named, dict) and named.get("name") == name and isinstance(cid, str) and cid:
            return cid
    return None
