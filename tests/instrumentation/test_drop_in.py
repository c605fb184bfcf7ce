"""toolwatch dropped into an application that already uses OpenTelemetry: its own provider, its own settings, its
own context. Real SDK, real OTLP exporters against receivers on 127.0.0.1."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry import context as otel_context
from opentelemetry.propagate import extract
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import instrumentation as tw
from instrumentation._stats import STATS


@tw.tool
def ping(x: int) -> int:
    return x


class GrpcReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC traces endpoint on an ephemeral loopback port, keeping each request's metadata and span count."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []
        self.spans = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)  # type: ignore[no-untyped-call]
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - the service's method name
        self.metadata.append(dict(context.invocation_metadata()))
        self.spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
def grpc_receiver() -> Iterator[GrpcReceiver]:
    receiver = GrpcReceiver()
    yield receiver
    receiver.server.stop(0)


@pytest.fixture
def providers() -> Iterator[list[TracerProvider]]:
    made: list[TracerProvider] = []
    STATS.reset()
    yield made
    for provider in made:
        provider.shutdown()


def test_grpc_headers_named_as_for_http_reach_the_receiver(
    grpc_receiver: GrpcReceiver, providers: list[TracerProvider]
) -> None:
    """`headers={"Authorization": ...}` works over HTTP; over gRPC the capital letter made every export fail
    (metadata keys are lowercase), so no span ever arrived."""
    provider = tw.configure(exporter="otlp-grpc", endpoint=f"http://127.0.0.1:{grpc_receiver.port}",
                            headers={"Authorization": "Bearer t0k", "X-Tenant": "a"}, set_global=False)
    providers.append(provider)
    assert ping(1) == 1
    assert provider.force_flush(10_000)
    assert grpc_receiver.spans == 1 and STATS.spans_exported == 1 and STATS.export_failures == 0
    [metadata] = grpc_receiver.metadata
    assert metadata["authorization"] == "Bearer t0k" and metadata["x-tenant"] == "a"


@pytest.mark.parametrize(
    ("protocol", "env", "endpoint"),
    [
        ("grpc", "OTEL_EXPORTER_OTLP_ENDPOINT", None),
        ("grpc", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None),
        ("grpc", None, "http://[::1"),
        ("http/protobuf", None, "http://[::1"),
    ],
)
def test_a_malformed_endpoint_does_not_stop_the_agent(
    providers: list[TracerProvider], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    protocol: str, env: str | None, endpoint: str | None,
) -> None:
    """An endpoint urllib cannot split (an unclosed IPv6 bracket) raised ValueError out of configure(): the agent
    did not start. Now it is logged, and the spans are counted as failed exports."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    if env is not None:
        monkeypatch.setenv(env, "http://[::1")
    with caplog.at_level(logging.WARNING):
        provider = tw.configure(endpoint=endpoint, set_global=False, simple=True)
    providers.append(provider)
    assert "http://[::1" in caplog.text and "cannot build the OTLP exporter" in caplog.text
    assert ping(2) == 2
    with tw.agent_turn("q", agent="a"):
        assert ping(3) == 3
    assert STATS.spans_export_failed == 3 and STATS.spans_exported == 0


def test_shutdown_leaves_a_provider_the_application_handed_over_running(providers: list[TracerProvider]) -> None:
    """`shutdown()` without a provider shuts down the one configure() made; it shut down the application's own
    provider given to set_tracer_provider(), whose later spans were then dropped ("Processor is already shutdown")."""
    app, exported = TracerProvider(), InMemorySpanExporter()
    app.add_span_processor(SimpleSpanProcessor(exported))
    providers.append(app)
    tw.set_tracer_provider(app)
    assert ping(1) == 1
    tw.shutdown()
    with app.get_tracer("app").start_as_current_span("app request"):
        assert ping(2) == 2
    assert [s.name for s in exported.get_finished_spans()] == ["execute_tool ping", "execute_tool ping", "app request"]


def test_shutdown_twice_is_quiet(providers: list[TracerProvider], caplog: pytest.LogCaptureFixture) -> None:
    provider = tw.configure(exporter="memory", set_global=False)
    ping(1)
    with caplog.at_level(logging.WARNING):
        tw.shutdown()
        tw.shutdown()
        provider.shutdown()
    assert caplog.text == ""
    assert isinstance(provider.exporter, InMemorySpanExporter) and len(provider.exporter.get_finished_spans()) == 1


APP_WITH_GLOBAL = r"""
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import instrumentation as tw

app_exported = InMemorySpanExporter()
app = TracerProvider()
app.add_span_processor(SimpleSpanProcessor(app_exported))
trace.set_tracer_provider(app)
ours = tw.configure(exporter="memory", service_name="agent", set_global=json.loads(sys.argv[1]))

@tw.tool
def ping(x: int) -> int:
    return x

with trace.get_tracer("app").start_as_current_span("POST /ask"):
    with tw.agent_turn("q", agent="a"):
        ping(1)
tw.shutdown()
with trace.get_tracer("app").start_as_current_span("after"):
    pass
ids = lambda spans: sorted((s.name, s.context.trace_id, s.parent.span_id if s.parent else 0) for s in spans)
print(json.dumps({"global_is_app": trace.get_tracer_provider() is app, "app": ids(app_exported.get_finished_spans()),
                  "ours": ids(ours.exporter.get_finished_spans())}))
"""


@pytest.mark.parametrize("set_global", [None, True, False])
def test_an_application_global_provider_is_kept_and_nothing_is_exported_twice(set_global: bool | None) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOOLWATCH_"))}
    proc = subprocess.run([sys.executable, "-c", APP_WITH_GLOBAL, "null" if set_global is None else str(set_global)
                           .lower()], capture_output=True, text=True, env=environ, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["global_is_app"]
    assert [name for name, _, _ in seen["app"]] == ["POST /ask", "after"]  # toolwatch did not shut it down
    assert [name for name, _, _ in seen["ours"]] == ["execute_tool ping", "invoke_agent a"]
    request = next(s for s in seen["app"] if s[0] == "POST /ask")
    turn = next(s for s in seen["ours"] if s[0] == "invoke_agent a")
    assert turn[1] == request[1]  # the turn joins the application's trace, under its request span


def test_tools_run_in_threads_join_the_turn_with_the_context_copied(providers: list[TracerProvider]) -> None:
    """As the README says: a thread pool does not carry the context; `contextvars.copy_context().run` does."""
    provider = tw.configure(exporter="memory", set_global=False)
    providers.append(provider)
    with tw.agent_turn("q", agent="a"), futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(ping, [1, 2]))
        ctx = contextvars.copy_context()
        list(pool.map(lambda x: ctx.copy().run(ping, x), [3, 4]))
    assert isinstance(provider.exporter, InMemorySpanExporter)
    spans = provider.exporter.get_finished_spans()
    [turn] = [s for s in spans if s.name == "invoke_agent a"]
    under = [s for s in spans if s.parent is not None and s.parent.span_id == turn.context.span_id]
    assert len(under) == 2 and all(s.context.trace_id == turn.context.trace_id for s in under)
    assert sum(1 for s in spans if s.parent is None) == 3  # the turn, and the two calls made without the context


def test_a_turn_under_a_remote_parent_keeps_its_trace(providers: list[TracerProvider]) -> None:
    provider = tw.configure(exporter="memory", set_global=False)
    providers.append(provider)
    token = otel_context.attach(extract({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}))
    try:
        with tw.agent_turn("q", agent="a"):
            ping(1)
    finally:
        otel_context.detach(token)
    assert isinstance(provider.exporter, InMemorySpanExporter)
    call, turn = provider.exporter.get_finished_spans()
    assert {call.context.trace_id, turn.context.trace_id} == {0x0AF7651916CD43DD8448EB211C80319C}
    assert turn.parent is not None and turn.parent.is_remote and turn.parent.span_id == 0xB7AD6B7169203331
    assert call.parent is not None and call.parent.span_id == turn.context.span_id


def test_spans_ended_after_shutdown_are_counted_as_dropped(
    providers: list[TracerProvider], caplog: pytest.LogCaptureFixture
) -> None:
    """A tool that ran after the provider was shut down (a later exit hook, a thread still at work) lost its span
    uncounted: the SDK only logs it at INFO."""
    provider = tw.configure(exporter="memory", simple=False, set_global=False)
    providers.append(provider)
    ping(1)
    tw.shutdown()
    assert ping(2) == 2 and ping(3) == 3
    assert STATS.spans_exported == 1 and STATS.spans_dropped_at_shutdown == 2 and tw.dropped_spans() == 2


def test_an_exporter_list_in_the_environment_says_what_is_used(
    providers: list[TracerProvider], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """OTEL_TRACES_EXPORTER=console,otlp names two exporters; configure() takes one: the rest went unsaid."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console,otlp")
    with caplog.at_level(logging.WARNING):
        provider = tw.configure(set_global=False)
    providers.append(provider)
    assert "OTEL_TRACES_EXPORTER" in caplog.text and "only console is used" in caplog.text
    assert provider.exporter is not None and type(provider.exporter).__name__ == "ConsoleSpanExporter"


@tw.tool
def numbers(n: int) -> Iterator[int]:
    yield from range(n)


@tw.tool
async def anumbers(n: int) -> Any:
    for i in range(n):
        yield i


def test_a_generator_tool_called_in_the_turn_and_read_after_it_stays_in_the_turn(
    providers: list[TracerProvider],
) -> None:
    """A generator tool called in the turn but read later (streamed out after the block) started its span where it
    was first read: outside the turn, in a trace of its own, so the monitor could not place the call in its turn."""
    provider = tw.configure(exporter="memory", set_global=False)
    providers.append(provider)
    with tw.agent_turn("q", agent="a"):
        stream = numbers(3)
        astream = anumbers(2)

    async def drain() -> list[int]:
        return [i async for i in astream]

    import asyncio

    assert list(stream) == [0, 1, 2] and asyncio.run(drain()) == [0, 1]
    assert isinstance(provider.exporter, InMemorySpanExporter)
    spans = {s.name: s for s in provider.exporter.get_finished_spans()}
    turn = spans["invoke_agent a"]
    for name in ("execute_tool numbers", "execute_tool anumbers"):
        call = spans[name]
        assert call.context.trace_id == turn.context.trace_id
        assert call.parent is not None and call.parent.span_id == turn.context.span_id


SHORT_SCRIPT = r"""
import sys
import instrumentation as tw

tw.configure(exporter="otlp-grpc", endpoint=sys.argv[1], service_name="short")

@tw.tool
def ping(x: int) -> int:
    return x

for i in range(int(sys.argv[2])):
    with tw.agent_turn("q", agent="a"):
        ping(i)
"""


def test_a_short_script_over_grpc_loses_nothing_at_exit(grpc_receiver: GrpcReceiver) -> None:
    """No shutdown() in the script: the provider's exit hook sends every span of every turn, the last one too."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOOLWATCH_"))}
    proc = subprocess.run([sys.executable, "-c", SHORT_SCRIPT, f"http://127.0.0.1:{grpc_receiver.port}", "700"],
                          capture_output=True, text=True, env=environ, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert grpc_receiver.spans == 1400
