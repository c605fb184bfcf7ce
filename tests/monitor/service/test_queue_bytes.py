"""The queue between the receivers and turn assembly is bounded in bytes too (`--queue-bytes`), not only in spans.

`--queue-spans` counts records: 262,144 of them whose calls carry 100 KB of arguments each could hold 25 GB while the
worker was behind. A request whose records would take the queue past `--queue-bytes` (weighed as the pending records
are, monitor/assembly/_budget.py) is refused as a full queue is (503 + Retry-After, gRPC UNAVAILABLE): retried by the
exporter, nothing lost. An empty queue takes any request.
"""

from __future__ import annotations

import grpc  # type: ignore[import-untyped]

from monitor.assembly import records_bytes
from monitor.serve._grpc import SERVICE
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.http_util import get, post
from tests.monitor.service.spans import Call, TurnSpec, record_turns, to_request

PB = "application/x-protobuf"
BIG = 250_000  # characters of arguments per call


def _heavy(i: int) -> bytes:
    """One turn whose call carries BIG characters of arguments."""
    turn = TurnSpec(f"[AUTH] login failure {i}", [Call("pull_auth_telemetry", {"log_excerpt": "x" * BIG})])
    return bytes(to_request(record_turns([turn])).SerializeToString())


def test_heavy_requests_past_the_queue_bytes_get_503_and_nothing_is_lost(serve: ServeFactory) -> None:
    _, server = serve(queue_bytes=550_000, queue_spans=1_000_000)  # two of these requests, not three
    p = server.pipeline
    p.paused = True
    bodies = [_heavy(i) for i in range(4)]
    assert [post(server.endpoint, b, PB)[0] for b in bodies[:2]] == [200, 200]
    status, _, headers = post(server.endpoint, bodies[2], PB)
    assert status == 503 and headers["Retry-After"] == "1"
    s = scrape(server)
    queued = value(s, "toolwatch_queue_bytes") or 0
    assert 2 * BIG < queued <= 550_000
    assert queued == p.queued_bytes == sum(records_bytes(batch) for batch, _ in p._queue)
    assert value(s, "toolwatch_queue_spans") == p.queued == 4  # two turns, two calls
    assert queued > 0.9 * 550_000
    assert get(server.metrics_url.replace("/metrics", "/readyz")) == 503  # past 90% of the bytes: not ready
    p.paused = False
    wait_for(lambda: p.queued == 0)
    assert p.queued_bytes == 0
    assert [post(server.endpoint, b, PB)[0] for b in bodies[2:]] == [200, 200]  # the retry, and the next one
    wait_for(lambda: p.turns_judged == 4)
    s = scrape(server)
    assert value(s, "toolwatch_requests_total", transport="http_protobuf", code="503") == 1
    assert value(s, "toolwatch_spans_dropped_total", reason="queue_full") == 2
    assert value(s, "toolwatch_turns_total", agent="incident-triage", judged="true") == 4


def test_an_empty_queue_takes_a_request_heavier_than_the_bound(serve: ServeFactory) -> None:
    _, server = serve(queue_bytes=100_000)
    server.pipeline.paused = True
    assert post(server.endpoint, _heavy(0), PB)[0] == 200
    assert server.pipeline.queued_bytes > 100_000
    assert post(server.endpoint, _heavy(1), PB)[0] == 503


def test_grpc_answers_unavailable_past_the_queue_bytes(serve: ServeFactory) -> None:
    _, server = serve(grpc_port=0, queue_bytes=550_000, queue_spans=1_000_000)
    server.pipeline.paused = True
    codes = []
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        export = channel.unary_unary(f"/{SERVICE}/Export")
        for i in range(3):
            try:
                export(_heavy(i), timeout=10)
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as err:
                codes.append(err.code())
    assert codes == [grpc.StatusCode.OK, grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE]
    server.pipeline.paused = False
    wait_for(lambda: server.pipeline.turns_judged == 2)
    assert value(scrape(server), "toolwatch_spans_dropped_total", reason="queue_full") == 2
