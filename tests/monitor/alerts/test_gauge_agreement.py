"""The in-process alerts of `serve` read, over a window the gauges also have, the figures of that gauge.

The alerts' windows took their snapshots when the alerts were evaluated (every 5 s, 30 a window) and the gauges'
at the worker's ticks (every second, 60 a window): at the same instant a 5m alert and the `window="5m"` gauge
subtracted snapshots of different times, so they counted different verdicts (in about 4 evaluations in 10), and an
alert fired on a figure, or a `min_samples` count, that /metrics never showed.
"""

from __future__ import annotations

import dataclasses
import random
import time
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.alerts.figures import FIGURES
from monitor.alerts.live import LiveAlerts, for_metrics
from monitor.alerts.windows import read_figure
from monitor.judge import Tally
from monitor.metrics import ToolwatchMetrics, View
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.serve import Server, Settings
from tests.deploy.binaries import ROOT

AGENT = "incident-triage"
RULES = ROOT / "rules" / "incident-triage.yaml"
AUTH, BILL = "pull_auth_telemetry", "pull_billing_telemetry"
WINDOWS = {"5m": 300.0, "1h": 3600.0}
# The gauges' figures (per agent, and per tool for a tool the shipped alerts name) as read_figure names them.
AGENT_FIGURES = {  # figure -> (numerator, denominator) of the gauge's per-agent vector
    "tool_call_accuracy": (0, 1),
    "spurious_rate": (2, 1),
    "missed_rate": (3, 4),
    "selection_accuracy": (6, 5),
    "end_to_end_accuracy": (7, 5),
}


class Clock:
    def __init__(self) -> None:
        self.now = time.monotonic()  # a fake clock, from where the real one is (the server's parts read either)

    def __call__(self) -> float:
        return self.now


def _turn(tool: str | None) -> Turn:
    calls = () if tool is None else (ToolCall(name=tool, arguments='{"log_excerpt": "login failures"}'),)
    return Turn(input_text="[AUTH] login failures", calls=calls, agent=AGENT, output_text="Result: checked")


def _gauge(view: View, num: int, den: int) -> tuple[float | None, float]:
    vec = view.agents.get(AGENT)
    if vec is None or not vec[den]:
        return None, float(vec[den]) if vec is not None else 0.0
    return vec[num] / vec[den], float(vec[den])


def _alert(tally: Tally | None, figure: str) -> tuple[float | None, float]:
    return read_figure(tally, figure, None) if tally is not None else (None, 0.0)


def test_alert_windows_count_the_verdicts_of_the_gauge_of_their_length() -> None:
    clock = Clock()
    metrics = ToolwatchMetrics(windows=tuple(WINDOWS.values()), clock=clock)
    server = Server(Settings(rules=(str(RULES),), watch_rules=False), metrics=metrics)
    live = server.alerts
    assert live is not None and {300.0, 3600.0} <= set(live.windows.windows)
    rng = random.Random(7)
    start = clock.now
    differ: list[tuple[int, str, str, tuple[float | None, float], tuple[float | None, float]]] = []
    evaluations = 0
    for second in range(1, 1500):
        clock.now = start + second + rng.random() * 0.2  # the worker's tick: about once a second
        tools = [rng.choice([AUTH, AUTH, AUTH, BILL, None]) for _ in range(rng.randrange(4))]
        if tools:
            server.pipeline.judge([_turn(t) for t in tools], time.time_ns())  # as the worker judges a batch
        metrics.tick()
        if second % 5:
            continue
        evaluations += 1  # the alerts' evaluation, every 5 s: each window as the evaluator reads it, and the gauges
        gauges = metrics.window_counts(now=clock.now)
        for label, seconds in WINDOWS.items():
            tally = live.windows.tally(AGENT, seconds, now=clock.now)
            for figure, (num, den) in AGENT_FIGURES.items():
                got, want = _alert(tally, figure), _gauge(gauges[label], num, den)
                if got != want:
                    differ.append((second, label, figure, got, want))
    assert evaluations == 299
    assert differ == [], f"{len(differ)} figures differ, the first: {differ[:3]}"


OPEN = """
agent: open
catalog: {from_definitions: true, tools: [{name: search}]}
expect:
  - when: {prefix: q}
    call: [{tool: search}]
alerts:
  - {name: LookupAccuracyLow, figure: tool_call_accuracy, agent: open, tool: lookup, below: 0.5, for: 0s,
     min_samples: 1}
  - {name: SearchAccuracyLow, figure: tool_call_accuracy, agent: open, tool: search, below: 0.5, for: 0s,
     min_samples: 1}
"""


def _served(rules: Path, text: str) -> tuple[Clock, ToolwatchMetrics, Server, LiveAlerts]:
    """A server of the rule file `rules` (written with `text`), its metrics on a controlled clock, and its alerts."""
    rules.write_text(text)
    clock = Clock()
    metrics = ToolwatchMetrics(clock=clock)
    server = Server(Settings(rules=(str(rules),), watch_rules=False), metrics=metrics)
    live = server.alerts
    assert live is not None
    return clock, metrics, server, live


def test_an_alert_on_a_tool_metrics_count_as_other_reads_no_figure(tmp_path: Path) -> None:
    """With `from_definitions`, an offered tool the rules do not declare is `__other__` on /metrics (declared tools
    only are label values): the gauges and Prometheus' per-tool rules have no series of it, so an alert naming it
    never fires there. In process it read the tool's own calls and fired; it now reads no figure either."""
    clock, metrics, server, live = _served(tmp_path / "open.yaml", OPEN)
    offered = ({"type": "function", "name": "lookup"}, {"type": "function", "name": "search"})
    turn = Turn(input_text="q where", agent="open", tool_definitions=offered, calls=(ToolCall(name="lookup"),))
    server.pipeline.judge([turn] * 3, time.time_ns())  # lookup instead of search: a wrong-tool call, search missed
    clock.now += 1
    metrics.tick()
    gauge = metrics.window_counts()["5m"]
    assert set(gauge.tools) == {("open", "__other__"), ("open", "search")}  # lookup's calls are `__other__`'s
    tally = live.windows.tally("open", 300.0, now=clock.now)
    assert tally is not None
    assert read_figure(tally, "tool_call_accuracy", "lookup") == (None, 0.0)  # as the gauge: no series
    assert read_figure(tally, "tool_call_accuracy", "search") == (None, 0.0)  # no search call: absent in both
    live.evaluate(clock.now)
    assert [a.labels["alertname"] for a in live.active()] == []


def test_alerts_removed_and_restored_by_reloads_count_the_verdicts_between() -> None:
    """A reload that removes every alert keeps the windows (their lengths still fit); one that brings them back reads
    them again. The verdicts judged between were not counted, so the restored alerts read the window's verdicts
    before the gap and after it, and none of it, while the gauge counted all of them."""
    clock = Clock()
    metrics = ToolwatchMetrics(windows=(300.0,), clock=clock)
    server = Server(Settings(rules=(str(RULES),), watch_rules=False), metrics=metrics)
    live = server.alerts
    assert live is not None
    ruleset = server.rules.current.ruleset
    no_alerts = dataclasses.replace(ruleset, alerts=())
    for second, tool, reload in ((1, AUTH, None), (2, BILL, no_alerts), (3, BILL, ruleset), (4, AUTH, None)):
        if reload is not None:
            live.update(reload)
        clock.now += 1
        server.pipeline.judge([_turn(tool)] * 2, time.time_ns())
        metrics.tick()
    gauge = _gauge(metrics.window_counts()["5m"], *AGENT_FIGURES["tool_call_accuracy"])
    assert gauge == (0.5, 8.0)
    assert _alert(live.windows.tally(AGENT, 300.0, now=clock.now), "tool_call_accuracy") == gauge


def test_a_per_tool_alert_reads_its_tool_when_the_metrics_get_their_labels_after_the_alerts() -> None:
    """`for_metrics`'s own example makes the alerts before the Server that gives the metrics their label sets (the
    catalog's tools). The alert tools were filtered by the tool labels of that moment, none, once: the per-tool
    windows kept no count, and AuthTelemetryAccuracyLow never fired while /metrics showed pull_auth_telemetry's
    calls all spurious. The alerts now follow the metrics' label changes."""
    clock = Clock()
    metrics = ToolwatchMetrics(clock=clock)
    live = for_metrics(load_rules([RULES]), metrics)  # before the Server, as the docstring shows
    server = Server(Settings(rules=(str(RULES),), watch_rules=False, alerts=False), metrics=metrics)
    assert AUTH in live.windows.tools
    calls = tuple(ToolCall(name=tool, arguments='{"log_excerpt": "x"}') for tool in (BILL, AUTH))
    bill = Turn(input_text="[BILL] invoice failed", calls=calls, agent=AGENT, output_text="Result: x")
    for _ in range(120):  # 20 minutes: every auth call spurious
        clock.now += 10
        server.pipeline.judge([bill] * 3, time.time_ns())
        metrics.tick()
        live.evaluate(clock.now)
    text = generate_latest(metrics.registry()).decode()
    assert f'toolwatch_tool_calls_total{{agent="{AGENT}",outcome="spurious",tool="{AUTH}"}} 360.0' in text
    assert "AuthTelemetryAccuracyLow" in [a.labels["alertname"] for a in live.active()]


def test_closed_alerts_stop_following_the_metrics() -> None:
    """A closed LiveAlerts went on counting every verdict batch, and each for_metrics added a follower for good."""
    metrics = ToolwatchMetrics(clock=Clock())
    live = for_metrics(load_rules([RULES]), metrics)
    other = for_metrics(load_rules([RULES]), metrics)
    assert list(metrics.followers) == [live, other]
    live.close()
    assert list(metrics.followers) == [other]
    other.close()
    other.close()  # twice: nothing more to undo
    assert not metrics.followers


def _turns_in(view: View) -> int:
    vec = view.agents.get(AGENT)
    return vec[5] if vec is not None else 0  # judged turns


def test_verdicts_of_before_a_pause_longer_than_a_window_leave_it_at_once() -> None:
    """A process stopped (SIGSTOP) and continued: the monotonic clock the windows run on went on. The verdicts
    counted after the last snapshot before the pause counted, in the gauges and the alert windows alike, for a whole
    window after it ended, though judged more than a window before (the first snapshot after the pause was dated
    when it was taken, and the one before the pause was subtracted until then). The counts held unchanged from their
    last change to the end of the pause: the snapshot of them is dated back to that change."""
    for judge_first in (False, True):  # a scrape's tick first, or the worker judging turns whose grace ended
        clock = Clock()
        metrics = ToolwatchMetrics(windows=(300.0, 3600.0), clock=clock)
        server = Server(Settings(rules=(str(RULES),), watch_rules=False), metrics=metrics)
        live = server.alerts
        assert live is not None
        start = clock.now
        for second in range(1, 101):  # a turn a second, the worker's tick after it
            clock.now = start + second
            server.pipeline.judge([_turn(AUTH)], time.time_ns())
            metrics.tick()
        clock.now = start + 100.5  # after the last snapshot: three turns, then the process is stopped
        server.pipeline.judge([_turn(BILL)] * 3, time.time_ns())
        clock.now += 7200  # two hours later it continues
        if judge_first:
            server.pipeline.judge([_turn(AUTH)], time.time_ns())
        metrics.tick()
        gauges = metrics.window_counts()
        after = 1 if judge_first else 0
        assert (_turns_in(gauges["5m"]), _turns_in(gauges["1h"])) == (after, after), judge_first
        for seconds in (300.0, 600.0, 900.0, 1800.0, 3600.0):  # followed (the gauges' lengths) or not
            tally = live.windows.tally(AGENT, seconds, now=clock.now)
            assert tally is not None and tally.judged_turns == after, (judge_first, seconds)
        six_hours = live.windows.tally(AGENT, 21600.0, now=clock.now)
        assert six_hours is not None and six_hours.judged_turns == 103 + after  # a window longer than the pause
        clock.now += 1  # the windows go on as usual
        server.pipeline.judge([_turn(AUTH)] * 2, time.time_ns())
        metrics.tick()
        assert _turns_in(metrics.window_counts()["5m"]) == after + 2
        tally = live.windows.tally(AGENT, 300.0, now=clock.now)
        assert tally is not None and tally.judged_turns == after + 2


USAGE = """
catalog: {tools: [{name: search}]}
expect:
  - when: {prefix: q}
    call: [{tool: search}]
alerts:
  - {name: UsageHigh, figure: tool_usage_rate, above: 0.6, for: 0s, min_samples: 2}
"""


def _counted(text: str, name: str, agent: str) -> float:
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == name and s.labels.get("agent") == agent)


def test_the_tool_usage_rate_alert_reads_the_agent_turns_as_the_counters_do(tmp_path: Path) -> None:
    """METRICS.md: tool usage rate = turns with at least one call / all turns, a turn being one agent invocation.
    Calls whose turn never came (turnless groups, judged alone: `__other__`, as an agent without a name) are none:
    they count in neither term, in process as on /metrics. Counted as turns with calls, three of them beside two
    agent turns (one with a call) made the rate 4 / 5, and UsageHigh (above 0.6) fired on calls of no turn."""
    clock, metrics, server, live = _served(tmp_path / "usage.yaml", USAGE)
    search = (ToolCall(name="search", arguments="{}"),)
    turns = [Turn(input_text="q one", calls=search), Turn(input_text="q two")]
    turnless = [Turn(input_text="", calls=search, turnless=True)] * 3
    server.pipeline.judge([turns[0], *turnless, turns[1]], time.time_ns())
    clock.now += 1
    metrics.tick()
    text = generate_latest(metrics.registry()).decode()
    figure = FIGURES["tool_usage_rate"]
    numerator, agent_turns = (_counted(text, c.metric, "__other__") for c in (figure.numerator, figure.denominator))
    total, turnless_turns = (_counted(text, m, "__other__")
                             for m in ("toolwatch_turns_total", "toolwatch_turnless_turns_total"))
    assert (numerator, agent_turns, total, turnless_turns) == (1.0, 2.0, 5.0, 3.0)
    tally = live.windows.tally("__other__", 300.0, now=clock.now)
    assert read_figure(tally, "tool_usage_rate", None) == (numerator / agent_turns, agent_turns) == (0.5, 2.0)
    live.evaluate(clock.now)
    assert [a.labels["alertname"] for a in live.active()] == []
