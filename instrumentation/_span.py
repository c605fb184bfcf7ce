"""Starting and ending one `execute_tool` span: the hot path shared by every kind of tool.

Attributes are built once into a dict passed at span start; the arguments are serialized once (or the
raw JSON the model emitted is reused) and only when the span will be recorded. Every function here
guards itself: a telemetry failure is logged and counted, never raised into the agent.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping
from contextvars import Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from instrumentation import _attributes as A
from instrumentation._content import SETTINGS, ContentSettings, bounded, redact, set_bounded, to_json_prefix
from instrumentation._context import PENDING, SAMPLE_OTHER, TRACING, PendingCall, new_call_id, will_not_sample
from instrumentation._spec import ToolSpec
from instrumentation._stats import STATS
from instrumentation._wire import wire_safe

logger = logging.getLogger(__name__)

_INTERNAL = SpanKind.INTERNAL
_set_span_in_context = trace.set_span_in_context
_attach = otel_context.attach
_detach = otel_context.detach

Started = tuple[Span, object, "Token[PendingCall | None] | None", ContentSettings]


def take_pending(name: str) -> PendingCall | None:
    """The call a dispatcher queued for a tool of this name, if any."""
    pending = PENDING.get()
    if pending is not None and (pending.tool_name is None or pending.tool_name == name):
        return pending
    return None


def arguments_of(spec: ToolSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The call's arguments by parameter name (positional ones named after the signature)."""
    positional = args[1:] if spec.skip_first else args
    if not positional:
        return kwargs
    names = spec.param_names
    data: dict[str, Any] = dict(zip(names, positional, strict=False))
    if len(positional) > len(names):
        data[spec.var_positional or "*args"] = list(positional[len(names):])
    data.update(kwargs)
    return data


def add_arguments(
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    raw_json: str | None,
    settings: ContentSettings,
    attributes: dict[str, Any],
) -> None:
    """Put `gen_ai.tool.call.arguments` into `attributes`: redacted, serialized once, bounded."""
    if settings.needs_redaction:
        recorded = redact(spec.name, arguments, settings)
        if recorded is None:
            attributes[A.TOOLWATCH_CONTENT_ERROR] = "redaction_failed"
            return
        text = to_json_prefix(recorded, settings.max_length)
    else:
        # the names of a function's parameters are its code's, short: counted only for a **kwargs tool's (a
        # call naming a parameter that does not exist fails; Python spells out that name in full too)
        text = raw_json if raw_json is not None else to_json_prefix(arguments, settings.max_length, spec.var_keyword)
    bounded(text, A.GEN_AI_TOOL_CALL_ARGUMENTS, attributes, settings.max_length)


def start_span(
    spec: ToolSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any], pending: PendingCall | None,
    parent: otel_context.Context | None = None,
) -> tuple[Span, ContentSettings]:
    """Start the span of one call, not made current. Raises only on a bug; callers guard it.

    Callers first ask `will_not_sample()`; when the sampler is known (always_off, parent-based), a span
    that passed that check is recorded, so the arguments are serialized before the start and passed
    with the other attributes in one dict. Otherwise they are serialized only if the span records.
    Generators use this directly: they make the span current only while the original runs, and leave the
    pending call alone (they run in their consumer's context, between its statements), and pass the `parent` context
    of their call: their span starts when they are first read, which may be after the turn they were called in."""
    settings = SETTINGS.current
    if pending is not None:
        call_id = pending.call_id
        raw_json = pending.arguments_json
    else:
        call_id = new_call_id()
        raw_json = None
    attributes = dict(spec.base_attributes)
    attributes[A.GEN_AI_TOOL_CALL_ID] = call_id
    late = settings.capture_content and TRACING.mode == SAMPLE_OTHER  # sampling unknown: serialize if recorded
    if settings.capture_content and not late:
        add_arguments(spec, arguments_of(spec, args, kwargs), raw_json, settings, attributes)
    span = TRACING.tracer.start_span(spec.span_name, context=parent, kind=_INTERNAL, attributes=attributes)
    if late and span.is_recording():
        extra: dict[str, Any] = {}
        add_arguments(spec, arguments_of(spec, args, kwargs), raw_json, settings, extra)
        span.set_attributes(extra)
    return span, settings


def begin(
    spec: ToolSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any], pending: PendingCall | None
) -> Started:
    """Start the span of one call and make it current (see `start_span`). A pending call is cleared for the
    duration of the call (restored by `end`), whether this tool took it or not: it is for a tool called directly
    in its `use_tool_call_id` block, and tools called from inside this tool get their own ids."""
    reset: Token[PendingCall | None] | None = PENDING.set(None) if PENDING.get() is not None else None
    span, settings = start_span(spec, args, kwargs, pending)
    token = _attach(_set_span_in_context(span))
    return span, token, reset, settings


def record_result(span: Span, result: Any, settings: ContentSettings) -> None:
    """Set `gen_ai.tool.call.result` when capture is on and the span records."""
    try:
        if settings.capture_content and span.is_recording():
            record_result_json(span, to_json_prefix(result, settings.max_length), settings)
    except Exception:  # noqa: BLE001
        STATS.instrumentation_errors += 1
        logger.exception("toolwatch: recording a tool result failed")


def record_result_json(span: Span, text: str, settings: ContentSettings) -> None:
    """Set `gen_ai.tool.call.result` to the JSON `text`, cut at the content limit (the cut marked); unguarded."""
    text = wire_safe(text)
    if len(text) <= TRACING.content_limit(settings.max_length):
        span.set_attribute(A.GEN_AI_TOOL_CALL_RESULT, text)
        return
    set_bounded(span, text, A.GEN_AI_TOOL_CALL_RESULT, settings.max_length)


def cut_middle(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: its beginning and its end around an ellipsis when it is longer."""
    if len(text) <= limit:
        return text
    if limit < 3:
        return text[:limit]
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head):]


def record_error(span: Span, exc: BaseException, settings: ContentSettings) -> None:
    """Status ERROR and `error.type`; the message and an exception event only when capture is on. The status
    description, and the event's message and stack trace, are cut at the content length limit (the stack trace
    keeps its beginning and its end: the outer and the innermost frames, the exception's line): a message quoting
    a large input made an export request over the monitor's body limit, losing the other spans of its batch."""
    try:
        if not span.is_recording():
            return
        error_type = type(exc).__qualname__
        span.set_attribute(A.ERROR_TYPE, error_type)
        if settings.capture_content:
            limit = settings.max_length
            try:
                text: str | None = str(exc)
            except Exception:  # noqa: BLE001 - an exception whose __str__ raises is still a failed call
                text = None
            # A lone surrogate in the status would fail the whole export request.
            safe = wire_safe(text if text is not None else f"<unprintable {error_type}>")
            span.set_status(Status(StatusCode.ERROR, f"{error_type}: {safe}"[:limit]))
            # The event `span.record_exception` makes, made here: it formats the message and the whole stack trace
            # again before taking the ones given (twice the cost of a failed call), and calls a raising __str__ again.
            module = type(exc).__module__
            span.add_event("exception", {
                A.EXCEPTION_TYPE: f"{module}.{error_type}" if module and module != "builtins" else error_type,
                A.EXCEPTION_MESSAGE: safe[:limit],
                A.EXCEPTION_STACKTRACE: cut_middle(wire_safe("".join(traceback.format_exception(exc))), limit),
                A.EXCEPTION_ESCAPED: "False",
            })
        else:
            span.set_status(Status(StatusCode.ERROR))
    except Exception:  # noqa: BLE001
        STATS.instrumentation_errors += 1
        logger.exception("toolwatch: recording a tool error failed")


def record_failed_call(
    spec: ToolSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any], pending: PendingCall | None, exc: BaseException
) -> None:
    """The span of a call that raised before there was anything to iterate or await (e.g. an argument the signature
    does not take); guarded like the rest."""
    try:
        span, settings = start_span(spec, args, kwargs, pending)
    except Exception:  # noqa: BLE001
        failed_begin()
        return
    record_error(span, exc, settings)
    end_span(span)


def call_then_trace(
    spec: ToolSpec, func: Callable[..., Any], trace_it: Callable[[Any, tuple[Any, ...], Mapping[str, Any]], Any]
) -> Callable[..., Any]:
    """The plain call of a generator, async-generator or coroutine tool: calls `func` at once (a bad call raises
    there, as unwrapped, and is recorded as a failed call) and returns `trace_it(what it returned, args, kwargs)`,
    or what it returned itself when the call will not be sampled."""
    name = spec.name

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            started = func(*args, **kwargs)
        except BaseException as exc:  # e.g. an argument the signature does not take: a failed call, on a span too
            if not will_not_sample():
                record_failed_call(spec, args, kwargs, take_pending(name), exc)
            raise
        if will_not_sample():
            return started
        return trace_it(started, args, kwargs)

    return call


def end(started: Started) -> None:
    """Make the previous context current again and end the span."""
    span, token, reset, _ = started
    _detach(token)  # type: ignore[arg-type]  # logs and swallows its own errors
    end_span(span)
    if reset is not None:
        try:
            PENDING.reset(reset)
        except ValueError:  # a coroutine driven on in another context: nothing to restore there
            pass


def end_span(span: Span) -> None:
    """End the span; a failing span processor is logged and counted."""
    try:
        span.end()
    except Exception:  # noqa: BLE001 - e.g. a user span processor that raises
        STATS.instrumentation_errors += 1
        logger.exception("toolwatch: ending a tool span failed")


def failed_begin() -> None:
    STATS.instrumentation_errors += 1
    logger.exception("toolwatch: starting a tool span failed; the tool runs untraced")
