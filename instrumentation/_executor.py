"""`ToolExecutor`: a registry name -> tool that runs the calls a model requested, each one traced.

A known tool runs inside its `@tool` span with the model's call id (handed over through a context
variable, with the raw argument JSON so it is serialized only once). An unknown tool name or arguments
that are not a JSON object still produce an `execute_tool {name}` span, status ERROR with `error.type`
(`UnknownToolError` / `ToolArgumentsError`): the monitor must see exactly these failures. The caller
then gets the typed exception (`on_error="raise"`, the default) or an error result to hand back to the
model (`on_error="result"`, which also turns exceptions raised by tools into error results).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from opentelemetry.trace import SpanKind, Status, StatusCode

from instrumentation import _attributes as A
from instrumentation._calls import (
    ToolArgumentsError,
    ToolCallError,
    ToolCallRequest,
    ToolResult,
    UnknownToolError,
    parse_tool_call,
)
from instrumentation._content import SETTINGS, ContentSettings, bounded, redact, to_json, to_json_prefix
from instrumentation._context import PENDING, TRACING, PendingCall, new_call_id
from instrumentation._spec import ToolSpec, get_tool_spec
from instrumentation._stats import STATS
from instrumentation._tool import tool
from instrumentation._wire import wire_safe

logger = logging.getLogger(__name__)

OnError = Literal["raise", "result"]
_MAX_NAME = 256


# What a failed call's arguments are recorded as when redaction is on and they cannot be redacted: text that is not
# JSON either when they were not (the monitor counts the call's arguments `malformed`, as it would unredacted), and
# the redaction marker as a JSON string when they were JSON but not an object (a `type` violation).
NOT_JSON_REDACTED = "[REDACTED: not JSON]"
NOT_OBJECT_REDACTED = json.dumps(A.REDACTED)


def _failed_arguments_text(name: str, raw: object, settings: ContentSettings) -> tuple[str | None, str | None]:
    """The arguments of a failed call as recorded (as sent, or redacted), and why they are not as sent (None: they
    are). With redaction on, arguments that are not a JSON object are replaced whole, so nothing unredacted leaks;
    None when the redaction itself failed."""
    if not settings.needs_redaction:
        return (raw if isinstance(raw, str) else to_json_prefix(raw, settings.max_length)), None
    parsed: object = raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return NOT_JSON_REDACTED, "not_redactable"
    if not isinstance(parsed, Mapping):
        return NOT_OBJECT_REDACTED, "not_redactable"
    recorded = redact(name, parsed, settings)
    return (None, "redaction_failed") if recorded is None else (to_json_prefix(recorded, settings.max_length), None)


def _record_failed_call(name: str, call_id: str, raw: object, error: ToolCallError) -> None:
    """An `execute_tool` span for a call that could not run; never raises."""
    try:
        settings = SETTINGS.current
        shown = wire_safe(name[:_MAX_NAME])
        attributes: dict[str, Any] = {
            A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
            A.GEN_AI_TOOL_NAME: shown,
            A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
            A.GEN_AI_TOOL_CALL_ID: wire_safe(call_id),
            A.ERROR_TYPE: type(error).__qualname__,
        }
        if settings.capture_content and raw is not None:
            text, why = _failed_arguments_text(shown, raw, settings)
            if why is not None:
                attributes[A.TOOLWATCH_CONTENT_ERROR] = why
            if text is not None:
                bounded(text, A.GEN_AI_TOOL_CALL_ARGUMENTS, attributes, settings.max_length)
        span = TRACING.tracer.start_span(f"{A.OP_EXECUTE_TOOL} {shown}", kind=SpanKind.INTERNAL, attributes=attributes)
        message = str(error)
        if settings.needs_redaction and isinstance(error, ToolArgumentsError):  # it shows the arguments unredacted
            message = error.without_arguments
        span.set_status(Status(StatusCode.ERROR, wire_safe(message[:1024]) if settings.capture_content else None))
        span.end()
    except Exception:  # noqa: BLE001
        STATS.instrumentation_errors += 1
        logger.exception("toolwatch: recording a failed tool call failed")


def _parse_arguments(name: str, call_id: str, arguments: object) -> tuple[dict[str, Any], str | None]:
    """(arguments as a dict, the raw JSON text if they came as text)."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}, None
    if isinstance(arguments, Mapping):
        return dict(arguments), None
    if not isinstance(arguments, str):
        raise ToolArgumentsError(
            f"arguments of tool {name!r} must be a JSON object (text or dict), got {type(arguments).__name__}",
            tool_name=name, call_id=call_id, arguments=arguments,
        )
    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        raise ToolArgumentsError(
            f"arguments of tool {name!r} are not valid JSON ({exc})",
            tool_name=name, call_id=call_id, arguments=arguments, shown=f": {arguments[:200]!r}",
        ) from exc
    if not isinstance(parsed, dict):
        raise ToolArgumentsError(
            f"arguments of tool {name!r} must be a JSON object, got JSON {type(parsed).__name__}",
            tool_name=name, call_id=call_id, arguments=arguments,
        )
    return parsed, arguments


class ToolExecutor:
    """Runs tool calls by name. Register `@tool` functions (plain functions are wrapped with `@tool`).

    `on_error="raise"` (default): an unknown tool raises `UnknownToolError`, bad arguments
    `ToolArgumentsError` (both `ToolCallError`), a tool's own exception propagates unchanged.
    `on_error="result"`: all of these come back as error results for the model (`ToolResult.error`,
    or from `execute` the text `Error: ...`). Either way the failure is on an `execute_tool` span.
    """

    def __init__(self, tools: Iterable[Callable[..., Any]] = (), *, on_error: OnError = "raise") -> None:
        if on_error not in ("raise", "result"):
            raise ValueError(f"on_error must be 'raise' or 'result', got {on_error!r}")
        self.on_error: OnError = on_error
        self._tools: dict[str, tuple[ToolSpec, Callable[..., Any]]] = {}
        self._definitions_json: str | None = None
        for func in tools:
            self.register(func)

    def register(self, func: Callable[..., Any], *, name: str | None = None) -> Callable[..., Any]:
        """Add a tool (also usable as a decorator); a function without `@tool` is wrapped first."""
        spec = get_tool_spec(func)
        if spec is None:
            func = tool(name=name)(func)
            spec = get_tool_spec(func)
            assert spec is not None
        elif name is not None and name != spec.name:
            raise ValueError(f"tool {spec.name!r} is already named by @tool; rename it there: @tool(name={name!r})")
        if spec.name in self._tools and self._tools[spec.name][1] != func:
            raise ValueError(f"a different tool named {spec.name!r} is already registered")
        self._tools[spec.name] = (spec, func)
        self._definitions_json = None
        return func

    def __repr__(self) -> str:
        return f"ToolExecutor(tools={list(self._tools)!r}, on_error={self.on_error!r})"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [spec for spec, _ in self._tools.values()]

    def __iter__(self) -> Any:
        return iter(self.specs())

    def definitions(self) -> list[dict[str, Any]]:
        """`[{type, name, description, parameters}]`, as recorded in `gen_ai.tool.definitions`."""
        return [spec.definition() for spec in self.specs()]

    def definitions_json(self) -> str:
        if self._definitions_json is None:
            self._definitions_json = to_json(self.definitions())
        return self._definitions_json

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tools in the chat-completions `tools=[...]` shape."""
        return [spec.openai_tool() for spec in self.specs()]

    def _resolve(
        self, name: str, arguments: object, call_id: str
    ) -> tuple[Callable[..., Any], dict[str, Any], str | None]:
        entry = self._tools.get(name)
        try:
            if entry is None:
                known = ", ".join(sorted(self._tools)[:50])
                raise UnknownToolError(f"unknown tool {name[:_MAX_NAME]!r}; available tools: {known}",
                                       tool_name=name, call_id=call_id)
            parsed, raw = _parse_arguments(name, call_id, arguments)
        except ToolCallError as error:
            _record_failed_call(name, call_id, arguments, error)
            raise
        return entry[1], parsed, raw

    def _check_sync(self, name: str) -> None:
        entry = self._tools.get(name)
        if entry is not None and entry[0].kind in ("coroutine", "async_generator"):
            raise TypeError(f"tool {name!r} is async: run it with `await executor.aexecute(...)` "
                            "or `await executor.aexecute_tool_calls(...)`")

    def _error_text(self, error: Exception) -> str:
        return ToolResult("", "", error=error).content

    def _run(self, name: str, arguments: object, call_id: str, *, collect: bool) -> Any:
        """Resolve and run one call with its id pending for the `@tool` span; `collect` lists a
        generator's items. Raises the call's error (typed for unknown tools and bad arguments)."""
        func, parsed, raw = self._resolve(name, arguments, call_id)
        token = PENDING.set(PendingCall(wire_safe(call_id), name, raw))
        try:
            output = func(**parsed)
            if collect and inspect.isgenerator(output):
                output = list(output)
            return output
        finally:
            PENDING.reset(token)

    async def _arun(self, name: str, arguments: object, call_id: str, *, collect: bool) -> Any:
        """`_run` from async code: coroutine tools are awaited; `collect` lists (async) generators' items."""
        func, parsed, raw = self._resolve(name, arguments, call_id)
        token = PENDING.set(PendingCall(wire_safe(call_id), name, raw))
        try:
            output = func(**parsed)
            if inspect.isawaitable(output):
                output = await output
            elif collect and inspect.isasyncgen(output):
                output = [item async for item in output]
            elif collect and inspect.isgenerator(output):
                output = list(output)
            return output
        finally:
            PENDING.reset(token)

    def execute(self, name: str, arguments: str | Mapping[str, Any] | None = None, call_id: str | None = None) -> Any:
        """Run one call; `arguments` as a dict or the raw JSON text the model emitted.

        Returns the tool's value (a generator tool's iterator, whose span covers its iteration), or with
        `on_error="result"` the text `Error: <type>: <message>` when the call failed. `call_id` is the
        model's id for the call (`gen_ai.tool.call.id`); a fresh one is made when it is None.
        """
        self._check_sync(name)
        try:
            return self._run(name, arguments, call_id or new_call_id(), collect=False)
        except Exception as error:
            if self.on_error == "raise":
                raise
            return self._error_text(error)

    async def aexecute(
        self, name: str, arguments: str | Mapping[str, Any] | None = None, call_id: str | None = None
    ) -> Any:
        """Run one call from async code: coroutine tools are awaited, others called directly."""
        try:
            return await self._arun(name, arguments, call_id or new_call_id(), collect=False)
        except Exception as error:
            if self.on_error == "raise":
                raise
            return self._error_text(error)

    def _result(self, request: ToolCallRequest, output: Any = None, error: Exception | None = None) -> ToolResult:
        return ToolResult(request.call_id, request.name, output, error, request.style)

    def execute_tool_calls(self, tool_calls: Iterable[Any]) -> list[ToolResult]:
        """Run the calls of one model response in order; generator outputs are collected into lists."""
        requests = [parse_tool_call(call) for call in tool_calls]
        for request in requests:
            self._check_sync(request.name)
        results = []
        for request in requests:
            try:
                output = self._run(request.name, request.arguments, request.call_id or new_call_id(), collect=True)
            except Exception as error:
                if self.on_error == "raise":
                    raise
                results.append(self._result(request, error=error))
            else:
                results.append(self._result(request, output))
        return results

    async def _run_one(self, request: ToolCallRequest) -> ToolResult:
        try:
            output = await self._arun(request.name, request.arguments, request.call_id or new_call_id(), collect=True)
        except Exception as error:
            if self.on_error == "raise":
                raise
            return self._result(request, error=error)
        return self._result(request, output)

    async def aexecute_tool_calls(self, tool_calls: Iterable[Any], *, concurrent: bool = False) -> list[ToolResult]:
        """Run the calls of one model response; with `concurrent=True` as parallel asyncio tasks."""
        requests = [parse_tool_call(call) for call in tool_calls]
        if concurrent:
            return list(await asyncio.gather(*(self._run_one(r) for r in requests)))
        return [await self._run_one(r) for r in requests]
