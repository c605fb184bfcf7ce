"""`toolwatch serve` when the wall clock steps (an NTP step, a VM resumed): turns are judged a grace period after
their span arrived, as measured by a clock that does not step, so the verdicts and their windows go on as before.

The server runs under libfaketime (Debian `faketime`, installed by scripts/ensure-services.sh) with its monotonic
clock left alone: only the wall clock jumps, as with a real step, when the test rewrites the offset file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.stack import free_port
from tests.monitor.service.conftest import RULES, wait_for
from tests.monitor.service.spans import Call, TurnSpec, record_turns

TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
A = "incident-triage"
ARGS = {"log_excerpt": "token rejected"}
# Long enough that a loaded machine (CI beside other work) still sees the turn pending before its grace ends; far
# shorter than the hour the wall clock steps.
GRACE_S = 6

pytestmark = pytest.mark.skipif(
    not LIBFAKETIME.exists() or shutil.which("faketime") is None,
    reason="libfaketime not installed (scripts/ensure-services.sh installs it)",
)


class Served:
    def __init__(self, offset: Path, port: int, metrics_port: int) -> None:
        self.offset = offset
        self.endpoint = f"http://127.0.0.1:{port}/v1/traces"
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"

    def step_wall_clock(self, offset: str) -> None:
        """Move the server's wall clock to `offset` from the real one (e.g. "-3600"); its monotonic clock stays."""
        self.offset.write_text(f"{offset}\n")

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as resp:
            text = resp.read().decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
        }

    def value(self, name: str, **labels: str) -> float | None:
        return self.samples().get((name, tuple(sorted(labels.items()))))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    offset = tmp_path / "offset"
    offset.write_text("+0\n")
    port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        "FAKETIME_NO_CACHE": "1",  # read the file at every clock call: the step lands at once
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # only the wall clock steps, as with NTP
    }
    args = [TOOLWATCH, "serve", "--rules", str(RULES), "--no-watch", "--port", str(port)]
    args += ["--metrics-port", str(metrics_port), "--grace", f"{GRACE_S}s", "--turnless-timeout", f"{GRACE_S}s"]
    args += ["--windows", "5m"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s = Served(offset, port, metrics_port)
    try:
        wait_for(lambda: _up(s), timeout=30)
        yield s
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _up(s: Served) -> bool:
    try:
        s.samples()
    except OSError:
        return False
    return True


def _export(s: Served, turns: list[TurnSpec]) -> None:
    exporter = OTLPSpanExporter(endpoint=s.endpoint, timeout=10)
    assert exporter.export(record_turns(turns)) is SpanExportResult.SUCCESS
    exporter.shutdown()  # type: ignore[no-untyped-call]


def _judged(s: Served) -> float:
    return s.value("toolwatch_turns_total", agent=A, judged="true") or 0.0


def test_a_wall_clock_stepped_back_does_not_hold_pending_turns(served: Served) -> None:
    """A turn that arrived before the wall clock stepped back an hour is judged its grace period later, not an hour
    later: meanwhile its agent's figures would be missing from every window."""
    _export(served, [TurnSpec("[AUTH] token rejected", [Call("pull_auth_telemetry", ARGS)], output_text="Result: x")])
    wait_for(lambda: served.value("toolwatch_pending_turns", kind="turn") == 1)  # in its grace period
    served.step_wall_clock("-3600")
    wait_for(lambda: _judged(served) == 1, timeout=GRACE_S + 10)
    assert served.value("toolwatch_pending_turns", kind="turn") == 0
    assert served.value("toolwatch_tool_call_accuracy_ratio", agent=A, window="5m") == 1.0


def test_a_wall_clock_stepped_forward_does_not_judge_turns_before_their_grace_ends(served: Served) -> None:
    """A turn span that arrives before its call (another process's exporter is later) keeps its grace period when the
    wall clock steps forward an hour meanwhile: the call is judged with it, not dropped as late and counted missed."""
    turn, call = _split(record_turns([TurnSpec("[AUTH] token rejected", [Call("pull_auth_telemetry", ARGS)])]))
    exporter = OTLPSpanExporter(endpoint=served.endpoint, timeout=10)
    assert exporter.export(turn) is SpanExportResult.SUCCESS
    wait_for(lambda: served.value("toolwatch_pending_turns", kind="turn") == 1)  # in its grace period
    served.step_wall_clock("+3600")
    time.sleep(0.2)  # the worker polls at least every 100 ms: a turn due by the stepped wall clock is judged now
    assert exporter.export(call) is SpanExportResult.SUCCESS
    exporter.shutdown()  # type: ignore[no-untyped-call]
    wait_for(lambda: _judged(served) == 1, timeout=GRACE_S + 10)
    assert served.value("toolwatch_missed_calls_total", agent=A, tool="pull_auth_telemetry") == 0
    assert served.value("toolwatch_tool_calls_total", agent=A, tool="pull_auth_telemetry", outcome="correct") == 1
    assert served.value("toolwatch_spans_dropped_total", reason="late_call") == 0
    assert served.value("toolwatch_missed_call_ratio", agent=A, window="5m") == 0.0


def _split(spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    turn = [s for s in spans if s.name.startswith("invoke_agent")]
    return turn, [s for s in spans if s not in turn]
