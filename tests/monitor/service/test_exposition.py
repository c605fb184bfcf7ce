"""The /metrics exposition: promtool-clean, bounded label values, ratios absent on zero denominators."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from monitor.metrics import names
from tests.monitor.service.conftest import ServeFactory, wait_for
from tests.monitor.service.spans import record_turns
from tests.monitor.service.test_end_to_end import N_TURNS, known_turns


def _fill(serve: ServeFactory) -> str:
    _, server = serve()
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    exporter.export(record_turns(known_turns()))
    exporter.shutdown()  # type: ignore[no-untyped-call]
    wait_for(lambda: server.pipeline.turns_judged == N_TURNS)
    with urllib.request.urlopen(server.metrics_url, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=")
        return str(resp.read().decode())


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
