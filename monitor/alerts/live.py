"""In-process alerting for the embedded monitor: the rule file's alerts over rolling windows of verdicts.

One object to wire into a service: feed it verdicts with `accept()` (never raises, never blocks for long),
`start()` its evaluation thread, read `table()` / `active()`, `close()` on shutdown. Firing alerts go to an
Alertmanager (`.../api/v2/alerts`) or a plain webhook when `notify_url` is set.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from monitor.alerts.evaluate import ActiveAlert, ActiveKey, AlertEvaluator
from monitor.alerts.notify import AlertNotifier
from monitor.alerts.spec import AlertSpec, parse_duration, specs_from_ruleset
from monitor.alerts.windows import TallyWindows, read_figure
from monitor.rules import DEFAULT_BURN_WINDOWS, BurnWindow
from monitor.verdict import TurnVerdict

logger = logging.getLogger(__name__)


def window_lengths(specs: Iterable[AlertSpec], burn_windows: Sequence[BurnWindow]) -> set[float]:
    """Every window length the alerts read: threshold windows, and both windows of each burn rate."""
    out: set[float] = set()
    for spec in specs:
        if spec.is_slo:
            out.update(parse_duration(w) for b in burn_windows for w in (b.long, b.short))
        else:
            out.add(spec.window_s)
    return out


def for_metrics(ruleset: object, metrics: Any, **kwargs: Any) -> LiveAlerts:
    """LiveAlerts publishing into a `monitor.metrics.ToolwatchMetrics` (its `toolwatch_alert_active` family),
    with the same agent label values as the verdict counters, and following it (`ToolwatchMetrics.follow`): it
    counts every verdict the metrics count (do not feed it yourself), keeps per-tool counts for the tools that are
    label values as the metrics' label sets change (made before or after they are set), and a window of a length the
    gauges have takes its snapshots when the gauge does, so over that window an alert reads the gauge's figure:

        live = for_metrics(ruleset, metrics, notify_url=url)  # url optional
        server = Server(settings, metrics=metrics); live.start()  # live.close() at exit
    """

    def publish(table: dict[ActiveKey, float]) -> None:
        metrics.ops.alert_active = table  # one attribute swap: a scrape sees the old or the new table

    # The label values are the configured agents and `__other__`, as on /metrics: the windows keep every one (a
    # bound of their own, 64 agents, folded the 65th configured agent's turns into `__other__` in process only).
    kwargs.setdefault("max_agents", None)
    kwargs.setdefault("clock", metrics.clock)
    live = LiveAlerts(
        specs_from_ruleset(ruleset),
        agent_label=lambda agent: str(metrics.labels.agent(agent)),
        tool_label=lambda tool: str(metrics.labels.tool(tool)),
        publish=publish,
        follow=metrics.window_lengths,
        **kwargs,
    )
    metrics.follow(live)
    live.on_close.append(lambda: metrics.unfollow(live))
    return live


def _alert_tools(specs: Iterable[AlertSpec], tool_label: Callable[[str], str] | None = None) -> frozenset[str]:
    """The tools whose per-tool figures the alerts read: the only per-tool counts the windows keep. With `tool_label`,
    only those that are label values of their own: another (an offered tool the rules do not declare) counts under
    `__other__` on /metrics, where an alert naming it has no series and never fires; in process it reads no figure
    either."""
    tools = (s.tool for s in specs if s.tool is not None)
    return frozenset(t for t in tools if tool_label is None or tool_label(t) == t)


def _agents_of(ruleset: object) -> frozenset[str]:
    return frozenset(getattr(ruleset, "agents", frozenset()))


class _RulesAgents:
    """The agent label of LiveAlerts.from_ruleset: an agent of the rules in force is its own label, any other is
    `__other__` (every agent is its own when the rules name none)."""

    def __init__(self, ruleset: object) -> None:
        self.agents = _agents_of(ruleset)

    def __call__(self, agent: str) -> str:
        agents = self.agents
        return agent if not agents or agent in agents else "__other__"


class LiveAlerts:
    """Rolling windows + evaluator + optional notifier, for `toolwatch serve` and the demo."""

    _rules_agents: _RulesAgents | None = None  # the agent label from_ruleset made, which update keeps current

    def __init__(
        self,
        specs: Sequence[AlertSpec],
        *,
        agent_label: Callable[[str], str] | None = None,
        tool_label: Callable[[str], str] | None = None,
        publish: Callable[[dict[ActiveKey, float]], None] | None = None,
        registry: CollectorRegistry | None = None,
        notify_url: str | None = None,
        notify_timeout_s: float = 5.0,
        interval_s: float = 5.0,
        resend_s: float = 60.0,
        burn_windows: Sequence[BurnWindow] = DEFAULT_BURN_WINDOWS,
        clock: Callable[[], float] = time.monotonic,
        max_agents: int | None = 64,
        follow: Iterable[float] = (),
    ) -> None:
        """`follow`: the window lengths whose snapshots are taken at the ticks that name them (`tick`), as
        `for_metrics` sets them: the gauges' lengths. `tool_label`: the tool label values of /metrics (see
        `_alert_tools`), read again at each `update` and `relabel`."""
        self.specs = tuple(specs)
        self.on_close: list[Callable[[], None]] = []  # what close() undoes (for_metrics: following the metrics)
        self.tool_label = tool_label
        lengths = window_lengths(self.specs, burn_windows) or {300.0}
        self.windows = TallyWindows(
            lengths,
            agent_label=agent_label,
            tools=_alert_tools(self.specs, tool_label),
            clock=clock,
            max_agents=max_agents,
            follow=follow,
        )
        notifier = AlertNotifier(notify_url, timeout_s=notify_timeout_s) if notify_url else None
        self.evaluator = AlertEvaluator(
            self.specs,
            self.windows,
            read_figure,
            publish=publish,
            registry=registry,
            notifier=notifier,
            burn_windows=burn_windows,
            resend_s=resend_s,
            interval_s=interval_s,
            clock=clock,
        )

    @classmethod
    def from_ruleset(cls, ruleset: object, **kwargs: Any) -> LiveAlerts:
        """From a loaded RuleSet; its agents are the only agent label values (others are `__other__`), those of the
        rules in force: `update` with reloaded rules labels by their agents."""
        labels = None
        if "agent_label" not in kwargs:
            labels = kwargs["agent_label"] = _RulesAgents(ruleset)
        live = cls(specs_from_ruleset(ruleset), **kwargs)
        live._rules_agents = labels
        return live

    def __repr__(self) -> str:
        return f"LiveAlerts({self.evaluator!r}, notifier={self.evaluator.notifier!r})"

    @property
    def notifier(self) -> AlertNotifier | None:
        return self.evaluator.notifier

    def accept(self, verdicts: Iterable[TurnVerdict]) -> None:
        """Count verdicts into the rolling windows, with alerts or without (a reload that removes them all keeps the
        windows, and one that brings them back reads them: the verdicts between must be there). Never raises:
        alerting must not break judging."""
        try:
            self.windows.accept(verdicts)
        except Exception:
            logger.exception("alert windows could not take a verdict batch")

    def tick(self, now: float, snapshots: Mapping[float, float]) -> None:
        """The windows' snapshots due at `now` (`snapshots`: the dates of those the followed windows take, by their
        lengths). Never raises."""
        try:
            self.windows.tick(now, snapshots)
        except Exception:
            logger.exception("alert windows could not take their snapshots")

    def relabel(self) -> None:
        """The tool label values changed (the metrics' `set_labels`, which `for_metrics` follows): the per-tool counts
        kept are those of the alert tools that are label values now. Never raises."""
        try:
            tools = _alert_tools(self.specs, self.tool_label)
            if tools != self.windows.tools:
                self.windows.tools = tools
        except Exception:
            logger.exception("alert windows could not take the new tool labels")

    def evaluate(self, now: float | None = None) -> list[ActiveAlert]:
        return self.evaluator.evaluate(now)

    def table(self) -> dict[ActiveKey, float]:
        return self.evaluator.table()

    def active(self) -> list[ActiveAlert]:
        return self.evaluator.active()

    def update(self, ruleset: object) -> None:
        """New alert definitions after a rules reload. The windows keep their history when they still fit."""
        if self._rules_agents is not None:
            self._rules_agents.agents = _agents_of(ruleset)
        specs = specs_from_ruleset(ruleset)
        needed = window_lengths(specs, self.evaluator.burn_windows)
        if not needed <= set(self.windows.windows):
            logger.info("alert windows changed to %s: in-process alert history starts again", sorted(needed))
            old = self.windows
            self.windows = TallyWindows(
                needed,
                agent_label=old.agent_label,
                clock=old.clock,
                max_agents=old.max_agents,
                steps=old.steps,
                follow=old.follow,
            )
        self.windows.tools = _alert_tools(specs, self.tool_label)
        self.evaluator.replace(specs, self.windows)
        self.specs = specs

    def start(self) -> None:
        self.evaluator.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop evaluating (and following the metrics, when `for_metrics` made it)."""
        while self.on_close:
            self.on_close.pop()()
        self.evaluator.close(timeout_s)
