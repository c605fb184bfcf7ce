"""toolwatch_requests_total and toolwatch_spans_received_total of a real server: every answer of the receiver is
counted, a wrong path or method included, under the bounded label values of `monitor.metrics.names`; and the series
an alert or dashboard takes the rate() of are there at 0 from the start (rate() does not see a series' first value
as growth)."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from monitor.metrics import names as n
from tests.monitor.service.conftest import ServeFactory, scrape, value
from tests.monitor.service.http_util import post
from tests.monitor.service.test_bad_input import JS, PB, assert_still_serving, good_pb

TRANSPORTS = {"http_protobuf", "http_json", "http_other", "grpc"}  # names.REQUESTS


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code


def _series(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> list[dict[str, str]]:
    return [dict(labels) for (sample, labels) in samples if sample == name]


def test_a_wrong_path_or_method_is_counted_under_bounded_labels(serve: ServeFactory) -> None:
    # Before: aiohttp answered them (404, 405) and nothing counted them: an exporter pointed at the wrong path lost
    # every export with no trace in the metrics.
    _, server = serve()
    base = server.endpoint.removesuffix("/v1/traces")
    for i in range(20):  # many paths: one series
        assert post(f"{base}/v1/logs{i}", good_pb(), PB)[0] == 404
    assert post(f"{base}/v1/metrics", b"{}", JS)[0] == 404
    assert _get(server.endpoint) == 405
    s = scrape(server)
    assert value(s, n.REQUESTS, transport="http_protobuf", code="404") == 20
    assert value(s, n.REQUESTS, transport="http_json", code="404") == 1
    assert value(s, n.REQUESTS, transport="http_other", code="405") == 1
    series = _series(s, n.REQUESTS)
    assert {lbl["transport"] for lbl in series} <= TRANSPORTS
    assert all(set(lbl) == {"transport", "code"} for lbl in series)
    assert len([lbl for lbl in series if lbl["code"] == "404"]) == 2
    assert_still_serving(server)
    # An answer of the handler is counted once, not again as a routed request.
    assert value(scrape(server), n.REQUESTS, transport="http_protobuf", code="200") == 1


@pytest.mark.parametrize("grpc", [False, True], ids=["http", "http+grpc"])
def test_the_series_a_rate_reads_are_there_at_0_from_the_start(serve: ServeFactory, grpc: bool) -> None:
    # Before: toolwatch_requests_total and toolwatch_spans_received_total had no series until the first request, so
    # rate() missed the first exports (and the first 503s of ToolwatchBackPressure).
    _, server = serve(grpc_port=0) if grpc else serve()
    s = scrape(server)
    for transport in ("http_protobuf", "http_json"):
        assert value(s, n.SPANS_RECEIVED, transport=transport) == 0
        for code in ("200", "503"):
            assert value(s, n.REQUESTS, transport=transport, code=code) == 0, (transport, code)
    assert value(s, n.SPANS_RECEIVED, transport="grpc") == (0 if grpc else None)
    for code in ("0", "14"):  # OK, UNAVAILABLE
        assert value(s, n.REQUESTS, transport="grpc", code=code) == (0 if grpc else None)
    assert all(v == 0 for (name, _), v in s.items() if name in (n.REQUESTS, n.SPANS_RECEIVED))
