"""The alert windows count a batch by signature: the same Tallies as `Tally.add`, one verdict at a time, with the calls
of an alert tool outside the agent's catalog counted for that tool, as /metrics counts them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from monitor.alerts.windows import OTHER, TallyWindows
from monitor.judge import Tally
from monitor.metrics import VerdictBatch
from monitor.metrics._batch import MAX_CACHED, MAX_CACHED_CALLS, signatures
from monitor.verdict import TurnVerdict
from tests.monitor.service.test_metrics_fastpath import (
    FAST,
    TEXT,
    _sample_verdicts,
    many_calls,
    one_field_apart,
    turn_verdicts,
    uncounted_variant,
    verdict_batches,
)


def as_metrics_count(v: TurnVerdict, tools: frozenset[str]) -> TurnVerdict:
    """The verdict with its calls of a tool in `tools` counted per tool even when outside the agent's catalog (a
    scoped agent's hallucinated call of another agent's tool), as /metrics counts them under the tool's name."""
    calls = tuple(replace(c, in_catalog=True) if not c.in_catalog and c.name in tools else c for c in v.calls)
    return replace(v, calls=calls)


class ReferenceWindows:
    """TallyWindows' totals as they were kept before the fast path: `Tally.add` per verdict (its calls of the kept
    tools counted per tool, as_metrics_count), then pruned."""

    def __init__(self, agent_label: Callable[[str], str], max_agents: int, tools: Iterable[str]) -> None:
        self.agent_label = agent_label
        self.max_agents = max_agents
        self.tools = frozenset(tools)
        self.totals: dict[str, Tally] = {}

    def accept(self, verdicts: Iterable[TurnVerdict]) -> None:
        touched = set()
        for v in verdicts:
            label = self.agent_label(v.agent)
            if label not in self.totals and len(self.totals) >= self.max_agents:
                label = OTHER
            self.totals.setdefault(label, Tally()).add(as_metrics_count(v, self.tools))
            touched.add(label)
        for label in touched:
            total = self.totals[label]
            total.confusion.clear()
            for tool in [t for t in total.per_tool if t not in self.tools]:
                del total.per_tool[tool]

    def set_tools(self, tools: Iterable[str]) -> None:
        """As TallyWindows.tools: every total drops the other tools at once."""
        self.tools = frozenset(tools)
        for total in self.totals.values():
            for tool in [t for t in total.per_tool if t not in self.tools]:
                del total.per_tool[tool]


def label(agent: str) -> str:
    return agent if agent in ("triage", "billing", "someone-else") else OTHER


@FAST
@given(verdict_batches(), st.booleans(), st.integers(1, 4), st.sampled_from([MAX_CACHED, 0, 1]))
def test_windows_count_by_signature_like_tally_add(
    batches: list[list[TurnVerdict]], shared: bool, max_agents: int, max_units: int
) -> None:
    fast = TallyWindows(
        [60.0], agent_label=label, max_agents=max_agents, tools=("search", "ghost"), max_units=max_units
    )
    ref = ReferenceWindows(label, max_agents, ("search", "ghost"))
    for i, batch in enumerate(batches):
        if i == 2:  # the alerts changed (a rules reload): other tools are kept
            fast.tools = {"read", "y" * 300}
            ref.set_tools({"read", "y" * 300})
        fast.accept(VerdictBatch(batch) if shared else iter(batch))
        ref.accept(batch)
        assert fast._totals == ref.totals  # every count, and sequence-score sums summed in the same order


def tally_of(v: TurnVerdict) -> Tally:
    t = Tally()
    t.add(v)
    return t


@FAST
@given(turn_verdicts(), turn_verdicts(), TEXT)
def test_signatures_hold_what_a_tally_counts(v: TurnVerdict, other: TurnVerdict, text: str) -> None:
    sig = signatures([v])
    counts = tally_of(v)
    counts.sequence_score_sum = 0.0  # the one float: summed verdict by verdict, not part of a signature
    assert signatures([uncounted_variant(v, text)]) == sig
    for w in one_field_apart(v, other):
        tw = tally_of(w)
        tw.sequence_score_sum = 0.0
        if tw != counts:
            assert signatures([w]) != sig


def test_unit_cache_follows_the_alert_tools() -> None:
    vs = _sample_verdicts()
    w = TallyWindows([60.0], tools=("search",))
    w.accept(vs)
    assert w._totals["triage"].per_tool["search"].calls == 5
    w.tools = ()
    w.accept(vs)
    assert w._totals["triage"].per_tool == {}
    w.tools = ("search",)
    w.accept(vs)
    total = w._totals["triage"]
    assert total.per_tool["search"].calls == 5 and total.turns == 15  # the tool's counts start again


def test_unit_cache_keeps_no_signature_of_a_turn_with_many_calls() -> None:
    """As the counters' plans: a turn with more than MAX_CACHED_CALLS calls is added as it is, never kept."""
    w = TallyWindows([60.0], agent_label=label, tools=("search",))
    ref = ReferenceWindows(label, 64, ("search",))
    for k in (MAX_CACHED_CALLS + 1, 1000):
        batch = [many_calls(k), many_calls(k)]
        w.accept(batch)
        ref.accept(batch)
    assert w._units == {}
    w.accept([many_calls(MAX_CACHED_CALLS)])
    ref.accept([many_calls(MAX_CACHED_CALLS)])
    assert len(w._units) == 1
    assert w._totals == ref.totals
