"""The fast verdict builders produce ordinary, frozen, equal instances (both strategies)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from monitor.judge._build import Builder
from monitor.verdict import ArgCheckResult, CallVerdict, MissedUnit, Outcome, TurnVerdict

CALL = CallVerdict(
    0, "a", "c1", Outcome.CORRECT, True, 0, True, (), True, (ArgCheckResult("x", "exact", "1", "1", True),)
)
TURN_FIELDS = {f.name: f for f in dataclasses.fields(TurnVerdict)}
TURN = {
    "agent": "a", "trace_id": "t", "span_id": "s", "input_text": "in", "judged": True, "turnless": False,
    "rule": "r", "alternative": 0, "calls": (CALL,), "missed": (MissedUnit("b", 1),), "expected_calls": 2,
    "max_calls": 2, "selection_ok": False, "args_ok": True, "schema_ok": True, "sequence_ok": None,
    "sequence_score": None, "forbidden": (), "response_ok": None, "end_to_end": False, "over_calling": False,
    "confusion": (("a", "a"), ("b", "(none)")), "reason": "failed (r): missed b",
}  # fmt: skip


@pytest.mark.parametrize("strategy", ["build", "_descriptors"])
def test_builders_equal_the_constructor(strategy: str) -> None:
    builder = Builder(TurnVerdict, tuple(TURN))
    build = builder.build if strategy == "build" else builder._descriptors()
    built = build(*TURN.values())
    expected = TurnVerdict(**TURN)  # type: ignore[arg-type]
    assert type(built) is TurnVerdict
    assert built == expected and hash(built) == hash(expected)
    assert built.expected_by_tool == TURN_FIELDS["expected_by_tool"].default  # a field not given: its default
    assert pickle.loads(pickle.dumps(built)) == expected
    assert dataclasses.replace(built, agent="b").agent == "b"
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.agent = "x"  # type: ignore[misc]


def test_builder_uses_the_class_switch_for_verdicts() -> None:
    assert Builder(TurnVerdict, tuple(TURN)).build.__name__.endswith("Mirror")
    assert Builder(CallVerdict, ("index", "name", "call_id", "outcome", "in_catalog")).build(
        1, "b", "", Outcome.SPURIOUS, True
    ) == CallVerdict(1, "b", "", Outcome.SPURIOUS, True)


def test_builder_rejects_unknown_or_missing_fields() -> None:
    with pytest.raises(TypeError, match="no field"):
        Builder(CallVerdict, ("index", "nope"))
    with pytest.raises(TypeError, match="no default"):
        Builder(CallVerdict, ("index",))
