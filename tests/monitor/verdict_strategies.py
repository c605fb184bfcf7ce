"""Hypothesis strategies of TurnVerdicts and CallVerdicts, for the tests that count verdicts two ways and compare
(the C tally against Tally's Python reference; the metrics' fast path against the plain one)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from monitor.verdict import (
    NONE_LABEL,
    UNKNOWN_LABEL,
    CallVerdict,
    MissedUnit,
    Outcome,
    SchemaViolation,
    TurnVerdict,
    ViolationKind,
)

TOOLS = ("search", "read", "delete", "ghost", "y" * 300)  # ghost and the long one are outside a catalog of the rest
SCORES = (None, 0.0, 1.0, 0.5, 1 / 3, 0.1, 0.7)
OPT = (None, True, False)


@st.composite
def call_verdicts(
    draw: st.DrawFn, index: int, *, in_catalog: st.SearchStrategy[Any], text: st.SearchStrategy[str]
) -> CallVerdict:
    kinds = st.sampled_from(ViolationKind)
    return CallVerdict(
        index=index,
        name=draw(st.sampled_from(TOOLS)),
        call_id=f"c{index}",
        outcome=draw(st.sampled_from(Outcome)),
        in_catalog=draw(in_catalog),
        schema_valid=draw(st.sampled_from(OPT)),
        violations=tuple(draw(st.lists(st.builds(SchemaViolation, kinds, st.just("$.x"), text), max_size=4))),
        args_ok=draw(st.sampled_from(OPT)),
    )


@st.composite
def turn_verdicts(
    draw: st.DrawFn,
    *,
    agents: tuple[str, ...] = ("a",),
    text: st.SearchStrategy[str] = st.just(""),
    scores: tuple[float | int | None, ...] = SCORES,
    in_catalog: st.SearchStrategy[Any] = st.booleans(),
) -> TurnVerdict:
    """A verdict of up to 4 calls, every field drawn; `agents`, the texts (input, reason, violation messages), the
    sequence scores and the calls' `in_catalog` as the test needs them."""
    calls = tuple(draw(call_verdicts(i, in_catalog=in_catalog, text=text)) for i in range(draw(st.integers(0, 4))))
    tools = st.sampled_from(TOOLS)
    cells = st.sampled_from((*TOOLS, NONE_LABEL, UNKNOWN_LABEL))
    return TurnVerdict(
        agent=draw(st.sampled_from(agents)),
        trace_id="t",
        span_id="s",
        input_text=draw(text),
        judged=draw(st.booleans()),
        turnless=draw(st.booleans()),
        rule=draw(st.sampled_from((None, "", "r1", "r2", "case:1", "case:2"))),
        alternative=None,
        calls=calls,
        missed=tuple(MissedUnit(t, i) for i, t in enumerate(draw(st.lists(tools, max_size=3)))),
        expected_calls=draw(st.integers(0, 3)),
        max_calls=None,
        selection_ok=draw(st.sampled_from(OPT)),
        args_ok=draw(st.booleans()),
        schema_ok=draw(st.booleans()),
        sequence_ok=draw(st.sampled_from(OPT)),
        sequence_score=draw(st.sampled_from(scores)),
        forbidden=tuple(draw(st.lists(tools, max_size=2, unique=True))),
        response_ok=draw(st.sampled_from(OPT)),
        end_to_end=draw(st.sampled_from(OPT)),
        over_calling=draw(st.sampled_from(OPT)),
        confusion=tuple(draw(st.lists(st.tuples(cells, cells), max_size=3))),
        reason=draw(text),
        expected_by_tool=tuple((t, draw(st.integers(0, 2))) for t in draw(st.lists(tools, max_size=3, unique=True))),
    )
