"""Evaluate the rule file's alerts in process, over rolling windows of judge tallies (no Prometheus needed).

The conditions are exactly those of the rendered Prometheus rules: a threshold on the figure over `window`,
guarded by `min_samples` in its denominator; for objectives, the multi-window burn rates. `for:` works as in
Prometheus: a condition must hold at every evaluation for that long before the alert fires (pending before
that), and one false evaluation resets it. Firing alerts show as `toolwatch_alert_active{alertname,agent,severity}`
= 1 (0 once resolved) and go to the notifier: firing ones again every `resend_s`, resolved ones once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Gauge

from monitor.alerts.figures import FIGURES
from monitor.alerts.notify import AlertMessage, AlertNotifier
from monitor.alerts.render import num
from monitor.alerts.spec import AlertSpec, parse_duration
from monitor.rules import DEFAULT_BURN_WINDOWS, BurnWindow

logger = logging.getLogger(__name__)

ALERT_ACTIVE = "toolwatch_alert_active"
MAX_INSTANCES = 10_000  # alert instances (spec x agent x burn window) kept; more agents are ignored


class WindowSource(Protocol):
    """Rolling windows of tallies: the agents seen, and one agent's tally over the last `window_s`."""

    def agents(self) -> Iterable[str]: ...

    def tally(self, agent: str, window_s: float) -> Any | None: ...


ActiveKey = tuple[str, str, str]  # (alertname, agent, severity)
FigureReader = Callable[[Any, str, "str | None"], "tuple[float | None, float]"]


@dataclass(slots=True, frozen=True)
class Condition:
    """One evaluated alert instance: the alert, the agent, the burn window (objectives only)."""

    spec: AlertSpec
    agent: str
    burn: BurnWindow | None

    @property
    def severity(self) -> str:
        return self.burn.severity if self.burn is not None else self.spec.severity

    def labels(self) -> dict[str, str]:
        labels = {
            "alertname": self.spec.name,
            "agent": self.agent,
            "severity": self.severity,
            "figure": self.spec.figure,
        }
        if self.spec.tool is not None:
            labels["tool"] = self.spec.tool
        if self.burn is not None and self.spec.objective is not None:
            labels.update(
                objective=num(self.spec.objective),
                long_window=self.burn.long,
                short_window=self.burn.short,
                burn_rate=num(self.burn.factor),
            )
        return labels


@dataclass(slots=True)
class _State:
    pending_since: float | None = None  # monotonic
    firing_since: float | None = None  # wall clock, for startsAt
    value: float | None = None
    last_sent: float = float("-inf")


@dataclass(slots=True, frozen=True)
class ActiveAlert:
    labels: Mapping[str, str]
    value: float
    since: float  # unix seconds


class AlertEvaluator:
    """Evaluate alert specs over a WindowSource; call `evaluate()` periodically (or `start()` a thread)."""

    def __init__(
        self,
        specs: Sequence[AlertSpec],
        source: WindowSource,
        read: FigureReader,
        *,
        publish: Callable[[dict[ActiveKey, float]], None] | None = None,
        registry: CollectorRegistry | None = None,
        notifier: AlertNotifier | None = None,
        burn_windows: Sequence[BurnWindow] = DEFAULT_BURN_WINDOWS,
        resend_s: float = 60.0,
        interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`publish` receives a fresh {(alertname, agent, severity): 1 or 0} table after every evaluation
        (e.g. to swap it into the service's metrics); with `registry`, a `toolwatch_alert_active` gauge is
        registered there as well."""
        self.specs = tuple(specs)
        self.source = source
        self.read = read
        self.burn_windows = tuple(burn_windows)
        self.notifier = notifier
        self.resend_s = resend_s
        self.interval_s = interval_s
        self.clock = clock
        self.publish = publish
        self.gauge: Gauge | None = None
        if registry is not None:
            self.gauge = Gauge(
                ALERT_ACTIVE,
                "1 while an in-process toolwatch alert fires, 0 once resolved",
                ["alertname", "agent", "severity"],
                registry=registry,
            )
        self.evaluations = 0
        self._table: dict[ActiveKey, float] = {}
        self._states: dict[Condition, _State] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        firing = sum(1 for s in self._states.values() if s.firing_since is not None)
        return f"AlertEvaluator(specs={len(self.specs)} evaluations={self.evaluations} firing={firing})"

    def replace(self, specs: Sequence[AlertSpec], source: WindowSource) -> None:
        """New definitions (rules reload): firing alerts that no longer exist resolve at the next evaluation."""
        with self._lock:
            self.specs = tuple(specs)
            self.source = source

    def conditions(self) -> list[Condition]:
        seen = sorted(set(self.source.agents()))
        out: list[Condition] = []
        for spec in self.specs:
            agents = [spec.agent] if spec.agent is not None else seen
            for agent in agents:
                bursts: Sequence[BurnWindow | None] = self.burn_windows if spec.is_slo else (None,)
                out.extend(Condition(spec, agent, b) for b in bursts)
        return out[:MAX_INSTANCES]

    def check(self, cond: Condition) -> float | None:
        """The alert value when the condition holds now (the figure, or the long-window error ratio), else None."""
        spec, figure = cond.spec, FIGURES[cond.spec.figure]
        if cond.burn is None:
            value, den = self._read(cond.agent, spec, spec.window_s)
            if value is None or den < spec.min_samples:
                return None
            hit = value < spec.threshold if spec.below is not None else value > spec.threshold
            return value if hit else None
        assert figure.good is not None, "objectives are refused for figures with no better direction"
        limit = cond.burn.factor * spec.error_budget
        errors: list[float] = []
        for i, window in enumerate((cond.burn.long, cond.burn.short)):
            value, den = self._read(cond.agent, spec, parse_duration(window))
            if value is None or (i == 0 and den < spec.min_samples):
                return None
            error = 1.0 - value if figure.good else value
            if not error > limit:
                return None
            errors.append(error)
        return errors[0]

    def _read(self, agent: str, spec: AlertSpec, window_s: float) -> tuple[float | None, float]:
        tally = self.source.tally(agent, window_s)
        if tally is None:
            return None, 0.0
        return self.read(tally, spec.figure, spec.tool)

    def evaluate(self, now: float | None = None, wall: float | None = None) -> list[ActiveAlert]:
        """One evaluation round; returns the alerts firing after it. Never raises on a bad tally (logs)."""
        now = self.clock() if now is None else now
        wall = time.time() if wall is None else wall
        outgoing: list[AlertMessage] = []
        with self._lock:
            self.evaluations += 1
            current = self.conditions()
            for cond in current:
                try:
                    value = self.check(cond)
                except Exception:  # a broken tally must not stop the other alerts
                    logger.exception("evaluating alert %s for agent %s failed", cond.spec.name, cond.agent)
                    value = None
                msg = self._step(cond, value, now, wall)
                if msg is not None:
                    outgoing.append(msg)
            for gone in set(self._states) - set(current):  # definitions removed by a reload resolve
                msg = self._step(gone, None, now, wall)
                del self._states[gone]
                if msg is not None:
                    outgoing.append(msg)
            active = self._active()
            table = dict(self._table)
        if self.publish is not None:
            self.publish(table)
        if outgoing and self.notifier is not None:
            self.notifier.send(outgoing, wall)
        return active

    def _step(self, cond: Condition, value: float | None, now: float, wall: float) -> AlertMessage | None:
        state = self._states.setdefault(cond, _State())
        key = (cond.spec.name, cond.agent, cond.severity)
        if value is None:
            if state.firing_since is None:
                state.pending_since = None
                return None
            msg = self._message(cond, state, ends_at=wall)
            self._states[cond] = _State()
            self._set(key, 0.0)
            return msg
        state.value = value
        if state.pending_since is None:
            state.pending_since = now
        if state.firing_since is None and now - state.pending_since >= cond.spec.for_s:
            state.firing_since = wall
            self._set(key, 1.0)
            logger.warning(
                "alert %s firing for agent %s: %s = %.4f",
                cond.spec.name,
                cond.agent,
                "error ratio" if cond.burn is not None else cond.spec.figure,
                value,
            )
        if state.firing_since is not None and now - state.last_sent >= self.resend_s:
            state.last_sent = now
            return self._message(cond, state, ends_at=None)
        return None

    def _set(self, key: ActiveKey, value: float) -> None:
        self._table[key] = value
        if self.gauge is not None:
            self.gauge.labels(*key).set(value)

    def table(self) -> dict[ActiveKey, float]:
        """{(alertname, agent, severity): 1 firing, 0 resolved} for every alert instance that ever fired."""
        with self._lock:
            return dict(self._table)

    def _message(self, cond: Condition, state: _State, ends_at: float | None) -> AlertMessage:
        figure = FIGURES[cond.spec.figure]
        value = state.value if state.value is not None else float("nan")
        shown = f"{value * 100:.4g}%"
        what = "error ratio" if cond.burn is not None else figure.title
        summary = cond.spec.summary or f"{figure.title} alert {cond.spec.name} for agent {cond.agent}"
        annotations = {
            "summary": summary,
            "value": shown,
            "description": f"{what} of agent {cond.agent} is {shown} (in-process toolwatch alert).",
        }
        assert state.firing_since is not None
        return AlertMessage(cond.labels(), annotations, state.firing_since, ends_at, "toolwatch://alerts")

    def _active(self) -> list[ActiveAlert]:
        return [
            ActiveAlert(c.labels(), s.value if s.value is not None else float("nan"), s.firing_since)
            for c, s in self._states.items()
            if s.firing_since is not None
        ]

    def active(self) -> list[ActiveAlert]:
        with self._lock:
            return self._active()

    def states(self) -> list[tuple[Condition, str, float | None]]:
        """Every evaluated alert instance with its state ("firing", "pending", "inactive") and last value."""
        with self._lock:
            out: list[tuple[Condition, str, float | None]] = []
            for cond, st in self._states.items():
                if st.firing_since is not None:
                    out.append((cond, "firing", st.value))
                elif st.pending_since is not None:
                    out.append((cond, "pending", st.value))
                else:
                    out.append((cond, "inactive", None))
            return out

    def start(self) -> None:
        """Evaluate every `interval_s` in a daemon thread until `close()`."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="toolwatch-alert-evaluator", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.evaluate()
            except Exception:
                logger.exception("alert evaluation failed")

    def close(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self.notifier is not None:
            self.notifier.close(timeout_s)
