"""Rolling windows of judge Tallies per agent, fed with verdicts: what in-process alerts are evaluated over.

Each window keeps a ring of about `steps` snapshots of the per-agent cumulative Tallies (one every
window/steps seconds); the window's Tally is the cumulative one minus the oldest snapshot still inside it
(`Tally.subtract`), so a window covers between `window` and `window + window/steps` of the past, and adding
a verdict costs one `Tally.add`. Memory is bounded by windows x steps x agents (agents are bounded too), and
each Tally keeps per-tool counts only for the tools the alerts name and no confusion matrix: with a catalog
taken from the offered tool definitions, tool names come from the clients and would otherwise grow the Tallies
(and every snapshot of them) without limit.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from monitor.alerts.figures import FIGURES
from monitor.judge import Tally
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
        self.tools = frozenset(tools)  # the only per-tool counts kept
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

    def accept(self, verdicts: Iterable[TurnVerdict]) -> None:
        with self._lock:
            touched: set[str] = set()
            for v in verdicts:
                label = self._label(v.agent)
                total = self._totals.get(label)
                if total is None:
                    total = self._totals[label] = Tally()
                total.add(v)
                touched.add(label)
            keep = self.tools
            for label in touched:
                total = self._totals[label]
                total.confusion.clear()
                for tool in [t for t in total.per_tool if t not in keep]:
                    del total.per_tool[tool]

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
