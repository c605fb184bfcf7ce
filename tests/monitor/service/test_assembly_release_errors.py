"""A release that raises midway (poll's, flush's) keeps the counts of the turns it had already released.

The real error of a release is a sort of a trace's calls by start time that cannot compare them (a record built with
no start time). Turns released before it are gone from the assembler: each must be counted completed and no longer
pending, in C (_cassembler.c) as in the Python reference, or a turn is neither pending nor completed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from monitor.assembly import TurnAssembler, _assembler
from monitor.records import RunRoot, ToolCall, Turn

GOOD, BAD, LATER = "a" * 32, "b" * 32, "c" * 32  # sorted: the good trace is released first
_NS = 1_000_000_000


def _records() -> list[ToolCall | Turn]:
    """Two traces of one turn each, calls right under it (the usual trace, released inline); the second trace's
    calls cannot be ordered."""
    out: list[ToolCall | Turn] = []
    for tid, starts in ((GOOD, (3, 2)), (BAD, (None, 2))):
        out.append(Turn("hi", trace_id=tid, span_id="t", start_ns=1))
        out += [ToolCall("x", trace_id=tid, span_id=f"c{i}", parent_span_id="t", start_ns=s)  # type: ignore[arg-type]
                for i, s in enumerate(starts)]
    return out


def _on(
    python: bool, **settings: Any
) -> tuple[TurnAssembler, Callable[[list[Any], int], object], Callable[[int], list[Turn]]]:
    """A TurnAssembler of `settings`, with its add_records and poll on one path: the Python reference's, or C's
    (skipped when it is not loaded)."""
    if not python and _assembler._POLL_C is None:
        pytest.skip("the C assembler is not loaded")
    a = TurnAssembler(**settings)
    return (a, a._add_records_py, a._poll_py) if python else (a, a.add_records, a.poll)


def _poll(a: TurnAssembler, python: bool) -> list[Turn]:
    return a._poll_py(10**12) if python else a.poll(10**12)


def _flush(a: TurnAssembler, python: bool) -> list[Turn]:
    return a._release_all_py() if python else a.flush()


@pytest.mark.parametrize("release", [_poll, _flush], ids=["poll", "flush"])
@pytest.mark.parametrize("python", [False, True], ids=["c", "python"])
def test_turns_released_before_an_error_are_counted_completed(
    release: Callable[[TurnAssembler, bool], object], python: bool
) -> None:
    a, add, _ = _on(python, grace_s=1)
    add(_records(), 0)
    assert a._pending_turns == 2
    with pytest.raises(TypeError):
        release(a, python)
    good = a._traces.get(GOOD)
    assert (good is None or not good.turns) and a._traces[BAD].turns  # the first released, the second kept
    assert a.stats.turns_completed == 1
    assert a._pending_turns == 1


def _turnless(tid: str, starts: tuple[int | None, ...]) -> list[ToolCall | Turn]:
    """Calls of a trace whose turn never arrives (their parent is a span not received)."""
    return [
        ToolCall("x", trace_id=tid, span_id=f"c{i}", parent_span_id="gone", start_ns=s)  # type: ignore[arg-type]
        for i, s in enumerate(starts)
    ]


@pytest.mark.parametrize("python", [False, True], ids=["c", "python"])
def test_turnless_calls_that_cannot_be_ordered_stay_pending_at_poll(python: bool) -> None:
    # _release_turnless emptied the trace's calls, and poll had dropped the trace, before the sort that raises: the
    # calls were neither pending nor released nor counted (and remembered as judged alone: a retry, a duplicate).
    s = _NS
    a, add, poll = _on(python, grace_s=1, turnless_timeout_s=10)
    add(_turnless(GOOD, (3, 2)), 0)
    add(_turnless(BAD, (None, 2)), 1)
    add(_turnless(LATER, (5,)), 5 * s)
    with pytest.raises(TypeError):
        poll(10 * s + 1)
    assert a.stats.turnless_completed == 1 and a.stats.late_calls == 0  # the good trace's, released first
    assert GOOD not in a._traces and [c.span_id for c in a._traces[BAD].calls] == ["c0", "c1"]
    assert a.pending_traces == 2 and a.pending_turnless == 2
    assert not any(k.startswith(BAD) for k in a._judged_alone)
    # Looked at again a timeout later: the traces behind it are released meanwhile, not held up by it.
    released = poll(15 * s + 1)
    assert [t.trace_id for t in released] == [LATER] and a.stats.turnless_completed == 2
    assert [c.span_id for c in a._traces[BAD].calls] == ["c0", "c1"]
    with pytest.raises(TypeError):
        poll(20 * s + 2)
    assert a.pending_traces == 1 and a.pending_turnless == 1


@pytest.mark.parametrize("python", [False, True], ids=["c", "python"])
def test_turnless_calls_that_cannot_be_ordered_stay_pending_at_flush(python: bool) -> None:
    a, add, _ = _on(python, grace_s=1, turnless_timeout_s=10)
    add(_turnless(BAD, (None, 2)), 0)
    with pytest.raises(TypeError):
        _flush(a, python)
    assert [c.span_id for c in a._traces[BAD].calls] == ["c0", "c1"] and a.pending_turnless == 1
    assert a.stats.turnless_completed == 0 and not a._judged_alone


@pytest.mark.parametrize("python", [False, True], ids=["c", "python"])
def test_a_run_root_under_a_turn_that_cannot_be_released_keeps_waiting(python: bool) -> None:
    # A run's root waiting for a parent never sent, in the time of the trace's one turn: a step of that turn when it is
    # released (_runs.drop_runs). Its release raised after the root was taken off the trace's waiting lists and
    # remembered as a step, with the root still held: no longer waiting (its span id out of `roots`) yet held, and the
    # turn, released after, took it as a tool call (no RunRoot waiting, none dropped).
    s = _NS
    a, add, poll = _on(python, grace_s=1, turnless_timeout_s=10)
    bad = ToolCall("x", trace_id=GOOD, span_id="c0", parent_span_id="t", start_ns=None)  # type: ignore[arg-type]
    run = RunRoot("", trace_id=GOOD, span_id="r", parent_span_id="gone", start_ns=2 * s, end_ns=3 * s,
                  turn=Turn("run", trace_id=GOOD, span_id="r", start_ns=2 * s, end_ns=3 * s))  # fmt: skip
    records: list[ToolCall | Turn] = [
        Turn("hi", trace_id=GOOD, span_id="t", start_ns=0, end_ns=9 * s),
        run,
        bad,
        ToolCall("x", trace_id=GOOD, span_id="c1", parent_span_id="t", start_ns=s),
    ]
    add(records, 0)
    with pytest.raises(TypeError):
        poll(2 * s)
    tr = a._traces[GOOD]
    assert list(tr.turns) == ["t"] and [c.span_id for c in tr.calls] == ["r", "c0", "c1"]  # as before the release
    assert tr.waiting == {"gone": [run]} and tr.roots == {"r"} and GOOD + "r" not in a._steps
    bad.start_ns = 0
    out = _flush(a, python)
    assert not [c for t in out for c in t.calls if isinstance(c, RunRoot)]
