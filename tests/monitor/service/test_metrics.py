"""The metrics collector: rolling windows over a clock, bounded labels, and agreement with the judge's Tally."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.demo import LogLineGenerator, SimulatedTriageModel
from monitor.judge import Judge, Tally
from monitor.metrics import ToolwatchMetrics, format_duration, parse_duration
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict
from tests.monitor.service.conftest import RULES

JUDGE = Judge(load_rules([RULES]))


def verdicts(n: int, seed: int = 3) -> list[TurnVerdict]:
    model = SimulatedTriageModel(seed)
    out = []
    for line in LogLineGenerator(seed).lines(n):
        resp = model.respond(line)
        calls = tuple(ToolCall(c["function"]["name"], arguments=c["function"]["arguments"]) for c in resp.tool_calls)
        answer = model.answer(line, [], resp)
        out.append(JUDGE.judge(Turn(line.text, calls, agent="incident-triage", output_text=answer)))
    return out


def test_window_ratios_equal_tally_ratios() -> None:
    vs = verdicts(600)
    m = ToolwatchMetrics(tools=JUDGE.catalog, agents=JUDGE.agents, clock=lambda: 0.0)
    m.observe(vs)
    tally = Tally()
    for v in vs:
        tally.add(v)
    view = m.window_counts(now=1.0)["5m"]
    (vec,) = view.agents.values()
    r = tally.ratios()
    assert vec[0] / vec[1] == pytest.approx(r["tool_call_accuracy"])
    assert vec[2] / vec[1] == pytest.approx(r["spurious_rate"])
    assert vec[3] / vec[4] == pytest.approx(r["missed_rate"])
    assert vec[6] / vec[5] == pytest.approx(r["selection_accuracy"])
    assert vec[7] / vec[5] == pytest.approx(r["end_to_end_accuracy"])
    for (_, tool), (correct, judged) in view.tools.items():
        if tool in tally.per_tool:
            assert correct / judged == pytest.approx(tally.per_tool[tool].ratios()["tool_call_accuracy"])


def test_windows_roll_over() -> None:
    now = [1000.0]
    m = ToolwatchMetrics(tools=JUDGE.catalog, agents=JUDGE.agents, windows=(60.0, 600.0), clock=lambda: now[0])

    def advance(seconds: int) -> None:  # the service ticks every second
        for _ in range(seconds):
            now[0] += 1
            m.tick()

    m.observe(verdicts(100, seed=1))
    advance(30)
    m.observe(verdicts(50, seed=2))
    advance(45)  # the first batch is now 75 s old: out of the 1m window, inside the 10m one
    counts = m.window_counts()
    assert sum(v[5] for v in counts["1m"].agents.values()) == 50
    assert sum(v[5] for v in counts["10m"].agents.values()) == 150
    advance(600)
    counts = m.window_counts()
    assert sum(v[5] for v in counts["10m"].agents.values()) == 0


def test_unknown_agents_and_tools_are_other() -> None:
    m = ToolwatchMetrics(tools=JUDGE.catalog, agents=JUDGE.agents)
    v = JUDGE.judge(Turn("[AUTH] x", (ToolCall("nonsense_tool", arguments="{}"),), agent="someone-else"))
    m.observe([v])
    keys = set(m.counters.tables["toolwatch_tool_calls_total"])
    assert keys == {("__other__", "__other__", "hallucinated")}


@pytest.mark.parametrize(("text", "seconds"), [("5m", 300), ("1h", 3600), ("90s", 90), ("2", 2), ("1.5h", 5400)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_duration_labels_and_errors() -> None:
    assert [format_duration(s) for s in (300, 3600, 90, 86400)] == ["5m", "1h", "90s", "1d"]
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration("soon")


def test_forbidden_calls_counter_counts_calls(tmp_path: Path) -> None:
    # toolwatch_forbidden_calls_total is "calls of forbidden tools": a forbidden tool called twice in one
    # turn is two calls (as the judge's Tally counts them), not one.
    path = tmp_path / "forbid.yaml"
    path.write_text(
        "catalog: {tools: [{name: read}, {name: delete}]}\n"
        "forbid: [{tool: delete}]\n"
        "expect:\n"
        "  - when: {prefix: q}\n"
        "    call: [{tool: read, min: 0}, {tool: delete, min: 0, max: 5}]\n",
        encoding="utf-8",
    )
    judge = Judge(load_rules([path]))
    v = judge.judge(Turn("q", (ToolCall("delete"), ToolCall("read"), ToolCall("delete")), agent="a"))
    assert v.forbidden == ("delete",)
    m = ToolwatchMetrics(tools=judge.catalog, agents=["a"])
    m.observe([v])
    tally = Tally()
    tally.add(v)
    assert tally.forbidden_calls == 2
    assert m.counters.tables["toolwatch_forbidden_calls_total"] == {("a", "delete"): 2}


def test_tool_label_cache_is_bounded_in_bytes() -> None:
    # Hallucinated names are free-form and may be long; the label cache must not keep thousands of them.
    m = ToolwatchMetrics(tools=JUDGE.catalog, agents=JUDGE.agents)
    for i in range(300):
        name = f"{i}-" + "x" * (64 << 10)
        m.observe([JUDGE.judge(Turn("[AUTH] x", (ToolCall(name, arguments="{}"),), agent="incident-triage"))])
    assert sum(len(k) for k in m.counters._tool_cache) <= 1 << 20
    assert m.counters.tables["toolwatch_tool_calls_total"] == {("incident-triage", "__other__", "hallucinated"): 300}
