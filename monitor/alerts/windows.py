"""Rolling windows of judge Tallies per agent, fed with verdicts: what in-process alerts are evaluated over.

Each window keeps a ring of snapshots of the per-agent cumulative Tallies; the window's Tally is the cumulative one
minus the newest snapshot dated at or before the window's start (`Tally.subtract`), so a window covers between
`window` and `window` plus one snapshot interval of the past. A followed window (`follow`: in `serve`, one of a
length the gauges have) takes its snapshots when the gauge of that length takes one (`ToolwatchMetrics.follow`:
at the same instants, over the same verdicts, with the same dates), so an alert over it reads the gauge's counts;
another takes one at a tick (the gauges' ticks, each read, and each batch of verdicts) once window/`steps` seconds
have passed since its last, dated as the gauges date theirs (`monitor.metrics._windows`): when the Tallies last
changed if they changed since the snapshot before, else when it is taken, so that the verdicts counted before a
pause with no tick (SIGSTOP) leave the window a window after they were counted. Verdicts are added by signature
(`monitor.metrics.VerdictBatch`): what one verdict of a signature adds to a Tally (`Tally.add`) is kept and added
once per batch, times the verdicts that have it. Memory is bounded by windows x steps x agents
(a followed window keeps as many snapshots as its gauge, about 60; agents are bounded too), and each Tally keeps
per-tool counts only for the tools the alerts name and no confusion matrix: with a catalog taken from the offered
tool definitions, tool names come from the clients and would otherwise grow the Tallies (and every snapshot of them)
without limit.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields, replace
from itertools import repeat
from operator import add, mul
from typing import Any, cast

from monitor.alerts.figures import FIGURES
from monitor.judge import Tally, ToolCounts
from monitor.metrics import VerdictBatch
from monitor.metrics._batch import MAX_CACHED, SIG_AGENT, SIG_SCORED, Sig, cacheable
from monitor.metrics._windows import Changes, SnapshotRing
from monitor.verdict import TurnVerdict

OTHER = "__other__"
STEPS = 30

_DENOMINATOR = {
    "tool_call_accuracy": "judged_calls",
    "spurious_rate": "judged_calls",
    "wrong_tool_rate": "judged_calls",
    "hallucinated_rate": "all_calls",
    "missed_rate": "expected_calls",
    "selection_accuracy": "judged_turns",
    "argument_correctness": "args_checked_calls",
    "schema_adherence": "schema_checked_calls",
    "end_to_end_accuracy": "judged_turns",
    "sequence_accuracy": "sequence_turns",
    "response_compliance": "response_checked_turns",
    "tool_usage_rate": "agent_turns",  # Tally.agent_turns: exact in process (PromQL reads toolwatch_agent_turns_total)
    "over_calling_rate": "judged_turns",
}
assert set(_DENOMINATOR) == set(FIGURES)


def read_figure(tally: Any, figure: str, tool: str | None) -> tuple[float | None, float]:
    """(value, denominator count) of a METRICS.md figure in a Tally, for the agent or for one tool."""
    if tool is None:
        return tally.ratios()[figure], float(getattr(tally, _DENOMINATOR[figure]))
    counts = tally.per_tool.get(tool)
    if counts is None:
        return None, 0.0
    return counts.ratios()[figure], float(getattr(counts, _DENOMINATOR[figure]))


class _Window(SnapshotRing[dict[str, Tally]]):
    __slots__ = ("followed",)

    def __init__(self, seconds: float, start: float, steps: int, followed: bool) -> None:
        super().__init__(seconds, start, steps, {})
        self.followed = followed  # snapshots only when the gauge of this length takes one

    def tick(self, now: float, totals: dict[str, Tally], snapshots: Mapping[float, float] | None,
             changes: Changes) -> None:
        """A snapshot when due, dated as the gauges date theirs (see the module's docstring)."""
        at: float | None = None
        if not self.followed:
            at = self.due(now, changes)
        elif snapshots is not None and now >= (last := self.ring[-1][0]):
            at = snapshots.get(self.seconds)
            at = None if at is None else max(at, last)  # the gauge's date (before this window began: its start)
        if at is not None:
            self.take(at, {agent: t.copy() for agent, t in totals.items()}, now, changes.version)
        self.drop(now)


_TALLY_INTS = tuple(f.name for f in fields(Tally) if type(getattr(Tally(), f.name)) is int)  # all but the float
_TOOL_INTS = tuple(f.name for f in fields(ToolCounts) if type(getattr(ToolCounts(), f.name)) is int)


class _Unit:
    """What one verdict adds to a Tally (but its sequence score): vectors over _TALLY_INTS and _TOOL_INTS."""

    __slots__ = ("ints", "per_tool", "counters")

    def __init__(self, tally: Tally) -> None:
        self.ints = tuple(getattr(tally, name) for name in _TALLY_INTS)
        # Every tool the verdict names, even with no count: Tally.add creates their entries.
        self.per_tool = [(tool, tuple(getattr(tc, name) for name in _TOOL_INTS)) for tool, tc in tally.per_tool.items()]
        values = [(f.name, getattr(tally, f.name)) for f in fields(tally)]
        self.counters = [(name, list(x.items())) for name, x in values if isinstance(x, Counter) and x]


def _plus(acc: list[int] | None, vec: tuple[int, ...], count: int) -> list[int]:
    scaled = vec if count == 1 else map(mul, vec, repeat(count))
    return list(scaled) if acc is None else list(map(add, acc, scaled))


def _add_ints(target: Any, names: tuple[str, ...], vec: list[int]) -> None:
    for name, x in zip(names, vec, strict=True):
        if x:
            setattr(target, name, getattr(target, name) + x)


def _add(tally: Tally, v: TurnVerdict, keep: frozenset[str]) -> None:
    """Tally.add, counting per tool also the calls of a kept tool outside the agent's catalog: Tally.add counts per
    tool only the tools of the agent's catalog, while /metrics counts every call under its tool's label, so a scoped
    agent's (hallucinated) call of another agent's tool is a judged call of that tool there. The windows count tools
    as /metrics does, so that a per-tool figure, and an alert on it, is the same in process and in Prometheus."""
    if any(not c.in_catalog and c.name in keep for c in v.calls):
        v = replace(v, calls=tuple(replace(c, in_catalog=True) if not c.in_catalog and c.name in keep else c
                                   for c in v.calls))
    tally.add(v)


def _keep_tools(tally: Tally, keep: frozenset[str]) -> None:
    """Drop the per-tool counts of the tools not in `keep`."""
    for tool in [t for t in tally.per_tool if t not in keep]:
        del tally.per_tool[tool]


class TallyWindows:
    """A verdict sink keeping per-agent rolling Tallies over the given window lengths. Thread-safe."""

    def __init__(
        self,
        windows_s: Iterable[float],
        *,
        agent_label: Callable[[str], str] | None = None,
        max_agents: int | None = 64,
        steps: int = STEPS,
        tools: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        max_units: int = MAX_CACHED,
        follow: Iterable[float] = (),
    ) -> None:
        """`follow`: the lengths of the windows whose snapshots are taken only when a tick names them (see `tick`):
        those of the gauges of `monitor.metrics.ToolwatchMetrics`, which names the windows that took one."""
        seconds = sorted({float(w) for w in windows_s})
        if not seconds or seconds[0] <= 0:
            raise ValueError("rolling windows need at least one positive length")
        self.clock = clock
        self.agent_label = agent_label
        self.max_agents = max_agents
        self.max_units = max_units
        self._tools = frozenset(tools)  # the only per-tool counts kept
        self._units: dict[Sig, _Unit] = {}  # what one verdict of a signature adds to a Tally
        self._totals: dict[str, Tally] = {}
        self.steps = steps
        self.follow = frozenset(float(w) for w in follow)
        start = clock()
        self._windows = {s: _Window(s, start, steps, s in self.follow) for s in seconds}
        self._changes = Changes(start)  # when the totals last changed
        self._lock = threading.Lock()

    @property
    def windows(self) -> Sequence[float]:
        return tuple(self._windows)

    def _label(self, agent: str) -> str:
        label = self.agent_label(agent) if self.agent_label is not None else agent
        cap = self.max_agents  # None: the agent label's values are bounded already (the configured agents)
        if cap is not None and label not in self._totals and len(self._totals) >= cap:
            return OTHER
        return label

    @property
    def tools(self) -> frozenset[str]:
        return self._tools

    @tools.setter
    def tools(self, tools: Iterable[str]) -> None:
        """New tools to keep counts of (a rules reload). The totals and every snapshot drop the others at once: a
        snapshot still holding a tool the totals dropped would be subtracted from its new counts if it were named
        again within the window."""
        with self._lock:
            keep = self._tools = frozenset(tools)  # the only per-tool counts kept
            self._units = {}
            snapshots = (snapshot for w in self._windows.values() for _, snapshot in w.ring)
            for tallies in (self._totals, *snapshots):
                for tally in tallies.values():
                    _keep_tools(tally, keep)

    def accept(self, verdicts: Iterable[TurnVerdict]) -> None:
        """Count verdicts: each distinct signature of the batch once (see `monitor.metrics.VerdictBatch`)."""
        batch = VerdictBatch.of(verdicts)
        with self._lock:
            now = self.clock()
            if not self.follow:  # followed, the metrics tick every window just before they give a batch
                self._tick(now)  # the snapshots due are of the totals before it (after a pause: of before it)
            if batch:
                self._changes.counted(now)
            totals = self._totals
            labels, sums, tool_sums, scored = self._sums(batch)
            for label, vec in sums.items():
                _add_ints(totals[label], _TALLY_INTS, vec)
            for (label, tool), vec in tool_sums.items():
                per_tool = totals[label].per_tool
                tc = per_tool.get(tool)
                if tc is None:
                    tc = per_tool[tool] = ToolCounts()
                _add_ints(tc, _TOOL_INTS, vec)
            if scored:  # a float: summed in verdict order, as Tally.add one verdict at a time would
                for v in batch:
                    s = v.sequence_score
                    if s is not None and v.judged:
                        totals[labels[v.agent]].sequence_score_sum += s
            keep = self._tools
            for label in sums:  # what verdicts added as they are (Tally.add) counted beyond the units
                total = totals[label]
                total.confusion.clear()
                _keep_tools(total, keep)

    def _sums(
        self, batch: VerdictBatch
    ) -> tuple[dict[str, str], dict[str, list[int]], dict[tuple[str, str], list[int]], bool]:
        """The batch's counts by label and by (label, tool), its labels by agent, and whether any verdict has a
        sequence score. Creates the Tallies of new labels, in the order the verdicts name them."""
        totals = self._totals
        labels: dict[str, str] = {}
        sums: dict[str, list[int]] = {}
        tool_sums: dict[tuple[str, str], list[int]] = {}
        scored = False
        for sig, count in batch.groups().items():
            agent = cast(str, sig[SIG_AGENT])
            label = labels.get(agent)
            if label is None:
                label = labels[agent] = self._label(agent)
                if label not in totals:
                    totals[label] = Tally()
            unit = self._unit_of(batch, sig, count)
            if unit is None:  # one verdict, no sequence score: added as it is
                _add(totals[label], batch.example(sig), self._tools)
                sums.setdefault(label, [0] * len(_TALLY_INTS))
                continue
            sums[label] = _plus(sums.get(label), unit.ints, count)
            for tool, vec in unit.per_tool:
                tool_sums[label, tool] = _plus(tool_sums.get((label, tool)), vec, count)
            for name, items in unit.counters:
                counter = getattr(totals[label], name)
                for key, x in items:
                    counter[key] += x * count
            if sig[SIG_SCORED]:
                scored = True
        return labels, sums, tool_sums, scored

    def _unit_of(self, batch: VerdictBatch, sig: Sig, count: int) -> _Unit | None:
        """The signature's unit; None for a verdict best added as it is (see VerdictCounters.add)."""
        units = self._units
        unit = units.get(sig)
        if unit is None:
            keep = (len(units) < self.max_units or count > 1) and cacheable(sig)
            if not keep and count == 1 and not sig[SIG_SCORED]:
                return None
            unit = self._unit(batch.example(sig))
            if keep:
                if len(units) >= self.max_units:
                    units.clear()
                units[sig] = unit
        return unit

    def _unit(self, v: TurnVerdict) -> _Unit:
        tally = Tally()
        _add(tally, v, self._tools)
        tally.confusion.clear()
        _keep_tools(tally, self._tools)
        return _Unit(tally)

    def tick(self, now: float | None = None, snapshots: Mapping[float, float] | None = None) -> None:
        """Take the snapshots due at `now` and drop those that left their window. A followed window takes one only
        when `snapshots` names its length, with the date it gives; another, when a `steps`th of it has passed since
        its last."""
        with self._lock:
            self._tick(self.clock() if now is None else now, snapshots)

    def _tick(self, now: float, snapshots: Mapping[float, float] | None = None) -> None:
        for w in self._windows.values():
            w.tick(now, self._totals, snapshots, self._changes)

    def agents(self) -> list[str]:
        with self._lock:
            return sorted(self._totals)

    def tally(self, agent: str, window_s: float, now: float | None = None) -> Tally | None:
        """The agent's Tally over the last `window_s` (one of the configured lengths); None if never seen."""
        with self._lock:
            window = self._windows.get(float(window_s))
            if window is None:
                raise KeyError(f"no rolling window of {window_s:g}s (configured: {sorted(self._windows)})")
            self._tick(self.clock() if now is None else now)
            total = self._totals.get(agent)
            if total is None:
                return None
            out = total.copy()
            old = window.ring[0][1].get(agent)
            if old is not None:
                out.subtract(old)
            return out
