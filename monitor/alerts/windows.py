"""Rolling windows of judge Tallies per agent, fed with verdicts: what in-process alerts are evaluated over.

Each window keeps a ring of about `steps` snapshots of the per-agent cumulative Tallies (one every
window/steps seconds); the window's Tally is the cumulative one minus the oldest snapshot still inside it
(`Tally.subtract`), so a window covers between `window` and `window + window/steps` of the past. Verdicts are
added by signature (`monitor.metrics.VerdictBatch`): what one verdict of a signature adds to a Tally (`Tally.add`)
is kept and added once per batch, times the verdicts that have it. Memory is bounded by windows x steps x agents
(agents are bounded too), and each Tally keeps per-tool counts only for the tools the alerts name and no confusion
matrix: with a catalog taken from the offered tool definitions, tool names come from the clients and would
otherwise grow the Tallies (and every snapshot of them) without limit.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from typing import Any, cast

from monitor.alerts.figures import FIGURES
from monitor.judge import Tally, ToolCounts
from monitor.metrics import VerdictBatch
from monitor.metrics._batch import MAX_CACHED, SIG_AGENT, SIG_SCORED, Sig, cacheable
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
    "tool_usage_rate": "turns",
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


class _Window:
    __slots__ = ("seconds", "step", "ring")

    def __init__(self, seconds: float, start: float, steps: int) -> None:
        self.seconds = seconds
        self.step = seconds / steps
        self.ring: deque[tuple[float, dict[str, Tally]]] = deque([(start, {})])

    def tick(self, now: float, totals: dict[str, Tally]) -> None:
        ring = self.ring
        if now - ring[-1][0] >= self.step:
            ring.append((now, {agent: t.copy() for agent, t in totals.items()}))
        while len(ring) > 1 and ring[1][0] <= now - self.seconds:
            ring.popleft()


class _Unit:
    """The counts one verdict adds to a Tally (but its sequence score), to add `count` times at once."""

    __slots__ = ("ints", "per_tool", "counters")

    def __init__(self, tally: Tally) -> None:
        values = [(f.name, getattr(tally, f.name)) for f in fields(tally)]
        self.ints = [(name, x) for name, x in values if type(x) is int and x]  # the one float is not here
        self.counters = [(name, list(x.items())) for name, x in values if isinstance(x, Counter) and x]
        self.per_tool = [  # every tool the verdict names, even with no count: Tally.add creates their entries
            (tool, [(f.name, getattr(tc, f.name)) for f in fields(tc) if getattr(tc, f.name)])
            for tool, tc in tally.per_tool.items()
        ]

    def add_to(self, total: Tally, count: int) -> None:
        for name, x in self.ints:
            setattr(total, name, getattr(total, name) + x * count)
        if self.per_tool:
            per_tool = total.per_tool
            for tool, ints in self.per_tool:
                tc = per_tool.get(tool)
                if tc is None:
                    tc = per_tool[tool] = ToolCounts()
                for name, x in ints:
                    setattr(tc, name, getattr(tc, name) + x * count)
        for name, items in self.counters:
            counter = getattr(total, name)
            for key, x in items:
                counter[key] += x * count


class TallyWindows:
    """A verdict sink keeping per-agent rolling Tallies over the given window lengths. Thread-safe."""

    def __init__(
        self,
        windows_s: Iterable[float],
        *,
        agent_label: Callable[[str], str] | None = None,
        max_agents: int = 64,
        steps: int = STEPS,
        tools: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        seconds = sorted({float(w) for w in windows_s})
        if not seconds or seconds[0] <= 0:
            raise ValueError("rolling windows need at least one positive length")
        self.clock = clock
        self.agent_label = agent_label
        self.max_agents = max_agents
        self._tools = frozenset(tools)  # the only per-tool counts kept
        self._units: dict[Sig, _Unit] = {}  # what one verdict of a signature adds to a Tally
        self._totals: dict[str, Tally] = {}
        self._windows = {s: _Window(s, clock(), steps) for s in seconds}
        self._lock = threading.Lock()

    @property
    def windows(self) -> Sequence[float]:
        return tuple(self._windows)

    def _label(self, agent: str) -> str:
        label = self.agent_label(agent) if self.agent_label is not None else agent
        if label not in self._totals and len(self._totals) >= self.max_agents:
            return OTHER
        return label

    @property
    def tools(self) -> frozenset[str]:
        return self._tools

    @tools.setter
    def tools(self, tools: Iterable[str]) -> None:
        with self._lock:
            self._tools = frozenset(tools)  # the only per-tool counts kept
            self._units = {}

    def accept(self, verdicts: Iterable[TurnVerdict]) -> None:
        """Count verdicts: each distinct signature of the batch once (see `monitor.metrics.VerdictBatch`)."""
        batch = VerdictBatch.of(verdicts)
        with self._lock:
            units = self._units
            totals = self._totals
            touched: set[str] = set()
            scored = False
            for sig, count in batch.groups().items():
                unit = units.get(sig)
                if unit is None:
                    unit = self._unit(batch.first(sig))
                    if cacheable(sig):
                        if len(units) >= MAX_CACHED:
                            units.clear()
                        units[sig] = unit
                label = self._label(cast(str, sig[SIG_AGENT]))
                total = totals.get(label)
                if total is None:
                    total = totals[label] = Tally()
                unit.add_to(total, count)
                touched.add(label)
                if sig[SIG_SCORED]:
                    scored = True
            if scored:  # a float: summed in verdict order, as Tally.add one verdict at a time would
                for v in batch:
                    s = v.sequence_score
                    if s is not None and v.judged:
                        totals[self._label(v.agent)].sequence_score_sum += s
            keep = self._tools
            for label in touched:  # per-tool counts of tools the alerts no longer name (after an update)
                total = totals[label]
                total.confusion.clear()
                for tool in [t for t in total.per_tool if t not in keep]:
                    del total.per_tool[tool]

    def _unit(self, v: TurnVerdict) -> _Unit:
        tally = Tally()
        tally.add(v)
        tally.confusion.clear()
        for tool in [t for t in tally.per_tool if t not in self._tools]:
            del tally.per_tool[tool]
        return _Unit(tally)

    def tick(self, now: float | None = None) -> None:
        with self._lock:
            self._tick(self.clock() if now is None else now)

    def _tick(self, now: float) -> None:
        for w in self._windows.values():
            w.tick(now, self._totals)

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
