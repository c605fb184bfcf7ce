"""Rule reloads in bursts, while turns are in flight: a SIGHUP storm does not hold the service, and nothing is lost."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.monitor.service.conftest import RULES, wait_for
from tests.monitor.service.spans import Call, TurnSpec, record_turns


def _text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return str(resp.read().decode())


def _sample(text: str, name: str) -> float:
    """The sum of the samples named `name` (with any labels), or of the one sample `name{labels}`."""
    total = 0.0
    for line in text.splitlines():
        key, _, val = line.rpartition(" ")
        if key == name or key.startswith(name + "{"):
            total += float(val)
    return total


def test_a_sighup_storm_reloads_a_few_times_and_holds_no_request(tmp_path: Path) -> None:
    # 1,000 SIGHUPs used to be one reload each (about 40 ms of the event loop each, back to back, as fast as the
    # signals were read): the service answered nothing for seconds (10 s and a failed export for 2,000 signals).
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.read_text())
    exe = str(Path(sys.executable).parent / "toolwatch")
    args = ["serve", "--rules", str(rules), "--port", "0", "--metrics-port", "0", "--no-watch", "--grace", "0.2s"]
    err = tmp_path / "stderr.txt"
    with err.open("w") as out:
        proc = subprocess.Popen([exe, *args], stderr=out, text=True)
    try:
        wait_for(lambda: "OTLP/HTTP on" in err.read_text(), timeout=30)
        line = err.read_text()
        endpoint = line.split("OTLP/HTTP on ")[1].split(",")[0].strip()
        metrics = line.split("metrics on ")[1].split(" ")[0].strip()
        healthz = metrics.replace("/metrics", "/healthz")
        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10)
        results: list[SpanExportResult] = []
        stop = threading.Event()

        def export() -> None:  # turns in flight all along: each its own trace, judged 0.2 s after it arrives
            while not stop.is_set():
                turn = TurnSpec("[BILL] y", [Call("pull_auth_telemetry", {})])
                results.append(exporter.export(record_turns([turn])))
                time.sleep(0.01)

        sender = threading.Thread(target=export)
        sender.start()
        time.sleep(0.3)
        for _ in range(1000):
            proc.send_signal(signal.SIGHUP)
        slowest = 0.0
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            t0 = time.monotonic()
            _text(healthz)
            slowest = max(slowest, time.monotonic() - t0)
            time.sleep(0.02)
        # A change after the storm, and one more signal: it is read.
        rules.write_text(RULES.read_text().replace("ToolCallAccuracyLow", "ToolCallAccuracyLower"))
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.5)
        stop.set()
        sender.join()
        exporter.shutdown()  # type: ignore[no-untyped-call]
        assert slowest < 1.0, f"/healthz took {slowest:.2f} s during the storm"
        assert results and all(r is SpanExportResult.SUCCESS for r in results)
        wait_for(lambda: _sample(_text(metrics), "toolwatch_turns_total") >= len(results), timeout=5)
        text = _text(metrics)
        reloads = _sample(text, 'toolwatch_rules_reloads_total{result="success"}')
        assert 2 <= reloads <= 4, reloads
        assert _sample(text, "toolwatch_turns_total") == len(results)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        print(err.read_text()[-3000:])
