"""An application that sets the global TracerProvider itself before toolwatch runs it (imported only in a fresh
process: the global can be set once per process). `OWN_PROVIDER=sdk`: the SDK's TracerProvider, exporting to
memory, its count printed at exit; `OWN_PROVIDER=custom`: a provider of its own (not the SDK's)."""

from __future__ import annotations

import atexit
import os
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.monitor.offline.agents import plain_otel_agent


class CustomProvider(trace.NoOpTracerProvider):
    """A global provider that is not the SDK's (a vendor's, say)."""


if os.environ.get("OWN_PROVIDER") == "custom":
    trace.set_tracer_provider(CustomProvider())
else:
    _EXPORTER = InMemorySpanExporter()
    _PROVIDER = TracerProvider()
    _PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(_PROVIDER)
    atexit.register(
        lambda: print(f"application exporter: {len(_EXPORTER.get_finished_spans())} spans", file=sys.stderr)
    )

agent = plain_otel_agent  # its tracer was taken from the global provider at import, as an application's is
