"""/metrics carries what every Prometheus exporter built on the client library does: the process (CPU, memory, file
descriptors, start time), the Python runtime (python_info, python_gc_*), and toolwatch's version
(toolwatch_build_info), beside toolwatch's own metrics; the verdict metrics themselves (`ToolwatchMetrics.registry()`)
stay only toolwatch's."""

from __future__ import annotations

import os
import platform
import time
from importlib import metadata

import psutil
import pytest
from prometheus_client import generate_latest

from tests.monitor.service.conftest import ServeFactory, scrape, value


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process metrics are read from /proc")
def test_the_process_metrics_are_this_process_own(serve: ServeFactory) -> None:
    _, server = serve()
    me = psutil.Process()
    samples = scrape(server)
    rss = value(samples, "process_resident_memory_bytes")
    assert rss is not None and 0.5 < rss / me.memory_info().rss < 2, (rss, me.memory_info().rss)
    start = value(samples, "process_start_time_seconds")
    assert start is not None and abs(start - me.create_time()) < 2
    cpu = value(samples, "process_cpu_seconds_total")
    times = me.cpu_times()
    assert cpu is not None and 0 < cpu <= times.user + times.system + 0.05
    fds = value(samples, "process_open_fds")
    assert fds is not None and fds >= 3
    # it moves: CPU burnt between two scrapes shows
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:
        pass
    later = value(scrape(server), "process_cpu_seconds_total")
    assert later is not None and later >= cpu + 0.2


def test_python_and_toolwatch_versions_are_published(serve: ServeFactory) -> None:
    _, server = serve()
    samples = scrape(server)
    info = [labels for (name, labels) in samples if name == "python_info"]
    assert len(info) == 1 and dict(info[0])["version"] == platform.python_version(), info
    assert value(samples, "toolwatch_build_info", version=metadata.version("toolwatch")) == 1
    assert any(name == "python_gc_collections_total" for name, _ in samples)


def test_the_verdict_registry_holds_only_toolwatch_metrics(serve: ServeFactory) -> None:
    _, server = serve()
    text = generate_latest(server.metrics.registry()).decode()
    names = {ln.split(" ")[2] for ln in text.splitlines() if ln.startswith("# TYPE ")}
    assert names and all(n.startswith("toolwatch_") for n in names), names
    assert "toolwatch_build_info" not in names  # a property of the process, not of the verdicts
