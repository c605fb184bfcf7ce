"""Where spans go (the tracer in use) and which tool call is running (the pending call id).

The tracer comes from the provider given to `configure()` / `set_tracer_provider()`, else from the global
OpenTelemetry provider. A dispatcher (`ToolExecutor`, or user code through `use_tool_call_id`) hands the
model's call id, and the raw argument JSON, to the next `@tool` span through a context variable; the
`@tool` wrapper takes it and clears it, so tools called from inside that tool get their own ids.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanLimits

from instrumentation._attributes import SCOPE_NAME
from instrumentation._wire import wire_safe

try:
    from importlib.metadata import version as _dist_version

    _VERSION: str | None = _dist_version("toolwatch")
except Exception:  # noqa: BLE001 - not installed as a distribution (e.g. run from a source tree)
    _VERSION = None


# How the tracer's sampler decides, so a call that will not be sampled can skip the span entirely.
SAMPLE_OTHER = 0  # ask the SDK for every call
SAMPLE_NEVER = 1  # always_off: no call is ever sampled
SAMPLE_PARENT = 2  # parent-based, dropping under a valid parent that is not sampled (the default)


def _is_drop(sampler: object) -> bool:
    return type(sampler).__name__ == "StaticSampler" and str(getattr(sampler, "_decision", "")) == "Decision.DROP"


def sampling_mode(tracer: object) -> int:
    """Classify the SDK sampler of `tracer` (unknown tracers and samplers: SAMPLE_OTHER)."""
    sampler = getattr(tracer, "sampler", None)
    if sampler is None:
        return SAMPLE_OTHER
    if _is_drop(sampler):
        return SAMPLE_NEVER
    if type(sampler).__name__ == "ParentBased" and all(
        _is_drop(getattr(sampler, attr, None)) for attr in ("_local_parent_not_sampled", "_remote_parent_not_sampled")
    ):
        return SAMPLE_PARENT
    return SAMPLE_OTHER


def attribute_limit(tracer: object) -> tuple[int | None, bool]:
    """(the longest string attribute the SDK behind `tracer` keeps, whether that is final). The SDK cuts longer
    values without a mark, so content is cut here first, marked. The limit is the provider's `SpanLimits`
    (`OTEL_[SPAN_]ATTRIBUTE_VALUE_LENGTH_LIMIT` by default; None: no limit). The API's proxy tracer (toolwatch
    imported before the application set its global provider) follows the global provider: until one is set, the
    limit the environment gives every SDK provider, not final."""
    source = tracer
    if isinstance(tracer, trace.ProxyTracer):
        source = trace.get_tracer_provider()
    limits = getattr(source, "_span_limits", None)
    final = not isinstance(source, trace.ProxyTracerProvider)
    if not isinstance(limits, SpanLimits):
        try:
            limits = SpanLimits()
        except ValueError:  # a bad value: the SDK refuses it when the provider is built
            return None, final
    limit = limits.max_span_attribute_length
    return (limit if isinstance(limit, int) else None), final


class _TracerHolder:
    __slots__ = ("attribute_limit", "limit_final", "mode", "provider", "tracer")

    def __init__(self) -> None:
        self.provider: trace.TracerProvider | None = None
        self.tracer: trace.Tracer = trace.get_tracer(SCOPE_NAME, _VERSION)
        self.mode = SAMPLE_OTHER
        self.attribute_limit, self.limit_final = attribute_limit(self.tracer)

    def content_limit(self, max_length: int) -> int:
        """`max_length`, or the SDK's attribute length limit where that is lower (the SDK would cut unmarked)."""
        if not self.limit_final and not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            self.attribute_limit, self.limit_final = attribute_limit(self.tracer)  # a global provider was set since
        cap = self.attribute_limit
        return max_length if cap is None or cap >= max_length else cap


TRACING = _TracerHolder()


def set_tracer_provider(provider: trace.TracerProvider | None) -> None:
    """Send toolwatch's spans to `provider` (None: back to the global provider). Does not touch the global."""
    tracer = (provider.get_tracer(SCOPE_NAME, _VERSION) if provider is not None
              else trace.get_tracer(SCOPE_NAME, _VERSION))
    TRACING.provider = provider
    TRACING.mode = sampling_mode(tracer)
    TRACING.attribute_limit, TRACING.limit_final = attribute_limit(tracer)
    TRACING.tracer = tracer


_get_current_span = trace.get_current_span


def will_not_sample() -> bool:
    """True when the next span is certain not to be sampled: then no span needs to be started at all.

    (always_off; or a parent-based sampler under a valid, unsampled parent span.) Skipping the span
    changes nothing that is recorded: an unsampled span records nothing, and its children would not be
    sampled either, as they are not under the unsampled parent.
    """
    mode = TRACING.mode
    if mode == SAMPLE_OTHER:
        return False
    if mode == SAMPLE_NEVER:
        return True
    context = _get_current_span().get_span_context()
    return context.span_id != 0 and not context.trace_flags & 1


def get_tracer() -> trace.Tracer:
    """The tracer toolwatch's spans are started on."""
    return TRACING.tracer


@dataclass(frozen=True, slots=True)
class PendingCall:
    """The call a dispatcher is about to run: its id, the tool it names, the raw argument JSON if any."""

    call_id: str
    tool_name: str | None = None
    arguments_json: str | None = None


PENDING: ContextVar[PendingCall | None] = ContextVar("toolwatch_pending_call", default=None)

_getrandbits = random.getrandbits


def new_call_id() -> str:
    """A fresh call id for a tool call the model did not name (`tw_` + 16 hex digits)."""
    return f"tw_{_getrandbits(64):016x}"


@contextmanager
def use_tool_call_id(call_id: str, tool_name: str | None = None) -> Iterator[None]:
    """Record `call_id` as `gen_ai.tool.call.id` of the `@tool` calls made directly in this block (not of the tools
    those call): use one block per call.

    For agents with their own dispatch loop::

        with use_tool_call_id(tool_call.id):
            result = get_weather(**arguments)

    With `tool_name`, only a tool of that name takes the id.
    """
    token = PENDING.set(PendingCall(new_call_id() if call_id is None else wire_safe(call_id), tool_name))
    try:
        yield
    finally:
        PENDING.reset(token)
