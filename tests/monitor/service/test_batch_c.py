"""The C groups of a verdict batch (monitor/metrics/_cbatch.c) are the Python reference's (signatures, Counter).

Batches of generated verdicts, many repeated (as copies: equal, not identical), are grouped both ways: the same
signatures (of the same types, item by item), the same counts, in the same order, and each group's last verdict
the one `VerdictBatch.example` picks. What the extension does not take it leaves to Python (None). The extension
is imported directly, so these tests run even when TOOLWATCH_PURE_PYTHON=1; they are skipped when it was not built.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import importlib
import sys
from collections import Counter
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.metrics import VerdictBatch, _batch
from monitor.metrics._batch import signatures
from monitor.verdict import CallVerdict, MissedUnit, Outcome, SchemaViolation, TurnVerdict, ViolationKind
from tests.monitor import verdict_strategies
from tests.monitor.verdict_strategies import SCORES


def _import() -> ModuleType | None:
    try:
        mod = importlib.import_module("monitor.metrics._cbatch")
    except ImportError:
        return None
    mod.init(TurnVerdict, CallVerdict, MissedUnit, SchemaViolation, tuple(Outcome), tuple(ViolationKind), Counter)
    return mod


CBATCH = _import()
pytestmark = pytest.mark.skipif(CBATCH is None, reason="the C batch groups were not built")
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

turn_verdicts = functools.partial(
    verdict_strategies.turn_verdicts,
    agents=("a", "b", "x" * 40),
    scores=(*SCORES, 0, 1),
    in_catalog=st.sampled_from((None, True, False)),
)


def _shape(x: object) -> object:
    """x with the type of every item kept: (1 == True, but a signature holding 1 is not one holding True)."""
    if isinstance(x, tuple | frozenset):
        items = [_shape(y) for y in x]
        return type(x).__name__, items if isinstance(x, tuple) else sorted(items, key=repr)
    return type(x).__name__, x


def reference(vs: list[TurnVerdict]) -> tuple[list[tuple[object, int]], list[int]]:
    sigs = signatures(vs)
    groups = Counter(sigs)
    where = dict(zip(sigs, range(len(sigs)), strict=True))
    return [(_shape(s), n) for s, n in groups.items()], [where[s] for s in groups]


def in_c(vs: list[TurnVerdict]) -> tuple[list[tuple[object, int]], list[int]] | None:
    assert CBATCH is not None
    out = CBATCH.groups(tuple(vs))
    if out is None:
        return None
    groups, last = out
    assert type(groups) is Counter
    return [(_shape(s), n) for s, n in groups.items()], list(last)


@st.composite
def batches(draw: st.DrawFn) -> list[TurnVerdict]:
    """Up to 40 verdicts drawn from a pool of up to 6, each a copy (equal fields, not the same objects)."""
    pool = draw(st.lists(turn_verdicts(), min_size=1, max_size=6))
    picks = draw(st.lists(st.integers(0, len(pool) - 1), max_size=40))
    return [copy.deepcopy(pool[i]) if k % 2 else pool[i] for k, i in enumerate(picks)]


@FAST
@given(batches())
def test_c_groups_are_the_reference_groups(vs: list[TurnVerdict]) -> None:
    assert in_c(vs) == reference(vs)


@FAST
@given(turn_verdicts(), turn_verdicts())
def test_verdicts_one_field_apart_group_as_the_reference_does(v: TurnVerdict, other: TurnVerdict) -> None:
    """Every signature field changed alone (of the turn, of its first call, of its calls' violations)."""
    vs = [v]
    for f in (f.name for f in dataclasses.fields(TurnVerdict)):
        vs.append(dataclasses.replace(v, **{f: getattr(other, f)}))
    if v.calls and other.calls:
        for f in (f.name for f in dataclasses.fields(CallVerdict)):
            call = dataclasses.replace(v.calls[0], **{f: getattr(other.calls[0], f)})
            vs.append(dataclasses.replace(v, calls=(call, *v.calls[1:])))
    vs += [copy.deepcopy(w) for w in vs]
    assert in_c(vs) == reference(vs)


def _call(**kw: Any) -> CallVerdict:
    return CallVerdict(**{"index": 0, "name": "search", "call_id": "c", "outcome": Outcome.CORRECT, "in_catalog": True,
                          **kw})


def _turn(**kw: Any) -> TurnVerdict:
    base: dict[str, Any] = dict(
        agent="a", trace_id="t", span_id="s", input_text="", judged=True, turnless=False, rule="r", alternative=None,
        calls=(_call(),), missed=(), expected_calls=1, max_calls=None, selection_ok=True, args_ok=True,
        schema_ok=True, sequence_ok=None, sequence_score=None, forbidden=(), response_ok=None, end_to_end=True,
        over_calling=False, confusion=(("search", "search"),), reason="", expected_by_tool=(("search", 1),),
    )
    return TurnVerdict(**{**base, **kw})


def test_violations_and_missed_group_by_value() -> None:
    v1 = SchemaViolation(ViolationKind.TYPE, "$.a", "x")
    v2 = SchemaViolation(ViolationKind.REQUIRED, "$.b", "y")
    vs = [
        _turn(calls=(_call(schema_valid=False, violations=(v1, v2)),)),
        _turn(calls=(_call(schema_valid=False, violations=(v2, v1, v1)),)),  # the same kinds: one group
        _turn(calls=(_call(schema_valid=False, violations=(v1,)),)),
        _turn(missed=(MissedUnit("read", 0),)),
        _turn(missed=(MissedUnit("re" + "ad", 3),)),  # an equal tool name, another object
        _turn(calls=()),
        _turn(calls=(_call(), _call(index=1))),
        _turn(calls=(_call(), _call(index=1, name="read"))),
        _turn(sequence_score=0.5),
        _turn(sequence_score=1.0),  # scored too: one group
    ]
    c, ref = in_c(vs), reference(vs)
    assert c == ref
    assert [n for _, n in ref[0]] == [2, 1, 2, 1, 1, 1, 2]


STR_KIND: Any = "type"  # the kind's value, not the enum member


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param(lambda: _turn(judged=1), id="int-flag"),
        pytest.param(lambda: _turn(calls=[_call()]), id="list-calls"),
        pytest.param(lambda: _turn(calls=(_call(outcome="correct"),)), id="str-outcome"),
        pytest.param(lambda: _turn(calls=(_call(in_catalog=1),)), id="int-in-catalog"),
        pytest.param(lambda: _turn(calls=(_call(violations=[]),)), id="list-violations"),
        pytest.param(lambda: _turn(calls=(_call(violations=(SchemaViolation(STR_KIND, "$", ""),)),)), id="str-kind"),
        pytest.param(lambda: _turn(agent=type("S", (str,), {})("a")), id="str-subclass"),
        pytest.param(lambda: _turn(expected_calls=True), id="bool-count"),
        pytest.param(lambda: _turn(confusion=(["a", "b"],)), id="list-pair"),
        pytest.param(lambda: _turn(missed=("read",)), id="str-missed"),
        pytest.param(lambda: _turn(forbidden=("a", 1)), id="int-forbidden"),
    ],
)
def test_what_c_does_not_take_is_left_to_python(odd: Any) -> None:
    vs = [_turn(), odd(), _turn()]
    assert in_c(vs) is None
    batch = VerdictBatch(vs)
    try:
        ref = reference(vs)[0]
    except (TypeError, AttributeError) as exc:  # unhashable, or no .tool: the batch raises as the reference does
        with pytest.raises(type(exc), match=str(exc)):
            batch.groups()
        return
    assert [(_shape(s), n) for s, n in batch.groups().items()] == ref


def test_unset_slot_and_other_classes_are_left_to_python() -> None:
    unset = _turn()
    del unset.rule
    sub = type("Sub", (TurnVerdict,), {"__slots__": ()})
    assert in_c([_turn(), unset]) is None
    assert in_c([_turn(), sub(**{f.name: getattr(_turn(), f.name) for f in dataclasses.fields(TurnVerdict)})]) is None
    assert in_c([_turn(), "not a verdict"]) is None  # type: ignore[list-item]


def test_the_batch_uses_c_and_picks_the_reference_examples() -> None:
    vs = [_turn(), _turn(agent="b"), _turn(), _turn(rule="q"), _turn(agent="b")]
    batch = VerdictBatch(vs)
    groups = batch.groups()
    assert (batch._last is not None) == (_batch._GROUPS_C is not None)
    assert list(groups.values()) == [2, 2, 1]
    assert [batch.example(s) for s in groups] == [vs[2], vs[4], vs[3]]
    assert CBATCH is not None and CBATCH.groups(()) == (Counter(), ())


def test_a_collection_that_changes_the_verdicts_while_grouped_crashes_nothing() -> None:
    """The garbage collector's callbacks (Python code, as finalizers are) reassign the verdicts' slots to odd values
    whenever a collection runs; collections made as frequent as can be. No crash: groups or None, never a partial
    result or a stray exception."""
    kinds = (SchemaViolation(ViolationKind.TYPE, "$", ""),)
    vs = [_turn(agent=f"a{i % 7}", calls=(_call(schema_valid=False, violations=kinds),) * (i % 3)) for i in range(300)]
    odd: list[object] = [None, 1, [], "x", (1,), object()]

    def meddle(phase: str, info: dict[str, int]) -> None:
        for k, v in enumerate(vs[::17]):
            v.agent = odd[k % len(odd)]  # type: ignore[assignment]
            v.calls = odd[(k + 1) % len(odd)]  # type: ignore[assignment]

    threshold = gc.get_threshold()
    gc.callbacks.append(meddle)
    gc.set_threshold(1, 1, 1)
    try:
        for _ in range(20):
            out = CBATCH.groups(tuple(vs)) if CBATCH is not None else None
            assert out is None or sum(out[0].values()) == len(vs)
            for k, v in enumerate(vs):  # restored, for the next round
                v.agent, v.calls = f"a{k % 7}", (_call(schema_valid=False, violations=kinds),) * (k % 3)
    finally:
        gc.callbacks.remove(meddle)
        gc.set_threshold(*threshold)


def test_signatures_the_hash_does_not_tell_apart_are_compared_in_full() -> None:
    """The C hash takes the lengths of the pairs and forbidden tools, not their contents: verdicts differing only
    there share a hash and must still be grouped apart (and equal ones together)."""
    vs = [
        _turn(confusion=(("search", "read"),)),
        _turn(confusion=(("read", "search"),)),
        _turn(expected_by_tool=(("search", 2),)),
        _turn(expected_by_tool=(("read", 1),)),
        _turn(forbidden=("read",)),
        _turn(forbidden=("delete",)),
        _turn(expected_calls=2),
        _turn(),
    ]
    vs += [copy.deepcopy(v) for v in reversed(vs)]
    c, ref = in_c(vs), reference(vs)
    assert c == ref
    assert [n for _, n in ref[0]] == [2] * 8


def test_grouping_leaves_every_reference_count_as_it_was() -> None:
    """Groups made and dropped many times (taken by C, and left to Python by a verdict it does not take) hold no
    reference to what the verdicts hold: names, enum members, the verdicts' tuples, flags."""
    agent = "agent-" + str(len(STR_KIND))  # a str of its own, not interned
    kind = SchemaViolation(ViolationKind.TYPE, "$", "")
    vs = [
        _turn(agent=agent, calls=(_call(schema_valid=False, violations=(kind, kind)),), missed=(MissedUnit("rd", 0),)),
        _turn(agent=agent, calls=(_call(), _call(name="x"))),
        _turn(agent=agent, calls=()),
        _turn(agent=agent),
    ]
    batch = tuple(vs * 5 + [copy.deepcopy(v) for v in vs])
    odd = (*batch, _turn(judged=1))
    held = [agent, kind, ViolationKind.TYPE, Outcome.CORRECT, vs[0].calls, vs[0].missed, vs[0].confusion, vs[1].calls]
    assert CBATCH is not None
    rounds = 2000
    gc.collect()
    before = [sys.getrefcount(x) for x in held]
    for _ in range(rounds):
        assert CBATCH.groups(batch) is not None
        assert CBATCH.groups(odd) is None
    gc.collect()
    # A reference kept or dropped by a call shows `rounds` times over. Shared objects such as the enum members are also
    # held by whatever the rest of the process (earlier tests' threads and garbage) holds: a few come and go meanwhile.
    drift = [sys.getrefcount(x) - b for x, b in zip(held, before, strict=True)]
    assert all(abs(d) < rounds // 20 for d in drift), drift


class _Prefilled(dict[object, int]):
    def __init__(self) -> None:
        super().__init__({"stale": 1})


@pytest.mark.parametrize("counter", [list, _Prefilled], ids=["not a dict", "not empty"])
def test_a_counter_class_that_does_not_make_an_empty_dict_leaves_the_batch_to_python(counter: type) -> None:
    assert CBATCH is not None
    v = _turn()
    try:
        CBATCH.init(
            TurnVerdict, CallVerdict, MissedUnit, SchemaViolation, tuple(Outcome), tuple(ViolationKind), counter
        )
        assert CBATCH.groups((v, copy.copy(v))) is None  # not a SystemError: no result without an exception
    finally:
        _import()
    assert in_c([v, copy.copy(v)]) == reference([v, copy.copy(v)])


def test_more_violation_kinds_than_bits_are_refused_at_init() -> None:
    assert CBATCH is not None
    try:
        with pytest.raises(ImportError, match="Python VerdictBatch.groups is used"):
            CBATCH.init(TurnVerdict, CallVerdict, MissedUnit, SchemaViolation, tuple(Outcome),
                        tuple(object() for _ in range(64)), Counter)
        assert CBATCH.groups((_turn(),)) is None  # refused: nothing taken
    finally:
        _import()
    assert CBATCH.groups((_turn(),)) is not None
