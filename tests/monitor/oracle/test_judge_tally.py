"""The judge and the Tally against the oracle (METRICS.md) on generated turns: per call, per turn, every figure,
the confusion matrix and per-tool precision / recall / F1; the C tally and its Python reference both."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.judge import Judge, Tally
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict
from tests.monitor.oracle import oracle
from tests.monitor.oracle.convert import record, write_rules
from tests.monitor.oracle.gen import turns
from tests.monitor.oracle.spec import SPEC

SEEDS = (1, 2, 3)
TURNS = 700


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Judge:
    return Judge(load_rules(write_rules(SPEC, tmp_path_factory.mktemp("rules"))))


def _same_turn(v: TurnVerdict, o: oracle.TurnResult, where: str) -> None:
    got = [(c.name, c.outcome.value, c.schema_valid, c.args_ok) for c in v.calls]
    want = [(c.name, c.outcome, c.schema_valid, c.args_ok) for c in o.calls]
    assert got == want, where
    assert (v.judged, v.turnless, v.rule) == (o.judged, o.turnless, o.rule), where
    assert sorted(m.tool for m in v.missed) == sorted(o.missed), where
    assert Counter(v.confusion) == Counter(o.confusion), where
    assert {t: n for t, n in v.expected_by_tool if n} == {t: n for t, n in o.expected_by_tool.items() if n}, where
    assert sum(n for _, n in v.expected_by_tool) == v.expected_calls, where
    flags = (v.selection_ok, v.args_ok, v.schema_ok, v.sequence_ok, v.response_ok, v.end_to_end, v.over_calling)
    expected = (o.selection_ok, o.args_ok, o.schema_ok, o.seq_ok, o.response_ok, o.end_to_end, o.over_calling)
    assert flags == expected, where
    assert v.sequence_score == pytest.approx(o.seq_score), where
    assert set(v.forbidden) == o.forbidden, where
    assert {x.kind.value for c in v.calls for x in c.violations} == {k for c in o.calls for k in c.kinds}, where


def _check_tally(tally: Tally, results: list[oracle.TurnResult]) -> None:
    want = oracle.figures(results)
    got = tally.ratios()
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert (got[key] is None) == (value is None), key
        assert got[key] == pytest.approx(value), key
    matrix = oracle.confusion(results)
    assert +tally.confusion == matrix
    prf = oracle.precision_recall_f1(matrix)
    assert tally.per_tool_prf().keys() == prf.keys()
    for tool, (p, r, f1) in prf.items():
        assert tally.per_tool_prf()[tool] == pytest.approx((p, r, f1)), tool


@pytest.mark.parametrize("seed", SEEDS)
def test_judge_and_tally_give_the_oracle_figures(judge: Judge, seed: int) -> None:
    ts = turns(seed, TURNS)
    results = [oracle.judge(SPEC, t) for t in ts]
    c_tally, py_tally = Tally(), Tally()
    for i, (t, o) in enumerate(zip(ts, results, strict=True)):
        v = judge.judge(record(t, i))
        _same_turn(v, o, f"seed {seed} turn {i}: {t}")
        c_tally.add(v)
        py_tally._add_py(v)
    assert c_tally == py_tally
    _check_tally(c_tally, results)
    # the generated turns reach every outcome and figure
    outcomes = Counter(c.outcome for r in results for c in r.calls)
    assert set(outcomes) == {"correct", "wrong_tool", "spurious", "hallucinated", "unjudged"}
    assert all(v is not None for v in oracle.figures(results).values())


@settings(max_examples=150, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 12))
def test_any_small_set_of_turns(judge: Judge, seed: int, n: int) -> None:
    """Small sets: the zero denominators (absent, never 0 or 1) and few-turn figures."""
    ts = turns(seed, n)
    results = [oracle.judge(SPEC, t) for t in ts]
    tally = Tally()
    for i, t in enumerate(ts):
        tally.add(judge.judge(record(t, i)))
    _check_tally(tally, results)


def test_no_turn_every_ratio_absent() -> None:
    assert all(v is None for v in Tally().ratios().values())
    assert Tally().format_accuracy() == "Tool call accuracy: 0/0 (absent)"


def test_rules_load_from_the_written_files(tmp_path: Path) -> None:
    rs = load_rules(write_rules(SPEC, tmp_path))
    assert rs.catalog == frozenset(SPEC.tools)
    assert rs.agents == frozenset({"beta"})
