"""A real `toolwatch serve` on ephemeral 127.0.0.1 ports, in a background thread, per test."""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.assembly import _assembler
from monitor.serve import Server, ServerThread, Settings

RULES = Path(__file__).resolve().parents[3] / "rules" / "incident-triage.yaml"


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(server: Server) -> Samples:
    """The /metrics page over HTTP as {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(server.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def wait_for(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def stop_process(proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    """Stop a `toolwatch` process as an operator would: SIGTERM (it judges what is pending), then, past `timeout`,
    SIGKILL; it has exited on return."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def ready_line(stderr: IO[str], timeout: float = 30.0) -> str:
    """The ready line a `toolwatch serve` process writes on its stderr (read line by line until it comes)."""
    line = ""
    deadline = time.monotonic() + timeout
    while "OTLP/HTTP on" not in line and time.monotonic() < deadline:
        line = stderr.readline()
    assert "OTLP/HTTP on" in line, line
    return line


ServeFactory = Callable[..., tuple[ServerThread, Server]]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServeFactory]:
    threads: list[ServerThread] = []

    def factory(**overrides: Any) -> tuple[ServerThread, Server]:
        base: dict[str, Any] = {
            "rules": (str(RULES),),
            "port": 0,
            "metrics_port": 0,
            "grace_s": 0.2,
            "turnless_timeout_s": 1.0,
            "watch_rules": False,
            "poll_interval_s": 0.02,
        }
        base.update(overrides)
        st = ServerThread(Settings(**base))
        server = st.start()
        threads.append(st)
        return st, server

    yield factory
    for st in threads:
        st.stop()


@pytest.fixture(params=["c", "python"])
def asm_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The C assembler as loaded, or the Python reference alone (every C entry point off)."""
    if request.param == "c":
        if _assembler._ADD_C is None:
            pytest.skip("the C assembler is not loaded")
    else:
        for name in ("_ADD_C", "_POLL_C", "_COUNT_C", "_RELEASE_ALL_C"):
            monkeypatch.setattr(_assembler, name, None)
    return str(request.param)
