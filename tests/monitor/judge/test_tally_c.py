"""The C Tally.add (monitor/judge/_ctally.c) counts as the Python reference (Tally._add_py) does.

Generated verdicts are added one by one to two Tallies, one by the extension and one by the reference; after each,
every field must be equal, of the same type (1 is not 1.0), and every dict and Counter must hold the same keys in
the same order (the order per-tool entries and counter keys were made). What the extension does not take (other
classes, types or containers) it must leave untouched, for the reference to count. The extension is imported
directly, so these tests run even when TOOLWATCH_PURE_PYTHON=1 keeps Tally.add on Python; they are skipped only
when it was not built.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
from collections import Counter
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.judge import Tally, ToolCounts, _tally, add_verdict
from monitor.verdict import (
    NONE_LABEL,
    CallVerdict,
    MissedUnit,
    Outcome,
    SchemaViolation,
    TurnVerdict,
    ViolationKind,
)
from tests.monitor import verdict_strategies
from tests.monitor.verdict_strategies import SCORES


def _import() -> ModuleType | None:
    try:
        mod = importlib.import_module("monitor.judge._ctally")
    except ImportError:
        return None
    outcomes = (Outcome.CORRECT, Outcome.WRONG_TOOL, Outcome.SPURIOUS, Outcome.HALLUCINATED)
    mod.init(Tally, ToolCounts, TurnVerdict, CallVerdict, MissedUnit, SchemaViolation, ViolationKind, Counter,
             outcomes)
    return mod


CTALLY = _import()
pytestmark = pytest.mark.skipif(CTALLY is None, reason="the C tally was not built")
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

OPT = (None, True, False)
# ints too: the sum must stay what Python's + makes; in_catalog None too: the reference tests its truth
turn_verdicts = functools.partial(
    verdict_strategies.turn_verdicts, scores=(*SCORES, 0, 1), in_catalog=st.sampled_from(OPT)
)


def state(t: Tally) -> list[tuple[str, Any]]:
    """Every field of a Tally with its type; dicts and Counters as their items in order, per-tool counts likewise."""
    out: list[tuple[str, Any]] = []
    for f in dataclasses.fields(t):
        x = getattr(t, f.name)
        if isinstance(x, dict):
            items = [(k, dataclasses.astuple(v) if isinstance(v, ToolCounts) else v) for k, v in x.items()]
            out.append((f.name, (type(x), [(k, v, [type(e) for e in v] if isinstance(v, tuple) else type(v))
                                           for k, v in items])))
        else:
            out.append((f.name, (type(x), x)))
    return out


def add_both(c: Tally, py: Tally, v: TurnVerdict) -> None:
    """add on one side, add_failed on the other (alternately), the reference on py: the same counts, and
    add_failed answers v.failed."""
    assert CTALLY is not None
    c2 = copy.deepcopy(c)
    assert CTALLY.add(c, v) is True
    assert CTALLY.add_failed(c2, v) is v.failed
    assert state(c2) == state(c)
    py._add_py(v)


@FAST
@given(st.lists(turn_verdicts(), min_size=1, max_size=12))
def test_every_field_equals_the_reference_after_each_verdict(verdicts: list[TurnVerdict]) -> None:
    c, py = Tally(), Tally()
    for v in verdicts:
        add_both(c, py, v)
        assert state(c) == state(py)


@FAST
@given(st.lists(turn_verdicts(), min_size=1, max_size=6), st.lists(turn_verdicts(), min_size=1, max_size=6))
def test_counting_onto_a_merged_or_subtracted_tally_equals_the_reference(
    first: list[TurnVerdict], second: list[TurnVerdict]
) -> None:
    """Tallies of rolling windows and reports are merged and subtracted: counters then hold other values (and a
    per-tool entry may have gone); counting onto them must still agree."""
    base = Tally()
    for v in first:
        base._add_py(v)
    c, py = base.copy(), base.copy()
    c.subtract(base)
    py.subtract(base)
    for v in second:
        add_both(c, py, v)
    assert state(c) == state(py)


def _sample() -> TurnVerdict:
    calls = (
        CallVerdict(0, "search", "c0", Outcome.CORRECT, True, 0, True, (), True),
        CallVerdict(1, "ghost", "c1", Outcome.HALLUCINATED, False, None, False,
                    (SchemaViolation(ViolationKind.TYPE, "$.x", "m"), SchemaViolation(ViolationKind.ENUM, "$.y", "m"))),
    )
    # fmt: off
    return TurnVerdict(
        "a", "t", "s", "in", True, False, "r1", 0, calls, (MissedUnit("read", 1),), 2, None, False, True, False,
        True, 0.5, ("ghost",), False, False, True, (("search", "search"), ("read", NONE_LABEL)), "", (("search", 1),),
    )
    # fmt: on


class _Verdict(TurnVerdict):
    __slots__ = ()


class _Counter(Counter[str]):
    pass


class _Counts(ToolCounts):
    __slots__ = ()


def _unusual() -> list[tuple[str, Tally, TurnVerdict]]:
    """(what, a Tally, a verdict) that the extension must leave to Python."""
    v = _sample()

    def tally(**changes: Any) -> Tally:
        t = Tally()
        t._add_py(v)
        for k, x in changes.items():
            setattr(t, k, x)
        return t

    def odd(**changes: Any) -> TurnVerdict:  # fields of other types than declared
        return dataclasses.replace(v, **changes)

    def call(**changes: Any) -> TurnVerdict:
        return odd(calls=(v.calls[0], dataclasses.replace(v.calls[1], **changes)))

    sub = _Verdict(**{f.name: getattr(v, f.name) for f in dataclasses.fields(v)})
    return [
        ("a subclass of TurnVerdict", Tally(), sub),
        ("calls in a list", Tally(), odd(calls=list(v.calls))),
        ("a call that is not a CallVerdict", Tally(), odd(calls=(v.calls[0], ("ghost",)))),
        ("judged as 1", Tally(), odd(judged=1)),
        ("a name that is not a str", Tally(), call(name=b"ghost")),
        ("schema_valid as 0", Tally(), call(schema_valid=0)),
        ("violations in a list", Tally(), call(violations=list(v.calls[1].violations))),
        ("a violation kind that is a str", Tally(), call(violations=(SchemaViolation("type", "", ""),))),  # type: ignore[arg-type]
        ("a missed unit that is not a MissedUnit", Tally(), odd(missed=(("read", 1),))),
        ("a confusion cell that is not a str", Tally(), odd(confusion=((1, 2),))),
        ("a forbidden tool that is not a str", Tally(), odd(forbidden=(None,))),
        ("a sequence score that is a bool", Tally(), odd(sequence_score=True)),
        ("expected calls that are a float", Tally(), odd(expected_calls=2.0)),
        ("an unset slot", Tally(), _unset(v)),
        ("a counter that is a Counter subclass", tally(violations=_Counter({"type": 1})), v),
        ("a count that is not a number", tally(correct=Counter()), v),
        ("a per-tool entry of another class", tally(per_tool={"search": _Counts()}), v),
        ("a rule-failure count that is a float", tally(rule_failures=Counter({"r1": 0.5})), v),
        ("a violation count that is a float", tally(violations=Counter({"enum": 0.5})), v),
    ]


def _unset(v: TurnVerdict) -> TurnVerdict:
    out = dataclasses.replace(v)
    del out.over_calling
    return out


@pytest.mark.parametrize("what, t, v", _unusual(), ids=[w for w, _, _ in _unusual()])
def test_what_it_does_not_take_it_leaves_untouched(what: str, t: Tally, v: TurnVerdict) -> None:
    assert CTALLY is not None
    before = state(t)
    assert CTALLY.add(t, v) is False and CTALLY.add_failed(t, v) is None
    assert state(t) == before


def test_tally_add_counts_the_usual_verdict_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shape the judge builds, into a Tally as made: counted by the extension (not by _add_py), as Python
    counts it."""
    assert CTALLY is not None
    ref = Tally()
    ref._add_py(_sample())
    t = Tally()
    assert CTALLY.add(t, _sample()) is True
    assert state(t) == state(ref)
    assert t.violations == Counter({"type": 1, "enum": 1}) and list(t.per_tool) == ["search", "read"]
    if _tally._ADD_C is not None:  # Tally.add itself uses it (not under TOOLWATCH_PURE_PYTHON=1)
        monkeypatch.setattr(Tally, "_add_py", lambda self, v: pytest.fail("counted by Python"))
        t = Tally()
        t.add(_sample())
        assert state(t) == state(ref)


def test_what_c_leaves_tally_add_counts_in_python() -> None:
    class Mine(Tally):
        __slots__ = ()

    t, ref = Mine(), Tally()
    t.add(_sample())
    t.add(dataclasses.replace(_sample(), calls=list(_sample().calls)))  # type: ignore[arg-type]
    ref._add_py(_sample())
    ref._add_py(_sample())
    assert state(t) == state(ref)


@pytest.mark.parametrize("failing", [False, True])
def test_add_verdict_counts_and_answers_failed_for_what_c_takes_and_what_it_leaves(failing: bool) -> None:
    """The report sink's call: tally.add(v) then v.failed, whether the extension takes the verdict or not."""
    v = _sample()
    if not failing:  # end-to-end, nothing forbidden, no call hallucinated or invalid
        v = dataclasses.replace(v, end_to_end=True, forbidden=(), calls=v.calls[:1])
    assert v.failed is failing
    for odd in (v, dataclasses.replace(v, calls=list(v.calls))):  # type: ignore[arg-type]  # list: left to Python
        t, ref = Tally(), Tally()
        assert add_verdict(t, odd) is failing
        ref._add_py(v)
        assert state(t) == state(ref)


def test_a_turnless_group_is_no_turn_with_calls_in_c_as_in_python() -> None:
    """A turnless group (its calls' turn never arrived) counts as a turn and a turnless turn, never as an agent turn
    with calls (METRICS.md: the tool usage rate is over agent invocations), in the extension as in the reference."""
    assert CTALLY is not None
    call = CallVerdict(0, "search", "c0", Outcome.UNJUDGED, True, None, True)
    agent_turn = dataclasses.replace(_sample(), calls=(call,), forbidden=())
    turnless = dataclasses.replace(agent_turn, judged=False, turnless=True, rule=None, missed=(), confusion=(),
                                   expected_by_tool=(), end_to_end=None, selection_ok=None, over_calling=None)
    empty = dataclasses.replace(agent_turn, calls=())
    c, py = Tally(), Tally()
    for v in (turnless, agent_turn, turnless, empty):
        add_both(c, py, v)
    assert state(c) == state(py)
    assert (c.turns, c.turnless_turns, c.turns_with_calls, c.all_calls) == (4, 2, 1, 3)
    assert c.ratios()["tool_usage_rate"] == 0.5
