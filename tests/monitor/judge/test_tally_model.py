"""Tally.add against a plain model of its per-call counts, over random verdicts (the fast path must not drift)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.judge import Tally
from monitor.verdict import CallVerdict, Outcome, SchemaViolation, TurnVerdict, ViolationKind

TOOLS = ("a", "b", "zz")

calls = st.builds(
    lambda i, name, outcome, known, valid, kinds, args_ok: CallVerdict(
        i,
        name,
        "",
        outcome,
        known,
        None,
        valid,
        tuple(SchemaViolation(k, "", "") for k in kinds) if valid is False else (),
        args_ok,
    ),
    st.integers(0, 5),
    st.sampled_from(TOOLS),
    st.sampled_from(list(Outcome)),
    st.booleans(),
    st.sampled_from([None, True, False]),
    st.lists(st.sampled_from(list(ViolationKind)), max_size=3),
    st.sampled_from([None, True, False]),
)


def verdict(cs: list[CallVerdict], judged: bool, forbidden: tuple[str, ...]) -> TurnVerdict:
    # fmt: off
    return TurnVerdict(
        "agent", "t", "s", "in", judged, False, "r" if judged else None, 0 if judged else None, tuple(cs), (), 0, None,
        True if judged else None, True, True, None, None, forbidden, None, True if judged else None, False, (), "", (),
    )
    # fmt: on


Turns = list[tuple[list[CallVerdict], bool, tuple[str, ...]]]


def model(turns: Turns) -> tuple[dict[str, int], dict[str, dict[str, int]], dict[str, int]]:
    """Totals, per-tool counts and violation kinds, counted the plain way."""
    want: dict[str, int] = {}
    tools: dict[str, dict[str, int]] = {}
    kinds: dict[str, int] = {}

    def bump(key: str, tool: str | None = None) -> None:
        want[key] = want.get(key, 0) + 1
        if tool is not None:
            tools.setdefault(tool, {})[key] = tools.setdefault(tool, {}).get(key, 0) + 1

    for cs, judged, forbidden in turns:
        for c in cs:
            count_call(c, judged, forbidden, bump, kinds)
    return want, tools, kinds


def count_call(
    c: CallVerdict, judged: bool, forbidden: tuple[str, ...], bump: Callable[..., None], kinds: dict[str, int]
) -> None:
    tool = c.name if c.in_catalog else None
    if tool is not None:
        bump("calls", tool)
        if judged:
            bump("judged_calls_of_tool", tool)
    if c.outcome is Outcome.HALLUCINATED:
        bump("hallucinated")
        if judged:
            bump("judged_hallucinated")
    else:
        bump(c.outcome.value, tool)
    if c.schema_valid is not None:
        bump("schema_checked_calls", tool)
        if c.schema_valid:
            bump("schema_valid_calls", tool)
        else:
            for k in {x.kind.value for x in c.violations}:
                kinds[k] = kinds.get(k, 0) + 1
    if c.args_ok is not None:
        bump("args_checked_calls", tool)
        if c.args_ok:
            bump("args_ok_calls", tool)
    if c.name in forbidden:
        bump("forbidden_calls")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(calls, max_size=4), st.booleans(), st.sampled_from([(), ("a",)])), max_size=6))
def test_per_call_counts_follow_the_model(turns: Turns) -> None:
    tally = Tally()
    for cs, judged, forbidden in turns:
        tally.add(verdict(cs, judged, forbidden))
    want, tools, kinds = model(turns)
    totals = ("hallucinated", "judged_hallucinated", "schema_checked_calls", "schema_valid_calls",
              "args_checked_calls", "args_ok_calls", "forbidden_calls", "correct", "wrong_tool", "spurious",
              "unjudged")  # fmt: skip
    for key in totals:
        assert getattr(tally, key) == want.get(key, 0), key
    assert dict(tally.violations) == kinds
    assert set(tally.per_tool) == set(tools)
    for tool, counts in tools.items():
        tc = tally.per_tool[tool]
        assert tc.calls == counts.get("calls", 0)
        assert tc.judged_calls == counts.get("judged_calls_of_tool", 0)
        for key in ("correct", "wrong_tool", "spurious", "unjudged", "schema_checked_calls", "schema_valid_calls",
                    "args_checked_calls", "args_ok_calls"):  # fmt: skip
            assert getattr(tc, key) == counts.get(key, 0), (tool, key)
