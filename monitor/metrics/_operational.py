"""Operational counters of the service: ingest, rejection, drops, requests, reloads, latencies."""

from __future__ import annotations

from collections.abc import Iterable

from monitor.metrics._histogram import Histogram

JUDGE_BUCKETS = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25)
# Fine just past the default --grace (2 s: a turn's verdict) and --turnless-timeout (30 s: calls judged alone), where
# verdicts land; a bucket starting at a default delay would hold every verdict made just after it.
LAG_BUCKETS = (
    0.1,
    0.25,
    0.5,
    1.0,
    1.5,
    2.0,
    2.1,
    2.2,
    2.3,
    2.4,
    2.5,
    2.75,
    3.0,
    3.5,
    4.0,
    5.0,
    7.5,
    10.0,
    15.0,
    30.0,
    30.5,
    31.0,
    32.5,
    35.0,
    45.0,
    60.0,
    120.0,
)


# The HTTP listeners, the label values of toolwatch_connections_refused_total (all present from the start).
LISTENER_RECEIVER = "otlp_http"
LISTENER_METRICS = "metrics"
LISTENERS = (LISTENER_RECEIVER, LISTENER_METRICS)


class Operational:
    """Plain counters; the service updates them per request or per batch, never per span."""

    def __init__(self) -> None:
        self.spans_received: dict[str, int] = {}
        self.spans_rejected: dict[str, int] = {}
        self.spans_dropped: dict[str, int] = {}
        self.requests: dict[tuple[str, str], int] = {}
        self.receiver_faults: dict[str, int] = {}  # by transport: requests a fault of ours answered 503 / UNAVAILABLE
        self.connections_refused: dict[str, int] = dict.fromkeys(LISTENERS, 0)
        self.rules_reloads: dict[str, int] = {"success": 0, "failure": 0}
        self.rules_last_reload_ok = True  # the rules in force are the files' (at start, or the last reload took)
        self.alert_active: dict[tuple[str, str, str], float] = {}
        self.turns_evicted = 0
        self.verdict_log_lines_lost = 0
        self.judge_duration = Histogram(JUDGE_BUCKETS)
        self.verdict_lag = Histogram(LAG_BUCKETS)

    @staticmethod
    def _inc(table: dict[str, int], key: str, n: int) -> None:
        table[key] = table.get(key, 0) + n

    def received(self, transport: str, n: int) -> None:
        self._inc(self.spans_received, transport, n)

    def rejected(self, reason: str, n: int = 1) -> None:
        if n:
            self._inc(self.spans_rejected, reason, n)

    def dropped(self, reason: str, n: int = 1) -> None:
        if n:
            self._inc(self.spans_dropped, reason, n)

    def start_transport(self, transport: str, codes: Iterable[int]) -> None:
        """The series of a transport that serves, at 0 until counted (rate() does not see a series' first value as
        growth): its spans received, its faults, and its requests answered each of `codes` (a bounded few: those
        alerts and dashboards read, success and back-pressure)."""
        self.spans_received.setdefault(transport, 0)
        self.receiver_faults.setdefault(transport, 0)
        for code in codes:
            self.requests.setdefault((transport, str(code)), 0)

    def request(self, transport: str, code: int) -> None:
        k = (transport, str(code))
        self.requests[k] = self.requests.get(k, 0) + 1

    def receiver_fault(self, transport: str) -> int:
        """A request answered 503 (UNAVAILABLE over gRPC) for a fault of ours: counted in `request` too, with the
        answer's code; here apart from the 503s of back-pressure, since it is a bug to report, not load to add.
        Returns the faults of the process so far (which of them the log shows: _faults.power_of_ten)."""
        self._inc(self.receiver_faults, transport, 1)
        return sum(self.receiver_faults.values())

    def connection_refused(self, listener: str) -> None:
        self._inc(self.connections_refused, listener, 1)

    def verdict_log_lost(self, lines: int) -> None:
        """Lines of the verdict log that could not be written (a full disk, ...): the verdicts are counted all the
        same."""
        self.verdict_log_lines_lost += lines

    def reload(self, ok: bool) -> None:
        self._inc(self.rules_reloads, "success" if ok else "failure", 1)
        self.rules_last_reload_ok = ok
