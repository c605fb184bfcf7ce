"""A real OTLP round trip: the real OTLP/HTTP exporter sends to a receiver on 127.0.0.1, which decodes
the protobuf; every span is compared attribute by attribute with what the SDK recorded."""

from __future__ import annotations

import gzip
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import instrumentation as tw
from instrumentation._stats import STATS


class Receiver:
    """An OTLP/HTTP traces endpoint on an ephemeral loopback port, keeping every decoded request."""

    def __init__(self, max_body: int | None = None) -> None:
        self.max_body = max_body  # a larger body is refused with 413, as the monitor refuses one over --max-body-bytes
        self.refused: list[int] = []
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.content_types: list[str] = []
        self.api_keys: list[str | None] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if receiver.max_body is not None and len(body) > receiver.max_body:
                    receiver.refused.append(len(body))
                    self.send_response(413)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                receiver.paths.append(self.path)
                receiver.content_types.append(self.headers.get("Content-Type", ""))
                receiver.api_keys.append(self.headers.get("x-api-key"))
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def plain(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(plain(v) for v in value.array_value.values)
    assert kind is not None, "empty AnyValue"
    return getattr(value, kind)


@tw.tool
def get_weather(city: str, days: int = 1) -> dict[str, Any]:
    """Forecast for a city."""
    return {"city": city, "days": days, "ok": True}


def test_spans_survive_the_otlp_http_round_trip(receiver: Receiver) -> None:
    provider = tw.configure(exporter="otlp-http", endpoint=f"http://127.0.0.1:{receiver.port}",
                            service_name="roundtrip-agent", capture_content=True, max_content_length=64,
                            set_global=False)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    try:
        executor = tw.ToolExecutor([get_weather], on_error="result")
        with tw.agent_turn("Weather in Paris?", agent="weather", conversation_id="conv-9", case_id="case-1",
                           tools=executor) as turn:
            executor.execute_tool_calls([
                {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                                  "arguments": '{"city": "Paris", "days": 2}'}},
                {"type": "function_call", "call_id": "call_2", "name": "get_forecast", "arguments": "{}"},
                {"type": "function_call", "call_id": "call_3", "name": "get_weather", "arguments": '{"city": '},
                {"id": "call_4", "type": "function", "function": {"name": "get_weather",
                                                                  "arguments": '{"city": "' + "x" * 80 + '"}'}},
            ])
            turn.set_output("Sunny.")
        assert provider.force_flush()
    finally:
        provider.shutdown()

    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    assert set(receiver.content_types) == {"application/x-protobuf"}
    received = {}
    for request in receiver.requests:
        for resource_spans in request.resource_spans:
            resource = {kv.key: plain(kv.value) for kv in resource_spans.resource.attributes}
            assert resource["service.name"] == "roundtrip-agent"
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "toolwatch.instrumentation"
                for span in scope_spans.spans:
                    received[span.span_id] = span

    recorded: list[ReadableSpan] = list(memory.get_finished_spans())
    assert len(recorded) == len(received) == 5
    for sdk_span in recorded:
        ctx = sdk_span.context
        wire = received[ctx.span_id.to_bytes(8, "big")]
        assert wire.name == sdk_span.name
        assert wire.trace_id == ctx.trace_id.to_bytes(16, "big")
        assert wire.kind == sdk_span.kind.value + 1  # proto enum counts UNSPECIFIED as 0
        parent = sdk_span.parent.span_id.to_bytes(8, "big") if sdk_span.parent else b""
        assert wire.parent_span_id == parent
        assert wire.status.code == sdk_span.status.status_code.value
        assert wire.start_time_unix_nano == sdk_span.start_time and wire.end_time_unix_nano == sdk_span.end_time
        wire_attributes = {kv.key: plain(kv.value) for kv in wire.attributes}
        assert wire_attributes == dict(sdk_span.attributes or {}), sdk_span.name

    by_call = {dict((kv.key, plain(kv.value)) for kv in s.attributes).get("gen_ai.tool.call.id"): s
               for s in received.values()}
    assert {k for k in by_call if k} == {"call_1", "call_2", "call_3", "call_4"}
    first = {kv.key: plain(kv.value) for kv in by_call["call_1"].attributes}
    assert first["gen_ai.tool.call.arguments"] == '{"city": "Paris", "days": 2}'
    assert first["gen_ai.tool.call.result"] == '{"city":"Paris","days":2,"ok":true}'
    assert {kv.key: plain(kv.value) for kv in by_call["call_2"].attributes}["error.type"] == "UnknownToolError"
    assert {kv.key: plain(kv.value) for kv in by_call["call_3"].attributes}["error.type"] == "ToolArgumentsError"
    long = {kv.key: plain(kv.value) for kv in by_call["call_4"].attributes}
    assert long["toolwatch.truncated"] == ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")
    assert len(str(long["gen_ai.tool.call.arguments"])) == 64


def test_standard_environment_variables(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{receiver.port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "env-agent")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    from instrumentation._content import SETTINGS, ContentSettings

    SETTINGS.current = ContentSettings.from_env()
    provider = tw.configure(set_global=False)
    try:
        get_weather("Oslo")
        assert provider.force_flush()
    finally:
        provider.shutdown()
    assert receiver.paths == ["/v1/traces"] and receiver.api_keys == ["s3cret"]
    [resource_spans] = receiver.requests[0].resource_spans
    assert {kv.key: plain(kv.value) for kv in resource_spans.resource.attributes}["service.name"] == "env-agent"
    [span] = resource_spans.scope_spans[0].spans
    attributes = {kv.key: plain(kv.value) for kv in span.attributes}
    assert attributes["gen_ai.tool.call.arguments"] == '{"city":"Oslo"}'

    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    provider = tw.configure(set_global=False)
    try:
        get_weather("Rome")
        assert provider.force_flush()
    finally:
        provider.shutdown()
    assert len(receiver.requests) == 1  # nothing sampled, nothing sent


def test_lone_surrogates_from_the_model_do_not_lose_the_batch(receiver: Receiver) -> None:
    """A model's JSON can carry half an emoji (`\\ud83d`), which parses to a lone surrogate: protobuf cannot encode
    it. In a tool name it failed the whole export request (every span in the batch lost); in content it dropped
    the attribute (arguments not captured). Both arrive, escaped so the JSON still parses to the same value."""
    provider = tw.configure(exporter="otlp-http", endpoint=f"http://127.0.0.1:{receiver.port}", capture_content=True,
                            schedule_delay_millis=60_000, set_global=False)
    try:
        executor = tw.ToolExecutor([get_weather], on_error="result")
        calls = json.loads('[{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '
                           '"{\\"city\\": \\"Paris\\"}"}}, {"id": "c2\\ud83d", "type": "function", "function": '
                           '{"name": "get_weather\\ud83d", "arguments": "{}"}}]')
        with tw.agent_turn("Weather in Paris? \ud83d", agent="weather", tools=executor):
            executor.execute_tool_calls(calls)
            get_weather("Lyon \udcff")
        assert provider.force_flush()
    finally:
        provider.shutdown()
    spans = [(span.name, {kv.key: plain(kv.value) for kv in span.attributes}) for request in receiver.requests
             for resource_spans in request.resource_spans for scope_spans in resource_spans.scope_spans
             for span in scope_spans.spans]
    assert len(spans) == 4
    received = {str(attributes.get("gen_ai.tool.call.id", name)): attributes for name, attributes in spans}
    assert received["c1"]["gen_ai.tool.name"] == "get_weather"
    assert [name for name, _ in spans if "ud83d" in name] == ["execute_tool get_weather\\ud83d"]
    unknown = received["c2\\ud83d"]
    assert (unknown["gen_ai.tool.name"], unknown["gen_ai.tool.call.id"]) == ("get_weather\\ud83d", "c2\\ud83d")
    turn = received["invoke_agent weather"]
    assert json.loads(str(turn["gen_ai.input.messages"]))[0]["parts"][0]["content"] == "Weather in Paris? \ud83d"
    by_arguments = {json.loads(str(a["gen_ai.tool.call.arguments"])).get("city") for a in received.values()
                    if "gen_ai.tool.call.arguments" in a}
    assert "Lyon \udcff" in by_arguments


def test_lone_surrogates_in_the_turn_and_call_ids_do_not_lose_the_batch(receiver: Receiver) -> None:
    """An agent name, conversation or case id, or a `use_tool_call_id` id taken from model output can carry a lone
    surrogate: in the turn's span name it failed the whole export request (every span of the batch lost), and the
    call id was dropped. All arrive, escaped as the executor escapes tool names and call ids."""
    provider = tw.configure(exporter="otlp-http", endpoint=f"http://127.0.0.1:{receiver.port}", capture_content=True,
                            schedule_delay_millis=60_000, set_global=False)
    try:
        get_weather("Oslo")  # another span of the same batch
        with tw.agent_turn("hi", agent="bot\ud83d", conversation_id="conv\udcff", case_id="case\ud800",
                           tools=[get_weather]):
            with tw.use_tool_call_id("call\ud83d"):
                get_weather("Paris")
        assert provider.force_flush()
    finally:
        provider.shutdown()
    spans = {span.name: {kv.key: plain(kv.value) for kv in span.attributes} for request in receiver.requests
             for resource_spans in request.resource_spans for scope_spans in resource_spans.scope_spans
             for span in scope_spans.spans}
    assert sorted(spans) == ["execute_tool get_weather", "invoke_agent bot\\ud83d"]
    turn = spans["invoke_agent bot\\ud83d"]
    assert (turn["gen_ai.agent.name"], turn["gen_ai.conversation.id"], turn["toolwatch.case.id"]) == (
        "bot\\ud83d", "conv\\udcff", "case\\ud800")
    assert len(receiver.requests) >= 1
    ids = [a.get("gen_ai.tool.call.id") for r in receiver.requests for rs in r.resource_spans
           for ss in rs.scope_spans for sp in ss.spans
           for a in [{kv.key: plain(kv.value) for kv in sp.attributes}] if sp.name == "execute_tool get_weather"]
    assert "call\\ud83d" in ids and len(ids) == 2


@tw.tool
def find_city(city: str) -> str:
    """Look a city up."""
    raise LookupError(f"no city named {city}")


def test_a_lone_surrogate_in_a_tool_errors_message_does_not_lose_the_batch(receiver: Receiver) -> None:
    """A tool that fails quoting the model's argument: with content capture on, the message is the span's status
    description and the exception event's message. A lone surrogate there failed the whole export request (the
    status) and dropped the event's message and stack trace. All arrive, escaped."""
    provider = tw.configure(exporter="otlp-http", endpoint=f"http://127.0.0.1:{receiver.port}", capture_content=True,
                            schedule_delay_millis=60_000, set_global=False)
    try:
        executor = tw.ToolExecutor([get_weather, find_city], on_error="result")
        executor.execute_tool_calls(json.loads(
            '[{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},'
            ' {"id": "c2", "type": "function", "function": {"name": "find_city", "arguments": "{\\"city\\": \\"Ly'
            '\\\\ud83d\\"}"}}]'))
        assert provider.force_flush()
    finally:
        provider.shutdown()
    spans = {span.name: span for request in receiver.requests for resource_spans in request.resource_spans
             for scope_spans in resource_spans.scope_spans for span in scope_spans.spans}
    assert sorted(spans) == ["execute_tool find_city", "execute_tool get_weather"]
    failed = spans["execute_tool find_city"]
    assert failed.status.message == "LookupError: no city named Ly\\ud83d"
    [event] = failed.events
    attributes = {kv.key: plain(kv.value) for kv in event.attributes}
    assert attributes["exception.message"] == "no city named Ly\\ud83d"
    assert "LookupError: no city named Ly\\ud83d" in str(attributes["exception.stacktrace"])


@tw.tool
def parse_table(text: str) -> str:
    """Parse a table."""
    raise ValueError(f"cannot parse {text}")


def test_a_huge_tool_error_message_does_not_lose_the_batch() -> None:
    """A tool failing with a message quoting a large input (9 MB): the exception event's message and stack trace were
    recorded whole, the export request (18 MB) was over the monitor's default 16 MiB body limit, and the other spans
    of its batch were lost with it. They are cut at the content length limit, as the status description is."""
    receiver = Receiver(max_body=16 * 2**20)
    provider = tw.configure(exporter="otlp-http", endpoint=f"http://127.0.0.1:{receiver.port}", capture_content=True,
                            schedule_delay_millis=60_000, set_global=False)
    try:
        for _ in range(10):
            get_weather("Lyon")
        with pytest.raises(ValueError, match="cannot parse x{9000000}$"):
            parse_table("x" * 9_000_000)
        assert provider.force_flush()
    finally:
        provider.shutdown()
        receiver.close()
    assert receiver.refused == []
    spans = [span for request in receiver.requests for resource_spans in request.resource_spans
             for scope_spans in resource_spans.scope_spans for span in scope_spans.spans]
    assert sorted(span.name for span in spans) == ["execute_tool get_weather"] * 10 + ["execute_tool parse_table"]
    [failed] = [span for span in spans if span.name == "execute_tool parse_table"]
    [event] = failed.events
    attributes = {kv.key: plain(kv.value) for kv in event.attributes}
    assert attributes["exception.type"] == "ValueError"
    assert attributes["exception.message"] == ("cannot parse " + "x" * 9_000_000)[:16384]
    stacktrace = str(attributes["exception.stacktrace"])
    assert len(stacktrace) == 16384 and stacktrace.startswith("Traceback (most recent call last):")
    assert stacktrace.endswith("…" + "x" * 8191 + "\n")  # the end of the exception's line


@tw.tool
def fetch_page(url: str) -> str:
    """Fetch a page."""
    return "p" * 20_000


def _export_large_batch(receiver: Receiver) -> bool:
    """512 calls whose arguments and results are each cut at the content limit (16384 characters), exported as one
    batch to `receiver` (each call's index in the first 5 characters of its argument); the flush's result."""
    STATS.reset()
    provider = tw.configure(exporter="otlp-http", endpoint=f"http://127.0.0.1:{receiver.port}", capture_content=True,
                            schedule_delay_millis=60_000, max_export_batch_size=512, set_global=False)
    try:
        for i in range(512):
            fetch_page(f"{i:05d}" + "u" * 20_000)
        return provider.force_flush()
    finally:
        provider.shutdown()
        receiver.close()


def test_a_full_batch_of_calls_at_the_content_limit_arrives_whole() -> None:
    """One export request of 16.2 MiB, over the monitor's 16 MiB body limit, refused with 413 (not retried): the
    whole batch was lost. It goes in requests under the limit, in order, and every span arrives."""
    receiver = Receiver(max_body=16 * 2**20)
    assert _export_large_batch(receiver)
    assert receiver.refused == []
    assert len(receiver.requests) >= 2
    spans = [span for request in receiver.requests for resource_spans in request.resource_spans
             for scope_spans in resource_spans.scope_spans for span in scope_spans.spans]
    assert len(spans) == 512
    order = [str({kv.key: plain(kv.value) for kv in s.attributes}["gen_ai.tool.call.arguments"])[8:13] for s in spans]
    assert order == [f"{i:05d}" for i in range(512)]  # in the order they ended
    assert STATS.spans_exported == 512 and STATS.spans_export_failed == 0 and STATS.export_failures == 0


def test_a_split_batch_that_fails_counts_every_span_failed_once() -> None:
    """A receiver that refuses every request (413): the first request fails, the rest of the batch is not sent, and
    all of it is counted failed, once."""
    receiver = Receiver(max_body=1)
    _export_large_batch(receiver)
    assert len(receiver.refused) == 1  # one request tried, the others not sent
    assert STATS.spans_export_failed == 512 and STATS.spans_exported == 0 and STATS.export_failures == 1


def test_the_traces_endpoint_is_used_as_given_and_arguments_win(receiver: Receiver,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """As the specification says: `/v1/traces` is appended to OTEL_EXPORTER_OTLP_ENDPOINT only; the signal's own
    endpoint wins over it and is used as given; header values are URL-decoded; arguments win over the environment."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{receiver.port}/custom/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=a%20b%2Cc")
    for kwargs in ({}, {"endpoint": f"http://127.0.0.1:{receiver.port}", "headers": {"x-api-key": "arg"}}):
        provider = tw.configure(set_global=False, **kwargs)  # type: ignore[arg-type]
        try:
            get_weather("Oslo")
            assert provider.force_flush()
        finally:
            provider.shutdown()
    assert receiver.paths == ["/custom/traces", "/v1/traces"]
    assert receiver.api_keys == ["a b,c", "arg"]


@pytest.mark.parametrize("path", ["", "/"])
def test_a_traces_endpoint_without_a_path_is_used_as_given_and_warned_of(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    """OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://host:4318, written as OTEL_EXPORTER_OTLP_ENDPOINT is: the exporter
    posts to `/`, which toolwatch serve and the Collector answer 404, and the agent's log said only "404". It is still
    used as given (the specification), and configure() says what to write instead."""
    endpoint = f"http://127.0.0.1:{receiver.port}{path}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
    with caplog.at_level(logging.WARNING):
        provider = tw.configure(set_global=False)
    try:
        get_weather("Oslo")
        assert provider.force_flush()
    finally:
        provider.shutdown()
    assert receiver.paths == ["/"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"{endpoint!r}" in w and f"http://127.0.0.1:{receiver.port}/v1/traces" in w for w in warnings), warnings


@pytest.mark.parametrize("env", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
def test_an_endpoint_as_the_specification_means_it_is_not_warned_of(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, env: str
) -> None:
    base = f"http://127.0.0.1:{receiver.port}"
    monkeypatch.setenv(env, base if env == "OTEL_EXPORTER_OTLP_ENDPOINT" else base + "/v1/traces")
    with caplog.at_level(logging.WARNING):
        provider = tw.configure(set_global=False)
    try:
        get_weather("Oslo")
        assert provider.force_flush()
    finally:
        provider.shutdown()
    assert receiver.paths == ["/v1/traces"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "endpoint" in r.getMessage()]
