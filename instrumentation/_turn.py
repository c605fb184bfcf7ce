"""`agent_turn`: the `invoke_agent {agent}` span around one agent invocation on one input.

Recorded on the span: `gen_ai.operation.name=invoke_agent`, `gen_ai.agent.name`, `gen_ai.conversation.id`,
`toolwatch.case.id`, the offered tools as `gen_ai.tool.definitions` (always: they are not user content),
and the input and final answer as `gen_ai.input.messages` / `gen_ai.output.messages` in the GenAI
semantic-convention shape. The two message attributes follow `capture_turn_messages` (ON by default,
env `TOOLWATCH_CAPTURE_TURN_MESSAGES`), not the tool-content switch: the monitor needs the input to
judge which tools a turn should have called. Set it off where user text may not leave the process.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from instrumentation import _attributes as A
from instrumentation._content import SETTINGS, bounded, set_bounded, to_json
from instrumentation._context import TRACING
from instrumentation._spec import ToolSpec, get_tool_spec
from instrumentation._stats import STATS
from instrumentation._wire import wire_safe

logger = logging.getLogger(__name__)


def _input_messages(value: str | Sequence[Mapping[str, Any]]) -> list[Any]:
    if isinstance(value, str):
        return [{"role": "user", "parts": [{"type": "text", "content": value}]}]
    return list(value)


def tool_definitions(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """Definitions `{type, name, description, parameters}` of `@tool` functions, specs, or ready dicts."""
    out: list[dict[str, Any]] = []
    for item in tools:
        spec = item if isinstance(item, ToolSpec) else get_tool_spec(item)
        if spec is not None:
            out.append(spec.definition())
        elif isinstance(item, Mapping):
            out.append(dict(item))
        else:
            raise TypeError(f"tools must be @tool functions, ToolSpecs or definition dicts, got {item!r}")
    return out


class AgentTurn:
    """The object `agent_turn(...)` yields: call `set_output(text)` with the agent's final answer."""

    __slots__ = ("_attributes", "_name", "_output", "_token", "span")

    def __init__(self, name: str, attributes: dict[str, Any]) -> None:
        self._name = name
        self._attributes = attributes
        self._output: str | None = None
        self._token: object | None = None
        self.span: Span = trace.INVALID_SPAN

    def set_output(self, text: str, *, finish_reason: str = "stop") -> None:
        """Record the final answer as `gen_ai.output.messages` (when turn messages are captured)."""
        self._output = text
        settings = SETTINGS.current
        if not settings.capture_turn_messages or not self.span.is_recording():
            return
        try:
            message = [{"role": "assistant", "parts": [{"type": "text", "content": text}],
                        "finish_reason": finish_reason}]
            set_bounded(self.span, to_json(message), A.GEN_AI_OUTPUT_MESSAGES, settings.max_length)
        except Exception:  # noqa: BLE001
            STATS.instrumentation_errors += 1
            logger.exception("toolwatch: recording the turn output failed")

    @property
    def output(self) -> str | None:
        return self._output

    def set_attribute(self, key: str, value: Any) -> None:
        """Set any other attribute on the turn span."""
        self.span.set_attribute(key, value)

    def _start(self) -> AgentTurn:
        try:
            self.span = TRACING.tracer.start_span(self._name, kind=SpanKind.INTERNAL, attributes=self._attributes)
            self._token = otel_context.attach(trace.set_span_in_context(self.span))
        except Exception:  # noqa: BLE001
            STATS.instrumentation_errors += 1
            logger.exception("toolwatch: starting the turn span failed; the turn runs untraced")
        return self

    def _end(self, exc: BaseException | None) -> None:
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            self._token = None
        try:
            if exc is not None and self.span.is_recording():
                self.span.set_attribute(A.ERROR_TYPE, type(exc).__qualname__)
                self.span.set_status(Status(StatusCode.ERROR))
            self.span.end()
        except Exception:  # noqa: BLE001
            STATS.instrumentation_errors += 1
            logger.exception("toolwatch: ending the turn span failed")

    def __enter__(self) -> AgentTurn:
        return self._start()

    def __exit__(self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._end(exc)

    async def __aenter__(self) -> AgentTurn:
        return self._start()

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end(exc)


def agent_turn(
    input: str | Sequence[Mapping[str, Any]],  # noqa: A002 - the documented parameter name
    *,
    agent: str,
    conversation_id: str | None = None,
    case_id: str | None = None,
    tools: Iterable[Any] | None = None,
) -> AgentTurn:
    """Open the `invoke_agent {agent}` span for one turn, as a sync or async context manager.

    `input` is the user's text (recorded as one user message with a text part) or a list of messages
    already in the GenAI convention shape. `tools` are the tools offered to the model: `@tool`
    functions, a `ToolExecutor`, `ToolSpec`s or definition dicts. `case_id` labels the turn with a
    dataset case (`toolwatch.case.id`). Use as::

        with agent_turn(question, agent="triage", tools=executor) as turn:
            ...
            turn.set_output(answer)

    An exception leaving the block sets status ERROR and `error.type`, and propagates unchanged.
    """
    if not agent or not isinstance(agent, str):
        raise ValueError(f"agent_turn needs a non-empty agent name, got {agent!r}")
    # Names and ids may come from model output: a lone surrogate in the span name failed the whole export request.
    agent = wire_safe(agent)
    attributes: dict[str, Any] = {A.GEN_AI_OPERATION_NAME: A.OP_INVOKE_AGENT, A.GEN_AI_AGENT_NAME: agent}
    if conversation_id is not None:
        attributes[A.GEN_AI_CONVERSATION_ID] = wire_safe(conversation_id)
    if case_id is not None:
        attributes[A.TOOLWATCH_CASE_ID] = wire_safe(case_id)
    try:
        settings = SETTINGS.current
        if settings.capture_turn_messages:
            bounded(to_json(_input_messages(input)), A.GEN_AI_INPUT_MESSAGES, attributes, settings.max_length)
        if tools is not None:
            definitions = getattr(tools, "definitions_json", None)
            text = definitions() if callable(definitions) else to_json(tool_definitions(tools))
            attributes[A.GEN_AI_TOOL_DEFINITIONS] = wire_safe(text)
    except TypeError:
        raise
    except Exception:  # noqa: BLE001
        STATS.instrumentation_errors += 1
        logger.exception("toolwatch: building the turn attributes failed")
    return AgentTurn(f"{A.OP_INVOKE_AGENT} {agent}", attributes)
