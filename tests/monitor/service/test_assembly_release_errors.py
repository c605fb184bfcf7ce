"""A release that raises midway (poll's, flush's) keeps the counts of the turns it had already released.

The real error of a release is a sort of a trace's calls by start time that cannot compare them (a record built with
no start time). Turns released before it are gone from the assembler: each must be counted completed and no longer
pending, in C (_cassembler.c) as in the Python reference, or a turn is neither pending nor completed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from monitor.assembly import TurnAssembler, _assembler
from monitor.records import ToolCall, Turn

GOOD, BAD = "a" * 32, "b" * 32  # sorted: the good trace is released first


def _records() -> list[ToolCall | Turn]:
    """Two traces of one turn each, calls right under it (the usual trace, released inline); the second trace's
    calls cannot be ordered."""
    out: list[ToolCall | Turn] = []
    for tid, starts in ((GOOD, (3, 2)), (BAD, (None, 2))):
        out.append(Turn("hi", trace_id=tid, span_id="t", start_ns=1))
        out += [ToolCall("x", trace_id=tid, span_id=f"c{i}", parent_span_id="t", start_ns=s)  # type: ignore[arg-type]
                for i, s in enumerate(starts)]
    return out


def _poll(a: TurnAssembler, python: bool) -> object:
    return a._poll_py(10**12) if python else a.poll(10**12)


def _flush(a: TurnAssembler, python: bool) -> object:
    return a._release_all_py() if python else a.flush()


@pytest.mark.parametrize("release", [_poll, _flush], ids=["poll", "flush"])
@pytest.mark.parametrize("python", [False, True], ids=["c", "python"])
def test_turns_released_before_an_error_are_counted_completed(
    release: Callable[[TurnAssembler, bool], object], python: bool
) -> None:
    if not python and _assembler._POLL_C is None:
        pytest.skip("the C assembler is not loaded")
    a = TurnAssembler(grace_s=1)
    (a._add_records_py if python else a.add_records)(_records(), 0)
    assert a._pending_turns == 2
    with pytest.raises(TypeError):
        release(a, python)
    good = a._traces.get(GOOD)
    assert (good is None or not good.turns) and a._traces[BAD].turns  # the first released, the second kept
    assert a.stats.turns_completed == 1
    assert a._pending_turns == 1
