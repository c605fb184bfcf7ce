"""Stopping the server with OTLP/gRPC calls in flight: a call whose message arrives within the shutdown's grace is
answered and its turn judged; one whose message is later gets UNAVAILABLE, which exporters retry. None is lost
silently. (SIGTERM stops the server through the same `Server.stop`.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from monitor.serve._grpc import SERVICE
from tests.monitor.service.conftest import ServeFactory, wait_for
from tests.monitor.service.spans import Call, TurnSpec, record_turns, to_request


def test_grpc_calls_in_flight_at_stop_are_answered_or_refused_retryably(serve: ServeFactory) -> None:
    st, server = serve(grpc_port=0, grace_s=30.0)  # the turn is still pending at stop: judged by the shutdown
    body = to_request(record_turns([TurnSpec("look up tag", [Call("pull_auth_telemetry")])])).SerializeToString()
    started = threading.Barrier(3)
    outcomes: dict[str, object] = {}

    def message_after(delay_s: float) -> Iterator[bytes]:
        started.wait()
        time.sleep(delay_s)
        yield body

    def call(name: str, delay_s: float) -> None:
        # A unary call's one message, sent late: what a large export on a slow link looks like to the server.
        try:
            reply = channel.stream_unary(f"/{SERVICE}/Export")(message_after(delay_s), timeout=30)
            outcomes[name] = ExportTraceServiceResponse.FromString(reply).partial_success.rejected_spans
        except grpc.RpcError as err:
            outcomes[name] = err.code()

    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        calls = [threading.Thread(target=call, args=a) for a in (("within grace", 1.0), ("after grace", 8.0))]
        for t in calls:
            t.start()
        started.wait()
        time.sleep(0.3)
        judged = st.stop()
        for t in calls:
            t.join(timeout=30)
    assert outcomes == {"within grace": 0, "after grace": grpc.StatusCode.UNAVAILABLE}
    assert judged == 1
    wait_for(lambda: server.pipeline.turns_judged == 1, timeout=1)
