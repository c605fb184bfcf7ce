"""Generator and async-generator tools: one span over the whole iteration.

The original generator is created at call time (so a bad call raises where it did before); the
returned iterator drives it step by step with the full protocol (`send`, `throw`, `close` and their
async forms), makes the tool span current only while the original runs, and ends the span when the
original is exhausted, raises or is closed. Closing early is not an error. With content capture on,
the first `MAX_RECORDED_ITEMS` items are recorded as a JSON list in `gen_ai.tool.call.result`, each serialized when
it is yielded (as it was then; no item is kept).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from contextvars import Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

from instrumentation import _attributes as A
from instrumentation._content import to_json_prefix
from instrumentation._context import PENDING, PendingCall
from instrumentation._functionlike import function_like
from instrumentation._span import (
    call_then_trace,
    end_span,
    failed_begin,
    record_error,
    record_result_json,
    start_span,
    take_pending,
)
from instrumentation._spec import ToolSpec
from instrumentation._stats import STATS

logger = logging.getLogger(__name__)

MAX_RECORDED_ITEMS = 256

_attach = otel_context.attach
_get_current = otel_context.get_current
_detach = otel_context.detach
_pending = PENDING.get
_set_pending = PENDING.set


def _hide_pending() -> Token[PendingCall | None] | None:
    """Clear the pending call while the original runs: this tool took its id at the call, and the tools it calls get
    their own (a dispatcher's call, or a `use_tool_call_id` block, is still pending in its consumer's context)."""
    return None if _pending() is None else _set_pending(None)


def _restore(token: object, hidden: Token[PendingCall | None] | None) -> None:
    """The consumer's pending call and context again, after a step of the original."""
    if hidden is not None:
        try:
            PENDING.reset(hidden)
        except ValueError:  # a step that ended in another context (as `_span.end` allows): nothing to restore there
            pass
    _detach(token)  # type: ignore[arg-type]  # logs and swallows its own errors


class _Recorder:
    """Counts the items and records the first `MAX_RECORDED_ITEMS`, each as JSON when it is yielded: an item the
    caller changes later is recorded as it was yielded, and none is kept alive until the iteration ends (a tool
    streaming large chunks held up to 256 of them). Past the content length limit no more are serialized: the
    attribute is cut there anyway."""

    __slots__ = ("count", "keep", "limit", "parts", "size")

    def __init__(self, keep: bool, limit: int) -> None:
        self.keep = keep
        self.limit = limit
        self.count = 0
        self.parts: list[str] = []
        self.size = 1  # the opening bracket

    def add(self, item: Any) -> None:
        self.count += 1
        if self.keep and len(self.parts) < MAX_RECORDED_ITEMS and self.size <= self.limit:
            room = self.limit - self.size + 1  # past it the list is cut anyway: the rest of a large item is not kept
            text = to_json_prefix(item, room)  # never raises
            if len(text) > room:
                text = text[:room]
            self.parts.append(text)
            self.size += len(text) + 1

    def finish(self, span: Span, settings: Any) -> None:
        try:
            if span.is_recording():
                span.set_attribute(A.TOOLWATCH_YIELDED, self.count)
                if self.keep:
                    record_result_json(span, "[" + ",".join(self.parts) + "]", settings)
        except Exception:  # noqa: BLE001 - telemetry must not turn the end of iteration into an error
            STATS.instrumentation_errors += 1
            logger.exception("toolwatch: recording the yielded items failed")


def _start(
    spec: ToolSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any], pending: PendingCall | None,
    parent: otel_context.Context,
) -> tuple[Span, otel_context.Context, _Recorder, Any] | None:
    try:
        span, settings = start_span(spec, args, kwargs, pending, parent)
    except Exception:  # noqa: BLE001
        failed_begin()
        return None
    recorder = _Recorder(settings.capture_content and span.is_recording(), settings.max_length)
    return span, trace.set_span_in_context(span), recorder, settings


def _traced_generator(
    spec: ToolSpec, gen: Generator[Any, Any, Any], args: tuple[Any, ...], kwargs: Mapping[str, Any],
    pending: PendingCall | None, parent: otel_context.Context,
) -> Generator[Any, Any, Any]:
    started = _start(spec, args, kwargs, pending, parent)
    if started is None:
        return (yield from gen)
    span, ctx, recorder, settings = started
    sent: Any = None
    thrown: BaseException | None = None
    try:
        while True:
            token, hidden = _attach(ctx), _hide_pending()
            try:  # the item is held in `box` only until it is yielded: no local keeps it while the caller has it
                if thrown is None:
                    box = [gen.send(sent)]
                else:
                    box, thrown = [gen.throw(thrown)], None
            finally:
                _restore(token, hidden)
            recorder.add(box[0])
            try:
                sent = yield box.pop()
            except GeneratorExit:
                token, hidden = _attach(ctx), _hide_pending()
                try:
                    gen.close()
                finally:
                    _restore(token, hidden)
                raise
            except BaseException as exc:  # thrown in by the consumer: hand it to the original
                thrown = exc
    except StopIteration as stop:
        recorder.finish(span, settings)
        return stop.value
    except GeneratorExit:
        recorder.finish(span, settings)
        raise
    except BaseException as exc:
        record_error(span, exc, settings)
        raise
    finally:
        end_span(span)


async def _traced_async_generator(
    spec: ToolSpec, agen: AsyncGenerator[Any, Any], args: tuple[Any, ...], kwargs: Mapping[str, Any],
    pending: PendingCall | None, parent: otel_context.Context,
) -> AsyncGenerator[Any, Any]:
    _unhook(agen)
    started = _start(spec, args, kwargs, pending, parent)
    if started is None:
        try:
            async for item in agen:
                yield item
        finally:
            await agen.aclose()  # left to this wrapper (see `_unhook`)
        return
    span, ctx, recorder, settings = started
    sent: Any = None
    thrown: BaseException | None = None
    try:
        while True:
            token, hidden = _attach(ctx), _hide_pending()
            try:  # as in _traced_generator: `box` is empty while the caller has the item
                if thrown is None:
                    box = [await agen.asend(sent)]
                else:
                    box, thrown = [await agen.athrow(thrown)], None
            finally:
                _restore(token, hidden)
            recorder.add(box[0])
            try:
                sent = yield box.pop()
            except GeneratorExit:
                token, hidden = _attach(ctx), _hide_pending()
                try:
                    await agen.aclose()
                finally:
                    _restore(token, hidden)
                raise
            except BaseException as exc:
                thrown = exc
    except StopAsyncIteration:
        recorder.finish(span, settings)
    except GeneratorExit:
        recorder.finish(span, settings)
        raise
    except BaseException as exc:
        record_error(span, exc, settings)
        raise
    finally:
        end_span(span)


def _closed_by_the_wrapper(agen: AsyncGenerator[Any, Any]) -> None:
    """The finalizer of the original: nothing to do, the wrapper holding it closes it (see `_unhook`)."""


def _unhook(agen: AsyncGenerator[Any, Any]) -> None:
    """Keep the event loop from seeing the original: this wrapper is the async generator the caller has, the loop
    sees it start and closes it when it is left open or collected, and it closes the original. Seen too, the original
    was closed by the loop at the same time as by the wrapper ("aclose(): asynchronous generator is already running")
    when the loop ended, or when both were collected in one garbage cycle. The loop learns of an async generator
    through the thread's async-generator hooks, which run when its first step is made: one is made (and dropped,
    never run) with no first-step hook, and a finalizer that leaves the closing to the wrapper, which holds the
    original until it has closed it."""
    hooks = sys.get_asyncgen_hooks()
    sys.set_asyncgen_hooks(firstiter=None, finalizer=_closed_by_the_wrapper)
    try:
        agen.asend(None).close()
    finally:
        sys.set_asyncgen_hooks(*hooks)


def _as_iteration_tool(func: Callable[..., Any], traced: Callable[..., Any], spec: ToolSpec) -> Callable[..., Any]:
    """A generator tool stays one to `inspect.isgeneratorfunction` / `isasyncgenfunction` (see `_functionlike`);
    one with no code to show (a callable object) is wrapped in the plain call, as before."""
    # The span starts when the generator is first read; its parent is where it was called (in the turn)
    call = call_then_trace(spec, func, lambda it, args, kwargs: traced(spec, it, args, kwargs, take_pending(spec.name),
                                                                       _get_current()))
    return function_like(call, func) or call


def wrap_generator(spec: ToolSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    return _as_iteration_tool(func, _traced_generator, spec)


def wrap_async_generator(spec: ToolSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    return _as_iteration_tool(func, _traced_async_generator, spec)
