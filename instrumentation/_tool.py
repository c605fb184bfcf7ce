"""`@tool`: record every call of a function as an `execute_tool {name}` span, without changing the call.

The wrapper returns the very object the function returned and re-raises the very exception it raised
(same type, args and traceback frames, the wrapper's frame added on top). Plain functions are wrapped in a
function. Coroutine, generator and async-generator functions are wrapped in a callable that calls the original
at once (so a bad call raises at the call, as before, and is recorded as a failed call) and returns a coroutine
or an iterator driving the original, with the span covering the await or the iteration; it shows inspect the
original's code (`_functionlike`), so `inspect.iscoroutinefunction` / `isgeneratorfunction` /
`isasyncgenfunction` and `asyncio.iscoroutinefunction` still hold. (A callable object whose `__call__` is async
has no code of its own to show: it is wrapped in an `async def`, whose bad call raises when awaited.) Every
wrapper binds as a function does, so it works on methods, static methods and class methods (put
`@staticmethod` / `@classmethod` above `@tool`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextvars import Token
from random import getrandbits as _getrandbits
from typing import Any, TypeVar, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from instrumentation import _attributes as A
from instrumentation._content import SETTINGS
from instrumentation._context import PENDING, SAMPLE_OTHER, TRACING, PendingCall, will_not_sample
from instrumentation._coroutines import wrap_coroutine
from instrumentation._generators import wrap_async_generator, wrap_generator
from instrumentation._schema import JsonSchema, function_schema
from instrumentation._span import (
    add_arguments,
    arguments_of,
    end_span,
    failed_begin,
    record_error,
    record_result,
)
from instrumentation._spec import SPEC_ATTRIBUTE, ToolSpec, kind_of, positional_names

F = TypeVar("F", bound=Callable[..., Any])

_PENDING_GET = PENDING.get
_PENDING_SET = PENDING.set
_INTERNAL = SpanKind.INTERNAL
_CALL_ID = A.GEN_AI_TOOL_CALL_ID
_attach = otel_context.attach
_detach = otel_context.detach
_set_span_in_context = trace.set_span_in_context


def _description(func: Callable[..., Any]) -> str:
    doc = inspect.getdoc(func)
    return doc.strip() if doc else ""


def make_spec(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    schema: JsonSchema | None = None,
) -> ToolSpec:
    """The `ToolSpec` of `func`; the schema is derived from the signature unless given."""
    tool_name = name if name is not None else getattr(func, "__name__", None)
    if not tool_name:
        raise ValueError(f"cannot name tool {func!r}: pass @tool(name=...)")
    if schema is not None and (not isinstance(schema, dict) or schema.get("type", "object") != "object"):
        raise ValueError(f"tool {tool_name!r}: schema must be a JSON Schema dict of type object, got {schema!r}")
    names, skip_first, var_positional, var_keyword = positional_names(func)
    return ToolSpec(
        name=tool_name,
        description=_description(func) if description is None else description,
        parameters=schema if schema is not None else function_schema(func),
        kind=kind_of(func),
        param_names=names,
        skip_first=skip_first,
        var_positional=var_positional,
        var_keyword=var_keyword,
    )


def _failed_begin(reset: Token[PendingCall | None] | None) -> None:
    """Log and count a span that could not be started (called in the handler), and give back the pending call."""
    failed_begin()
    if reset is not None:
        PENDING.reset(reset)


def _wrap_function(spec: ToolSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    """The hot path, inlined: one attribute dict at span start, arguments serialized once (or the raw
    JSON the model sent reused), the result serialized once, all telemetry failures swallowed."""
    name = spec.name
    span_name = spec.span_name
    base = dict(spec.base_attributes)
    tracing = TRACING
    settings_holder = SETTINGS

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if will_not_sample():
            return func(*args, **kwargs)
        reset: Token[PendingCall | None] | None = None
        try:
            settings = settings_holder.current
            pending = _PENDING_GET()
            raw = None
            if pending is not None:
                reset = _PENDING_SET(None)  # hidden from the tools this one calls, whether it takes the id or not
            if pending is not None and (pending.tool_name is None or pending.tool_name == name):
                call_id = pending.call_id
                raw = pending.arguments_json
            else:
                call_id = f"tw_{_getrandbits(64):016x}"
            attributes = base.copy()
            attributes[_CALL_ID] = call_id
            capture = settings.capture_content
            late = capture and tracing.mode == SAMPLE_OTHER  # sampling unknown: serialize only if recorded
            if capture and not late:
                add_arguments(spec, arguments_of(spec, args, kwargs) if args else kwargs, raw, settings, attributes)
            span = tracing.tracer.start_span(span_name, kind=_INTERNAL, attributes=attributes)
            if late and span.is_recording():
                extra: dict[str, Any] = {}
                add_arguments(spec, arguments_of(spec, args, kwargs), raw, settings, extra)
                span.set_attributes(extra)
            token = _attach(_set_span_in_context(span))
        except Exception:  # noqa: BLE001 - telemetry must not break the call
            _failed_begin(reset)
            token = None
        if token is None:  # run outside the handler: the tool must not see the telemetry error as its context
            return func(*args, **kwargs)
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            record_error(span, exc, settings)
            raise
        else:
            if capture:
                record_result(span, result, settings)  # guarded: never changes the return value
            return result
        finally:
            _detach(token)
            end_span(span)
            if reset is not None:
                PENDING.reset(reset)

    return wrapper


def instrument(func: F, spec: ToolSpec) -> F:
    """Wrap `func` so each call is recorded as described by `spec`."""
    if spec.kind == "coroutine":
        wrapper = wrap_coroutine(spec, func)
    elif spec.kind == "generator":
        wrapper = wrap_generator(spec, func)
    elif spec.kind == "async_generator":
        wrapper = wrap_async_generator(spec, func)
    else:
        wrapper = _wrap_function(spec, func)
    functools.update_wrapper(wrapper, func)
    setattr(wrapper, SPEC_ATTRIBUTE, spec)
    return wrapper  # type: ignore[return-value]


@overload
def tool(func: F, /) -> F: ...


@overload
def tool(
    *, name: str | None = None, schema: JsonSchema | None = None, description: str | None = None
) -> Callable[[F], F]: ...


def tool(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    schema: JsonSchema | None = None,
    description: str | None = None,
) -> F | Callable[[F], F]:
    """Record each call of the decorated function as an `execute_tool {name}` span.

    `name` defaults to the function's name, `description` to its docstring, `schema` (the JSON Schema of
    the arguments) to one derived from the signature and type hints. The span carries
    `gen_ai.tool.name`, `gen_ai.tool.call.id` (the model's id when a `ToolExecutor` or
    `use_tool_call_id` dispatches the call, else a fresh one), `gen_ai.tool.type=function`,
    `gen_ai.tool.description`, and, when content capture is on, `gen_ai.tool.call.arguments` and
    `gen_ai.tool.call.result` as JSON. An exception sets status ERROR and `error.type` and propagates
    unchanged.
    """

    def decorate(f: F) -> F:
        if not callable(f):
            raise TypeError(f"@tool decorates a function or method, got {type(f).__name__}")
        if isinstance(f, (staticmethod, classmethod)):
            raise TypeError("put @staticmethod / @classmethod above @tool, not below it")
        if SPEC_ATTRIBUTE in getattr(f, "__dict__", {}):  # already a tool: one span per call, not two
            if name is None and schema is None and description is None:
                return f
            raise ValueError(f"{f!r} is already a @tool; give name, schema and description in one @tool(...)")
        return instrument(f, make_spec(f, name=name, description=description, schema=schema))

    if func is not None:
        return decorate(func)
    return decorate
