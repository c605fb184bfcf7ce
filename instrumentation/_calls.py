"""Tool-call shapes as models emit them, results as they go back, and the typed call errors.

Accepted shapes (plain dicts, or SDK objects with the same attributes):

- OpenAI chat completions: `{"id": ..., "type": "function", "function": {"name": ..., "arguments": "<json>"}}`
- OpenAI Responses: `{"type": "function_call", "call_id": ..., "name": ..., "arguments": "<json>"}`
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from instrumentation._content import to_json

CallStyle = Literal["chat", "responses"]


class ToolCallError(Exception):
    """A tool call that could not run: the model named an unknown tool or sent unusable arguments."""

    def __init__(self, message: str, *, tool_name: str, call_id: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.call_id = call_id


class UnknownToolError(ToolCallError):
    """The model called a tool name that is not registered."""


class ToolArgumentsError(ToolCallError):
    """The arguments are not a JSON object (unparseable JSON, or another JSON value)."""

    def __init__(self, message: str, *, tool_name: str, call_id: str, arguments: object, shown: str = "") -> None:
        super().__init__(message + shown, tool_name=tool_name, call_id=call_id)
        self.arguments = arguments
        self.without_arguments = message  # the message without the arguments it shows (`shown`)


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One requested call, normalized from either shape."""

    call_id: str
    name: str
    arguments: str | Mapping[str, Any] | None
    style: CallStyle


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def parse_tool_call(call: Any) -> ToolCallRequest:
    """Normalize one tool call of either OpenAI shape; a `TypeError` says what was wrong with another."""
    function = _get(call, "function")
    if function is not None and not isinstance(function, str):
        name, call_id, style = _get(function, "name"), _get(call, "id"), "chat"
        arguments = _get(function, "arguments")
    elif _get(call, "type") == "function_call" or _get(call, "call_id") is not None:
        name, call_id, style = _get(call, "name"), _get(call, "call_id"), "responses"
        arguments = _get(call, "arguments")
    else:
        raise TypeError(
            "unrecognized tool call: expected a chat-completions tool call "
            "{'id', 'type': 'function', 'function': {'name', 'arguments'}} or a Responses item "
            f"{{'type': 'function_call', 'call_id', 'name', 'arguments'}}, got {call!r:.200}"
        )
    if not isinstance(name, str):
        raise TypeError(f"tool call without a string name: {call!r:.200}")
    if arguments is not None and not isinstance(arguments, (str, Mapping)):
        arguments = str(arguments)
    return ToolCallRequest(str(call_id) if call_id is not None else "", name, arguments, style)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one call: `output` (the tool's value) or `error`, ready to hand back to the model."""

    call_id: str
    name: str
    output: Any = None
    error: BaseException | None = None
    style: CallStyle = "chat"

    @property
    def is_error(self) -> bool:
        return self.error is not None

    @property
    def content(self) -> str:
        """Text for the model: the output (JSON unless already a string), or `Error: ...`."""
        if self.error is not None:
            return f"Error: {type(self.error).__name__}: {self.error}"
        return self.output if isinstance(self.output, str) else to_json(self.output)

    def to_message(self) -> dict[str, Any]:
        """The message to append for the model, in the shape of the call it answers."""
        if self.style == "responses":
            return {"type": "function_call_output", "call_id": self.call_id, "output": self.content}
        return {"role": "tool", "tool_call_id": self.call_id, "content": self.content}
