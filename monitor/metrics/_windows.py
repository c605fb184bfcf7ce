"""Rolling-window ratios derived from the cumulative counters.

Each window keeps a ring of about 60 snapshots of the few counts its ratios need (taken at a tick once
window/60 seconds have passed since the last one; the service ticks every second, at each scrape and before
counting each verdict batch); the window's counts are the current counts minus the newest snapshot dated at or
before the window's start, so they cover between one window and one snapshot interval more. A snapshot of counts
that changed since the one before is dated when they last changed (they held from then on), else when it is taken:
after a pause with no tick (the process stopped by SIGSTOP and continued, on the monotonic clock, which goes on),
the verdicts counted before it leave the windows a window after they were counted, not a window after the pause.
Updating a verdict therefore costs nothing extra; memory is bounded by the label sets.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from monitor.metrics import names as n
from monitor.metrics._verdicts import VerdictCounters
from monitor.verdict import Outcome

STEPS_PER_WINDOW = 60

# Per-agent vector: correct, judged calls, spurious, missed, expected, judged turns, selection ok, e2e ok.
A_CORRECT, A_JUDGED, A_SPURIOUS, A_MISSED, A_EXPECTED, A_TURNS, A_SELECTION, A_E2E = range(8)
_A_LEN = 8
# Per (agent, tool) vector: the same call counts, restricted to the tool (selection and end-to-end are per turn).
T_CORRECT, T_JUDGED, T_SPURIOUS, T_MISSED, T_EXPECTED = range(5)
_T_LEN = 5

_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")
MAX_DURATION_S = 3650 * 86400  # ten years: longer than any window, timeout or grace means here
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


class DurationTooLong(ValueError):
    """A duration past MAX_DURATION_S."""


def parse_duration(text: str, *, allow_zero: bool = False) -> float:
    """'5m' -> 300.0; '500ms', '90s', '1h', '2d', or a bare number of seconds. Positive, or 0 with `allow_zero`; at
    most MAX_DURATION_S."""
    m = _DURATION.match(text)
    if not m or float(m.group(1)) < 0 or (float(m.group(1)) == 0 and not allow_zero):
        what = "0 or a positive number" if allow_zero else "a positive number"
        raise ValueError(
            f"invalid duration {text!r}: use {what} of seconds, or with a unit: ms, s, m, h or d (e.g. 500ms, 5m)"
        )
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if not seconds <= MAX_DURATION_S:  # inf too
        raise DurationTooLong(f"duration {text!r} is too long: at most {format_duration(MAX_DURATION_S)}")
    return seconds


def format_duration(seconds: float) -> str:
    """`seconds` in the largest unit that holds it whole (5m, 1h, 90s, 250ms), else in seconds with every digit: a
    label that `parse_duration` reads back as the same value (`%g` wrote 1000000s and 1000001s alike, `1e+06s`)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    ms = seconds * 1000
    if ms == int(ms) and int(ms) * 0.001 == seconds:  # as parse_duration reads it: 2675ms is 2.6750000000000003
        return f"{int(ms)}ms"
    return f"{seconds!r}s"  # the shortest text of exactly this float (no exponent from 1e-4 to 1e16)


@dataclass(slots=True)
class View:
    agents: dict[str, list[int]] = field(default_factory=dict)
    tools: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (agent, tool) -> T_* vector

    def minus(self, old: View) -> View:
        out = View()
        zero_a = [0] * _A_LEN
        for a, vec in self.agents.items():
            o = old.agents.get(a, zero_a)
            out.agents[a] = [x - y for x, y in zip(vec, o, strict=True)]
        zero_t = [0] * _T_LEN
        for k, vec in self.tools.items():
            o = old.tools.get(k, zero_t)
            out.tools[k] = [x - y for x, y in zip(vec, o, strict=True)]
        return out


def _counted(table: dict[tuple[str, ...], int]) -> Iterator[tuple[tuple[str, ...], int]]:
    """The entries that counted something: the series waiting at 0 for their first event take no room in views."""
    return ((key, count) for key, count in table.items() if count)


def view_of(c: VerdictCounters) -> View:
    t = c.tables
    v = View()

    def vec(agent: str) -> list[int]:
        x = v.agents.get(agent)
        if x is None:
            x = v.agents[agent] = [0] * _A_LEN
        return x

    def tvec(agent: str, tool: str) -> list[int]:
        x = v.tools.get((agent, tool))
        if x is None:
            x = v.tools[agent, tool] = [0] * _T_LEN
        return x

    for (agent, tool, outcome), count in _counted(t[n.TOOL_CALLS]):
        if outcome == Outcome.CORRECT.value:
            vec(agent)[A_CORRECT] += count
            tvec(agent, tool)[T_CORRECT] += count
        elif outcome == Outcome.SPURIOUS.value:
            vec(agent)[A_SPURIOUS] += count
            tvec(agent, tool)[T_SPURIOUS] += count
    for (agent, tool), count in _counted(t[n.JUDGED_CALLS]):
        vec(agent)[A_JUDGED] += count
        tvec(agent, tool)[T_JUDGED] += count
    for (agent, tool), count in _counted(t[n.MISSED_CALLS]):
        vec(agent)[A_MISSED] += count
        tvec(agent, tool)[T_MISSED] += count
    for (agent, tool), count in _counted(t[n.EXPECTED_CALLS]):
        vec(agent)[A_EXPECTED] += count
        tvec(agent, tool)[T_EXPECTED] += count
    _turn_counts(c, vec)
    return v


def _turn_counts(c: VerdictCounters, vec: Callable[[str], list[int]]) -> None:
    t = c.tables
    for (agent, judged), count in _counted(t[n.TURNS]):
        if judged == "true":
            vec(agent)[A_TURNS] += count
    for (agent, check, result), count in _counted(t[n.TURN_CHECKS]):
        if result == "pass" and check == "selection":
            vec(agent)[A_SELECTION] += count
        elif result == "pass" and check == "end_to_end":
            vec(agent)[A_E2E] += count


S = TypeVar("S")


class Changes:
    """When the counts last changed (`counted`), and how many times they have: what dates the snapshots."""

    __slots__ = ("at", "version")

    def __init__(self, start: float) -> None:
        self.at = start
        self.version = 0

    def counted(self, now: float) -> None:
        """The counts changed at `now` (after the tick at `now`: the snapshots due then are of the counts before)."""
        self.at = now
        self.version += 1


class SnapshotRing(Generic[S]):
    """A window's ring of dated snapshots (see the module's docstring); also the in-process alerts' windows'
    (`monitor.alerts.windows`), dated alike."""

    __slots__ = ("seconds", "step", "ring", "taken", "version")

    def __init__(self, seconds: float, start: float, steps: int, empty: S) -> None:
        self.seconds = seconds
        self.step = seconds / steps
        self.ring: deque[tuple[float, S]] = deque([(start, empty)])  # (date, snapshot)
        self.taken = start  # when the last snapshot was taken (its date may be earlier)
        self.version = 0  # the counts' version (Changes.version) in the last snapshot

    def due(self, now: float, changes: Changes) -> float | None:
        """The date of the snapshot due at `now` once a step has passed since the last was taken (else None): when
        the counts last changed if they changed since the last, else `now`."""
        if now - self.taken >= self.step:
            return max(self.ring[-1][0], min(changes.at, now)) if changes.version != self.version else now
        return None

    def take(self, at: float, snapshot: S, now: float, version: int) -> None:
        """A snapshot dated `at`, taken at `now` of the counts of `version`."""
        self.ring.append((at, snapshot))
        self.taken, self.version = now, version

    def drop(self, now: float) -> None:
        """Drop the snapshots that left the window (all but the newest dated at or before its start)."""
        ring = self.ring
        start = now - self.seconds
        while len(ring) > 1 and ring[1][0] <= start:
            ring.popleft()


class Window(SnapshotRing[View]):
    __slots__ = ("label",)

    def __init__(self, seconds: float, start: float) -> None:
        super().__init__(seconds, start, STEPS_PER_WINDOW, View())
        self.label = format_duration(seconds)

    def tick(
        self, now: float, current: View | None, counters: VerdictCounters, changes: Changes
    ) -> tuple[View | None, float | None]:
        """Take a snapshot when one is due (`due`); drop the snapshots that left the window. Returns the view used,
        and the date of the snapshot taken (None when none was)."""
        at = self.due(now, changes)
        if at is not None:
            current = current or view_of(counters)
            self.take(at, current, now, changes.version)
        self.drop(now)
        return current, at

    def counts(self, current: View) -> View:
        return current.minus(self.ring[0][1])


def ratio(num: int, den: int) -> float | None:
    return num / den if den > 0 else None


class RollingWindows:
    def __init__(self, seconds: Sequence[float], start: float) -> None:
        if not seconds:
            raise ValueError("at least one rolling window is needed")
        self.windows = [Window(s, start) for s in sorted(set(seconds))]
        self.changes = Changes(start)  # when the counts last changed (the metrics tell it: `Changes.counted`)

    def tick(self, now: float, counters: VerdictCounters) -> dict[float, float]:
        """Every window's tick at `now`; returns the date of each snapshot taken, by the length of its window."""
        current: View | None = None
        snapshots: dict[float, float] = {}
        for w in self.windows:
            current, at = w.tick(now, current, counters, self.changes)
            if at is not None:
                snapshots[w.seconds] = at
        return snapshots
