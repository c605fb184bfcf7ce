"""Turns of one trace released together (due by one poll, or all of them at a flush or an eviction), with the trace's
calls looked at once for all of them.

TurnAssembler._release_turn takes a turn's calls out of its trace's calls, looking at each (its nearest turn, up its
parent links: _owner): released one after the other, n turns of a trace looked at its calls n times (1,000 turns due
together in a trace took 0.17 ms a turn so, 40 times the cost of a turn in a trace of 10). DueTurns looks at them
once, when it is made: each call goes to its nearest turn among those pending, as _owner finds it, which is the turn
that takes it when they are released one after the other (a turn released takes only the calls whose nearest turn it
is, so no other call's nearest turn changes), in any order. Each turn is then released with those calls, in the order
the caller releases them, as _release_turn would release it then (the calls left as it would leave them, the same
turns, stats and state). Where that could differ it is _release_turn itself that releases the turn, given the calls
left: when the turn is the trace's only one left (the one turn whose time encloses a call under a span never received
takes it: _owner), and when its calls are all the calls left and right under it (the usual release: no reconcile). The
calls left are made a list again (`close`) only then and at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.records import ToolCall, Turn

if TYPE_CHECKING:
    from monitor.assembly._assembler import TurnAssembler, _Trace


def all_under(calls: list[ToolCall], sid: str) -> bool:
    """Whether every call sits right under the turn `sid` (the usual case: all its own, none under another, so no
    reconcile), none with the turn's span id (a collision: it would be the parent of the others)."""
    for c in calls:
        if c.parent_span_id != sid or c.span_id == sid:
            return False
    return True


class DueTurns:
    """The turns `sids` of a trace (those it holds), to be released one after the other by `release` (any order, each
    once), then `close` (also after an error): the trace's calls are then those the releases left, in their order."""

    __slots__ = ("asm", "tid", "tr", "groups", "calls", "gone", "left")

    def __init__(self, asm: TurnAssembler, tid: str, tr: _Trace, sids: list[str]) -> None:
        self.asm, self.tid, self.tr = asm, tid, tr
        turns = tr.turns
        groups: dict[str, list[ToolCall]] = {sid: [] for sid in sids if sid in turns}
        calls = tr.calls
        if len(groups) > 1:  # (one turn: _release_turn looks at the calls once)
            owner = asm._owner  # (no turn encloses a call under a span never received: the trace holds several)
            for c in calls:
                parent = c.parent_span_id
                sid = parent if parent in turns else owner(tid, tr, c)
                group = groups.get(sid) if sid is not None else None
                if group is not None:
                    group.append(c)
        else:
            groups.clear()
        self.groups = groups  # turn span id -> its calls (the trace's, in their order), until released
        self.calls = calls  # the trace's calls (tr.calls), those of the turns released included until close
        self.gone: set[int] = set()  # id() of those (the very records)
        self.left = len(calls)  # the calls left

    def release(self, sid: str, out: list[Turn], now_ns: int | None) -> None:
        """Releases the turn `sid` (held by the trace) as _release_turn(tid, tr, sid, out, now_ns) would now."""
        asm, tid, tr = self.asm, self.tid, self.tr
        mine = self.groups.pop(sid, None)
        if mine is None or len(tr.turns) == 1 or (len(mine) == self.left and all_under(mine, sid)):
            self.close()  # the calls left, as _release_turn reads them
            asm._release_turn(tid, tr, sid, out, now_ns)
            self.calls = tr.calls
            self.left = len(self.calls)
            return
        try:
            asm._release_with(tid, tr, sid, mine, self.calls, out, None)  # the calls left: counted here
        finally:
            if sid not in tr.turns:  # released (also when an error came after: the calls left it then)
                self.gone.update(map(id, mine))
                self.left -= len(mine)
        asm._after_release(tid, tr, self.left, now_ns)  # as _release_with ends with now_ns

    def close(self) -> None:
        """The trace's calls: those left by the turns released so far, in their order."""
        if self.gone:
            gone = self.gone
            self.calls = self.tr.calls = [c for c in self.calls if id(c) not in gone]
            self.gone = set()
