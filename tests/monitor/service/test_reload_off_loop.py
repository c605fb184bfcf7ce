"""A rules reload is loaded and compiled off the event loop: a big rule file does not stop receiving or scraping."""

from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from monitor.serve import ServerThread, Settings
from monitor.serve._rules import Attempt
from tests.monitor.service.conftest import RULES, wait_for
from tests.monitor.service.spans import Call, TurnSpec, record_turns

AGENT = "incident-triage"


def big_rules(tools: int) -> str:
    """The shipped rule file with `tools` more tools, each with a schema of its own and an expectation."""
    base = RULES.read_text()
    catalog = "".join(
        f"    - name: gen_tool_{i}\n      description: Generated tool {i}.\n"
        f"      schema: {{type: object, properties: {{x{i}: {{type: string}}}}, additionalProperties: false}}\n"
        for i in range(tools)
    )
    expect = "".join(
        f'  - id: gen{i}\n    when: {{prefix: "[G{i}]"}}\n    call:\n      - tool: gen_tool_{i}\n        exactly: 1\n'
        for i in range(tools)
    )
    first = "    - name: pull_auth_telemetry\n"
    return base.replace(first, catalog + first, 1).replace("\nexpect:\n", "\nexpect:\n" + expect, 1)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return str(resp.read().decode())


def _sample(url: str, sample: str) -> float | None:
    """One sample of the /metrics page, found by its line (parsing the page of 500 tools takes seconds)."""
    for line in _get(url).splitlines():
        key, _, val = line.rpartition(" ")
        if key == sample:
            return float(val)
    return None


def test_a_slow_reload_holds_no_request_and_loses_no_export(tmp_path: Path) -> None:
    # Loading a rule file of 500 more tools takes about 1.3 s (5,000: 12.5 s). The reload ran on the event loop, so
    # /healthz, /metrics and the OTLP receiver answered nothing meanwhile: /healthz and an export took as long as the
    # reload (for 5,000 tools, an exporter with a 10 s timeout failed). The rules are now loaded in a thread.
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.read_text())
    settings = Settings(
        rules=(str(rules),), port=0, metrics_port=0, grace_s=0.1, watch_rules=False, poll_interval_s=0.02
    )
    st = ServerThread(settings)
    server = st.start()
    try:
        healthz = server.metrics_url.replace("/metrics", "/healthz")
        exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=30)
        exports: list[tuple[SpanExportResult, float, float]] = []  # result, start, end (monotonic)
        answers: list[tuple[float, float]] = []  # /healthz: start, end
        loads: list[tuple[float, float]] = []  # Rules.prepare (the slow part of the reload): start, end
        stop = threading.Event()
        prepare = server.rules.prepare

        def timed_prepare() -> Attempt:  # the real load, its start and end noted
            t0 = time.monotonic()
            try:
                return prepare()
            finally:
                loads.append((t0, time.monotonic()))

        server.rules.prepare = timed_prepare  # type: ignore[method-assign]

        def export() -> None:
            while not stop.is_set():
                turn = TurnSpec("[AUTH] x", [Call("pull_auth_telemetry", {"log_excerpt": "x"})])
                t0 = time.monotonic()
                result = exporter.export(record_turns([turn]))
                exports.append((result, t0, time.monotonic()))
                time.sleep(0.01)

        def poll() -> None:
            while not stop.is_set():
                t0 = time.monotonic()
                _get(healthz)
                answers.append((t0, time.monotonic()))
                time.sleep(0.01)

        workers = [threading.Thread(target=export), threading.Thread(target=poll)]
        for w in workers:
            w.start()
        try:
            time.sleep(0.2)
            rules.write_text(big_rules(500))
            st.call(server.request_reload)  # what SIGHUP runs
            wait_for(lambda: server.metrics.ops.rules_reloads["success"] == 1, timeout=60)
            time.sleep(0.2)
        finally:
            stop.set()
            for w in workers:
                w.join()
            exporter.shutdown()  # type: ignore[no-untyped-call]
        # Before: the load ran on the event loop, and nothing was answered while it ran (/healthz and the exports
        # waited for the whole reload). Now requests are answered meanwhile: several /healthz requests and an export
        # each start and end while the load runs. A property of the order of events, not of their durations, so a
        # slow or loaded machine (which stretches the load and the requests alike) does not change the outcome.
        assert len(loads) == 1, loads
        load_start, load_end = loads[0]
        assert load_end - load_start > 0.3, f"the load took {load_end - load_start:.2f} s: give it more tools"
        inside = [(a, b) for a, b in answers if load_start <= a and b <= load_end]
        assert len(inside) >= 3, (load_end - load_start, len(inside), len(answers))
        assert any(load_start <= a and b <= load_end for _, a, b in exports), (load_end - load_start, exports)
        assert exports and all(r is SpanExportResult.SUCCESS for r, _, _ in exports)
        page = server.metrics_url
        turns = f'toolwatch_turns_total{{agent="{AGENT}",judged="true"}}'
        wait_for(lambda: _sample(page, turns) == len(exports))
        # The new rules are in force, with their tools' series: a turn for a generated tool is judged by them.
        assert _sample(page, f'toolwatch_missed_calls_total{{agent="{AGENT}",tool="gen_tool_7"}}') == 0
        exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=30)
        assert exporter.export(record_turns([TurnSpec("[G7] x", [Call("gen_tool_7", {"x7": "y"})])])) is (
            SpanExportResult.SUCCESS
        )
        exporter.shutdown()  # type: ignore[no-untyped-call]
        correct = f'toolwatch_tool_calls_total{{agent="{AGENT}",outcome="correct",tool="gen_tool_7"}}'
        wait_for(lambda: _sample(page, correct) == 1)
    finally:
        st.stop()


def _loader() -> threading.Thread | None:
    return next((t for t in threading.enumerate() if t.name == "toolwatch-rules-load"), None)


@pytest.mark.parametrize("trigger", ["watcher", "sighup"])
def test_a_reload_in_flight_neither_holds_stop_nor_comes_in_force_after_it(tmp_path: Path, trigger: str) -> None:
    # Loading 3,000 more tools takes seconds; the server is stopped meanwhile. The stop judges the pending turn by
    # the rules in force and returns while the load still runs (it waited for the whole load, which ran on its
    # loop); the load goes on in its daemon thread and its rules never come in force. (Not a time bound on the stop:
    # the load holds the GIL much of the time, and on a busy machine a stop of 1 s was not "at once" enough.)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.read_text())
    settings = Settings(
        rules=(str(rules),), port=0, metrics_port=0, grace_s=600, turnless_timeout_s=600,
        watch_rules=trigger == "watcher", watch_interval_s=0.05,
    )
    st = ServerThread(settings)
    server = st.start()
    try:
        exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
        turn = TurnSpec("[BILL] y", [Call("pull_auth_telemetry", {"log_excerpt": "y"})])
        assert exporter.export(record_turns([turn])) is SpanExportResult.SUCCESS
        exporter.shutdown()  # type: ignore[no-untyped-call]
        wait_for(lambda: server.pipeline.queued == 0 and server.pipeline.assembler.pending_turns == 1)
        old = server.rules.current
        rules.write_text(big_rules(3000))
        if trigger == "sighup":
            st.call(server.request_reload)
        time.sleep(0.4)  # the watcher takes the file at its second look, 0.1 s on
        loader = _loader()
        t0 = time.monotonic()
        judged = st.stop()
        stopped_in = time.monotonic() - t0
        loading_after_stop = loader is not None and loader.is_alive()
        if loader is not None:
            loader.join(timeout=60)
    finally:
        st.stop()
    assert loading_after_stop and judged == 1, (stopped_in, judged)  # the stop did not wait for the load
    assert loader is not None and loader.daemon and not loader.is_alive()  # it was loading at stop, and ended
    assert server.rules.current is old and len(server.rules.judge.catalog) == 5
    assert server.metrics.ops.rules_reloads == {"success": 0, "failure": 0}


def test_reloads_load_one_at_a_time(tmp_path: Path) -> None:
    # The watcher, SIGHUP and a reload abandoned half-way (cancelled) never load the files in two threads at once.
    import asyncio

    from monitor.judge import Judge
    from monitor.rules import RuleSet

    loading: list[int] = []
    peak = [0]
    guard = threading.Lock()

    def factory(ruleset: RuleSet) -> Judge:
        with guard:
            loading.append(1)
            peak[0] = max(peak[0], len(loading))
        time.sleep(0.2)
        with guard:
            loading.pop()
        return Judge(ruleset)

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.read_text())
    st = ServerThread(Settings(rules=(str(rules),), port=0, metrics_port=0, watch_rules=False), judge_factory=factory)
    server = st.start()
    try:

        async def reloads() -> list[bool | None]:
            abandoned = asyncio.ensure_future(server.reload_rules())
            await asyncio.sleep(0.05)
            abandoned.cancel()  # its thread goes on loading; the next load waits for it
            return list(await asyncio.gather(server.reload_rules(), server.reload_rules()))

        assert st.run(reloads()) == [True, True]
        assert peak[0] == 1
        assert server.metrics.ops.rules_reloads == {"success": 2, "failure": 0}
    finally:
        st.stop()


def test_sigterm_during_a_slow_reload_exits_at_once(tmp_path: Path) -> None:
    # SIGTERM while `toolwatch serve` loads 2,000 more tools after a SIGHUP: the process exited only once the load
    # had ended (8.5 s for 3,000 tools); the load is abandoned in its daemon thread, the process exits in under 1 s.
    import signal
    import subprocess
    import sys

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.read_text())
    exe = str(Path(sys.executable).parent / "toolwatch")
    err = tmp_path / "stderr.txt"
    with err.open("w") as out:
        proc = subprocess.Popen(
            [exe, "serve", "--rules", str(rules), "--port", "0", "--metrics-port", "0", "--no-watch"], stderr=out
        )
    try:
        wait_for(lambda: "OTLP/HTTP on" in err.read_text(), timeout=30)
        rules.write_text(big_rules(2000))
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        exited_in = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert exited_in < 2.0, exited_in
    assert "stopped; 0 pending turns judged at shutdown" in err.read_text()
