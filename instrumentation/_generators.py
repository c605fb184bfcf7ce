"""Generator and async-generator tools: one span over the whole iteration.

The original generator is created at call time (so a bad call raises where it did before); the
returned iterator drives it step by step with the full protocol (`send`, `throw`, `close` and their
async forms), makes the tool span current only while the original runs, and ends the span when the
original is exhausted, raises or is closed. Closing early is not an error. With content capture on,
the first `MAX_RECORDED_ITEMS` items are recorded as a JSON list in `gen_ai.tool.call.result`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

from instrumentation import _attributes as A
from instrumentation._context import PendingCall, will_not_sample
from instrumentation._span import end_span, failed_begin, record_error, record_result, start_span, take_pending
from instrumentation._spec import ToolSpec
from instrumentation._stats import STATS

logger = logging.getLogger(__name__)

MAX_RECORDED_ITEMS = 256

_attach = otel_context.attach
_detach = otel_context.detach


class _Recorder:
    """Counts the items and keeps the first few for the result attribute."""

    __slots__ = ("count", "items", "keep")

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.count = 0
        self.items: list[Any] = []

    def add(self, item: Any) -> None:
        self.count += 1
        if self.keep and len(self.items) < MAX_RECORDED_ITEMS:
            self.items.append(item)

    def finish(self, span: Span, settings: Any) -> None:
        try:
            if span.is_recording():
                span.set_attribute(A.TOOLWATCH_YIELDED, self.count)
        except Exception:  # noqa: BLE001 - telemetry must not turn the end of iteration into an error
            STATS.instrumentation_errors += 1
            logger.exception("toolwatch: recording the yielded count failed")
        if self.keep:
            record_result(span, self.items, settings)  # guarded


def _start(
    spec: ToolSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any], pending: PendingCall | None
) -> tuple[Span, otel_context.Context, _Recorder, Any] | None:
    try:
        span, settings = start_span(spec, args, kwargs, pending)
    except Exception:  # noqa: BLE001
        failed_begin()
        return None
    recorder = _Recorder(settings.capture_content and span.is_recording())
    return span, trace.set_span_in_context(span), recorder, settings


def _record_failed_call(
    spec: ToolSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any], pending: PendingCall | None, exc: BaseException
) -> None:
    """The span of a call that raised before there was anything to iterate; guarded like the rest."""
    started = _start(spec, args, kwargs, pending)
    if started is not None:
        record_error(started[0], exc, started[3])
        end_span(started[0])


def _traced_generator(
    spec: ToolSpec, gen: Generator[Any, Any, Any], args: tuple[Any, ...], kwargs: Mapping[str, Any],
    pending: PendingCall | None,
) -> Generator[Any, Any, Any]:
    started = _start(spec, args, kwargs, pending)
    if started is None:
        return (yield from gen)
    span, ctx, recorder, settings = started
    sent: Any = None
    thrown: BaseException | None = None
    try:
        while True:
            token = _attach(ctx)
            try:
                if thrown is None:
                    item = gen.send(sent)
                else:
                    item, thrown = gen.throw(thrown), None
            finally:
                _detach(token)
            recorder.add(item)
            try:
                sent = yield item
            except GeneratorExit:
                token = _attach(ctx)
                try:
                    gen.close()
                finally:
                    _detach(token)
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
    pending: PendingCall | None,
) -> AsyncGenerator[Any, Any]:
    started = _start(spec, args, kwargs, pending)
    if started is None:
        async for item in agen:
            yield item
        return
    span, ctx, recorder, settings = started
    sent: Any = None
    thrown: BaseException | None = None
    try:
        while True:
            token = _attach(ctx)
            try:
                if thrown is None:
                    item = await agen.asend(sent)
                else:
                    item, thrown = await agen.athrow(thrown), None
            finally:
                _detach(token)
            recorder.add(item)
            try:
                sent = yield item
            except GeneratorExit:
                token = _attach(ctx)
                try:
                    await agen.aclose()
                finally:
                    _detach(token)
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


def _wrap_iteration(spec: ToolSpec, func: Callable[..., Any], traced: Callable[..., Any]) -> Callable[..., Any]:
    """A plain function calling the original at once and returning `traced` driving it (or it, unsampled). A call
that raises at once (bad arguments) is recorded as a failed call, as for plain tools."""
    name = spec.name

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            iterator = func(*args, **kwargs)
        except BaseException as exc:  # e.g. an argument the signature does not take: a failed call, on a span too
            if not will_not_sample():
                _record_failed_call(spec, args, kwargs, take_pending(name), exc)
            raise
        if will_not_sample():
            return iterator
        return traced(spec, iterator, args, kwargs, take_pending(name))

    return wrapper


def wrap_generator(spec: ToolSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    return _wrap_iteration(spec, func, _traced_generator)


def wrap_async_generator(spec: ToolSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    return _wrap_iteration(spec, func, _traced_async_generator)
