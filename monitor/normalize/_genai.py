"""Span -> ToolCall / Turn for the OpenTelemetry GenAI semantic conventions.

This is the one place that knows GenAI span shapes; the spans of other conventions (OpenInference, OpenLLMetry) and of
GenAI producers that put values elsewhere (pydantic-ai, Strands) are handed to _foreign.py from this convention's
own pass (see `_foreign`), so that the batch stays one pass, in C for GenAI spans.
"""

from __future__ import annotations

import json
import json.decoder
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, cast

from monitor._json import PLAIN_CHARS, loads_bounded
from monitor.normalize._markers import (
    ADK_SCOPE,
    FOREIGN_MARKERS,
    INVOKE_WORKFLOW,
    LOGFIRE_OPENAI_AGENTS_SCOPE,
    MASTRA_NO_ERROR_ID,
    MASTRA_SCOPE,
    MASTRA_STEP,
    MLFLOW_SCOPE,
    OPENLIT_SCOPE_PREFIX,
    OTEL_CREWAI_SCOPE,
    OTEL_OPENAI_AGENTS_SCOPE,
    PA_ARGS,
    PA_MESSAGES,
    TL_KIND,
    TL_REQUEST_TYPE,
    is_openlit,
)
from monitor.normalize._offered import add_offered
from monitor.normalize._requested import (
    CONTENT_KEYS,
    MAX_REQUESTED_PER_SPAN,
    MODEL_REQUESTS,
    TOOL_CALL_MARK,
    add_model_input,
    add_model_request,
)
from monitor.otlp import STATUS_ERROR, Span
from monitor.otlp._accel import load_extension
from monitor.records import RequestedCall, ToolCall, Turn

_new = object.__new__

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
# Strands Agents' own attribute on its invoke_agent span: JSON text of the agent's tool names, all it records of the
# tools offered unless its `gen_ai_tool_definitions` opt-in is on (_named_tools).
AGENT_TOOLS = "gen_ai.agent.tools"
# The call id google-adk records on a tool span when it has none (the tool raised: no function response): no id.
NO_CALL_ID = "<not specified>"
# Every attribute key the convention reads: the only keys it reports as ignored (a bounded metric label set).
ATTRIBUTE_KEYS = frozenset(
    {
        OP,
        TOOL_NAME,
        TOOL_CALL_ID,
        TOOL_ARGS,
        TOOL_RESULT,
        ERROR_TYPE,
        AGENT_NAME,
        CONVERSATION_ID,
        INPUT_MESSAGES,
        OUTPUT_MESSAGES,
        TOOL_DEFINITIONS,
        CASE_ID,
        TRUNCATED,
    }
)

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


# One message with one text part, as compact JSON (what the toolwatch instrumentation writes), read with json's own
# string scanner (C when available; the same decoding and errors as json.loads) and string comparisons. Anything
# else takes the general JSON path.
# The scanner: text from just after an opening quote -> (decoded text, index after the closing quote).
_scanstring = cast(Callable[[str, int], tuple[str, int]], vars(json.decoder)["scanstring"])
_ROLE_PREFIX = '[{"role":"'
_PARTS = '","parts":[{"type":"text","content":"'
_USER_PARTS = _ROLE_PREFIX + "user" + _PARTS  # the two usual roles, recognised without a search
_ASSISTANT_PARTS = _ROLE_PREFIX + "assistant" + _PARTS
_ENDS = frozenset({"}]}]", '}],"finish_reason":"stop"}]', '}],"finish_reason":"length"}]'})  # after the text


def _one_text(raw: str) -> tuple[str, str] | None:
    """(role, text) of a compact one-message, one-text-part messages value; None for anything else."""
    if raw.startswith(_USER_PARTS):
        role, start = "user", len(_USER_PARTS)
    elif raw.startswith(_ASSISTANT_PARTS):
        role, start = "assistant", len(_ASSISTANT_PARTS)
    elif raw.startswith(_ROLE_PREFIX):
        i = raw.find('"', len(_ROLE_PREFIX))
        if i < 0 or not raw.startswith(_PARTS, i):
            return None
        try:
            role, after = _scanstring(raw, len(_ROLE_PREFIX))
        except ValueError:
            return None
        if after != i + 1:  # the quote found was escaped
            return None
        start = i + len(_PARTS)
    else:
        return None
    try:
        text, after = _scanstring(raw, start)
    except ValueError:
        return None
    return (role, text) if raw[after:] in _ENDS else None


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
        messages = loads_bounded(raw)
    except (ValueError, RecursionError):
        return raw
    return _texts(messages, roles)


def _texts(messages: Any, roles: tuple[str, ...] | None) -> str | None:
    """The text parts (and plain `content` strings) of the messages in `roles` (all when None), joined by newlines."""
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


def _last_run(messages: Any, roles: tuple[str, ...]) -> list[Any] | None:
    """The last run of consecutive messages in `roles` (None when no message is in them). A chat history holds
    earlier turns: their questions and answers are not this turn's input or answer."""
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        return None
    end = len(messages)
    while end and not (isinstance(messages[end - 1], dict) and messages[end - 1].get("role") in roles):
        end -= 1
    if not end:
        return None
    start = end - 1
    while start and isinstance(messages[start - 1], dict) and messages[start - 1].get("role") in roles:
        start -= 1
    return messages[start:end]


def structured(v: Any, *, obj: bool = False) -> Any:
    """A structured attribute value (an OTLP arrayValue or kvlistValue, as the decoders give them) as JSON data.

    The decoders give an arrayValue as a tuple of its values and a kvlistValue as a tuple of (key, value) pairs, which
    an array of two-element arrays each starting with a string also gives: such a tuple is read as an object (the
    GenAI values, messages, parts, arguments and tool definitions, are objects). An empty tuple is an object where
    the conventions expect one (`obj`: the arguments and result of a tool call), else an empty array.
    """
    if not isinstance(v, tuple):
        return v
    if not v:
        return {} if obj else []
    if all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in v):
        return {k: structured(x) for k, x in v}
    return [structured(x) for x in v]


_USER = ("user",)
_ASSISTANT = ("assistant",)


def _turn_text(raw: Any, roles: tuple[str, ...], *, empty_is_none: bool) -> str | None:
    """The text of the last run of messages in `roles` (a chat history's earlier turns left out); of all messages
    when none is in `roles`, or (with `empty_is_none`) when that text is empty. One message with one text part is
    its text, whatever its role. `raw` is JSON text or the structured value (see `structured`); text that is not
    JSON is itself."""
    if isinstance(raw, str):
        one = _one_text(raw)
        if one is not None:
            return one[1]
        try:
            messages = loads_bounded(raw)
        except (ValueError, RecursionError):
            return raw
    elif isinstance(raw, tuple):
        try:
            messages = structured(raw)
        except RecursionError:
            return None
    else:
        return None
    run = _last_run(messages, roles)
    text = _texts(run, None) if run is not None else None
    if run is None or (empty_is_none and not text):
        text = _texts(messages, None)
    return text


DefinitionsList = tuple[Mapping[str, Any], ...]
_DEFINITIONS_CACHE: dict[str, tuple[str, DefinitionsList | None]] = {}  # text -> (the same text, definitions)
_DEFINITIONS_CACHE_MAX = 256
_DEFINITIONS_CACHE_TEXT_MAX = 64 * 1024  # longer texts are parsed every time, not kept (256 x 64 KiB at most)
# The last cached entry per text length, found without hashing the text (a decoded span's strings are new
# objects, and hashing ~1.5 KB on every turn cost more than the rest of the turn): a hit is one comparison.
# Its entries are entries of _DEFINITIONS_CACHE (or were, before being pushed out), the same text objects.
_DEFINITIONS_BY_LENGTH: dict[int, tuple[str, DefinitionsList | None]] = {}


def _named_tools(raw: Any) -> DefinitionsList | None:
    """The tools offered named by a turn span's `gen_ai.agent.tools` when it records no `gen_ai.tool.definitions`
    (Strands Agents): JSON text of a list whose str items are tool names, each offered by name only (no description,
    no parameters). None when it is not such a list or names none (a value of another form is not Strands': not
    counted)."""
    if not isinstance(raw, str):
        return None
    if raw in _NAMED_CACHE:  # an agent names the same tools on every turn: read once, then shared (read-only)
        return _NAMED_CACHE[raw]
    try:
        names = loads_bounded(raw)
    except (ValueError, RecursionError):
        names = None
    if not isinstance(names, list):
        names = ()
    out = tuple({"type": "function", "name": n} for n in names if isinstance(n, str)) or None
    if len(raw) <= _DEFINITIONS_CACHE_TEXT_MAX:
        if len(_NAMED_CACHE) >= _DEFINITIONS_CACHE_MAX:
            _NAMED_CACHE.pop(next(iter(_NAMED_CACHE)))
        _NAMED_CACHE[raw] = out
    return out


_NAMED_CACHE: dict[str, DefinitionsList | None] = {}  # _named_tools' results by text, as _DEFINITIONS_CACHE


def _tool_definitions(raw: Any) -> DefinitionsList | None:
    """The offered tools. An agent offers the same definitions on every turn: parsed once, then shared (read-only).
    A structured value (see `structured`) is read each time."""
    if not isinstance(raw, str):
        if not isinstance(raw, tuple):
            return None
        try:
            defs = structured(raw)
        except RecursionError:
            return None
        return tuple(d for d in defs if isinstance(d, dict)) if isinstance(defs, list) else None
    n = len(raw)
    last = _DEFINITIONS_BY_LENGTH.get(n)
    if last is not None and last[0] == raw:
        return last[1]
    entry = _DEFINITIONS_CACHE.get(raw)
    if entry is None:
        try:
            defs = loads_bounded(raw)
        except (ValueError, RecursionError):
            defs = None
        out = tuple(d for d in defs if isinstance(d, dict)) if isinstance(defs, list) else None
        if n > _DEFINITIONS_CACHE_TEXT_MAX:
            return out
        if len(_DEFINITIONS_CACHE) >= _DEFINITIONS_CACHE_MAX:
            _DEFINITIONS_CACHE.pop(next(iter(_DEFINITIONS_CACHE)))
        entry = _DEFINITIONS_CACHE[raw] = (raw, out)
    if last is None and len(_DEFINITIONS_BY_LENGTH) >= _DEFINITIONS_CACHE_MAX:
        _DEFINITIONS_BY_LENGTH.pop(next(iter(_DEFINITIONS_BY_LENGTH)))
    _DEFINITIONS_BY_LENGTH[n] = entry
    return entry[1]


def operation(span: Span) -> str | None:
    """The GenAI operation of a span: its `gen_ai.operation.name`, else what its name starts with."""
    op = span.attributes.get(OP)
    if isinstance(op, str):
        return op
    return operation_of_name(span.name)


def operation_of_name(name: str) -> str | None:
    if name.startswith(EXECUTE_TOOL):
        return EXECUTE_TOOL
    if name.startswith(INVOKE_AGENT):
        return INVOKE_AGENT
    return None


class GenAIConvention:
    """The OpenTelemetry GenAI conventions (DESIGN.md, span contract)."""

    def normalize(self, span: Span, problems: list[str]) -> Normalized:
        """One span's record. Another span is None: the calls a model request asked for, which are more records,
        are left to Normalizer (add_requested_of), and so are the problems of reading them."""
        out: list[ToolCall | Turn | Span] = []
        rejected: dict[str, int] = {}
        mine: list[str] = []
        self.convert((span,), out, mine, rejected)
        if rejected:
            problems += mine
            return Rejected(next(iter(rejected)))
        r = out[0]
        if r is span:
            return None
        problems += mine
        return cast(ToolCall | Turn, r)

    def convert(
        self, spans: Iterable[Span], out: list[ToolCall | Turn | Span], problems: list[str], rejected: dict[str, int]
    ) -> None:
        """Normalize a batch: appends to `out` a record per tool or turn span and every other span itself (kept as
        a parent link), counts rejections by reason in `rejected` and ignored attributes in `problems`.

        In C when the extension is loaded (_cgenai.c, the same results), else _convert_py.
        """
        if _CONVERT_C is not None:
            _CONVERT_C(spans, out, problems, rejected)
        else:
            _convert_py(spans, out, problems, rejected)


def _mastra_error(span: Span, error_type: str) -> str:
    """A tool span's error whose `error.type` is `unknown`: of Mastra's scope, its error named no id of its own (a
    thrown error: its class is recorded nowhere), and its status message, the error's message, is the error; else
    `error_type`."""
    scope, message = span.scope, span.status_message
    if type(scope) is str and scope == _MASTRA_SCOPE and type(message) is str and message:
        return message
    return error_type


def _convert_py(  # noqa: C901 - one flat pass per span: a call per record cost more than its checks
    spans: Iterable[Span], out: list[ToolCall | Turn | Span], problems: list[str], rejected: dict[str, int]
) -> None:
    """GenAIConvention.convert in Python: the reference of _cgenai.c, which follows it line by line.

    The usual attribute types are checked inline, anything else by the helpers below; messages values by
    _turn_text, which reads the instrumentation's compact one-text form first (_cgenai.c reads that form itself,
    then calls _turn_text for anything else). Records are built field
    by field (the dataclass __init__ cost about as much as the rest): every field is set. Each span's result
    depends only on the span, `out`, `problems` and `rejected` (the C code hands uncommon spans here one by one).
    """
    append = out.append
    for span in spans:
        attrs = span.attributes
        op = attrs.get(OP)
        if type(op) is not str and not isinstance(op, str):
            op = operation_of_name(span.name)
        if op == EXECUTE_TOOL:
            arguments = attrs.get(TOOL_ARGS)
            if (arguments is None and (span.events or _PA_ARGS in attrs)) or _TL_KIND in attrs:
                _foreign(span, out, problems, rejected)  # arguments elsewhere: pydantic-ai, Strands, OpenLLMetry's
                continue
            name = attrs.get(TOOL_NAME)
            if type(name) is not str or not name:
                name = _tool_name(span, name, problems)
                if not name:
                    rejected[REASON_NO_TOOL_NAME] = rejected.get(REASON_NO_TOOL_NAME, 0) + 1
                    continue
            error_type = attrs.get(ERROR_TYPE)
            if error_type is not None and type(error_type) is not str and not isinstance(error_type, str):
                problems.append(ERROR_TYPE)
                error_type = None
            if error_type is None and span.status_code == STATUS_ERROR:
                error_type = span.status_message or "error"
            elif type(error_type) is str and error_type == _MASTRA_NO_ERROR_ID:
                error_type = _mastra_error(span, error_type)
            call_id = attrs.get(TOOL_CALL_ID)
            if type(call_id) is not str or call_id == NO_CALL_ID:
                call_id = _call_id(call_id, problems)
            if arguments is not None and type(arguments) is not str:
                arguments = _json_text(arguments, TOOL_ARGS, problems)
            if arguments is not None and _is_openlit(span.scope):
                arguments = _openlit_arguments(arguments)  # a Python dict repr (OpenLIT's LangChain callback)
            truncated = attrs.get(TRUNCATED)
            if truncated is not None:
                if not isinstance(truncated, str | tuple):
                    problems.append(TRUNCATED)  # a list of keys, or one key; anything else says nothing
                elif arguments is not None and TOOL_ARGS in truncated:
                    arguments = None  # a cut argument text is not captured, never "malformed" (METRICS.md)
            result = attrs.get(TOOL_RESULT)
            if result is not None and type(result) is not str:
                result = _json_text(result, TOOL_RESULT, problems)
            call = _new(ToolCall)
            call.name = name
            call.call_id = call_id or ""
            call.arguments = arguments
            call.result = result
            call.error_type = error_type
            call.trace_id = span.trace_id
            call.span_id = span.span_id
            call.parent_span_id = span.parent_span_id
            call.start_ns = span.start_ns
            call.end_ns = span.end_ns
            call.attributes = attrs
            append(call)
        elif op == INVOKE_AGENT:
            raw_in = attrs.get(INPUT_MESSAGES)
            if raw_in is None and span.scope == _MASTRA_SCOPE:
                _mastra_turn(span, out, problems, rejected)  # its input, answer and tools offered in its own keys
                continue
            if (span.parent_span_id or raw_in is None) and _is_openlit(span.scope):
                _foreign(span, out, problems, rejected)  # OpenLIT's: a step of the run around it, or input elsewhere
                continue
            if raw_in is None and (
                span.events
                or _PA_MESSAGES in attrs
                or _TL_KIND in attrs
                or ((span.scope == _OA_SCOPE or span.scope == _CREWAI_SCOPE) and AGENT_NAME not in attrs)
            ):
                # the input elsewhere: pydantic-ai, Strands, OpenLLMetry; or openai-agents' workflow (contrib's), a
                # crew's run (OpenLLMetry's)
                _foreign(span, out, problems, rejected)
                continue
            agent = attrs.get(AGENT_NAME)
            if type(agent) is not str:
                agent = _agent(span, agent, problems)
            if raw_in is not None and not isinstance(raw_in, str | tuple):  # a tuple: the structured form
                problems.append(INPUT_MESSAGES)
            text = _turn_text(raw_in, _USER, empty_is_none=False) or ""
            raw_out = attrs.get(OUTPUT_MESSAGES)
            if raw_out is not None and not isinstance(raw_out, str | tuple):
                problems.append(OUTPUT_MESSAGES)
            truncated = attrs.get(TRUNCATED)
            odd = truncated is not None and not isinstance(truncated, str | tuple)
            output: str | None = None
            if truncated is None or odd or OUTPUT_MESSAGES not in truncated:  # a cut answer is not captured (None)
                output = _turn_text(raw_out, _ASSISTANT, empty_is_none=True)
                if output is None and isinstance(raw_in, str | tuple) and span.status_code == STATUS_ERROR:
                    # Messages captured (the input is) and the turn failed without an answer: its response checks
                    # fail. Without an error, a missing answer may be elsewhere (a chat span): not checked.
                    output = ""
            if odd:
                problems.append(TRUNCATED)  # a list of keys, or one key; anything else says nothing
            conversation_id = attrs.get(CONVERSATION_ID)
            if (
                conversation_id is not None
                and type(conversation_id) is not str
                and not isinstance(conversation_id, str)
            ):
                problems.append(CONVERSATION_ID)
                conversation_id = None
            case_id = attrs.get(CASE_ID)
            if case_id is not None and type(case_id) is not str and not isinstance(case_id, str):
                case_id = str(case_id)
            raw_defs = attrs.get(TOOL_DEFINITIONS)
            if raw_defs is None:  # no tools offered (most turns of most agents): nothing to look up
                defs = None if AGENT_TOOLS not in attrs else _named_tools(attrs[AGENT_TOOLS])
            else:
                last = _DEFINITIONS_BY_LENGTH.get(len(raw_defs)) if type(raw_defs) is str else None
                defs = last[1] if last is not None and last[0] == raw_defs else _tool_definitions(raw_defs)
            turn = _new(Turn)
            turn.input_text = text
            turn.calls = ()
            turn.agent = agent
            turn.trace_id = span.trace_id
            turn.span_id = span.span_id
            turn.conversation_id = conversation_id
            turn.case_id = case_id
            turn.output_text = output
            turn.tool_definitions = defs
            turn.start_ns = span.start_ns
            turn.end_ns = span.end_ns
            turn.attributes = attrs
            turn.resource = span.resource
            turn.turnless = False
            append(turn)
        elif op is None:  # no GenAI operation at all: another convention's span when marked so
            for key in _FOREIGN_KEYS:
                if key in attrs:
                    _foreign(span, out, problems, rejected)
                    break
            else:
                append(span)
        elif op == _INVOKE_WORKFLOW and _is_openlit(span.scope):
            _foreign(span, out, problems, rejected)  # OpenLIT's LangGraph run: the turn at the root, else a step
        elif span.scope == _LOGFIRE_OA_SCOPE:
            _foreign(span, out, problems, rejected)  # Logfire's openai-agents Responses request: its values its own
        elif op == _MASTRA_STEP and span.scope == _MASTRA_SCOPE:
            _mastra_step(span, out, problems)  # a step of a Mastra agent's run: the calls its model asked for
        else:
            append(span)
            # A model request may say what it asked: in its output messages, its events (Strands Agents), or
            # flattened (OpenLLMetry)
            if attrs.get(OUTPUT_MESSAGES) is not None or span.events or _TL_REQUEST_TYPE in attrs:
                add_model_request(span, op, out, problems)
            if attrs.get(TOOL_DEFINITIONS) is not None:  # and which tools it offered
                add_offered(span, op, out)
            add_model_input(span, op, out)  # the input its model was given, for the scopes that say (add_model_input)


# A span with no GenAI operation that carries one of these keys is another convention's: _foreign maps it. So is a
# tool span without `gen_ai.tool.call.arguments` but with events or pydantic-ai 2's `tool_arguments`, and a turn span
# without `gen_ai.input.messages` but with events or `pydantic_ai.all_messages`; and a tool span, or a turn span
# without `gen_ai.input.messages`, with a Traceloop kind (OpenLLMetry's LangChain instrumentation writes GenAI
# attributes beside its own, its GenAI arguments the callback's whole input: Traceloop's rules read them).
_FOREIGN_KEYS: tuple[str, ...] = FOREIGN_MARKERS
_PA_ARGS = PA_ARGS
_PA_MESSAGES = PA_MESSAGES
_TL_KIND = TL_KIND
_ADK_SCOPE = ADK_SCOPE  # the C normalizer hands this scope's spans of another operation to _convert_py
# And this one's (openai-agents through OpenTelemetry's or OpenLLMetry's instrumentation), and sends its `invoke_agent`
# spans without `gen_ai.agent.name` or input messages (contrib's workflow span) to _foreign.
_OA_SCOPE = OTEL_OPENAI_AGENTS_SCOPE
# And this one's (MLflow's, its spans translated to the GenAI conventions: its `invoke_agent` spans record no input).
_MLFLOW_SCOPE = MLFLOW_SCOPE
# And this one's (Logfire's openai-agents integration: its Responses requests are `chat` spans whose input, calls and
# tools are in Logfire's own attributes) to _foreign.
_LOGFIRE_OA_SCOPE = LOGFIRE_OPENAI_AGENTS_SCOPE
# And this one's (OpenLLMetry's CrewAI instrumentation) `invoke_agent` spans without them (a crew's run) too.
_CREWAI_SCOPE = OTEL_CREWAI_SCOPE
# And this one's (Mastra's, @mastra/otel-exporter): the C normalizer hands its `invoke_agent` spans without
# `gen_ai.input.messages` and its spans of another operation to _convert_py, which reads its turns and steps by
# monitor/normalize/_mastra.py.
_MASTRA_SCOPE = MASTRA_SCOPE
_MASTRA_STEP = MASTRA_STEP
# Its failed tool span's `error.type` when its error has no id (a thrown error): the span's status message is the error.
_MASTRA_NO_ERROR_ID = MASTRA_NO_ERROR_ID
# And OpenLIT's (the scopes opening with this, _markers.is_openlit): every span of a GenAI operation (a run's root is
# its turn, its nested `invoke_agent` spans steps, its model requests give an InputMark, its tools' arguments may be a
# Python repr); _convert_py sends its `invoke_workflow` spans, and its `invoke_agent` spans under another span or
# without input messages, to _foreign.
_OPENLIT_SCOPE_PREFIX = OPENLIT_SCOPE_PREFIX
_INVOKE_WORKFLOW = INVOKE_WORKFLOW
_is_openlit = is_openlit
_TL_REQUEST_TYPE = TL_REQUEST_TYPE  # a span of another GenAI operation with it may flatten its calls (OpenLLMetry)
_TOOL_CALL_MARK = TOOL_CALL_MARK  # in an output text asking for a call: one without it asks for none
# What the C normalizer reads the common output texts asking for calls with (_requested.add_requested's reading):
# json.loads's own scanner (a decoder with json.loads's defaults) and json.dumps, and _requested's constants.
_SCAN_JSON = cast(Callable[[str, int], tuple[Any, int]], vars(json.JSONDecoder())["scan_once"])
_DUMPS = json.dumps
_MODEL_REQUESTS = MODEL_REQUESTS
_CONTENT_KEYS = CONTENT_KEYS
_MAX_REQUESTED = MAX_REQUESTED_PER_SPAN
_JSON_PLAIN_CHARS = PLAIN_CHARS  # a longer text is handed to Python, which parses it within a budget (monitor._json)
_REQUESTED_CALL = RequestedCall  # the class of the records it makes


def _foreign(span: Span, out: list[ToolCall | Turn | Span], problems: list[str], rejected: dict[str, int]) -> None:
    """Another convention's span (OpenInference, Traceloop), or a GenAI producer's that puts arguments or messages
    elsewhere (pydantic-ai, Strands Agents): monitor/normalize/_foreign.py."""
    from monitor.normalize._foreign import convert  # imports this module: imported on first use

    convert(span, out, problems, rejected)


def _mastra_turn(span: Span, out: list[ToolCall | Turn | Span], problems: list[str], rejected: dict[str, int]) -> None:
    """A Mastra agent's run (monitor/normalize/_mastra.py)."""
    from monitor.normalize._mastra import turn  # imports this module: imported on first use

    turn(span, out, problems, rejected)


def _mastra_step(span: Span, out: list[ToolCall | Turn | Span], problems: list[str]) -> None:
    """A step of a Mastra agent's run (monitor/normalize/_mastra.py)."""
    from monitor.normalize._mastra import step  # imports this module: imported on first use

    step(span, out, problems)


def _openlit_arguments(arguments: str) -> str | None:
    """An OpenLIT tool span's arguments: JSON text as it is; else read as OpenInference's LangChain tool input is (a
    Python dict repr as JSON text, anything else None: not captured; _foreign._repr_arguments)."""
    try:
        loads_bounded(arguments)
    except (ValueError, RecursionError):
        from monitor.normalize._foreign import _repr_arguments  # imports this module: imported on first use

        return _repr_arguments(arguments)
    return arguments


def _tool_name(span: Span, name: Any, problems: list[str]) -> str:
    """The tool name when `gen_ai.tool.name` is not a non-empty str: the span name's, else ""."""
    if isinstance(name, str) and name:
        return name
    if name is not None:
        problems.append(TOOL_NAME)
    # The span name is `execute_tool {gen_ai.tool.name}`.
    return span.name[len(EXECUTE_TOOL) + 1 :].strip() if span.name.startswith(EXECUTE_TOOL + " ") else ""


def _call_id(call_id: Any, problems: list[str]) -> str:
    """The call id when `gen_ai.tool.call.id` is not a str other than NO_CALL_ID ("" for none)."""
    if call_id is None or isinstance(call_id, str):
        return "" if call_id is None or call_id == NO_CALL_ID else call_id
    problems.append(TOOL_CALL_ID)
    return str(call_id)


def _json_text(v: Any, key: str, problems: list[str]) -> str | None:
    """JSON text attributes (arguments, results): the structured form the conventions ask for where the SDK has it
    (an OTLP kvlistValue, read by `structured`) is encoded as JSON; anything else too, counted (the conventions
    expect an object)."""
    if isinstance(v, str):
        return v
    if isinstance(v, tuple):
        try:
            v = structured(v, obj=True)
        except RecursionError:
            return None
    if not isinstance(v, dict):
        problems.append(key)
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return None


def _agent(span: Span, agent: Any, problems: list[str]) -> str:
    """The agent name when `gen_ai.agent.name` is not a str: the span name's, else ""."""
    if isinstance(agent, str):
        return agent or ""
    if agent is not None:
        problems.append(AGENT_NAME)
    if span.name.startswith(INVOKE_AGENT + " "):
        return span.name[len(INVOKE_AGENT) + 1 :].strip()
    return ""


def _load_c() -> Callable[[Iterable[Span], list[ToolCall | Turn | Span], list[str], dict[str, int]], None] | None:
    """The C convert (_cgenai.c), given this module's classes, helpers and constants (it reads the names it needs);
    None when it is not loaded (see load_extension)."""
    mod = load_extension("monitor.normalize._cgenai", globals())
    if mod is None:
        return None
    return cast(Callable[[Iterable[Span], list[ToolCall | Turn | Span], list[str], dict[str, int]], None], mod.convert)


_CONVERT_C = _load_c()
