"""The records the judge works on: one tool call that ran, and one agent turn.

Sources (OTLP, files, Redis) decode spans; the normalizer maps them to these records;
turn assembly groups calls under their turn. Nothing here knows about OpenTelemetry.

Records are read-only once turn assembly has released them (the judge, the metrics and the verdict log share
them). They are not frozen dataclasses only because a frozen `__init__` costs about three times as much, on
the path every span takes. The GenAI normalizer even builds them field by field, without `__init__`: a new field
must be set there too (tests/monitor/service/test_normalize_fast.py fails otherwise).

Records (and spans and verdicts) built by the C extensions are not tracked by the cyclic garbage collector
(monitor/_cext/records.h): they only refer to what they were built from. Never store a record inside itself or its
own containers: such a cycle would not be collected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

AttributeValue = str | bool | int | float | tuple[Any, ...]
Attributes = Mapping[str, AttributeValue]


@dataclass(slots=True)
class ToolCall:
    """One tool call that ran (an `execute_tool` span, or a mapped equivalent).

    `arguments` is the raw JSON text as captured (`gen_ai.tool.call.arguments`), or None when content
    capture was off: such a call is unjudged for arguments and schema, never wrong.
    """

    name: str
    call_id: str = ""
    arguments: str | None = None
    result: str | None = None
    error_type: str | None = None
    trace_id: str = ""
    span_id: str = ""
    parent_span_id: str = ""
    start_ns: int = 0
    end_ns: int = 0
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True)
class RequestedCall(ToolCall):
    """A call the model requested (a `tool_call` part of a chat span's `gen_ai.output.messages`) that no executed
    call of its turn accounts for: it never ran (the framework refused an unknown tool, hit an iteration cap,
    crashed). Judged as any call of its turn; its type marks it "requested, not run".

    Turn assembly holds one per `tool_call` part while the turn is pending (its span id is the chat span's id and
    its index, its parent the chat span) and keeps, at release, only those no executed call matches
    (monitor.assembly._reconcile).
    """


@dataclass(slots=True)
class HandoffMark(ToolCall):
    """A handoff to another agent seen in a turn (openai-agents through OpenInference records it as a TOOL span
    without `tool.name`): not a call. `name` is the tool the model asked for to make it (`transfer_to_{agent}`,
    openai-agents' default name). Turn assembly holds it with the turn's calls (its span id is the handoff span's id
    and `#handoff`, its parent the handoff span); at release it drops the requested call of that name it stands for,
    then itself (monitor.assembly._reconcile): neither is judged.
    """


@dataclass(slots=True)
class CallIdMark(ToolCall):
    """The call id a span above a tool's span holds, for a call whose own span names none: not a call. `name` is the
    tool, `call_id` the id. Made for LangGraph's ToolNode through OpenInference (monitor.normalize._foreign): it runs
    each call the model asked for as a task of its own, a `tools` CHAIN span whose input holds the call, around the
    tool's TOOL span; a tool that returned names its id in its own output (the ToolMessage), one that raised has none.

    Turn assembly holds it with the turn's calls (its span id is the task span's id and `#call`, its parent the task
    span, its start the span's start, no attributes) and, at release, gives its id to the one call of its name without
    an id right under its span, then drops it (monitor.assembly._reconcile): it is never judged.
    """


@dataclass(slots=True)
class InputMark(ToolCall):
    """The input a span under a turn was given, for a turn whose own span records none: not a call. `arguments`
    holds the text; `name` is empty. Made for producers whose turn spans record no input: openai-agents through
    OpenInference (each of its LLM spans gives the latest user message its model saw, monitor.normalize._flat),
    google-adk (each of its model request spans, the same, ADK's transcripts of another agent left out,
    monitor.normalize._requested), a Traceloop `workflow` span under another span (its input: OpenLLMetry's LangChain
    instrumentation records a LangGraph run's input there, not on the graph's `invoke_agent` span,
    monitor.normalize._foreign).

    A Traceloop `workflow` span's mark holds its run's answer too, in `result` (None when not captured; its
    `arguments` empty when only the answer was): OpenLLMetry records a LangGraph run's answer there as well.

    Turn assembly holds it with the turn's calls (its span id is the span's id and `#input`, its parent the span, its
    start the span's start, no attributes) and, at release, drops it; when the turn's `input_text` is empty, the
    earliest one with text (by start time, then span id) gives it, and when the turn has no answer (`output_text`
    None), the latest one with an answer (by end time, then span id) gives that (monitor.assembly._offered). It is
    never judged.
    """


@dataclass(slots=True)
class OfferedTools(ToolCall):
    """The tools offered to the model on a model request span (a chat span's `gen_ai.tool.definitions`, an
    OpenInference LLM span's `llm.tools`, an OpenLLMetry chat span's `llm.request.functions`): not a call.
    `definitions` are the tools as the producer gave them (each a mapping, read by `definition_name`).

    Turn assembly holds one per such span with the turn's calls (its span id is the chat span's id and `#tools`, its
    parent the chat span, no attributes: none of the span's contents) and, at release, adds its definitions to its
    turn's `tool_definitions` and drops it (monitor.assembly._offered): it is never judged.
    """

    definitions: tuple[Mapping[str, Any], ...] = ()


def definition_name(definition: Mapping[str, Any]) -> str | None:
    """The name of an offered tool: its `name` (GenAI, Anthropic, MCP), else its `function`'s `name` (OpenAI's
    `{"type": "function", "function": {"name", "parameters"}}`); None when it names no tool."""
    name = definition.get("name")
    if not isinstance(name, str):
        fn = definition.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
    return name if isinstance(name, str) and name else None


@dataclass(slots=True)
class Turn:
    """One agent invocation on one input, with the tool calls that ran under it in start-time order.

    A turnless turn (`turnless=True`) holds calls whose turn span never arrived: it is judged with
    catalog and schema checks only.

    `tool_definitions` are the tools offered to the model: the turn span's own `gen_ai.tool.definitions`, then those
    of its model request spans (OfferedTools) that name a tool not offered before (monitor.assembly._offered).
    """

    input_text: str
    calls: tuple[ToolCall, ...] = ()
    agent: str = ""
    trace_id: str = ""
    span_id: str = ""
    conversation_id: str | None = None
    case_id: str | None = None
    output_text: str | None = None
    tool_definitions: tuple[Mapping[str, Any], ...] | None = None
    start_ns: int = 0
    end_ns: int = 0
    attributes: Attributes = field(default_factory=dict)
    resource: Attributes = field(default_factory=dict)
    turnless: bool = False


@dataclass(slots=True)
class RunRoot(ToolCall):
    """The outermost span of a framework's run that has a parent: LangChain's or LangGraph's root CHAIN span through
    OpenInference, a Traceloop `workflow` span, an OpenLIT run's `invoke_workflow` / `invoke_agent` span. At the root
    of its trace such a span is the run's turn; under a span of the application that is no part of an agent's run (a
    web framework's server span, any other span of its own, a parent never received) it is the turn too; under a
    turn, a call or another span of a run it is a step of that run, a parent link. Which one is known only once its
    parent (and the spans above that) have arrived, after it: turn assembly holds it meanwhile and settles it
    (monitor.assembly._runs). Not a call.

    Its ids and times are the span's (it is the span's parent link too); `turn` is the span read as at the root of its
    trace: the turn it is, when it is one. Its `name` is empty and it has no attributes of its own.
    """

    turn: Turn = field(default_factory=lambda: Turn(""))
