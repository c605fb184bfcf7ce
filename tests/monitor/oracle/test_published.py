"""/metrics (counters and rolling gauges, as the exposition text shows them) against the oracle: generated turns
judged by the real Judge and counted by the real ToolwatchMetrics, with an injected clock for the windows."""

from __future__ import annotations

import random

import pytest
from prometheus_client.exposition import generate_latest

from monitor.judge import Judge
from monitor.metrics import ToolwatchMetrics, VerdictBatch
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict
from tests.monitor.oracle import oracle
from tests.monitor.oracle.convert import record, write_rules
from tests.monitor.oracle.gen import turns
from tests.monitor.oracle.published import Labels
from tests.monitor.oracle.scrape import Page, assert_counters, assert_gauges, parse
from tests.monitor.oracle.spec import SPEC, Spec


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _metrics(judge: Judge, spec: Spec, clock: Clock, windows: tuple[float, ...]) -> ToolwatchMetrics:
    tools, rule_agents = judge.scoping()
    return ToolwatchMetrics(
        tools=judge.catalog,
        agents=judge.agents | set(spec.agents),
        rules=[e.id for e in judge.ruleset.expectations],
        windows=windows,
        clock=clock,
        agent_tools=tools,
        rule_agents=rule_agents,
    )


def _labels(judge: Judge, spec: Spec) -> Labels:
    return Labels(judge.catalog, judge.agents | set(spec.agents))


def _page(m: ToolwatchMetrics) -> Page:
    return parse(generate_latest(m.registry()).decode())


def _observe(m: ToolwatchMetrics, verdicts: list[TurnVerdict], rng: random.Random) -> None:
    """In batches of varied sizes, as the worker does (one signature counted once per batch)."""
    i = 0
    while i < len(verdicts):
        n = rng.choice((1, 2, 7, 64))
        m.observe(VerdictBatch(verdicts[i : i + n]))
        i += n


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Judge:
    return Judge(load_rules(write_rules(SPEC, tmp_path_factory.mktemp("rules"))))


@pytest.mark.parametrize(("seed", "max_plans"), [(11, None), (12, 3)])
def test_every_published_figure_is_the_oracle_s(judge: Judge, seed: int, max_plans: int | None) -> None:
    clock = Clock()
    m = _metrics(judge, SPEC, clock, (60.0, 3600.0))
    if max_plans is not None:
        m.counters.max_plans = max_plans  # the plan cache full all the time: signatures counted directly too
    ts = turns(seed, 900)
    verdicts = [judge.judge(record(t, i)) for i, t in enumerate(ts)]
    results = [oracle.judge(SPEC, t) for t in ts]
    _observe(m, verdicts, random.Random(seed))
    clock.now += 30
    page = _page(m)
    phases = [(results, _labels(judge, SPEC))]
    assert_counters(page, phases)
    assert_gauges(page, phases, "1m")
    assert_gauges(page, phases, "1h")
    # __other__ really holds folded names: agents gamma and "", made-up tools, offered tools
    assert any(k[0] == "__other__" for k in page["toolwatch_turns"] if page["toolwatch_turns"][k])
    assert page["toolwatch_tool_calls"].get(("alpha", "__other__", "hallucinated"), 0) > 0
    assert page["toolwatch_tool_calls"].get(("alpha", "__other__", "spurious"), 0) > 0


def test_no_verdict_no_ratio(judge: Judge) -> None:
    """Zero denominators: every gauge absent (never 0, 1 or NaN), before any turn and after turns that judge
    nothing (unjudged and turnless turns only)."""
    clock = Clock()
    m = _metrics(judge, SPEC, clock, (60.0,))
    page = _page(m)
    assert_gauges(page, [], "1m")
    assert all(not v for name in ("toolwatch_tool_calls", "toolwatch_turns") for v in page[name].values())
    unjudged = [t for t in turns(5, 300) if t.turnless or not oracle.judge(SPEC, t).judged]
    m.observe([judge.judge(record(t, i)) for i, t in enumerate(unjudged)])
    page = _page(m)
    phases = [([oracle.judge(SPEC, t) for t in unjudged], _labels(judge, SPEC))]
    assert_counters(page, phases)
    assert_gauges(page, phases, "1m")
    assert not any(page.get(name) for name in ("toolwatch_tool_call_accuracy_ratio", "toolwatch_tool_accuracy_ratio"))
