"""Per-tool figures of an agent whose rule file scopes its tools, when it calls a catalog tool outside its scope.

That call is `hallucinated` for the agent, under the tool's own name (README, Metrics). The /metrics counters
count it as a judged call of that tool (`toolwatch_judged_calls_total{tool=...}`), so the live per-tool gauge and
the rendered per-tool recording rules give that tool an accuracy of 0. The Tally keeps per-tool counts only for the
agent's catalog tools, and the in-process alert windows, read from Tallies, had no accuracy for it (absent): an
alert on that tool fired in Prometheus and not in process. The windows now count tools as /metrics does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.alerts.windows import TallyWindows, read_figure
from monitor.judge import Judge
from monitor.metrics import ToolwatchMetrics
from monitor.metrics._batch import MAX_CACHED
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict

SCOPED_X = """
version: 1
agent: x
catalog:
  tools: [{name: a}]
expect:
  - id: XA
    when: {prefix: "[A]"}
    call: [{tool: a}]
"""
SCOPED_Y = SCOPED_X.replace("agent: x", "agent: y").replace("name: a", "name: b").replace("XA", "YB")


def _verdicts(tmp_path: Path, n: int = 3) -> tuple[Judge, list[TurnVerdict]]:
    (tmp_path / "x.yaml").write_text(SCOPED_X, encoding="utf-8")
    (tmp_path / "y.yaml").write_text(SCOPED_Y, encoding="utf-8")
    judge = Judge(load_rules([tmp_path / "x.yaml", tmp_path / "y.yaml"]))
    turns = [Turn("[A] go", (ToolCall("b", call_id="c1", arguments="{}"),), agent="x")] * n
    return judge, [judge.judge(t) for t in turns]


def _gauge(metrics: ToolwatchMetrics, agent: str, tool: str) -> float | None:
    text = generate_latest(metrics.registry()).decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "toolwatch_tool_accuracy_ratio" and s.labels == {"agent": agent, "tool": tool, "window": "5m"}:
                return float(s.value)
    return None


def _figures(tmp_path: Path, n: int = 3, max_units: int = MAX_CACHED) -> tuple[float | None, float | None]:
    judge, verdicts = _verdicts(tmp_path, n)
    assert [c.outcome.value for v in verdicts for c in v.calls] == ["hallucinated"] * n
    tools, rule_agents = judge.scoping()
    metrics = ToolwatchMetrics(
        tools=judge.catalog, agents=judge.agents, rules=["XA", "YB"], agent_tools=tools, rule_agents=rule_agents
    )
    metrics.observe(verdicts)
    windows = TallyWindows([300.0], tools=judge.catalog, clock=lambda: 0.0, max_units=max_units)
    windows.accept(verdicts)
    tally = windows.tally("x", 300.0, now=1.0)
    assert tally is not None
    return _gauge(metrics, "x", "b"), read_figure(tally, "tool_call_accuracy", "b")[0]


def test_the_agent_figures_agree(tmp_path: Path) -> None:
    """Per agent both count the three hallucinated calls as judged: accuracy 0 in both."""
    _, verdicts = _verdicts(tmp_path)
    windows = TallyWindows([300.0], tools=(), clock=lambda: 0.0)
    windows.accept(verdicts)
    tally = windows.tally("x", 300.0, now=1.0)
    assert tally is not None
    assert read_figure(tally, "tool_call_accuracy", None) == (0.0, 3.0)
    gauge, _ = _figures(tmp_path)
    assert gauge == 0.0  # the live per-tool gauge: 0 correct of 3 judged calls named b


@pytest.mark.parametrize(("n", "max_units"), [(1, 0), (3, MAX_CACHED)],
                         ids=["one verdict, no unit cached: added as it is", "a signature's unit, times three"])
def test_the_live_gauge_and_the_in_process_window_agree_per_tool(tmp_path: Path, n: int, max_units: int) -> None:
    gauge, in_process = _figures(tmp_path, n, max_units)
    assert gauge == in_process == 0.0
