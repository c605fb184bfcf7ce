"""Spans from plain OpenTelemetry tracers (`trace.get_tracer(...)` on the global provider) into the harness.

An agent instrumented with OpenTelemetry alone (GenAI-convention `execute_tool` spans) creates its spans on the
global TracerProvider, which the harness does not own. OpenTelemetry lets the global be set once per process, so
the CLI commands set it, once and only when the application has not, to a router whose tracers send each span
to the provider of the run in progress (`route_global_tracing`), and to no provider otherwise (like the API's
default). Library code and tests that build a Harness leave the global alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
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


_ROUTER = _Router()
_LOCK = threading.Lock()


def _installed() -> bool:
    """Install the router as the global provider unless the application set one; whether it is the global."""
    with _LOCK:
        current = trace.get_tracer_provider()
        if current is _ROUTER:
            return True
        if not isinstance(current, trace.ProxyTracerProvider):
            return False
        trace.set_tracer_provider(_ROUTER)
        return trace.get_tracer_provider() is _ROUTER


@contextmanager
def route_global_tracing(provider: trace.TracerProvider) -> Iterator[bool]:
    """Send spans of the global provider's tracers to `provider` while the block runs (for the CLI commands: the
    first call sets the global provider, for the rest of the process). Yields False, and routes nothing, when the
    application set a global provider of its own: those spans go there, not to `provider`."""
    if not _installed():
        logger.info(
            "a global TracerProvider is set already: spans of plain OpenTelemetry tracers go to it, "
            "only toolwatch's instrumentation is captured"
        )
        yield False
        return
    previous, _ROUTER.target = _ROUTER.target, provider
    try:
        yield True
    finally:
        _ROUTER.target = previous
