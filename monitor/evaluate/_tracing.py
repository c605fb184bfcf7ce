"""Spans from plain OpenTelemetry tracers (`trace.get_tracer(...)` on the global provider) into the harness.

An agent instrumented with OpenTelemetry alone (GenAI-convention `execute_tool` spans) creates its spans on the
global TracerProvider, which the harness does not own. OpenTelemetry lets the global be set once per process, so
the CLI commands set it, once and only when the application has not, to a router whose tracers send each span
to the provider of the run in progress (`route_global_tracing`), and to no provider otherwise (like the API's
default). When the application has set the SDK's TracerProvider as the global itself, a span processor is added to
it (once) that hands each span ending while a run is in progress to the harness's processor as well (the
application's own processors still get every span); any other global provider cannot be tapped, and a warning
says so. Library code and tests that build a Harness leave the global alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context, trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.util.types import Attributes

logger = logging.getLogger(__name__)


class _Router(trace.TracerProvider):
    """The global provider the CLI installs: its tracers follow `target`, read at every span."""

    def __init__(self) -> None:
        self.target: trace.TracerProvider | None = None

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes | None = None,
    ) -> trace.Tracer:
        return _RoutedTracer(self, (instrumenting_module_name, instrumenting_library_version, schema_url, attributes))


class _RoutedTracer(trace.Tracer):
    """A tracer of the router's current target (a no-op tracer while there is none)."""

    _NOOP = trace.NoOpTracer()

    def __init__(self, router: _Router, args: tuple[str, str | None, str | None, Attributes | None]) -> None:
        self._router = router
        self._args = args
        self._cached: tuple[trace.TracerProvider, trace.Tracer] | None = None

    def _tracer(self) -> trace.Tracer:
        target = self._router.target
        if target is None:
            return self._NOOP
        cached = self._cached
        if cached is None or cached[0] is not target:
            cached = self._cached = (target, target.get_tracer(*self._args))
        return cached[1]

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return self._tracer().start_span(*args, **kwargs)

    @contextmanager  # (the API's own ProxyTracer overrides it the same way, with a type: ignore)
    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Iterator[trace.Span]:  # type: ignore[override]
        with self._tracer().start_as_current_span(*args, **kwargs) as span:
            yield span


class _Forwarder(SpanProcessor):
    """Added once to an application's own SDK TracerProvider: spans that end while a run is in progress also go to
    the harness's processor (`target`); the application's processors are not touched."""

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None

    def on_start(self, span: Span, parent_context: context.Context | None = None) -> None:
        target = self.target
        if target is not None:
            target.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        target = self.target
        if target is not None:
            target.on_end(span)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_ROUTER = _Router()
_FORWARDER = _Forwarder()
_TAPPED: list[SdkTracerProvider] = []  # the application's provider the forwarder was added to (the global is set once)
_LOCK = threading.Lock()


def _install() -> str:
    """How the global provider's spans reach the harness: "router" (the router is the global: installed now unless
    the application set one), "forward" (the application's SDK provider, tapped by the forwarder), or "" (not)."""
    with _LOCK:
        current = trace.get_tracer_provider()
        if current is _ROUTER:
            return "router"
        if isinstance(current, trace.ProxyTracerProvider):
            trace.set_tracer_provider(_ROUTER)
            if trace.get_tracer_provider() is _ROUTER:
                return "router"
            current = trace.get_tracer_provider()
        if isinstance(current, SdkTracerProvider):
            if not any(p is current for p in _TAPPED):
                current.add_span_processor(_FORWARDER)
                _TAPPED.append(current)
            return "forward"
        return ""


@contextmanager
def route_global_tracing(provider: trace.TracerProvider, processor: SpanProcessor) -> Iterator[bool]:
    """Send spans of the global provider's tracers to `provider` while the block runs (for the CLI commands: the
    first call sets the global provider, for the rest of the process). When the application set the SDK's
    TracerProvider as the global itself, its spans ending in the block go to `processor` (the harness's,
    `Harness.processor`) as well as to the application's processors. Yields False, and captures nothing, when the
    global provider is neither: a warning says what to do."""
    mode = _install()
    if not mode:
        current = trace.get_tracer_provider()
        logger.warning(
            "the application set a global TracerProvider (%s) that is not the OpenTelemetry SDK's TracerProvider: "
            "spans of plain OpenTelemetry tracers go to it and are not captured, only toolwatch's instrumentation "
            "is (set an opentelemetry.sdk.trace.TracerProvider as the global provider, or leave it unset, to "
            "capture them)",
            type(current).__qualname__,
        )
        yield False
        return
    if mode == "router":
        previous, _ROUTER.target = _ROUTER.target, provider
        try:
            yield True
        finally:
            _ROUTER.target = previous
        return
    before, _FORWARDER.target = _FORWARDER.target, processor
    try:
        yield True
    finally:
        _FORWARDER.target = before
