"""Turns of one trace due together (their grace periods ending by one poll) released as one after the other.

Each turn's release looked at every call of its trace (_release_turn), so n turns of a trace due together cost n
times its calls. They are released as one after the other would be, the trace's calls looked at once for all of them.
The reference is that release one turn at a time (`OneByOne`, as poll released them before): random traces of several
turns (calls right under them, under chat spans, under spans never received, under other calls; requested calls,
offered tools, inputs, handoffs; RunRoots waiting beside them; turns due at other times) give the same turns, in the
same order, and the same state, in C and in Python. And releasing n turns due together costs work in proportion to n.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.assembly import TurnAssembler, _assembler
from monitor.assembly._assembler import _Trace
from monitor.records import Turn

from .test_assembly_c import PythonAssembler, Side, Spec, _lines_run, _on_path

pytestmark = pytest.mark.skipif(_assembler._ADD_C is None, reason="the C assembler is not loaded")

T, U = "a" * 32, "b" * 32
S = 1_000_000_000


class OneByOne:
    """Each turn released by _release_turn, as poll released turns due together before (the reference)."""

    def __init__(self, asm: TurnAssembler, tid: str, tr: _Trace) -> None:
        self.asm, self.tid, self.tr = asm, tid, tr

    def release(self, sid: str, out: list[Turn], now_ns: int) -> None:
        self.asm._release_turn(self.tid, self.tr, sid, out, now_ns)

    def close(self) -> None:
        pass


class OneByOneAssembler(PythonAssembler):
    def _due_turns(self, tid: str, tr: _Trace, sids: list[str]) -> Any:
        return OneByOne(self, tid, tr)


TURNS = [f"t{i}" for i in range(6)]
SPANS = ["m0", "m1", "m2", "m3"]
CALLS = [f"c{i}" for i in range(8)]
PARENTS = [*TURNS, *SPANS, "c0", "c1", "gone", "", "x"]
trace = st.sampled_from([T, U])
start, end = st.integers(0, 6), st.integers(0, 9)
spec = st.one_of(
    st.tuples(st.sampled_from(["turn", "turn0"]), trace, st.sampled_from(TURNS), st.just(""), start, end),
    st.tuples(st.sampled_from(["other", "other", "marked", "server"]), trace, st.sampled_from(SPANS),
              st.sampled_from(PARENTS), start, end),
    st.tuples(st.sampled_from(["call", "call:a", "call:b", "req0:a", "req1:b", "req0", "offered", "input", "handoff"]),
              trace, st.sampled_from(CALLS), st.sampled_from(PARENTS), start, end),
    st.tuples(st.just("run"), trace, st.sampled_from(["x", "y"]), st.sampled_from([*SPANS, "q", "t0"]), start, end),
)  # fmt: skip
step: st.SearchStrategy[tuple[str, list[Spec], int]] = st.one_of(
    st.tuples(st.just("add"), st.lists(spec, max_size=24), st.integers(0, 2)),
    st.tuples(st.sampled_from(["poll", "poll_py"]), st.just([]), st.integers(0, 3)),
)


def run_three(steps: list[tuple[str, list[Spec], int]], max_pending: int = 100) -> Side:
    """The steps on an assembler in C, one in Python and the reference (one turn at a time): the same turns (the
    same records) and the same state after each step. The C side."""
    sides = [
        Side(cls(grace_s=1, turnless_timeout_s=5, max_pending=max_pending))
        for cls in (TurnAssembler, PythonAssembler, OneByOneAssembler)
    ]
    now = 0
    for op, specs, dt in [*steps, ("poll", [], 3), ("poll", [], 6), ("flush", [], 0)]:
        now += dt * S
        outs = []
        for side in sides:
            a = side.asm
            if op == "add":
                got = a.add_records(side.records(specs), now)
            elif op == "poll_py":
                got = a._poll_py(now)
                a._remember_judged(got)  # as poll does
            else:
                got = a.poll(now) if op == "poll" else a.flush()
            side.released += got
            outs.append((side.turns(got), side.state()))
        assert outs[0] == outs[2] and outs[1] == outs[2]
    return sides[0]


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=8), st.sampled_from([1, 2, 100]))
def test_turns_due_together_are_released_as_one_at_a_time(
    steps: list[tuple[str, list[Spec], int]], max_pending: int
) -> None:
    """Polls, flushes and evictions (at a bound of 1 or 2 pending traces) alike."""
    run_three(steps, max_pending)


# Denser: most records in one trace, calls and turns more often than spans, runs under turns and spans never received,
# flushes between the steps, and calls that cannot be ordered ("bad": no start time) in the runs without a flush (C's
# flush after an error leaves other state than the Python one, as before turns were released together). More of its
# traces hold several turns due together with calls, beside turns due later or waiting runs, and releases that raise
# midway; the rare paths of _due are also held by hand (test_turns_due_together_with_a_turn_due_later).
dense_trace = st.sampled_from([T, T, T, U])
dense_turn = st.tuples(
    st.sampled_from(["turn", "turn0"]), dense_trace, st.sampled_from(TURNS[:5]), st.just(""), start, end
)
dense_spec = st.one_of(
    dense_turn,
    dense_turn,
    *[st.tuples(st.sampled_from(["call", "call", "call:a", "call:b", "req0:a", "req1:b", "req0", "offered", "input",
                                 "handoff", "bad"]),
                dense_trace, st.sampled_from(CALLS[:6]),
                st.sampled_from([*TURNS[:5], *SPANS[:3], "c0", "c1", "gone", "x"]), start, end)] * 3,
    st.tuples(st.sampled_from(["other", "other", "marked", "server"]), dense_trace, st.sampled_from(SPANS[:3]),
              st.sampled_from([*TURNS[:5], *SPANS[:3], "gone", "x"]), start, end),
    st.tuples(st.just("run"), dense_trace, st.sampled_from(["x", "y", "z"]),
              st.sampled_from([*SPANS[:3], *TURNS[:5], "x", "y", "q", "gone"]), start, end),
)  # fmt: skip
dense_step: st.SearchStrategy[tuple[str, list[Spec], int]] = st.one_of(
    st.tuples(st.just("add"), st.lists(dense_spec, min_size=1, max_size=16), st.integers(0, 2)),
    st.tuples(st.sampled_from(["poll", "poll_py"]), st.just([]), st.integers(0, 3)),
    st.tuples(st.just("flush"), st.just([]), st.just(0)),
)  # fmt: skip


def _dense_records(side: Side, specs: list[Spec]) -> list[Any]:
    """side.records(specs), a "bad" call given no start time (its turn's calls cannot be ordered)."""
    out = side.records([("call", *s[1:]) if s[0] == "bad" else s for s in specs])
    for s, r in zip(specs, out, strict=True):
        if s[0] == "bad":
            r.start_ns = None  # type: ignore[assignment]
    return out


@settings(max_examples=500, deadline=None)
@given(st.lists(dense_step, min_size=1, max_size=8), st.sampled_from([1, 2, 100, 100]))
def test_dense_traces_release_turns_due_together_as_one_at_a_time(
    steps: list[tuple[str, list[Spec], int]], max_pending: int
) -> None:
    """As test_turns_due_together_are_released_as_one_at_a_time, errors included: the same turns, or the same error,
    and the same state after each step (Side.state checks the RunRoots held are those waiting)."""
    if any(op == "flush" for op, _, _ in steps):
        steps = [(op, [s for s in specs if s[0] != "bad"], dt) for op, specs, dt in steps]
    sides = [
        Side(cls(grace_s=1, turnless_timeout_s=5, max_pending=max_pending))
        for cls in (TurnAssembler, PythonAssembler, OneByOneAssembler)
    ]
    now = 0
    for op, specs, dt in [*steps, ("poll", [], 3), ("poll", [], 6)]:
        now += dt * S
        outs = []
        for side in sides:
            a = side.asm
            try:
                if op == "add":
                    got = a.add_records(_dense_records(side, specs), now)
                elif op == "poll_py":
                    got = a._poll_py(now)
                    a._remember_judged(got)  # as poll does
                else:
                    got = a.poll(now) if op == "poll" else a.flush()
                res: Any = side.turns(got)
            except TypeError:  # calls that cannot be ordered
                res = "raised"
            outs.append((res, side.state()))
        assert outs[0] == outs[2] and outs[1] == outs[2]


def test_many_turns_due_together_each_get_their_own_calls() -> None:
    """Four turns of a trace due together: t1's calls right under it, t2's under its chat span, t3's right under it,
    t4's under a span never received in its time (t4 the trace's last turn when it is released: the one turn enclosing
    it), and a call under another span never received, outside every turn's time, judged alone at the timeout."""
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [
            ("call", T, "c1", "t1", 1, 2), ("call", T, "c2", "t1", 2, 3), ("other", T, "m", "t2", 1, 5),
            ("call", T, "c3", "m", 2, 3), ("call", T, "c4", "t3", 2, 3), ("call", T, "c5", "gone", 6, 7),
            ("call", T, "c6", "p", 20, 21),
            *[("turn", T, f"t{i}", "", 0, 9 if i == 4 else 5) for i in (4, 3, 2, 1)],
        ], 0),
        ("poll", [], 1),
    ]  # fmt: skip
    c = run_three(steps)
    got = [(t.span_id, t.turnless, tuple(x.span_id for x in t.calls)) for t in c.released]
    assert got == [
        ("t1", False, ("c1", "c2")), ("t2", False, ("c3",)), ("t3", False, ("c4",)), ("t4", False, ("c5",)),
        ("", True, ("c6",)),
    ]  # fmt: skip


WITH_A_TURN_DUE_LATER: dict[str, tuple[list[Spec], list[tuple[str, bool, tuple[str, ...]]]]] = {
    # t0 takes its call (under its chat span) and leaves the trace none, t1 has none: the trace keeps its turnless
    # timeout (no call left to count it for), as _release_turn leaves it
    "leaves-no-call": (
        [("other", T, "m0", "t0", 1, 2), ("call", T, "c0", "m0", 1, 2)],
        [("t0", False, ("c0",)), ("t1", False, ()), ("t2", False, ())],
    ),
    # t1's calls are all the calls left, right under it: the usual release (no reconcile: the tools offered there stay
    # a call, as _release_turn's usual release keeps them; the normalizer never puts them there), then t3 with none
    "all-left-right-under-it": (
        [("other", T, "m0", "t0", 1, 2), ("call", T, "c0", "m0", 1, 2), ("offered", T, "c1", "t1", 1, 2),
         ("turn", T, "t3", "", 0, 5)],
        [("t0", False, ("c0",)), ("t1", False, ("c1",)), ("t3", False, ()), ("t2", False, ())],
    ),
    # t0's calls right under it, all the trace holds (the usual release), then t1 with none: nothing left to restart
    # the trace's turnless timeout for
    "the-usual-release-first": (
        [("call", T, "c0", "t0", 1, 2), ("call", T, "c1", "t0", 2, 3)],
        [("t0", False, ("c0", "c1")), ("t1", False, ()), ("t2", False, ())],
    ),
    # beside a run's root waiting for a parent never sent (_runs.release_due), the last turn due released with its
    # calls, a call under none left: the trace's calls are those left once the turns due are released
    "beside-a-run": (
        [("run", T, "x", "q", 7, 8), ("other", T, "m0", "t0", 1, 2), ("call", T, "c0", "m0", 1, 2),
         ("other", T, "m1", "t1", 1, 2), ("call", T, "c1", "m1", 1, 2), ("call", T, "c2", "gone", 8, 9)],
        [("t0", False, ("c0",)), ("t1", False, ("c1",)), ("t2", False, ()), ("x", False, ()), ("", True, ("c2",))],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(WITH_A_TURN_DUE_LATER))
def test_turns_due_together_with_a_turn_due_later(case: str) -> None:
    """t0 and t1 (and t3) due together, t2 a second later: none of them the trace's last turn (_release_turn releases
    that one)."""
    specs, expected = WITH_A_TURN_DUE_LATER[case]
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [*specs, ("turn", T, "t0", "", 0, 5), ("turn", T, "t1", "", 0, 5)], 0),
        ("add", [("turn", T, "t2", "", 0, 5)], 1),
    ]
    c = run_three(steps)
    assert [(t.span_id, t.turnless, tuple(x.span_id for x in t.calls)) for t in c.released] == expected


@pytest.mark.parametrize("bad", ["c2", "c4", "c6"])
def test_calls_that_cannot_be_ordered_leave_what_one_at_a_time_leaves(bad: str) -> None:
    """A call of one of the turns due together has no start time (its turn's calls cannot be ordered): the release
    raises there, the turns before it released and counted, that turn and those after it pending with their calls,
    the calls in the order they came: as released one at a time, in C and in Python. Given a start time, the flush
    releases them."""
    specs: list[Spec] = [
        ("call", T, "c1", "t1", 1, 2), ("other", T, "m", "t2", 1, 5), ("call", T, "c2", "m", 3, 4),
        ("call", T, "c3", "m", 2, 3), ("call", T, "c4", "t3", 2, 3), ("call", T, "c5", "t3", 1, 3),
        ("call", T, "c6", "gone", 2, 3), ("call", T, "c7", "gone", 3, 4), ("call", T, "c8", "p", 50, 51),
        *[("turn", T, f"t{i}", "", 0, 9) for i in (1, 2, 3)],
    ]  # fmt: skip
    sides = [Side(cls(grace_s=1, turnless_timeout_s=5)) for cls in (TurnAssembler, PythonAssembler, OneByOneAssembler)]
    seen: list[Any] = []
    for side in sides:
        records = side.records(specs)
        side.asm.add_records(records, 0)
        late = next(r for r in records if r.span_id == bad)
        late.start_ns = None  # type: ignore[assignment]
        with pytest.raises(TypeError):
            side.asm.poll(S)
        seen.append((side.state(), side.asm.stats.turns_completed))
        late.start_ns = 2
        seen.append(side.turns(side.asm.flush()))
    assert seen[0:2] == seen[4:6] and seen[2:4] == seen[4:6]
    (traces, *_), done = seen[4]
    assert done == {"c2": 1, "c4": 2, "c6": 2}[bad]  # the turns released before the error
    assert traces[0][2] == sorted(traces[0][2])  # the trace's calls left, in the order they came
    assert [t[2] for t in seen[5]] == [f"t{i}" for i in range(done + 1, 4)] + [""]  # and c8 alone
    assert sides[0].asm.stats.turns_completed == 3 and not sides[0].asm.pending_traces


def _lines_to_release_turns(n: int, run: bool) -> int:
    """Python lines run by the poll that releases n turns of one trace due together, each with a call under its chat
    span and one right under it (with `run`, beside a run's root waiting for a parent never sent: _runs.release_due
    releases them): the work, counted, not timed."""
    a = TurnAssembler(grace_s=1, turnless_timeout_s=5, max_calls_per_trace=4 * n)
    side = Side(a)
    specs: list[Spec] = [("run", T, "w", "q", 20, 21)] if run else []  # (in no turn's time)
    for i in range(n):
        specs += [("call", T, f"c{i}", f"m{i}", 2, 3), ("other", T, f"m{i}", f"t{i}", 1, 4),
                  ("call", T, f"d{i}", f"t{i}", 2, 3), ("turn", T, f"t{i}", "", 0, 9)]  # fmt: skip
    a.add_records(side.records(specs), 0)
    lines, out = _lines_run(lambda: a.poll(S))
    assert sorted((t.span_id, tuple(x.span_id for x in t.calls)) for t in out) == sorted(
        (f"t{i}", (f"c{i}", f"d{i}")) for i in range(n)
    )
    assert not a.pending_turns and a.pending_traces == run
    return lines


@pytest.mark.parametrize("run", [False, True], ids=["plain", "beside-a-run"])
@pytest.mark.parametrize("impl", ["c", "python"])
def test_many_turns_due_together_in_one_trace_cost_linear_work(
    impl: str, run: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each turn's release looked at every call of its trace: four times the turns cost thirteen times the work. Now
    about four times."""
    _on_path(impl, monkeypatch)
    small, large = _lines_to_release_turns(50, run), _lines_to_release_turns(200, run)
    assert large < 6 * small, (small, large)
