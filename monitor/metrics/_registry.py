"""`ToolwatchMetrics`: every toolwatch metric as one prometheus_client Collector (`collect()` yields families)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from monitor.metrics import names as n
from monitor.metrics._batch import VerdictBatch
from monitor.metrics._initial import MAX_INITIAL_SERIES, Checked, initial_series
from monitor.metrics._labels import LabelPolicy
from monitor.metrics._operational import Operational
from monitor.metrics._verdicts import COUNTERS, Counts, VerdictCounters
from monitor.metrics._windows import (
    A_CORRECT,
    A_E2E,
    A_EXPECTED,
    A_JUDGED,
    A_MISSED,
    A_SELECTION,
    A_SPURIOUS,
    A_TURNS,
    T_CORRECT,
    T_EXPECTED,
    T_JUDGED,
    T_MISSED,
    T_SPURIOUS,
    RollingWindows,
    View,
    ratio,
    view_of,
)
from monitor.normalize import ATTRIBUTE_KEYS
from monitor.verdict import TurnVerdict

logger = logging.getLogger(__name__)

DEFAULT_WINDOWS = (300.0, 3600.0)
PENDING_KINDS = ("turn", "turnless")

_RATIOS = (
    (n.TOOL_CALL_ACCURACY_RATIO, "Tool call accuracy: correct / judged calls, over the window.", A_CORRECT, A_JUDGED),
    (n.SPURIOUS_CALL_RATIO, "Spurious-call rate: spurious / judged calls, over the window.", A_SPURIOUS, A_JUDGED),
    (n.MISSED_CALL_RATIO, "Missed-call rate: missed / expected calls, over the window.", A_MISSED, A_EXPECTED),
    (
        n.SELECTION_ACCURACY_RATIO,
        "Selection accuracy: selection_ok / judged turns, over the window (per agent only: a turn's result).",
        A_SELECTION,
        A_TURNS,
    ),
    (
        n.END_TO_END_ACCURACY_RATIO,
        "End-to-end accuracy: end_to_end / judged turns, over the window (per agent only: a turn's result).",
        A_E2E,
        A_TURNS,
    ),
)
_TOOL_RATIOS = (
    (
        n.TOOL_ACCURACY_RATIO,
        "Per-tool accuracy: correct / judged calls of the tool, over the window.",
        T_CORRECT,
        T_JUDGED,
    ),
    (
        n.TOOL_SPURIOUS_CALL_RATIO,
        "Per-tool spurious-call rate: spurious / judged calls of the tool, over the window.",
        T_SPURIOUS,
        T_JUDGED,
    ),
    (
        n.TOOL_MISSED_CALL_RATIO,
        "Per-tool missed-call rate: missed / expected calls of the tool, over the window.",
        T_MISSED,
        T_EXPECTED,
    ),
)


class WindowFollower(Protocol):
    """What keeps windows of its own over the verdicts the metrics count (the in-process alerts): it is given each
    batch `observe()` counts, each tick of the windows with the snapshots they took then (each one's date by the
    length of its window: see `monitor.metrics._windows`), and each change of the label sets (`set_labels`, after
    it: `labels` holds the new ones), all under the metrics' lock. None may raise."""

    def accept(self, verdicts: VerdictBatch) -> None: ...

    def tick(self, now: float, snapshots: Mapping[float, float]) -> None: ...

    def relabel(self) -> None: ...


class ToolwatchMetrics(Collector):
    """Verdict counters, rolling-window gauges and operational metrics.

    `observe()` is called by the worker with each batch of verdicts; `collect()` renders everything at
    scrape time. Thread-safe (one lock, taken once per batch and once per scrape): the service collects in a
    thread of its own. The operational counters, pending counts and ignored attributes, which the worker updates
    without the lock, are read as they are at that moment (each table copied at once).
    """

    def __init__(
        self,
        *,
        tools: Iterable[str] = (),
        agents: Iterable[str] = (),
        rules: Iterable[str] = (),
        windows: Sequence[float] = DEFAULT_WINDOWS,
        clock: Callable[[], float] = time.monotonic,
        max_initial_series: int = MAX_INITIAL_SERIES,
        agent_tools: Mapping[str, Iterable[str]] | None = None,
        rule_agents: Mapping[str, str] | None = None,
        schema_tools: Checked = None,
        argument_tools: Checked = None,
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.max_initial_series = max_initial_series
        self._warned: set[tuple[frozenset[str], frozenset[str], frozenset[str]]] = set()
        labels = LabelPolicy(tools=tools, agents=agents)
        self.counters = VerdictCounters(labels)
        self.counters.set_labels(
            labels, self._initial(labels, rules, agent_tools, rule_agents, schema_tools, argument_tools)
        )
        self.windows = RollingWindows(windows, clock())
        self._followers: list[WindowFollower] = []
        self.ops = Operational()
        # Read at scrape time, set by the service: pending turns by kind ("turn", "turnless"), and the span
        # attributes the normalizer had to ignore, by key.
        self.pending: Callable[[], Mapping[str, int]] | None = None
        self.pending_bytes: Callable[[], int] | None = None  # what the pending records weigh (estimated)
        self.queue: Callable[[], tuple[int, int]] | None = None  # records queued for assembly, and their weight
        self.ignored_attributes: Callable[[], Mapping[str, int]] | None = None
        self.attribute_keys = ATTRIBUTE_KEYS  # the `attribute` label values (the conventions' keys)

    @property
    def labels(self) -> LabelPolicy:
        return self.counters.labels

    def set_labels(
        self,
        *,
        tools: Iterable[str],
        agents: Iterable[str],
        rules: Iterable[str] = (),
        agent_tools: Mapping[str, Iterable[str]] | None = None,
        rule_agents: Mapping[str, str] | None = None,
        schema_tools: Checked = None,
        argument_tools: Checked = None,
    ) -> None:
        """New label sets (after a rules reload): the series of every label set they allow start at 0 (see
        `_initial`, which also says what `agent_tools`, `rule_agents`, `schema_tools` and `argument_tools` leave
        out); series already counted keep their labels and counts."""
        labels = LabelPolicy(tools=tools, agents=agents)
        initial = self._initial(labels, rules, agent_tools, rule_agents, schema_tools, argument_tools)
        with self._lock:
            self.counters.set_labels(labels, initial)
            for follower in self._followers:
                follower.relabel()

    def _initial(
        self,
        labels: LabelPolicy,
        rules: Iterable[str],
        agent_tools: Mapping[str, Iterable[str]] | None,
        rule_agents: Mapping[str, str] | None,
        schema_tools: Checked,
        argument_tools: Checked,
    ) -> list[tuple[str, tuple[str, ...]]]:
        """The series to create at 0; the warning about those left out is logged once per distinct label set (a
        reload that keeps them says nothing again)."""
        rules = frozenset(rules)
        series, warning = initial_series(
            labels,
            rules,
            budget=self.max_initial_series,
            agent_tools=agent_tools,
            rule_agents=rule_agents,
            schema_tools=schema_tools,
            argument_tools=argument_tools,
        )
        key = (labels.agents, labels.tools, rules)
        if warning is not None and key not in self._warned:
            self._warned.add(key)
            logger.warning("%s", warning)
        return series

    @property
    def clock(self) -> Callable[[], float]:
        """The clock of the rolling windows."""
        return self._clock

    @property
    def window_lengths(self) -> tuple[float, ...]:
        """The rolling windows' lengths in seconds, shortest first."""
        return tuple(w.seconds for w in self.windows.windows)

    def follow(self, follower: WindowFollower) -> None:
        """Give `follower` every verdict batch counted from now on, and every tick of the windows: a window of its
        own of a length the gauges have, with a snapshot exactly when theirs takes one, then counts the verdicts
        the gauge of that window counts (the verdicts and the snapshots are in step under the lock, whichever
        thread ticks: the worker, or a scrape)."""
        with self._lock:
            self._followers.append(follower)

    def unfollow(self, follower: WindowFollower) -> None:
        """Stop giving `follower` anything (no error when it was not following)."""
        with self._lock:
            self._followers = [f for f in self._followers if f is not follower]

    @property
    def followers(self) -> tuple[WindowFollower, ...]:
        with self._lock:
            return tuple(self._followers)

    def observe(self, verdicts: Sequence[TurnVerdict]) -> None:
        batch = VerdictBatch.of(verdicts)
        with self._lock:
            now = self._clock()
            self._tick(now)  # the snapshots due are of the counts before this batch (after a pause: of before it)
            self.counters.add(batch)
            if batch:
                self.windows.changes.counted(now)
            for follower in self._followers:
                follower.accept(batch)

    def _tick(self, now: float) -> None:
        """Under the lock."""
        snapshots = self.windows.tick(now, self.counters)
        for follower in self._followers:
            follower.tick(now, snapshots)

    def tick(self, now: float | None = None) -> None:
        with self._lock:
            self._tick(self._clock() if now is None else now)

    def registry(self) -> CollectorRegistry:
        """A fresh registry holding only these metrics (what /metrics serves)."""
        reg = CollectorRegistry(auto_describe=False)
        reg.register(self)
        return reg

    def window_counts(self, now: float | None = None) -> dict[str, View]:
        """The counts behind the window gauges, by window label (for the live view and tests)."""
        with self._lock:
            self._tick(self._clock() if now is None else now)
            current = view_of(self.counters)
            return {w.label: w.counts(current) for w in self.windows.windows}

    def collect(self) -> Iterator[Metric]:
        # Under the lock (the worker's observe() and tick() wait on it, on the event loop): only copies of what the
        # worker changes, and the window views. The families, sorted and built from the copies, come after: with
        # 20 agents x 50 tools building them took 60-77 ms, copying the tables 0.4 ms.
        with self._lock:
            tables = {name: dict(table) for name, table in self.counters.tables.items()}
            sequence_score = dict(self.counters.sequence_score)
            self._tick(self._clock())
            current = view_of(self.counters)
            per_window = [(w.label, w.counts(current)) for w in self.windows.windows]
        yield from self._verdict_families(tables, sequence_score)
        yield from self._window_families(per_window)
        yield from self._operational_families()

    def _verdict_families(self, tables: Mapping[str, Counts], sequence_score: Mapping[str, float]) -> Iterator[Metric]:
        for name, (doc, label_names) in COUNTERS.items():
            fam = CounterMetricFamily(name, doc, labels=label_names)
            if name == n.SEQUENCE_SCORE:
                for agent, total in sorted(sequence_score.items()):
                    fam.add_metric([agent], total)
            else:
                for key, value in sorted(tables[name].items()):
                    fam.add_metric(list(key), value)
            yield fam

    def _window_families(self, per_window: Sequence[tuple[str, View]]) -> Iterator[Metric]:
        for name, doc, num, den in _RATIOS:
            fam = GaugeMetricFamily(name, doc, labels=["agent", "window"])
            for label, view in per_window:
                for agent, vec in sorted(view.agents.items()):
                    r = ratio(vec[num], vec[den])
                    if r is not None:  # a zero denominator is absent, never 0 or 1
                        fam.add_metric([agent, label], r)
            yield fam
        for name, doc, num, den in _TOOL_RATIOS:
            fam = GaugeMetricFamily(name, doc, labels=["agent", "tool", "window"])
            for label, view in per_window:
                for (agent, tool), vec in sorted(view.tools.items()):
                    r = ratio(vec[num], vec[den])
                    if r is not None:
                        fam.add_metric([agent, tool, label], r)
            yield fam

    def _ignored_attributes(self) -> dict[str, int]:
        """The normalizer's counts by key, folded into the bounded label set: every known key (at 0 until
        counted), anything else `__other__`."""
        out = dict.fromkeys(sorted(self.attribute_keys), 0)
        out[n.OTHER] = 0
        counts = dict(self.ignored_attributes()) if self.ignored_attributes is not None else {}
        for key, count in counts.items():
            label = key if key in self.attribute_keys else n.OTHER
            out[label] += count
        return out

    def _operational_families(self) -> Iterator[Metric]:
        ops = self.ops

        def counter(name: str, doc: str, label: str, table: dict[str, int]) -> CounterMetricFamily:
            fam = CounterMetricFamily(name, doc, labels=[label])
            for k, v in sorted(table.items()):
                fam.add_metric([k], v)
            return fam

        yield counter(n.SPANS_RECEIVED, "Spans received, by transport.", "transport", ops.spans_received)
        yield counter(n.SPANS_REJECTED, "Spans that could not be used, by reason.", "reason", ops.spans_rejected)
        yield counter(n.SPANS_DROPPED, "Spans not judged (refused or dropped), by reason.", "reason", ops.spans_dropped)
        fam = CounterMetricFamily(
            n.REQUESTS, "Export requests, by transport and status code.", labels=["transport", "code"]
        )
        for (transport, code), v in sorted(ops.requests.items()):
            fam.add_metric([transport, code], v)
        yield fam
        yield counter(
            n.RECEIVER_FAULTS,
            "Export requests answered 503 (UNAVAILABLE over gRPC) for a fault of toolwatch's own, a bug whose "
            "traceback is logged (also in toolwatch_requests_total), by transport.",
            "transport",
            ops.receiver_faults,
        )
        yield counter(
            n.CONNECTIONS_REFUSED,
            "Connections answered 503 and closed because the listener had its most open connections, by listener.",
            "listener",
            ops.connections_refused,
        )
        yield counter(n.RULES_RELOADS, "Rule reloads, by result.", "result", ops.rules_reloads)
        fam_r = GaugeMetricFamily(
            n.RULES_LAST_RELOAD_SUCCESSFUL,
            "0 while the last rules reload failed (the rules before it are still in force), else 1.",
        )
        fam_r.add_metric([], 1 if ops.rules_last_reload_ok else 0)
        yield fam_r
        yield counter(
            n.SPAN_ATTRIBUTES_IGNORED,
            "Span attributes of the wrong type, ignored or converted, by key (other keys: __other__).",
            "attribute",
            self._ignored_attributes(),
        )
        pending = dict(self.pending()) if self.pending is not None else {}
        fam_p = GaugeMetricFamily(
            n.PENDING_TURNS,
            "Turns waiting to be judged: kind=turn, turn spans in their grace period; kind=turnless, traces holding "
            "calls but no turn span (each judged as one turnless turn after the timeout, unless its turn arrives). "
            "Calls of a trace that also holds a pending turn they are not part of count as turnless only once that "
            "turn is released. A framework run's root waiting for its parent (and the calls under it) counts as "
            "neither: it becomes its run's turn or a step; a trace where one waits counts as turnless only for calls "
            "under no such root.",
            labels=["kind"],
        )
        for kind in PENDING_KINDS:
            fam_p.add_metric([kind], pending.get(kind, 0))
        yield fam_p
        if self.pending_bytes is not None:
            yield GaugeMetricFamily(
                n.PENDING_BYTES,
                "What the records of the pending traces weigh, estimated (about 1.3 KB a record plus its text); "
                "beyond --max-pending-bytes the oldest traces are judged early (toolwatch_turns_evicted_total).",
                value=self.pending_bytes(),
            )
        if self.queue is not None:
            spans, weight = self.queue()
            yield GaugeMetricFamily(
                n.QUEUE_SPANS,
                "Tool-call and turn spans received and waiting for turn assembly; beyond --queue-spans requests are "
                "refused (503 + Retry-After, gRPC UNAVAILABLE) until it drains.",
                value=spans,
            )
            yield GaugeMetricFamily(
                n.QUEUE_BYTES,
                "What the spans waiting for turn assembly weigh, estimated as toolwatch_pending_bytes; beyond "
                "--queue-bytes requests are refused (503 + Retry-After, gRPC UNAVAILABLE) until it drains.",
                value=weight,
            )
        yield CounterMetricFamily(
            n.TURNS_EVICTED,
            "Pending turns judged early because the bound of pending traces or of their bytes was reached (each turn "
            "of an evicted trace, and its tool calls outside any turn as one turnless turn).",
            value=ops.turns_evicted,
        )
        yield CounterMetricFamily(
            n.VERDICT_LOG_LINES_LOST,
            "Lines of --verdict-log that could not be written (a full disk, an unwritable file): the verdicts are in "
            "the other metrics all the same.",
            value=ops.verdict_log_lines_lost,
        )
        yield ops.judge_duration.family(n.JUDGE_DURATION, "Time to judge one turn.")
        yield ops.verdict_lag.family(n.VERDICT_LAG, "Time from a turn's span end to its verdict in the metrics.")
        fam_g = GaugeMetricFamily(
            n.ALERT_ACTIVE,
            "1 while an alert of the rule file fires (in-process evaluation).",
            labels=["alertname", "agent", "severity"],
        )
        for key, active in sorted(ops.alert_active.items()):
            fam_g.add_metric(list(key), active)
        yield fam_g
