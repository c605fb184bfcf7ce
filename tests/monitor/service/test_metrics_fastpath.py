"""The fast paths of the metrics side against the one-verdict-at-a-time code they replace.

Verdict counters count a batch by signature (each distinct signature once, times its verdicts); histograms
take a turn's observations in one call; the verdict log writes its JSON line directly. Each must give exactly
what the general code gives: the same tables (sequence-score floats included, bit for bit), the same bucket
counts and sums, the same bytes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.metrics import Histogram, LabelPolicy, ToolwatchMetrics, VerdictBatch, VerdictCounters
from monitor.metrics import names as n
from monitor.metrics._batch import MAX_CACHED, MAX_CACHED_CALLS, MAX_CACHED_CHARS, signatures
from monitor.metrics._operational import JUDGE_BUCKETS, LAG_BUCKETS
from monitor.serve import VerdictLog, verdict_record
from monitor.serve._verdict_log import verdict_line
from monitor.verdict import (
    NONE_LABEL,
    UNKNOWN_LABEL,
    CallVerdict,
    Outcome,
    TurnVerdict,
)
from tests.monitor import verdict_strategies

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

AGENTS = ("triage", "billing", "someone-else", "x" * 300)
CATALOG = ("search", "read", "delete")
TEXT = st.text(st.characters() | st.sampled_from('"\\\n\t\x00\x7f\u2028é€😀\ud800'), max_size=8)
turn_verdicts = functools.partial(verdict_strategies.turn_verdicts, agents=AGENTS, text=TEXT)


TURN_FIELDS = tuple(f.name for f in dataclasses.fields(TurnVerdict))
CALL_FIELDS = tuple(f.name for f in dataclasses.fields(CallVerdict))


@st.composite
def neighbours(draw: st.DrawFn, v: TurnVerdict) -> TurnVerdict:
    """`v` with one field (of the turn, or of its first call) taken from another random verdict."""
    other = draw(turn_verdicts())
    of_a_call = draw(st.booleans())
    if of_a_call and v.calls and other.calls:
        f = draw(st.sampled_from(CALL_FIELDS))
        call = dataclasses.replace(v.calls[0], **{f: getattr(other.calls[0], f)})
        return dataclasses.replace(v, calls=(call, *v.calls[1:]))
    f = draw(st.sampled_from(TURN_FIELDS))
    return dataclasses.replace(v, **{f: getattr(other, f)})


@st.composite
def verdict_batches(draw: st.DrawFn) -> list[list[TurnVerdict]]:
    """Batches of verdicts drawn from a small pool of verdicts one field apart (copies with fresh ids): the
    signatures repeat, and nearly collide."""
    first = draw(turn_verdicts())
    pool = [first, *draw(st.lists(neighbours(first), max_size=6))]
    picks = draw(st.lists(st.integers(0, len(pool) - 1), max_size=100))
    vs = [dataclasses.replace(pool[p], trace_id=f"t{i}") for i, p in enumerate(picks)]
    cuts = sorted(draw(st.lists(st.integers(0, len(vs)), max_size=6)))
    return [vs[a:b] for a, b in zip([0, *cuts], [*cuts, len(vs)], strict=True)]


class ReferenceCounters:
    """The counters as they were counted one verdict at a time, before the signature fast path."""

    def __init__(self, labels: LabelPolicy) -> None:
        self.labels = labels
        self.tables: dict[str, dict[tuple[str, ...], int]] = {name: {} for name in VerdictCounters(labels).tables}
        self.sequence_score: dict[str, float] = {}

    def inc(self, name: str, key: tuple[str, ...], k: int = 1) -> None:
        self.tables[name][key] = self.tables[name].get(key, 0) + k

    def add(self, verdicts: Iterable[TurnVerdict]) -> None:
        lab = self.labels
        for v in verdicts:
            agent = lab.agent(v.agent)
            self.turn(v, agent)
            for c in v.calls:
                k = (agent, lab.tool(c.name))
                self.inc(n.TOOL_CALLS, (*k, c.outcome.value))
                if v.judged:
                    self.inc(n.JUDGED_CALLS, k)
                if c.schema_valid is not None:
                    self.inc(n.SCHEMA_CHECKED_CALLS, k)
                    if c.schema_valid:
                        self.inc(n.SCHEMA_VALID_CALLS, k)
                    else:
                        self.inc(n.SCHEMA_INVALID_CALLS, k)
                        for kind in sorted({x.kind.value for x in c.violations} or {"other"}):
                            self.inc(n.SCHEMA_VIOLATIONS, (*k, kind))
                if c.args_ok is not None:
                    self.inc(n.ARGUMENT_CHECKED_CALLS, k)
                    if c.args_ok:
                        self.inc(n.ARGUMENT_OK_CALLS, k)
                    else:
                        self.inc(n.ARGUMENT_MISMATCHES, k)
            for c in v.calls:
                if c.name in v.forbidden:
                    self.inc(n.FORBIDDEN_CALLS, (agent, lab.tool(c.name)))
            if v.judged:
                self.judged(v, agent)

    def turn(self, v: TurnVerdict, agent: str) -> None:
        self.inc(n.TURNS, (agent, "true" if v.judged else "false"))
        if v.turnless:  # calls whose turn never came: no agent turn (METRICS.md, tool usage rate)
            self.inc(n.TURNLESS_TURNS, (agent,))
            return
        self.inc(n.AGENT_TURNS, (agent,))
        if v.calls:
            self.inc(n.TURNS_WITH_CALLS, (agent,))

    def judged(self, v: TurnVerdict, agent: str) -> None:
        lab = self.labels
        for m in v.missed:
            self.inc(n.MISSED_CALLS, (agent, lab.tool(m.tool)))
        for tool, count in v.expected_by_tool:
            self.inc(n.EXPECTED_CALLS, (agent, lab.tool(tool)), count)
        for exp, act in v.confusion:
            self.inc(n.CONFUSION, (agent, lab.matrix(exp), lab.matrix(act)))
        checks = [("selection", v.selection_ok), ("args", v.args_ok), ("schema", v.schema_ok)]
        checks += [("sequence", v.sequence_ok), ("response", v.response_ok), ("end_to_end", v.end_to_end)]
        checks += [("over_calling", None if v.over_calling is None else not v.over_calling)]
        for check, ok in checks:
            if ok is not None:
                self.inc(n.TURN_CHECKS, (agent, check, "pass" if ok else "fail"))
        if v.sequence_ok is False:
            self.inc(n.ORDER_VIOLATIONS, (agent,))
        if v.sequence_score is not None:
            self.sequence_score[agent] = self.sequence_score.get(agent, 0.0) + v.sequence_score
        if v.response_ok is not None:
            self.inc(n.RESPONSE_CHECKED_TURNS, (agent,))
        if v.end_to_end is False and v.rule:
            self.inc(n.RULE_FAILURES, (agent, lab.rule(v.rule)))


def _labels(catalog: Iterable[str] = CATALOG) -> LabelPolicy:
    return LabelPolicy(tools=catalog, agents=("triage", "billing"))


@FAST
@given(verdict_batches(), st.booleans(), st.sampled_from([MAX_CACHED, 0, 1]))
def test_counting_by_signature_equals_counting_each_verdict(
    batches: list[list[TurnVerdict]], shared: bool, max_plans: int
) -> None:
    """Whether plans are cached, replaced (a full cache) or not used (verdicts counted directly)."""
    fast = VerdictCounters(_labels(), max_plans=max_plans)
    ref = ReferenceCounters(_labels())
    for i, batch in enumerate(batches):
        if i == 2:  # a rules reload in the middle: new label sets, cached plans must not outlive them
            fast.set_labels(_labels(("search", "ghost")))
            ref.labels = _labels(("search", "ghost"))
        fast.add(VerdictBatch(batch) if shared else batch)
        ref.add(batch)
    assert fast.tables == ref.tables
    assert fast.sequence_score == ref.sequence_score  # floats summed in the same order: equal, not approx


def uncounted_variant(v: TurnVerdict, text: str) -> TurnVerdict:
    """The verdict with every field that is not counted changed: ids, texts, slots, violation details."""
    calls = tuple(
        dataclasses.replace(
            c,
            index=c.index + 1,
            call_id=text,
            slot=7,
            violations=tuple(dataclasses.replace(x, path=text, message=text) for x in c.violations),
            arguments_captured=not c.arguments_captured,
        )
        for c in v.calls
    )
    missed = tuple(dataclasses.replace(m, slot=m.slot + 1) for m in v.missed)
    return dataclasses.replace(
        v,
        trace_id=text,
        span_id=text,
        input_text=text,
        reason=text,
        alternative=3,
        max_calls=9,
        calls=calls,
        missed=missed,
    )


@FAST
@given(turn_verdicts(), TEXT)
def test_verdicts_differing_only_in_uncounted_fields_share_a_signature(v: TurnVerdict, text: str) -> None:
    w = uncounted_variant(v, text)
    assert signatures([v]) == signatures([w])
    rv, rw = ReferenceCounters(_labels()), ReferenceCounters(_labels())
    rv.add([v])
    rw.add([w])
    assert (rv.tables, rv.sequence_score) == (rw.tables, rw.sequence_score)


def one_field_apart(v: TurnVerdict, other: TurnVerdict) -> Iterator[TurnVerdict]:
    """`v` with each field in turn (of the turn, or of its first call) taken from `other`."""
    for f in TURN_FIELDS:
        yield dataclasses.replace(v, **{f: getattr(other, f)})
    if v.calls and other.calls:
        for f in CALL_FIELDS:
            call = dataclasses.replace(v.calls[0], **{f: getattr(other.calls[0], f)})
            yield dataclasses.replace(v, calls=(call, *v.calls[1:]))


def reference_counts(v: TurnVerdict) -> object:
    ref = ReferenceCounters(_labels())
    ref.add([v])
    return ref.tables, ref.sequence_score.keys()


@FAST
@given(turn_verdicts(), turn_verdicts())
def test_verdicts_counted_differently_have_different_signatures(v: TurnVerdict, other: TurnVerdict) -> None:
    """The signature holds everything counted: change any one field, and either the counts or it change."""
    counts = reference_counts(v)
    sig = signatures([v])
    for w in one_field_apart(v, other):
        if reference_counts(w) != counts:
            assert signatures([w]) != sig


def test_generators_and_batches_count_alike() -> None:
    vs = _sample_verdicts()
    a, b = VerdictCounters(_labels()), VerdictCounters(_labels())
    a.add(iter(vs))
    batch = VerdictBatch(vs)
    b.add(batch)
    b.add(batch)  # a batch read twice counts twice (its groups are computed once)
    assert {k: {kk: 2 * c for kk, c in t.items()} for k, t in a.tables.items()} == b.tables


def _sample_verdicts() -> list[TurnVerdict]:
    call = CallVerdict(0, "search", "c0", Outcome.CORRECT, True, schema_valid=True, args_ok=True)
    bad = CallVerdict(1, "ghost", "c1", Outcome.HALLUCINATED, False, schema_valid=False)
    base = TurnVerdict(
        agent="triage",
        trace_id="t",
        span_id="s",
        input_text="q",
        judged=True,
        turnless=False,
        rule="r1",
        alternative=None,
        calls=(call,),
        missed=(),
        expected_calls=1,
        max_calls=1,
        selection_ok=True,
        args_ok=True,
        schema_ok=True,
        sequence_ok=None,
        sequence_score=None,
        forbidden=(),
        response_ok=None,
        end_to_end=True,
        over_calling=False,
        confusion=(("search", "search"),),
        reason="ok",
        expected_by_tool=(("search", 1),),
    )
    failing = dataclasses.replace(base, calls=(call, bad), end_to_end=False, reason="failed")
    return [base, failing, base, base, failing]


def test_plan_cache_is_bounded_in_entries_and_characters() -> None:
    counters = VerdictCounters(_labels())
    base = _sample_verdicts()[0]
    for i in range(MAX_CACHED + 10):
        call = dataclasses.replace(base.calls[0], name=f"tool-{i}", outcome=Outcome.HALLUCINATED)
        counters.add([dataclasses.replace(base, calls=(call,))])
    long_call = dataclasses.replace(base.calls[0], name="z" * (MAX_CACHED_CHARS + 1))
    counters.add([dataclasses.replace(base, calls=(long_call,))])
    plans = counters._plans
    assert 0 < len(plans) <= MAX_CACHED
    assert not any(long_call.name in str(sig) for sig in plans)
    assert counters.tables[n.TOOL_CALLS][("triage", "__other__", "hallucinated")] == MAX_CACHED + 10


def many_calls(n_calls: int) -> TurnVerdict:
    """A judged turn of `n_calls` hallucinated calls with empty names (a client can send up to
    max_calls_per_trace of them, 1,000 by default, under one turn)."""
    base = _sample_verdicts()[0]
    call = dataclasses.replace(base.calls[0], name="", outcome=Outcome.HALLUCINATED, in_catalog=False)
    calls = tuple(dataclasses.replace(call, index=i) for i in range(n_calls))
    return dataclasses.replace(base, calls=calls, confusion=((NONE_LABEL, UNKNOWN_LABEL),) * n_calls)


def test_plan_cache_keeps_no_signature_of_a_turn_with_many_calls() -> None:
    """A signature holds a tuple per call: kept for turns of any size, 2,048 signatures of turns with 500 to 1,000
    calls held ~240 MiB. Such turns are counted directly (whether seen once or more), like the same turns kept."""
    counters, ref = VerdictCounters(_labels()), ReferenceCounters(_labels())
    for k in (MAX_CACHED_CALLS + 1, 2 * MAX_CACHED_CALLS, 1000):
        batch = [many_calls(k), many_calls(k)]  # seen twice in a batch: worth keeping, but for its size
        counters.add(batch)
        ref.add(batch)
    assert counters._plans == {}
    counters.add([many_calls(MAX_CACHED_CALLS)])
    ref.add([many_calls(MAX_CACHED_CALLS)])
    assert len(counters._plans) == 1
    assert counters.tables == ref.tables


def test_metrics_observe_counts_a_shared_batch_once() -> None:
    vs = _sample_verdicts()
    m = ToolwatchMetrics(tools=CATALOG, agents=("triage",))
    m.observe(VerdictBatch(vs))
    tables = {name: {k: v for k, v in t.items() if v} for name, t in m.counters.tables.items()}  # the counted
    assert tables[n.TURNS] == {("triage", "true"): 5}
    assert tables[n.TOOL_CALLS] == {
        ("triage", "search", "correct"): 5,
        ("triage", "__other__", "hallucinated"): 2,
    }


@FAST
@given(
    st.lists(st.floats(min_value=-1.0, max_value=1e4, allow_nan=False), max_size=60),
    st.sampled_from([JUDGE_BUCKETS, LAG_BUCKETS]),
)
def test_histogram_observe_each_equals_observe(values: list[float], bounds: tuple[float, ...]) -> None:
    a, b = Histogram(bounds), Histogram(bounds)
    a.observe(0.125)
    b.observe(0.125)
    for x in values:
        a.observe(x)
    b.observe_each(values)
    assert (a.counts, a.total) == (b.counts, b.total)


@FAST
@given(turn_verdicts(), st.floats(min_value=0, max_value=4e9))
def test_verdict_line_is_the_json_of_the_record(v: TurnVerdict, at: float) -> None:
    expected = json.dumps(verdict_record(v, at=at), ensure_ascii=False, separators=(",", ":"))
    assert verdict_line(v, at) == expected


def test_verdict_log_lines(tmp_path: Path) -> None:
    vs = _sample_verdicts()
    odd = dataclasses.replace(vs[1], input_text="bad \ud800 surrogate", reason='quote " and é')
    log = VerdictLog(tmp_path / "v.jsonl")
    log.write([*vs, odd])
    log.close()
    lines = (tmp_path / "v.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 3 and log.written == 3
    at = records[0]["time"]
    assert records[0] == json.loads(json.dumps(verdict_record(vs[1], at=at)))
    assert records[2]["input"] == "bad \ud800 surrogate" and "\\ud800" in lines[2]  # kept escaped
