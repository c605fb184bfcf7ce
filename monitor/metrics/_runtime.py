"""The page /metrics serves: toolwatch's metrics, and what every exporter built on the Prometheus client library
publishes beside its own: the process (`process_*`: CPU seconds, resident memory, open file descriptors, start
time; read from /proc, so on Linux only), the Python runtime (`python_info`, `python_gc_*`) and toolwatch's version
(`toolwatch_build_info`)."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from monitor.metrics import names
from monitor.metrics._registry import ToolwatchMetrics


def version() -> str:
    """The installed toolwatch's version ("unknown" when run from sources that were not installed)."""
    try:
        return metadata.version("toolwatch")
    except metadata.PackageNotFoundError:
        return "unknown"


class BuildInfo(Collector):
    """toolwatch_build_info{version} 1: which release a replica runs (joined on in PromQL, shown on dashboards)."""

    def __init__(self) -> None:
        self.version = version()

    def collect(self) -> Iterator[Metric]:
        fam = GaugeMetricFamily(
            names.BUILD_INFO, "The toolwatch release this process runs: always 1.", labels=["version"]
        )
        fam.add_metric([self.version], 1)
        yield fam


def served_registry(metrics: ToolwatchMetrics) -> CollectorRegistry:
    """A registry of `metrics` and the process, runtime and build metrics: what /metrics serves. The client library's
    own collectors read the process they run in when scraped; they keep no state of their own."""
    reg = metrics.registry()
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR, BuildInfo()):
        reg.register(collector)
    return reg
