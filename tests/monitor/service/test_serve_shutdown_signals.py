"""Signals to `toolwatch serve` while it shuts down (judging the pending turns, writing their verdicts).

A process manager reloading at the wrong moment (`ExecReload=kill -HUP`) sends SIGHUP while the service judges the
turns still waiting for their grace period: once the server's handlers were removed, SIGHUP's default action ended
the process and those verdicts were lost. A real `toolwatch serve` with a long grace receives turns from the
OpenTelemetry SDK's OTLP/HTTP exporter, is sent SIGTERM, then SIGHUP after SIGHUP until it exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client.parser import text_string_to_metric_families

from tests.monitor.service.conftest import RULES, wait_for
from tests.monitor.service.test_reload_off_loop import big_rules

TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")
pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts the process's threads in /proc")
AGENT = "incident-triage"
TOOL = "pull_auth_telemetry"
TURNS = 2000  # at least 256: the exporter's queue holds them all
Spawn = Callable[..., tuple[subprocess.Popen[str], Path, Path, str, str]]


def _pending_turns(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "toolwatch_pending_turns" and s.labels.get("kind") == "turn":
                return s.value
    return 0.0


def _send_turns(endpoint: str, turns: int) -> set[str]:
    """`turns` turns, each a turn span with one tool call, exported over OTLP/HTTP; their trace ids."""
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10)
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=2 * turns, max_export_batch_size=512))
    tracer = provider.get_tracer("tests")
    ids: set[str] = set()
    turn_attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT,
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "login"}]}]),
    }
    tool_attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": TOOL,
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": json.dumps({"log_excerpt": "login failure"}),
    }
    for _ in range(turns):
        with tracer.start_as_current_span(f"invoke_agent {AGENT}", attributes=turn_attrs) as turn:
            ids.add(format(turn.get_span_context().trace_id, "032x"))
            with tracer.start_as_current_span(f"execute_tool {TOOL}", attributes=tool_attrs):
                pass
    assert provider.force_flush(30_000)
    provider.shutdown()
    return ids


def _serve(tmp_path: Path, rules_text: str, *more: str) -> tuple[subprocess.Popen[str], Path, Path]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(rules_text)
    err = tmp_path / "stderr.txt"
    log = tmp_path / "verdicts.jsonl"
    # A grace of 10 minutes: every turn stays pending until the shutdown.
    args = ["serve", "--rules", str(rules), "--port", "0", "--metrics-port", "0", "--no-watch", "--grace", "10m"]
    args += ["--verdict-log", str(log), "--verdict-log-all", *more]
    with err.open("w") as out:
        # With Python's fault handler, a SIGABRT prints every thread's stack: what a hung shutdown was doing.
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
        proc = subprocess.Popen([TOOLWATCH, *args], stderr=out, text=True, env=env)
    return proc, err, log


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Spawns `toolwatch serve` on a rule file's text and waits until it is ready; returns it with its stderr file,
    verdict log, receiver endpoint and metrics URL."""
    procs: list[tuple[subprocess.Popen[str], Path]] = []

    def start(rules_text: str, *more: str) -> tuple[subprocess.Popen[str], Path, Path, str, str]:
        proc, err, log = _serve(tmp_path, rules_text, *more)
        procs.append((proc, err))
        wait_for(lambda: "OTLP/HTTP on" in err.read_text() or proc.poll() is not None, timeout=120)
        ready = err.read_text()
        assert "OTLP/HTTP on" in ready, ready
        endpoint = ready.split("OTLP/HTTP on ")[1].split(",")[0].strip()
        metrics = ready.split("metrics on ")[1].split(" ")[0].strip().rstrip(",")
        return proc, err, log, endpoint, metrics

    yield start
    for proc, err in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        print(err.read_text()[-3000:])


STOP_WITHIN_S = 60.0  # a shutdown takes seconds; well before pytest's timeout, which would say nothing of why


def _hang_up_until_exit(proc: subprocess.Popen[str], pause_s: float, err: Path) -> int:
    """SIGHUP after SIGHUP (`pause_s` apart; 0: as fast as they can be sent) until the process ends. One that has
    not ended within STOP_WITHIN_S fails the test with its threads' stacks (SIGABRT to its fault handler)."""
    sent = 0
    deadline = time.monotonic() + STOP_WITHIN_S
    while proc.poll() is None:
        if time.monotonic() > deadline:
            blocked = _thread_states(proc.pid)
            proc.send_signal(signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            pytest.fail(f"not stopped {STOP_WITHIN_S:.0f} s after SIGTERM ({sent} SIGHUPs sent); its threads: "
                        f"{blocked}\n{err.read_text()[-20000:]}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGHUP)
        sent += 1
        if pause_s:
            time.sleep(pause_s)
    return sent


def _thread_states(pid: int) -> dict[str, str]:
    """Per thread (name/id): its state and where in the kernel it waits."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            task = Path(f"/proc/{pid}/task/{tid}")
            fields = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
            out[f"{fields['Name'].strip()}/{tid}"] = f"{fields['State'].strip()} {(task / 'wchan').read_text()}"
    return out


def _assert_every_verdict_written(err: Path, log: Path, ids: set[str]) -> None:
    assert f"{len(ids)} pending turns judged at shutdown" in err.read_text()
    written = [json.loads(line) for line in log.read_text().splitlines()]
    assert {r["trace_id"] for r in written} == ids and len(written) == len(ids)
    assert not any(r["turnless"] for r in written)
    assert [c["name"] for c in written[0]["calls"]] == [TOOL]
    assert [r["calls"] for r in written] == [written[0]["calls"]] * len(ids)  # every turn with its call, alike


@pytest.mark.parametrize("pause_s", [0.001, 0.0], ids=["1ms-apart", "back-to-back"])
def test_sighup_during_shutdown_neither_ends_it_nor_loses_the_pending_verdicts(
    spawn: Spawn, pause_s: float
) -> None:
    proc, err, log, endpoint, metrics = spawn(RULES.read_text())
    ids = _send_turns(endpoint, TURNS)
    wait_for(lambda: _pending_turns(metrics) == TURNS, timeout=60)
    proc.send_signal(signal.SIGTERM)
    sent = _hang_up_until_exit(proc, pause_s, err)
    assert proc.returncode == 0, f"ended by SIGHUP during its shutdown (exit {proc.returncode}, {sent} sent)"
    assert "SIGHUP while stopping: ignored" in err.read_text()
    _assert_every_verdict_written(err, log, ids)


def test_sighup_during_a_shutdown_that_a_reload_outlives(
    spawn: Spawn,
) -> None:
    # A reload of a big rule file (300 more tools: most of a second) is loading in its thread when the shutdown
    # starts and still at its end, where SIGHUP passes from the loop's handler to being ignored.
    proc, err, log, endpoint, metrics = spawn(big_rules(300))
    ids = _send_turns(endpoint, TURNS)
    wait_for(lambda: _pending_turns(metrics) == TURNS, timeout=60)
    threads = len(os.listdir(f"/proc/{proc.pid}/task"))
    proc.send_signal(signal.SIGHUP)
    wait_for(lambda: len(os.listdir(f"/proc/{proc.pid}/task")) > threads, timeout=10)  # the load thread started
    proc.send_signal(signal.SIGTERM)
    sent = _hang_up_until_exit(proc, 0.0, err)
    assert proc.returncode == 0, f"ended by SIGHUP during its shutdown (exit {proc.returncode}, {sent} sent)"
    assert "rules reload" not in err.read_text().lower()  # the reload was not put in force, nor did it fail
    _assert_every_verdict_written(err, log, ids)


def _sighup_blocked_in(pid: int) -> dict[str, bool]:
    """Per thread of the process (by name and id), whether it blocks SIGHUP."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            out[f"{fields['Name'].strip()}/{tid}"] = bool(int(fields["SigBlk"], 16) & 1 << (signal.SIGHUP - 1))
    return out


def test_every_thread_but_the_main_one_is_born_with_sighup_blocked(spawn: Spawn) -> None:
    # At the end of the shutdown asyncio restores SIGHUP's default action for a moment, the loop's thread blocking
    # it: a thread that does not block it then takes the signal, and the process ends. The threads alive then: the
    # metrics renderer's (until the interpreter exits), a rules load that outlives the shutdown, gRPC's, the alerts'
    # (if their close timed out). Each is born with SIGHUP blocked; the main thread catches it.
    proc, err, log, endpoint, metrics = spawn(
        big_rules(300), "--grpc-port", "0", "--alert-webhook", "http://127.0.0.1:9/api/v2/alerts"
    )
    before = _sighup_blocked_in(proc.pid)
    _pending_turns(metrics)  # the metrics renderer's thread
    proc.send_signal(signal.SIGHUP)  # a rules load's thread
    wait_for(lambda: len(_sighup_blocked_in(proc.pid)) > len(before) + 1, timeout=10)
    # The main thread blocks SIGHUP for a moment itself while it starts a thread (the rules load's, just asked
    # for): a view taken then says nothing of it, so the view is taken again until it shows the main thread open.
    main = f"toolwatch/{proc.pid}"
    views: list[dict[str, bool]] = []

    def main_open() -> bool:
        views.append(_sighup_blocked_in(proc.pid))
        return views[-1].get(main) is False

    wait_for(main_open, timeout=10)
    threads = views[-1]
    assert threads.pop(main) is False
    assert len(threads) >= 4 and all(threads.values()), threads
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_a_second_ctrl_c_during_shutdown_ends_it_at_once_without_a_traceback(spawn: Spawn) -> None:
    """The second Ctrl-C of an impatient user ends the process at once, as a second SIGTERM does (the pending turns
    are dropped, as documented): it raised KeyboardInterrupt inside the HTTP server's shutdown and printed a
    traceback (or not, by where it found the loop). A client stalled in the middle of a body holds the shutdown
    meanwhile (aiohttp waits for it)."""
    import socket
    from urllib.parse import urlsplit

    proc, err, _, endpoint, _ = spawn(RULES.read_text())
    url = urlsplit(endpoint)
    with socket.create_connection((url.hostname, url.port), timeout=10) as stalled:
        stalled.sendall(f"POST {url.path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                        "Content-Length: 100000\r\n\r\n".encode() + b"\x0a" * 10)
        time.sleep(0.3)  # the request is being read
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)  # the shutdown waits for the stalled body
        assert proc.poll() is None, err.read_text()
        proc.send_signal(signal.SIGINT)
        started = time.monotonic()
        proc.wait(timeout=30)
    assert time.monotonic() - started < 2.0
    assert proc.returncode == -signal.SIGINT, (proc.returncode, err.read_text())  # its default action, as at start
    assert "Traceback" not in err.read_text(), err.read_text()


def test_a_second_ctrl_c_during_shutdown_is_ignored_when_the_service_was_started_ignoring_it(tmp_path: Path) -> None:
    """A service started with SIGINT ignored (a background job of a shell, `nohup`) stops on the first SIGINT (its
    handler) and keeps ignoring a second one while it judges what is pending: asyncio gave SIGINT Python's handler
    back, and the default action replaced that."""
    import socket
    from urllib.parse import urlsplit

    err = tmp_path / "stderr.txt"
    with err.open("w") as out:
        proc = subprocess.Popen(
            [TOOLWATCH, "serve", "--rules", str(RULES), "--port", "0", "--metrics-port", "0", "--no-watch"],
            stderr=out, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509
        )
    try:
        wait_for(lambda: "OTLP/HTTP on" in err.read_text() or proc.poll() is not None, timeout=120)
        endpoint = err.read_text().split("OTLP/HTTP on ")[1].split(",")[0].strip()
        url = urlsplit(endpoint)
        with socket.create_connection((url.hostname, url.port), timeout=10) as stalled:
            stalled.sendall(f"POST {url.path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                            "Content-Length: 100000\r\n\r\n".encode())
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            time.sleep(1.0)  # the shutdown waits for the stalled body
            proc.send_signal(signal.SIGINT)
            time.sleep(0.5)
            assert proc.poll() is None, err.read_text()  # not ended by the second one
        assert proc.wait(timeout=30) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
