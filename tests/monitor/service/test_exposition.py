"""The /metrics exposition: promtool-clean, bounded label values, ratios absent on zero denominators."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import threading
import urllib.request
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from prometheus_client import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from monitor.assembly import TurnAssembler
from monitor.metrics import ToolwatchMetrics, names
from monitor.records import ToolCall, Turn
from monitor.serve import Server, ServerThread, Settings
from monitor.serve._pipeline import DROP_REASONS, REJECT_REASONS
from tests.monitor.service.conftest import RULES, ServeFactory, scrape, value, wait_for
from tests.monitor.service.http_util import post
from tests.monitor.service.spans import new_tracer, record_turn, record_turns, to_request
from tests.monitor.service.test_end_to_end import N_TURNS, known_turns

PB = "application/x-protobuf"


def _fill(serve: ServeFactory) -> str:
    return _filled(serve)[1]


def _filled(serve: ServeFactory) -> tuple[Server, str]:
    """A server that judged the known turns, and its /metrics page as a plain scrape gets it."""
    _, server = serve()
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    exporter.export(record_turns(known_turns()))
    exporter.shutdown()  # type: ignore[no-untyped-call]
    wait_for(lambda: server.pipeline.turns_judged == N_TURNS)
    with urllib.request.urlopen(server.metrics_url, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=")
        return server, str(resp.read().decode())


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (make test installs it)")
def test_promtool_check_metrics_reports_nothing(serve: ServeFactory) -> None:
    text = _fill(serve)
    proc = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == "", proc.stdout + proc.stderr


def test_every_documented_metric_is_exposed(serve: ServeFactory) -> None:
    text = _fill(serve)
    for const in dir(names):
        value = getattr(names, const)
        if const.isupper() and isinstance(value, str) and value.startswith("toolwatch_") and value != names.PREFIX:
            base = value.removesuffix("_total")
            assert f"# TYPE {base}" in text, value


def test_every_drop_and_rejection_reason_is_a_series_from_the_start(serve: ServeFactory) -> None:
    """rate() and increase() read a series' first value as no growth: a reason whose series appeared only with its
    first dropped span hid that span (and the dashboard's drop panel showed nothing for the first late call)."""
    _, server = serve()
    samples = scrape(server)
    for reason in DROP_REASONS:
        assert value(samples, "toolwatch_spans_dropped_total", reason=reason) == 0, reason
    for reason in REJECT_REASONS:
        assert value(samples, "toolwatch_spans_rejected_total", reason=reason) == 0, reason
    assert {"late_call", "late_turn", "queue_full", "duplicate"} <= set(DROP_REASONS)
    assert {"invalid_id", "missing_tool_name", "malformed_span", "normalize_error"} == set(REJECT_REASONS)


def _get(url: str, **headers: str) -> tuple[bytes, dict[str, str]]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as resp:
        return resp.read(), dict(resp.headers.items())


def test_metrics_are_gzipped_when_asked(serve: ServeFactory) -> None:
    _, server = serve()
    plain, headers = _get(server.metrics_url)
    assert "Content-Encoding" not in headers
    body, headers = _get(server.metrics_url, **{"Accept-Encoding": "deflate, gzip;q=0.9"})
    assert headers["Content-Encoding"] == "gzip"
    assert headers["Content-Type"].startswith("text/plain; version=")
    text = gzip.decompress(body).decode()
    assert len(body) < len(plain) and "# TYPE toolwatch_tool_calls_total counter" in text
    assert text.splitlines()[:50] == plain.decode().splitlines()[:50]  # the same page (histograms may move on)


@pytest.mark.parametrize(
    ("accept", "gzipped"),
    [
        ("", False),
        ("gzip", True),
        ("GZip ; q=0.5", True),
        ("gzip;q=0", False),  # "not gzip" (RFC 9110): prometheus_client's gzip_accepted took it as yes
        ("gzip; q=0.000", False),
        ("deflate, gzip;q=0", False),
        ("*", True),
        ("gzip;q=0, *", False),  # gzip named: the wildcard does not overrule it
        ("*;q=0", False),
        ("identity", False),
        ("gzip;q=nonsense", False),
    ],
)
def test_metrics_honour_accept_encoding_and_say_vary(serve: ServeFactory, accept: str, gzipped: bool) -> None:
    _, server = serve()
    body, headers = _get(server.metrics_url, **({"Accept-Encoding": accept} if accept else {}))
    assert headers["Vary"] == "Accept, Accept-Encoding"  # a cache between scraper and server keeps the pages apart
    assert (headers.get("Content-Encoding") == "gzip") is gzipped
    text = (gzip.decompress(body) if gzipped else body).decode()
    assert "# TYPE toolwatch_tool_calls_total counter" in text


# What Prometheus 2.x sends when scraping (scrape_protocols left at their default): OpenMetrics preferred.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)


def _samples(families: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in families
        for s in fam.samples
        if not s.name.startswith(("process_", "python_gc_", "toolwatch_judge_", "toolwatch_verdict_lag"))
    }


@pytest.mark.parametrize("accept", [PROMETHEUS_ACCEPT, "application/openmetrics-text"])
def test_an_openmetrics_scrape_gets_openmetrics(serve: ServeFactory, accept: str) -> None:
    """Content negotiation as the Prometheus client library's own handlers do it: a scraper that asks for
    OpenMetrics (Prometheus does, first) gets valid OpenMetrics, labelled as such; the others the text format."""
    server, text = _filled(serve)
    url = server.metrics_url
    body, headers = _get(url, Accept=accept)
    # (prometheus_client says `; escaping=underscores` too when the scraper named a version.)
    assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0; charset=utf-8")
    assert "Accept" in headers["Vary"]  # a cache keeps the OpenMetrics and text pages apart
    page = body.decode()
    assert page.endswith("# EOF\n")
    # The strict OpenMetrics parser: raises on anything invalid.
    families = list(openmetrics_families(page))  # type: ignore[no-untyped-call]
    assert _samples(families) == _samples(text_string_to_metric_families(text))
    # gzip still applies
    packed, headers = _get(url, Accept=accept, **{"Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(packed).decode().endswith("# EOF\n")


def test_a_text_scrape_gets_the_text_format_it_asked_for(serve: ServeFactory) -> None:
    _, server = serve()
    body, headers = _get(server.metrics_url, Accept="text/plain;version=0.0.4")
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# EOF" not in body.decode() and "# TYPE toolwatch_tool_calls_total counter" in body.decode()
    body, headers = _get(server.metrics_url)
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"


class _RenderGate:
    """A collector whose collect() waits until released: a /metrics render held under way for as long as a test
    needs (a real render of a large registry takes hundreds of milliseconds; timing one flaked on a busy machine)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def collect(self) -> list[Any]:
        self.entered.set()
        self.release.wait(10)
        return []


class _GatedMetrics(ToolwatchMetrics):
    def __init__(self, gate: _RenderGate) -> None:
        super().__init__()
        self.gate = gate

    def registry(self) -> Any:
        reg = super().registry()
        reg.register(self.gate)  # a collector by duck typing, as the client library takes
        return reg


def test_a_scrape_being_rendered_does_not_hold_up_otlp_requests() -> None:
    """Rendering /metrics runs off the event loop, so an export arriving while a render is under way is answered at
    once (it waited for the whole render while the loop rendered). The render is held until the export's answer."""
    settings = Settings(rules=(str(RULES),), port=0, metrics_port=0, watch_rules=False)
    body = bytes(to_request(record_turns(known_turns()[:1])).SerializeToString())
    gate = _RenderGate()
    with ServerThread(settings, metrics=_GatedMetrics(gate)) as server:
        scraped: list[int] = []

        def scrape_once() -> None:
            _get(server.metrics_url)
            scraped.append(1)

        scraper = threading.Thread(target=scrape_once)
        scraper.start()
        try:
            assert gate.entered.wait(10), "the scrape did not start rendering"
            status, _, _ = post(server.endpoint, body, PB)  # hangs (and times out) if the loop is rendering
            assert status == 200
            assert not scraped and scraper.is_alive()  # answered while the render was still held
        finally:
            gate.release.set()
            scraper.join(timeout=30)
        assert scraped, "the scrape did not finish"


def test_a_scrape_builds_its_families_outside_the_lock_the_worker_waits_on() -> None:
    """observe() and tick() run on the event loop and take the metrics lock: a scrape holds it only to copy what the
    worker changes, and builds the families (60-77 ms for 20 agents x 50 tools) after releasing it."""
    metrics = ToolwatchMetrics(tools=["a", "b"], agents=["x"])
    held: list[bool] = []

    class Watched(ToolwatchMetrics):
        def _verdict_families(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
            held.append(self._lock.locked())
            return super()._verdict_families(*args, **kwargs)  # type: ignore[arg-type]

        def _window_families(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
            held.append(self._lock.locked())
            return super()._window_families(*args, **kwargs)  # type: ignore[arg-type]

    metrics.__class__ = Watched
    page = generate_latest(metrics.registry()).decode()
    assert held == [False, False]
    assert 'toolwatch_tool_calls_total{agent="x",outcome="correct",tool="a"} 0.0' in page


def test_pending_turns_count_turnless_traces(serve: ServeFactory) -> None:
    _, server = serve(grace_s=600, turnless_timeout_s=600)
    provider, tracer, exporter = new_tracer()
    for t in known_turns()[:2]:  # two turns, each in its own trace
        record_turn(tracer, t)
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pull_auth_telemetry"}
    with tracer.start_as_current_span("handle request"):  # a trace with calls and no turn span
        for _ in range(2):
            with tracer.start_as_current_span("execute_tool pull_auth_telemetry", attributes=attrs):
                pass
    provider.shutdown()
    status, _, _ = post(server.endpoint, to_request(exporter.get_finished_spans()).SerializeToString(), PB)
    assert status == 200
    wait_for(lambda: server.pipeline.queued == 0 and server.pipeline.assembler.pending_traces == 3)
    s = scrape(server)
    assert value(s, names.PENDING_TURNS, kind="turn") == 2
    assert value(s, names.PENDING_TURNS, kind="turnless") == 1  # judged as one turnless turn after the timeout


def test_a_call_beside_a_pending_turn_counts_as_turnless_once_the_turn_is_released() -> None:
    """What the HELP text of toolwatch_pending_turns says: a call of a trace whose pending turn it is not part of
    (here a call under no turn, after it) is not counted as turnless while that turn waits; then it is."""
    assembler = TurnAssembler(grace_s=1.0, turnless_timeout_s=600.0)
    trace = "a" * 32
    turn = Turn("[AUTH] q", trace_id=trace, span_id="1" * 16, start_ns=100, end_ns=200)
    beside = ToolCall("pull_auth_telemetry", trace_id=trace, span_id="2" * 16, start_ns=300, end_ns=400)
    metrics = ToolwatchMetrics()
    metrics.pending = lambda: {"turn": assembler.pending_turns, "turnless": assembler.pending_turnless}

    def pending() -> tuple[float | None, float | None]:
        text = generate_latest(metrics.registry()).decode()
        samples = {
            s.labels["kind"]: s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == names.PENDING_TURNS
        }
        return samples.get("turn"), samples.get("turnless")

    assert assembler.add_records([turn, beside], 1_000) == []
    assert pending() == (1, 0)
    (released,) = assembler.poll(2_000_000_000)  # the grace period is over: the turn, without the call
    assert released.span_id == turn.span_id and released.calls == ()
    assert pending() == (0, 1)


@pytest.mark.parametrize("accept", ["text/plain;version=x", "application/openmetrics-text; version=abc"])
def test_a_version_that_is_not_a_number_gets_the_text_format(serve: ServeFactory, accept: str) -> None:
    """prometheus_client's negotiation raises on a version it cannot compare (TypeError): the scrape got a 500 and the
    log a traceback. A scraper whose Accept cannot be read gets the text format, as one that names none."""
    _, server = serve()
    body, headers = _get(server.metrics_url, Accept=accept)
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# TYPE toolwatch_tool_calls_total counter" in body.decode()
