"""Window boundaries (injected clock) and a rules reload mid-stream, against the oracle."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from monitor.judge import Judge
from monitor.rules import load_rules
from tests.monitor.oracle import oracle, published
from tests.monitor.oracle.convert import record, write_rules
from tests.monitor.oracle.gen import turns
from tests.monitor.oracle.published import Labels
from tests.monitor.oracle.scrape import assert_counters, assert_gauges, gauges_of
from tests.monitor.oracle.spec import OBJ_N, SPEC, Rule, Slot
from tests.monitor.oracle.test_published import Clock, _labels, _metrics, _page

WINDOW = 60.0
STEP = 1.0  # a 60th of the window, and the worker's tick


def test_window_edges(tmp_path: Path) -> None:
    """One verdict each second, the worker's tick after each; at every scrape the gauges cover the verdicts of
    (s, now] for a snapshot time s with now - window - step <= s <= now - window: never less than the window, at most
    one step more. A verdict exactly one window old is out (the window is (now - 60s, now])."""
    judge = Judge(load_rules(write_rules(SPEC, tmp_path)))
    clock = Clock()
    start = clock.now
    m = _metrics(judge, SPEC, clock, (WINDOW,))
    labels = _labels(judge, SPEC)
    ts = [t for t in turns(21, 600) if not t.turnless][:200]
    seen: list[tuple[float, oracle.TurnResult]] = []
    rng = random.Random(21)
    checked = 0
    for i, t in enumerate(ts):
        clock.now = start + i
        m.observe([judge.judge(record(t, i))])
        seen.append((clock.now, oracle.judge(SPEC, t)))
        m.tick()
        if rng.random() < 0.3:  # a scrape a little later in the same second, or exactly on the next tick
            clock.now += rng.choice((0.0, 0.25, 0.5, 0.999))
            got = gauges_of(_page(m), "1m")
            cuts = [clock.now - WINDOW] + [x for x, _ in seen if clock.now - WINDOW - STEP <= x < clock.now - WINDOW]
            candidates = [published.gauges([([r for x, r in seen if x > cut], labels)]) for cut in cuts]
            assert any(_same(got, want) for want in candidates), f"at {clock.now - start}s"
            assert _same(got, candidates[0]), f"at {clock.now - start}s: exactly the window"
            checked += 1
    assert checked > 40


def _same(got: dict[str, dict[tuple[str, ...], float]], want: dict[str, dict[tuple[str, ...], float]]) -> bool:
    return all(got[name] == pytest.approx(want.get(name, {})) and got[name].keys() == want.get(name, {}).keys()
               for name in got)


RELOADED = replace(
    SPEC,
    tools={**{k: v for k, v in SPEC.tools.items() if k != "t3"}, "t5": OBJ_N},
    rules=(
        *(r for r in SPEC.rules if r.id not in ("rany", "rb")),
        Rule("rany", "[ANY]", ((Slot("t5"),), (Slot("t1"), Slot("t2")))),
        Rule("r5", "[B]", ((Slot("t5"),),), agent="gamma"),
    ),
    agents=("alpha", "beta"),
)


def test_rules_reload_mid_stream(tmp_path: Path) -> None:
    """Turns before the reload count under the old catalog and labels, turns after under the new: t3 leaves the
    catalog (its calls become made-up names, __other__), t5 joins, agent gamma gets a rule file of its own."""
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = Judge(load_rules(write_rules(SPEC, tmp_path / "old")))
    new = Judge(load_rules(write_rules(RELOADED, tmp_path / "new")))
    clock = Clock()
    m = _metrics(old, SPEC, clock, (3600.0,))
    before = turns(31, 400)
    after = [replace(t, calls=tuple(replace(c, name="t5") if c.name == "t3" and i % 2 else c for c in t.calls))
             for i, t in enumerate(turns(32, 400))]
    m.observe([old.judge(record(t, i)) for i, t in enumerate(before)])
    zero_t3 = {k for k, v in _page(m)["toolwatch_tool_calls"].items() if k[1] == "t3" and not v}
    assert zero_t3
    clock.now += 10
    m.tick()
    tools, rule_agents = new.scoping()
    m.set_labels(tools=new.catalog, agents=new.agents | set(RELOADED.agents),
                 rules=[e.id for e in new.ruleset.expectations], agent_tools=tools, rule_agents=rule_agents)
    m.observe([new.judge(record(t, i)) for i, t in enumerate(after)])
    clock.now += 10
    page = _page(m)
    phases = [
        ([oracle.judge(SPEC, t) for t in before], _labels(old, SPEC)),
        ([oracle.judge(RELOADED, t) for t in after], Labels(new.catalog, new.agents | set(RELOADED.agents))),
    ]
    assert_counters(page, phases)
    assert_gauges(page, phases, "1h")
    # the series created at 0 for names the new rules no longer have are gone; counted ones stay
    calls = page["toolwatch_tool_calls"]
    assert calls[("alpha", "t3", "correct")] > 0
    assert not any(k in calls for k in zero_t3)
    assert ("gamma", "t5", "wrong_tool") in calls  # created at 0 (or counted) for the new agent and tool
