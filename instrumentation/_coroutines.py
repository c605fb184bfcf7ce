"""Async tools: a plain call that creates the original's coroutine at once (so a bad call raises its TypeError at
the call, as it did unwrapped) and returns a coroutine awaiting it under the tool span; shown to inspect with the
original's code (`_functionlike`), so `inspect.iscoroutinefunction` and `asyncio.iscoroutinefunction` still hold.

The span starts when the returned coroutine is first run, as for an `async def` wrapper: it covers the await, and
the tool call id is the one in force there. A call that will not be sampled (decided at the call, as for generator
tools) returns the original's coroutine itself. The returned coroutine carries the original's name and qualified name.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from instrumentation._context import will_not_sample
from instrumentation._functionlike import function_like
from instrumentation._span import (
    Started,
    begin,
    call_then_trace,
    end,
    failed_begin,
    record_error,
    record_result,
    take_pending,
)
from instrumentation._spec import ToolSpec


class _Original:
    """Holds the original's coroutine for the traced one. A coroutine thrown into before its first step (a task
    cancelled before it ran) ends without running a line, so the original's would be reported as never awaited,
    which it was not unwrapped: this closes it then, quietly, as the throw would have."""

    __slots__ = ("coro",)

    def __init__(self, coro: Any) -> None:
        self.coro = coro

    def __del__(self) -> None:
        coro = self.coro
        if getattr(coro, "cr_frame", None) is not None and not coro.cr_suspended and not coro.cr_running:
            coro.close()  # not yet started: ends it as a throw into it would have


def _traced(spec: ToolSpec, func: Callable[..., Any]) -> Callable[..., Coroutine[Any, Any, Any]]:
    name = spec.name

    async def traced(original: _Original, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        coro = original.coro
        try:
            started: Started | None = begin(spec, args, kwargs, take_pending(name))
        except Exception:  # noqa: BLE001
            failed_begin()
            started = None
        if started is None:  # awaited outside the handler: the tool must not see the telemetry error as its context
            return await coro
        try:
            result = await coro
        except BaseException as exc:
            record_error(started[0], exc, started[3])
            raise
        else:
            record_result(started[0], result, started[3])
            return result
        finally:
            end(started)

    traced.__name__ = getattr(func, "__name__", name)  # the name of each coroutine it makes
    traced.__qualname__ = getattr(func, "__qualname__", traced.__name__)
    return traced


def _legacy(spec: ToolSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    """The `async def` wrapper of a callable object whose `__call__` is async (no code of its own to show inspect):
    a coroutine function, whose bad call raises when awaited."""
    traced = _traced(spec, func)

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if will_not_sample():
            return await func(*args, **kwargs)
        return await traced(_Original(func(*args, **kwargs)), args, kwargs)

    return wrapper


def wrap_coroutine(spec: ToolSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    traced = _traced(spec, func)
    # Unsampled, the call returns the original's own coroutine: nothing to record.
    call = call_then_trace(spec, func, lambda coro, args, kwargs: traced(_Original(coro), args, kwargs))
    return function_like(call, func) or _legacy(spec, func)
