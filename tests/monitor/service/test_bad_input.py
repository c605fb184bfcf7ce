"""Bad input gets its documented status, loses nothing else, and the server stays up."""

from __future__ import annotations

import gzip
import json
import time
import zlib
from typing import Any

import pytest
import zstandard
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from monitor.otlp import request_to_json
from monitor.serve import Server
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.http_util import get, post, raw_exchange
from tests.monitor.service.spans import Call, TurnSpec, record_turns, to_request

PB = "application/x-protobuf"
JS = "application/json"
GOOD = [TurnSpec("[AUTH] login failure", [Call("pull_auth_telemetry", {"log_excerpt": "x"})], output_text="Result: x")]


def good_pb() -> bytes:
    return bytes(to_request(record_turns(GOOD)).SerializeToString())


def assert_still_serving(server: Server) -> None:
    status, body, _ = post(server.endpoint, good_pb(), PB)
    assert status == 200 and ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans == 0
    assert get(server.metrics_url.replace("/metrics", "/healthz")) == 200


def test_truncated_protobuf_is_400_with_a_status(serve: ServeFactory) -> None:
    _, server = serve()
    body = good_pb()
    status, resp, headers = post(server.endpoint, body[:-5], PB)
    assert status == 400 and headers["Content-Type"] == PB
    st = status_pb2.Status.FromString(resp)
    assert st.code == 3 and "invalid OTLP protobuf" in st.message
    assert_still_serving(server)
    assert value(scrape(server), "toolwatch_requests_total", transport="http_protobuf", code="400") == 1


@pytest.mark.parametrize(
    ("ctype", "encoding", "status"),
    [("text/plain", None, 415), ("application/xml", None, 415), (PB, "br", 415), (PB, "snappy", 415),
     (PB, "zstd, gzip", 415)],
)
def test_unsupported_types_and_encodings(serve: ServeFactory, ctype: str, encoding: str | None, status: int) -> None:
    _, server = serve()
    headers = {"Content-Encoding": encoding} if encoding else {}
    got, body, answered = post(server.endpoint, good_pb(), ctype, **headers)
    assert got == status
    # Another content type is answered in OTLP/HTTP's default encoding, which OTLP clients read (google.rpc.Status).
    assert answered["Content-Type"] == PB
    assert status_pb2.Status.FromString(body).code == code_pb2.INVALID_ARGUMENT
    assert_still_serving(server)


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"resourceSpans": {"a": 1}}', b"\xff\xfe\x00"])
def test_invalid_json_is_400(serve: ServeFactory, body: bytes) -> None:
    _, server = serve()
    status, resp, headers = post(server.endpoint, body, JS)
    assert status == 400 and headers["Content-Type"] == JS
    assert json.loads(resp)["code"] == 3
    assert_still_serving(server)


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("deflate", zlib.compress),  # the OTel Python exporter's `deflate`: zlib data (RFC 9110 8.4.1.2)
        ("deflate", _raw_deflate),  # what some clients send as deflate: raw DEFLATE data, no zlib header
        ("GZIP", gzip.compress),  # content codings are case-insensitive
        ("x-gzip", gzip.compress),  # RFC 9110 8.4.1.3: equivalent to gzip
        ("identity, gzip", gzip.compress),
        ("identity", bytes),
        ("zstd", lambda b: zstandard.ZstdCompressor().compress(b)),  # the Collector's otlphttp `compression: zstd`
        # The Collector's otlphttp `compression: zlib` sends the coding by that name; its receiver reads it as deflate
        ("zlib", zlib.compress),
        ("ZLIB", zlib.compress),
    ],
)
def test_content_codings_exporters_send_are_decoded(serve: ServeFactory, encoding: str, compress: Any) -> None:
    _, server = serve()
    status, body, headers = post(server.endpoint, compress(good_pb()), PB, **{"Content-Encoding": encoding})
    assert (status, headers["Content-Type"]) == (200, PB)
    assert ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans == 0
    wait_for(lambda: server.pipeline.turns_judged == 1)
    assert value(scrape(server), "toolwatch_spans_received_total", transport="http_protobuf") == 2


def test_invalid_and_oversized_deflate(serve: ServeFactory) -> None:
    _, server = serve(max_decompressed_bytes=1 << 20)
    packed = zlib.compress(good_pb())
    for body in (packed[:-6], b"not deflate at all", packed + b"junk"):
        status, resp, _ = post(server.endpoint, body, PB, **{"Content-Encoding": "deflate"})
        assert status == 400 and "invalid deflate data" in status_pb2.Status.FromString(resp).message
    bomb = zlib.compress(b"\0" * (64 << 20), 9)
    status, resp, _ = post(server.endpoint, bomb, PB, **{"Content-Encoding": "deflate"})
    assert status == 413 and "decompressed body exceeds" in status_pb2.Status.FromString(resp).message
    assert_still_serving(server)


def test_invalid_and_oversized_zstd(serve: ServeFactory) -> None:
    _, server = serve(max_decompressed_bytes=1 << 20)
    packed = zstandard.ZstdCompressor().compress(good_pb())
    for body in (packed[:-6], b"not zstd at all", packed + b"junk", b""):  # empty: no frame, as gzip and deflate
        status, resp, _ = post(server.endpoint, body, PB, **{"Content-Encoding": "zstd"})
        assert status == 400 and "invalid zstd data" in status_pb2.Status.FromString(resp).message
    bomb = zstandard.ZstdCompressor(level=19).compress(b"\0" * (256 << 20))  # 256 MiB from about 8 KB
    assert len(bomb) < 64 << 10
    t0 = time.monotonic()
    status, resp, _ = post(server.endpoint, bomb, PB, **{"Content-Encoding": "zstd"})
    assert status == 413 and "decompressed body exceeds" in status_pb2.Status.FromString(resp).message
    assert time.monotonic() - t0 < 5
    assert_still_serving(server)


def test_invalid_gzip_is_400(serve: ServeFactory) -> None:
    _, server = serve()
    packed = gzip.compress(good_pb())
    for body in (packed[:-10], b"not gzip at all"):
        status, _, _ = post(server.endpoint, body, PB, **{"Content-Encoding": "gzip"})
        assert status == 400
    assert_still_serving(server)


def test_gzip_bomb_is_refused_cheaply(serve: ServeFactory) -> None:
    _, server = serve()
    member = gzip.compress(b"\0" * (16 << 20), compresslevel=9)
    bomb = member * 64  # 1 GiB once inflated, about 1 MB on the wire (concatenated gzip members)
    assert len(bomb) < 2 << 20
    t0 = time.monotonic()
    status, resp, _ = post(server.endpoint, bomb, PB, **{"Content-Encoding": "gzip"})
    elapsed = time.monotonic() - t0
    assert status == 413
    assert "decompressed body exceeds" in status_pb2.Status.FromString(resp).message
    assert elapsed < 5, elapsed
    assert_still_serving(server)


def test_100_mb_body_is_refused_without_reading_it(serve: ServeFactory) -> None:
    _, server = serve()
    size = 100 << 20
    head = (f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {PB}\r\nContent-Length: {size}\r\n\r\n").encode()
    t0 = time.monotonic()
    reply = raw_exchange("127.0.0.1", server.port, head, [b"\0" * 65536] * 16)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert time.monotonic() - t0 < 5
    # Chunked, with no length announced: refused once the limit is passed while streaming.
    _, small = serve(max_body_bytes=1 << 20)
    head = f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {PB}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    chunk = b"10000\r\n" + b"\0" * 65536 + b"\r\n"
    reply = raw_exchange("127.0.0.1", small.port, head, [chunk] * 64)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert_still_serving(server)
    assert_still_serving(small)


def _span(trace: str, span: str, name: str, attrs: dict[str, object], parent: str = "") -> dict[str, object]:
    def val(v: object) -> dict[str, object]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, list):
            return {"arrayValue": {"values": [val(x) for x in v]}}
        return {"stringValue": v}

    return {
        "traceId": trace,
        "spanId": span,
        "parentSpanId": parent,
        "name": name,
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        "attributes": [{"key": k, "value": val(v)} for k, v in attrs.items()],
    }


def test_missing_and_wrongly_typed_attributes(serve: ServeFactory) -> None:
    _, server = serve()
    t = "0af7651916cd43dd8448eb211c80319c"
    turn = _span(
        t,
        "b7ad6b7169203331",
        "invoke_agent incident-triage",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "incident-triage", "gen_ai.input.messages": 42},
    )
    spans = [
        turn,
        # no tool name at all: rejected
        _span(t, "00f067aa0ba902b7", "execute_tool", {"gen_ai.operation.name": "execute_tool"}, "b7ad6b7169203331"),
        # tool name of the wrong type: the span name gives it; arguments as a list are re-encoded as JSON
        _span(
            t,
            "00f067aa0ba902b8",
            "execute_tool pull_auth_telemetry",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": 7, "gen_ai.tool.call.arguments": [1, 2]},
            "b7ad6b7169203331",
        ),
        # ids of the wrong length: rejected
        _span(t, "00f067", "execute_tool x", {"gen_ai.tool.name": "x"}, "b7ad6b7169203331"),
        _span("0af7", "00f067aa0ba902b9", "execute_tool x", {"gen_ai.tool.name": "x"}),
    ]
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
    status, resp, _ = post(server.endpoint, body, JS)
    assert status == 200
    partial = json.loads(resp)["partialSuccess"]
    assert partial["rejectedSpans"] == "3"
    assert "invalid_id=2" in partial["errorMessage"] and "missing_tool_name=1" in partial["errorMessage"]
    wait_for(lambda: server.pipeline.turns_judged == 1)
    s = scrape(server)
    assert value(s, "toolwatch_spans_rejected_total", reason="invalid_id") == 2
    assert value(s, "toolwatch_spans_rejected_total", reason="missing_tool_name") == 1
    assert value(s, "toolwatch_spans_received_total", transport="http_json") == 5
    # The attributes ignored (wrongly typed) are exported by key; the other keys are at 0.
    ignored = {"gen_ai.tool.name": 1, "gen_ai.tool.call.arguments": 1, "gen_ai.input.messages": 1}
    for key in ("gen_ai.tool.name", "gen_ai.tool.call.arguments", "gen_ai.input.messages", "gen_ai.agent.name"):
        assert value(s, "toolwatch_span_attributes_ignored_total", attribute=key) == ignored.get(key, 0), key
    assert value(s, "toolwatch_span_attributes_ignored_total", attribute="__other__") == 0
    # The usable call was judged in its turn (the input was unusable, so no rule matched: unjudged).
    assert (
        value(s, "toolwatch_tool_calls_total", agent="incident-triage", tool="pull_auth_telemetry", outcome="unjudged")
        == 1
    )
    assert_still_serving(server)


def test_protobuf_ids_of_wrong_length_are_partial_success(serve: ServeFactory) -> None:
    _, server = serve()
    req = to_request(record_turns(GOOD))
    req.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x01" * 15
    status, resp, _ = post(server.endpoint, req.SerializeToString(), PB)
    assert status == 200
    ps = ExportTraceServiceResponse.FromString(resp).partial_success
    assert ps.rejected_spans == 1 and "invalid_id=1" in ps.error_message


def test_queue_full_is_503_with_retry_after_and_nothing_is_lost(serve: ServeFactory) -> None:
    _, server = serve(queue_spans=2)
    server.pipeline.paused = True
    first, second = good_pb(), good_pb()  # two spans each, distinct turns
    assert post(server.endpoint, first, PB)[0] == 200
    status, _, headers = post(server.endpoint, second, PB)
    assert status == 503 and headers["Retry-After"] == "1"
    assert get(server.metrics_url.replace("/metrics", "/readyz")) == 503
    server.pipeline.paused = False
    wait_for(lambda: server.pipeline.queued == 0)
    assert post(server.endpoint, second, PB)[0] == 200  # the client's retry
    wait_for(lambda: server.pipeline.turns_judged == 2)
    s = scrape(server)
    assert value(s, "toolwatch_requests_total", transport="http_protobuf", code="503") == 1
    assert value(s, "toolwatch_receiver_faults_total", transport="http_protobuf") == 0  # back-pressure, no fault
    assert value(s, "toolwatch_spans_dropped_total", reason="queue_full") == 2
    assert value(s, "toolwatch_turns_total", agent="incident-triage", judged="true") == 2


def test_bearer_token(serve: ServeFactory) -> None:
    _, server = serve(token="s3cret")
    status, _, headers = post(server.endpoint, good_pb(), PB)
    assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
    assert post(server.endpoint, good_pb(), PB, Authorization="Bearer wrong")[0] == 401
    assert post(server.endpoint, good_pb(), PB, Authorization="Bearer s3cret")[0] == 200


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        ("bearer s3cret", 200),  # the scheme is case-insensitive (RFC 7235)
        ("BEARER s3cret", 200),
        ("Bearer  s3cret", 200),  # 1*SP between scheme and token
        ("Bearer S3CRET", 401),  # the token is not
        ("Basic s3cret", 401),
        ("Bearers3cret", 401),
        ("s3cret", 401),
        ("Bearer", 401),
    ],
)
def test_bearer_scheme_in_any_case(serve: ServeFactory, authorization: str, status: int) -> None:
    _, server = serve(token="s3cret")
    assert post(server.endpoint, good_pb(), PB, Authorization=authorization)[0] == status


def test_json_response_in_request_content_type(serve: ServeFactory) -> None:
    _, server = serve()
    body = request_to_json(to_request(record_turns(GOOD))).encode()
    status, resp, headers = post(server.endpoint, body, "application/json; charset=utf-8")
    assert (status, headers["Content-Type"], json.loads(resp)) == (200, JS, {})


def test_protobuf_response_in_the_request_s_own_protobuf_type(serve: ServeFactory) -> None:
    """OTLP/HTTP: "The server MUST use the same Content-Type in the response as it received in the request": a
    request sent as `application/protobuf` (the registered name, which some clients use) is answered in it too, as a
    success, a partial success and an error."""
    _, server = serve()
    ptype = "application/protobuf"
    status, resp, headers = post(server.endpoint, good_pb(), ptype)
    assert (status, headers["Content-Type"]) == (200, ptype)
    assert not ExportTraceServiceResponse.FromString(resp).HasField("partial_success")
    bad_id = to_request(record_turns(GOOD))
    bad_id.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x01\x02"
    status, resp, headers = post(server.endpoint, bad_id.SerializeToString(), ptype)
    assert (status, headers["Content-Type"]) == (200, ptype)
    assert ExportTraceServiceResponse.FromString(resp).partial_success.rejected_spans == 1
    status, resp, headers = post(server.endpoint, good_pb()[:-5], ptype)
    assert (status, headers["Content-Type"]) == (400, ptype)
    assert status_pb2.Status.FromString(resp).code == 3
    status, resp, headers = post(server.endpoint, good_pb(), ptype, **{"Content-Encoding": "br"})
    assert (status, headers["Content-Type"]) == (415, ptype)
    # The usual name is answered as it was sent.
    assert post(server.endpoint, good_pb(), PB)[2]["Content-Type"] == PB


def test_a_retried_export_is_not_counted_twice(serve: ServeFactory) -> None:
    _, server = serve(grace_s=1.0)
    body = good_pb()
    assert post(server.endpoint, body, PB)[0] == 200
    assert post(server.endpoint, body, PB)[0] == 200  # e.g. the exporter timed out and sent it again
    wait_for(lambda: server.pipeline.turns_judged == 1)
    time.sleep(1.2)
    assert post(server.endpoint, body, PB)[0] == 200  # and once more, after the turn was judged: all duplicates
    wait_for(lambda: value(scrape(server), "toolwatch_spans_dropped_total", reason="duplicate") == 4)
    s = scrape(server)
    assert not value(s, "toolwatch_spans_dropped_total", reason="late_call")
    assert value(s, "toolwatch_turns_total", agent="incident-triage", judged="true") == 1
    assert (
        value(s, "toolwatch_tool_calls_total", agent="incident-triage", tool="pull_auth_telemetry", outcome="correct")
        == 1
    )


def test_grpc_bad_input_and_partial_success(serve: ServeFactory) -> None:
    import grpc  # type: ignore[import-untyped]

    _, server = serve(grpc_port=0, token="t0k")
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        auth = (("authorization", "Bearer t0k"),)
        with pytest.raises(grpc.RpcError) as err:
            export(good_pb(), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:
            export(good_pb()[:-5], timeout=10, metadata=auth)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        req = to_request(record_turns(GOOD))
        req.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01"
        resp = ExportTraceServiceResponse.FromString(export(req.SerializeToString(), timeout=10, metadata=auth))
        assert resp.partial_success.rejected_spans == 1
        export(good_pb(), timeout=10, metadata=(("authorization", "bearer t0k"),))  # any case of the scheme
        with pytest.raises(grpc.RpcError) as err:
            export(good_pb(), timeout=10, metadata=(("authorization", "Basic t0k"),))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert get(server.metrics_url.replace("/metrics", "/healthz")) == 200


def test_grpc_requests_held_per_connection_are_bounded(serve: ServeFactory) -> None:
    """A connection has at most STREAMS_PER_CONNECTION requests in the server at once (HTTP/2 max concurrent
    streams): a stream past that is refused with UNAVAILABLE, which OTLP exporters retry, so the server never holds
    more request messages of one connection. Export is held open here to see how many run at once."""
    import asyncio

    import grpc

    from monitor.serve._grpc import STREAMS_PER_CONNECTION, GrpcReceiver

    st, server = serve()

    class Held(GrpcReceiver):
        active = peak = 0

        async def export(self, requests: Any, context: Any) -> bytes:
            self.active += 1
            self.peak = max(self.peak, self.active)
            await release.wait()
            self.active -= 1
            return await super().export(requests, context)

    receiver = Held(server.settings, server.pipeline)
    release = asyncio.Event()
    port = st.run(receiver.start("127.0.0.1", 0))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            sent = [export.future(good_pb(), timeout=30) for _ in range(3 * STREAMS_PER_CONNECTION)]
            wait_for(lambda: receiver.peak >= STREAMS_PER_CONNECTION)
            time.sleep(0.5)  # time for more to arrive, were they let through
            assert receiver.peak == STREAMS_PER_CONNECTION
            st.call(release.set)
            codes = []
            for f in sent:
                try:
                    resp = ExportTraceServiceResponse.FromString(f.result(timeout=30))
                    assert resp.partial_success.rejected_spans == 0
                    codes.append(grpc.StatusCode.OK)
                except grpc.RpcError as exc:
                    codes.append(exc.code())
    finally:
        st.run(receiver.stop(0))
    assert receiver.peak == STREAMS_PER_CONNECTION
    assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}, codes
    assert codes.count(grpc.StatusCode.OK) >= STREAMS_PER_CONNECTION


def test_json_nested_too_deeply_is_400(serve: ServeFactory) -> None:
    _, server = serve()
    status, resp, headers = post(server.endpoint, b"[" * 100_000, JS)
    assert status == 400 and headers["Content-Type"] == JS
    assert json.loads(resp)["code"] == 3 and "invalid JSON" in json.loads(resp)["message"]
    assert_still_serving(server)
    assert value(scrape(server), "toolwatch_requests_total", transport="http_json", code="400") == 1


def test_unusable_attribute_values_do_not_fail_the_request(serve: ServeFactory) -> None:
    # Attribute values of unexpected types or JSON nested too deeply are ignored: the request succeeds, and
    # the other spans of the same request (here a good turn with its call) are judged.
    _, server = serve()
    t = "0af7651916cd43dd8448eb211c80319d"
    deep = "[" * 100_000
    good = json.loads(request_to_json(to_request(record_turns(GOOD))))
    bad_spans = [
        _span(
            t,
            "00f067aa0ba90201",
            "execute_tool x",
            {"gen_ai.tool.name": "x", "gen_ai.tool.call.arguments": "{}", "toolwatch.truncated": True},
        ),
        _span(
            t,
            "00f067aa0ba90202",
            "execute_tool x",
            {"gen_ai.tool.name": "x", "gen_ai.tool.call.arguments": "{}", "toolwatch.truncated": 7},
        ),
        _span(
            t,
            "00f067aa0ba90203",
            "invoke_agent a",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": deep},
        ),
        _span(
            t,
            "00f067aa0ba90204",
            "invoke_agent a",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.output.messages": deep},
        ),
        _span(
            t,
            "00f067aa0ba90205",
            "invoke_agent a",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.tool.definitions": deep},
        ),
    ]
    good["resourceSpans"].append({"scopeSpans": [{"spans": bad_spans}]})
    status, resp, _ = post(server.endpoint, json.dumps(good).encode(), JS)
    assert status == 200, resp[:300]
    wait_for(lambda: server.pipeline.turns_judged >= 4)
    s = scrape(server)
    assert value(s, "toolwatch_spans_received_total", transport="http_json") == 7
    assert (
        value(s, "toolwatch_tool_calls_total", agent="incident-triage", tool="pull_auth_telemetry", outcome="correct")
        == 1
    )
    assert_still_serving(server)


def test_spans_past_a_trace_bound_are_dropped_and_counted(serve: ServeFactory) -> None:
    _, server = serve(max_calls_per_trace=2, grace_s=60, turnless_timeout_s=60)
    t = "0af7651916cd43dd8448eb211c80319e"
    spans = [_span(t, f"{n:016x}", "chat model", {}, "b7ad6b7169203331") for n in range(1, 31)]
    spans += [
        _span(t, f"{n:016x}", "invoke_agent a", {"gen_ai.operation.name": "invoke_agent"}) for n in range(101, 104)
    ]
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
    assert post(server.endpoint, body, JS)[0] == 200
    # 20 parent links (10 per allowed call) and 2 pending turns are kept; 10 + 1 spans are dropped, counted.
    wait_for(lambda: value(scrape(server), "toolwatch_spans_dropped_total", reason="trace_too_large") == 11)


def test_bodies_in_flight_are_bounded_together(serve: ServeFactory) -> None:
    # Each body is bounded; so are all the bodies being read at once (here 4 x the decompressed limit): many
    # clients sending large bodies slowly get 503 + Retry-After instead of growing memory without limit.
    import socket

    limit = 256 << 10
    _, server = serve(max_body_bytes=limit, max_decompressed_bytes=limit)
    head = (f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {PB}\r\nContent-Length: {limit}\r\n\r\n").encode()
    slow = []
    for _ in range(4):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(head + b"\0" * (limit - 100))  # nearly all of the body, then nothing more for now
        slow.append(sock)

    def refused() -> bool:
        status, resp, headers = post(server.endpoint, good_pb(), PB)
        return status == 503 and headers.get("Retry-After") == "1"

    try:
        wait_for(refused)
    finally:
        for sock in slow:
            sock.close()
    wait_for(lambda: post(server.endpoint, good_pb(), PB)[0] == 200)
    assert_still_serving(server)


def test_a_double_attribute_written_as_a_huge_integer_is_left_out_not_a_500(serve: ServeFactory) -> None:
    # An integer literal past the double range (310+ digits) as a doubleValue: float() overflows. The span is kept
    # without that attribute; the request is not a server error.
    _, server = serve()
    doc = json.loads(request_to_json(to_request(record_turns(GOOD))))
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["attributes"].append({"key": "odd.double", "value": {"doubleValue": 10**400}})
    status, body, _ = post(server.endpoint, json.dumps(doc).encode(), JS)
    assert status == 200 and json.loads(body) == {}
    assert_still_serving(server)


def test_a_json_time_outside_fixed64_rejects_its_span_and_no_lag_of_decades(serve: ServeFactory) -> None:
    # A "-1" end (or one past 2**64 - 1, the fixed64 range of the .proto) is no time: its span is malformed, counted
    # in the partial success and the rejected metric; the other turn of the request is judged, its lag within a minute.
    _, server = serve()
    doc = json.loads(request_to_json(to_request(record_turns(GOOD + GOOD))))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    traces = sorted({s["traceId"] for s in spans})
    for s in spans:
        if s["traceId"] == traces[1] and s["name"].startswith("invoke_agent"):
            s["endTimeUnixNano"] = "-1"
        elif s["traceId"] == traces[1]:
            s["startTimeUnixNano"] = str(2**64)
    status, body, _ = post(server.endpoint, json.dumps(doc).encode(), JS)
    assert status == 200
    partial = json.loads(body)["partialSuccess"]
    assert partial == {"rejectedSpans": "2", "errorMessage": "2 spans rejected: malformed_span=2"}
    wait_for(lambda: server.pipeline.turns_judged == 1)
    time.sleep(0.5)  # the poll that would judge a turn of the rejected spans' trace
    s = scrape(server)
    assert server.pipeline.turns_judged == 1
    assert value(s, "toolwatch_spans_rejected_total", reason="malformed_span") == 2
    assert value(s, "toolwatch_verdict_lag_seconds_count") == 1
    assert value(s, "toolwatch_verdict_lag_seconds_bucket", le="60.0") == 1
    assert_still_serving(server)


def _with_invalid_utf8() -> bytes:
    """A request of two turns: GOOD, and one whose call has bytes that are not UTF-8 in five string fields."""
    marker, bad = b"BADUTF8!", b"x\xff\xc3(\xed\xa0\x80y"  # same length, so the framing stays as serialized
    assert len(marker) == len(bad)
    turns = GOOD + [TurnSpec("[AUTH] login failure", [Call(marker.decode(), {"log_excerpt": marker.decode()})])]
    req = to_request(record_turns(turns))
    req.resource_spans[0].scope_spans[0].scope.name = marker.decode()
    for span in req.resource_spans[0].scope_spans[0].spans:
        if marker.decode() in span.name:
            span.status.message = marker.decode()
    body = bytes(req.SerializeToString())
    assert body.count(marker) == 5  # scope name, the call's span name, tool name, arguments and status message
    return body.replace(marker, bad)


def test_invalid_utf8_in_a_protobuf_string_loses_no_span(serve: ServeFactory) -> None:
    # A protobuf string field (a span name, an attribute value, a status message, a scope name) with bytes that are
    # not UTF-8: the request is taken whole, those strings read as errors="replace" does (U+FFFD for each invalid
    # sequence), as OTLP JSON takes lone surrogates. A tool name with U+FFFD is simply a tool the rules do not offer.
    import grpc

    _, server = serve(grpc_port=0)
    status, resp, _ = post(server.endpoint, _with_invalid_utf8(), PB)
    assert status == 200, resp
    assert not ExportTraceServiceResponse.FromString(resp).HasField("partial_success")
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:  # the same decoder
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        resp = export(_with_invalid_utf8(), timeout=10)
        assert not ExportTraceServiceResponse.FromString(resp).HasField("partial_success")
    wait_for(lambda: server.pipeline.turns_judged == 4)
    s = scrape(server)
    assert value(s, "toolwatch_spans_received_total", transport="http_protobuf") == 4
    assert value(s, "toolwatch_spans_received_total", transport="grpc") == 4
    assert (
        value(s, "toolwatch_tool_calls_total", agent="incident-triage", tool="pull_auth_telemetry", outcome="correct")
        == 2
    )
    assert value(s, "toolwatch_requests_total", transport="http_protobuf", code="200") == 1
    # The calls whose tool name has U+FFFD are judged too: a tool the rules do not offer (hallucinated, __other__).
    other = value(s, "toolwatch_tool_calls_total", agent="incident-triage", tool="__other__", outcome="hallucinated")
    assert other == 2
    assert_still_serving(server)


@pytest.mark.parametrize(("header", "said"), [(None, "no Content-Type"),
                                              ("application/json, application/json",
                                               "'application/json, application/json'")])
def test_a_refused_content_type_is_named_as_sent(serve: ServeFactory, header: str | None, said: str) -> None:
    """With no Content-Type, or one that does not parse, the 415 said `unsupported content type
    'application/octet-stream'`, a type the client never sent (aiohttp's default)."""
    import http.client
    from urllib.parse import urlsplit

    _, server = serve()
    url = urlsplit(server.endpoint)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    conn.putrequest("POST", url.path, skip_accept_encoding=True)
    body = good_pb()
    if header is not None:
        conn.putheader("Content-Type", header)
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    resp = conn.getresponse()
    st = status_pb2.Status.FromString(resp.read())
    conn.close()
    assert resp.status == 415
    assert said in st.message and "octet-stream" not in st.message, st.message
    assert_still_serving(server)


def test_a_json_enum_by_an_unknown_name_keeps_its_tool_call(serve: ServeFactory) -> None:
    # A call span whose kind and status code are names this receiver does not know (a producer on a newer .proto
    # writing the protobuf JSON mapping's names): read as unset, the call judged in its turn. It was rejected as
    # malformed, and the turn judged without the call.
    _, server = serve()
    doc = json.loads(request_to_json(to_request(record_turns(GOOD))))
    (call,) = [s for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"] if s["name"].startswith("execute_tool")]
    call["kind"], call["status"] = "SPAN_KIND_FUTURE", {"code": "STATUS_CODE_FUTURE"}
    status, body, _ = post(server.endpoint, json.dumps(doc).encode(), JS)
    assert status == 200 and json.loads(body) == {}
    wait_for(lambda: server.pipeline.turns_judged == 1)
    s = scrape(server)
    assert value(s, "toolwatch_spans_rejected_total", reason="malformed_span") == 0
    calls = {k[1]: v for k, v in s.items() if k[0] == "toolwatch_tool_calls_total" and v}
    assert [dict(k)["tool"] for k in calls] == ["pull_auth_telemetry"], calls
    assert_still_serving(server)
