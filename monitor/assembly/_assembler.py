"""Group tool calls under their agent turn and release turns once complete.

A call belongs to its nearest `invoke_agent` ancestor in the same trace (calls may sit under
intermediate spans, so parent links of every span of a pending trace are kept). A turn is complete
once its span has arrived (spans are exported when they end) plus a grace period for late children.
Calls whose turn never arrives are released alone, as one turnless turn per trace, after a timeout counted from the
arrival of the first call the trace holds (or from the release of the turn that left them). A call found under a
turn already released by then is a late call; a turn arriving after its calls were released alone is a late turn:
judged now, it would count the calls it got as missed, so it is dropped and counted.
Pending traces are bounded. At the bound, the oldest trace holding only parent links (other spans: most of what a
Collector forwards) is dropped, which judges nothing; only when none is left is the oldest trace released early, and
the turns it releases (each turn, and its calls as one turnless turn) are counted as evicted. One trace is bounded
too: at most `max_calls_per_trace` calls and pending turns, and `SPANS_PER_CALL` times as many parent links; spans
past that are dropped and counted.
A call judged, alone or with its turn, is remembered (bounded, as released turns are): a copy of it (an exporter retry)
is a duplicate. So is what reconcile dropped from a released turn (a requested call a call that ran accounts for, a
wrapper's span, a handoff): judged with the turn too, it is remembered when the turn is released (only a turn that
needed reconciling, never the usual release), so a retry of its chat span's request is no call judged alone nor late.
Calls a model requested (RequestedCall, under their chat span) are held as calls; when a turn (or a turnless group) is
released they are reconciled with the calls that ran (_reconcile). So are the tools a chat span offered (OfferedTools):
at release they join the turn's (or turnless group's) `tool_definitions` and leave its calls (_offered), and so does the
input a model request span was given (InputMark): the earliest gives a turn without input text its input, a turnless
group none. So is the call id a LangGraph ToolNode task's span holds (CallIdMark), which reconcile gives the call of a
tool that raised under it and drops. They count as calls against `max_calls_per_trace`. None ever sits right under a
turn, so the usual release (every call right under its turn, inline here and in C) never holds one; the C assembler
also releases itself a trace that is one turn whose calls sit right under it or under a direct child span (a chat
span), none offered tools, an input, a handoff or a task's call id (the C code adds an InputMark, HandoffMark or
CallIdMark as a call; a trace holding one is released by _release_turn), each with a call id when one is requested
(reconcile's rule 1 then decides alone), as _release_turn would (_cassembler.c's release_chat); any other goes to
_release_turn, and several turns of a trace released together (due by one poll, flushed, evicted) to _release_turns,
which looks at the trace's calls once for all of them (_due). The drop counts count spans that carry calls: a chat
span's requested calls, dropped together (a copy, a late span), count once, with its first (_spans_of); the tools it
offered, the input it was given and a task's call id count for nothing (no call: a copy, or one after their turn was
judged, is dropped as a chat span that offers nothing is).
A framework run's root under another span (RunRoot) is settled as its run's turn or as a step of what is above it once
that has arrived; meanwhile it is held as a call of its trace, and a trace where RunRoots wait is released by the
Python code (_runs, which says how; the C assembler hands it those records, the records they wait for, SERVER and
CONSUMER spans, and such a trace's due entries and flush).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from monitor.assembly._budget import (
    DEFINITION_BYTES,
    LOW_WATER,
    MAX_DEPTH,
    RECORD_BYTES,
    pending_bytes_py,
    record_bytes,
    records_bytes_py,
    released_bytes_py,
)
from monitor.assembly._due import DueTurns
from monitor.assembly._due import all_under as _all_under
from monitor.assembly._offered import Definitions, fill_in, joined, take_offered
from monitor.assembly._reconcile import reconcile
from monitor.assembly._runs import (
    LONE_DUE,
    add_run,
    arrived,
    beside,
    drop_runs,
    entry,
    held_before,
    holds_alone,
    release_due,
    release_lone,
    release_turnless,
    runs_among,
    settle_all,
)
from monitor.normalize import Normalizer
from monitor.normalize._markers import RUN_MARKERS
from monitor.normalize._requested import FIRST_REQUESTED
from monitor.otlp import KIND_CONSUMER, KIND_SERVER, Span
from monitor.otlp._accel import load_extension
from monitor.records import (
    CallIdMark,
    HandoffMark,
    InputMark,
    OfferedTools,
    RequestedCall,
    RunRoot,
    ToolCall,
    Turn,
)

_NS = 1_000_000_000
SPANS_PER_CALL = 10  # parent links (every span seen) kept per trace: this many times max_calls_per_trace
_new = object.__new__
_SPARE_MAX = 1024  # emptied traces kept for reuse
DEFAULT_MAX_PENDING_BYTES = 512 * 1024 * 1024  # estimated weight of the pending records (_budget)


class _Trace:
    """One pending trace. Built field by field in add_records (a constructor call cost as much as the rest), or one
    released by poll, emptied and reused (at most _SPARE_MAX kept)."""

    __slots__ = (
        "first_seen_ns", "calls", "turns", "parents", "waiting", "known", "held_ns", "since", "roots", "lone", "checked"
    )
    first_seen_ns: int  # arrival of its first span, or of its first call held, or release of a turn that left calls
    # (where RunRoots wait: of its first call held under none of them, _runs.beside; or the earliest arrival among the
    # calls still under none when the call that set it is found under a run, the trace then out of the order of
    # _traces, due by an entry of its own: _runs._put_off)
    calls: list[ToolCall]
    turns: dict[str, Turn]  # turn span id -> turn record (no calls yet)
    parents: dict[str, str]  # span id -> parent span id (every span seen)
    waiting: dict[str, list[RunRoot]] | None  # span id awaited -> the RunRoots (among the calls) waiting for it (_runs)
    known: dict[str, bool] | None  # span id of a RunRoot, or of a SERVER / CONSUMER span -> whether part of a run
    held_ns: int  # arrival of the last call held (set when one is)
    since: dict[str, int] | None  # span id of a call held before held_ns -> its arrival (the others arrived then; None
    # when all did): where the turnless timeout of the calls under none counts from when RunRoots wait or waited and
    # the call that started it is found under a run (_runs._start). Bounded: under three times max_calls_per_trace
    # (held_before); None in a trace spared
    # Set when RunRoots begin to wait (unset before, read only while `waiting` is not None: _runs):
    roots: set[str]  # the span ids of the RunRoots waiting
    lone: ToolCall | None  # a call it holds under none of them (its turnless timeout counting from the first to
    # arrive; _runs.beside), None when not known
    checked: int  # while `lone` is not None: the calls before this one are RunRoots or under one of them


@dataclass(slots=True)
class AssemblerStats:
    turns_completed: int = 0
    turnless_completed: int = 0
    evicted: int = 0  # turns (and turnless ones) of pending traces released early because the bound was reached
    late_calls: int = 0  # call spans that arrived after their turn had been released (dropped, counted; a chat span's
    # requested calls count once, as the span)
    late_turns: int = 0  # turns that arrived after their calls had been released as turnless (dropped, counted)
    oversized_calls: int = 0  # calls beyond max_calls_per_trace (dropped, counted; offered tools, input marks and
    # call id marks, which take the same places, are dropped uncounted: no call)
    duplicates: int = 0  # tool, chat (with requested calls) or turn spans received again (an exporter retry), also
    # after judged (alone, or with their turn: kept or dropped by reconcile): dropped, counted once per span
    oversized_spans: int = 0  # turn and other spans beyond a trace's bounds (dropped, counted)
    evicted_for_bytes: int = 0  # of those, the turns released early for the bound of pending bytes


def _call_key(c: ToolCall) -> tuple[int, str]:
    return (c.start_ns, c.span_id)


def _spans_of(c: ToolCall) -> int:
    """The spans a dropped call counts for (the drop counts count spans that carry calls): a call is its span; the
    calls a chat span requested are that one span, counted with its first requested call (index 0) and 0 for the
    others (a span's requested calls are dropped together: a copy of the span, or the span late); the tools it offered
    and the input it was given count 0 (no call: a chat span that offers nothing is not counted either), and so does
    the call id a ToolNode task's span gives (its span carries no call: its tool's span does)."""
    if isinstance(c, OfferedTools | InputMark | RunRoot | CallIdMark):
        return 0
    return 0 if isinstance(c, RequestedCall) and not c.span_id.endswith(FIRST_REQUESTED) else 1


def _remember(keys: set[str], order: deque[str], key: str, most: int) -> None:
    """Add key to a bounded set whose keys `order` holds oldest first; the oldest is forgotten past `most`. A key
    held already is left where it is (held twice in `order`, it would be forgotten with its first place)."""
    if key in keys:
        return
    keys.add(key)
    order.append(key)
    if len(order) > most:
        keys.discard(order.popleft())


def _count_turnless_py(traces: OrderedDict[str, _Trace]) -> int:
    """TurnAssembler.pending_turnless in Python: the traces holding calls and no turn, where RunRoots wait only those
    holding a call under none of them (_runs.holds_alone)."""
    return sum(
        1 for tr in list(traces.values()) if tr.calls and not tr.turns and (tr.waiting is None or holds_alone(tr))
    )


class TurnAssembler:
    """Assembles turns from spans (or already normalized records); not thread-safe (one worker owns it)."""

    def __init__(
        self,
        *,
        grace_s: float = 2.0,
        turnless_timeout_s: float = 30.0,
        max_pending: int = 100_000,
        max_calls_per_trace: int = 1_000,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        normalizer: Normalizer | None = None,
    ) -> None:
        if grace_s < 0 or turnless_timeout_s < 0:
            raise ValueError("grace_s and turnless_timeout_s must be >= 0")
        if max_pending < 1 or max_calls_per_trace < 1 or max_pending_bytes < 1:
            raise ValueError("max_pending, max_calls_per_trace and max_pending_bytes must be >= 1")
        self.grace_ns = int(grace_s * _NS)
        self.turnless_timeout_ns = int(turnless_timeout_s * _NS)
        self.max_pending = max_pending
        self.max_calls_per_trace = max_calls_per_trace
        self.max_links_per_trace = SPANS_PER_CALL * max_calls_per_trace
        self.max_pending_bytes = max_pending_bytes
        self._bytes = 0  # estimated weight of the pending records, never below it (_budget)
        self.normalizer = normalizer or Normalizer()
        self.stats = AssemblerStats()
        self._traces: OrderedDict[str, _Trace] = OrderedDict()
        # The ids of the pending traces holding no call and no turn (parent links only), in the order of _traces: a
        # trace made by a record it does not hold is added (one made by a call or turn it holds, the usual case,
        # never is), and leaves when it gets its first call or turn (it then holds records until released) or is
        # dropped. At the bound these go first.
        self._links: OrderedDict[str, None] = OrderedDict()
        self._pending_turns = 0
        # Pending turns by deadline (turns added together share one): deadline -> {trace id: turn span id, or
        # the span ids in arrival order when the trace has several}, and a heap of the deadlines. Released in
        # (deadline, trace id, span id) order. Entries of turns released early (eviction) are skipped then. A trace's
        # id and `#lone` (no trace's) is the entry of its calls under none put off (_runs.release_lone).
        self._due: dict[int, dict[str, str | list[str]]] = {}
        self._deadlines: list[int] = []
        # Trace id + span id of recently released turns (one string per entry, to keep it small), to recognise
        # late children and retried turns: a set, and the same keys oldest first to forget the oldest (bounded).
        self._released: set[str] = set()
        self._released_order: deque[str] = deque()
        self._released_max = 65_536
        # Trace id + span id where the parent chains of calls released as turnless broke (their turn, usually): that
        # turn arriving later is a late turn. Bounded as the released keys are.
        self._orphaned: set[str] = set()
        self._orphaned_order: deque[str] = deque()
        # Trace id + span id of calls judged (released as turnless, or with their turn: those kept, _remember_judged,
        # and those reconcile dropped, _release_turn): a copy arriving later is a duplicate. Bounded likewise.
        self._judged_alone: set[str] = set()
        self._judged_alone_order: deque[str] = deque()
        # Trace id + span id of RunRoots settled as steps (_runs): a copy arriving after its trace was released is no
        # run's root, and a RunRoot under one a step. Bounded likewise.
        self._steps: set[str] = set()
        self._steps_order: deque[str] = deque()
        self._spare: list[_Trace] = []  # released traces, emptied, for new ones (fewer allocations, less GC)

    def next_deadline_ns(self) -> int | None:
        """When the next pending turn's grace period ends (None when no turn waits)."""
        return self._deadlines[0] if self._deadlines else None

    @property
    def pending_traces(self) -> int:
        return len(self._traces)

    @property
    def pending_turns(self) -> int:
        return self._pending_turns

    @property
    def pending_turnless(self) -> int:
        """Pending traces holding calls but no turn span: each is released as one turnless turn after the timeout,
        unless its turn arrives. A trace where RunRoots wait counts only when it holds a call under none of them (they
        and the calls under them will be their runs' turns or steps: no turn yet, and no turnless group). Counted when
        asked (one pass over the pending traces, for a scrape; in C when the extension is loaded: 100,000 traces took
        16 ms in Python)."""
        if _COUNT_C is not None:
            n = _COUNT_C(self._traces)
            if n is not None:
                return n
        return _count_turnless_py(self._traces)

    def add(self, spans: Iterable[Span], now_ns: int) -> list[Turn]:
        """Normalize and add spans; returns the turns complete as of `now_ns`."""
        records, _ = self.normalizer.split(spans)
        return self.add_records(records, now_ns)

    def add_records(
        self, records: Iterable[ToolCall | Turn | Span], now_ns: int, weight: int | None = None
    ) -> list[Turn]:
        """Add normalized records (tool calls, turns without calls, other spans as parent links); returns the turns
        complete as of `now_ns`, and those released early for the bound of pending bytes. `weight` is what the
        records weigh (`records_bytes`) when the caller has weighed them already. In C when the extension is loaded
        (_cassembler.c, the same results), else _add_records_py."""
        add = _ADD_C
        if not isinstance(records, list | tuple):  # any other iterable: the Python code, as the C code would hand it
            records, add = list(records), None
        self._bytes += _RECORDS_BYTES(records) if weight is None else weight
        return self._weigh(add(self, records, now_ns) if add is not None else self._add_records_py(records, now_ns))

    @property
    def pending_bytes(self) -> int:
        """What the pending records weigh (estimated as _budget says; one pass over the pending traces, in C when
        the extension is loaded)."""
        return _PENDING_BYTES(self._traces)

    def _weigh(self, out: list[Turn]) -> list[Turn]:
        """Takes the turns released off the estimate; past the bound, weighs the pending records and, if they weigh
        more than LOW_WATER of it, releases the oldest traces early (counted as evicted) until they weigh at most
        that. So a weighing (one pass over what is pending) comes after at least 1 - LOW_WATER of the bound was
        added since the last, not after every request while the weight stays just under the bound."""
        self._take_off(out)
        if self._bytes <= self.max_pending_bytes:
            return out
        held = _PENDING_BYTES(self._traces)
        low = int(self.max_pending_bytes * LOW_WATER)
        first = len(out)  # the turns released early, remembered as _take_off remembered the others
        if held > low:
            traces = self._traces
            for tid in list(traces):
                if held <= low:
                    break
                tr = traces[tid]
                if tr.calls or tr.turns:
                    weight = _RECORDS_BYTES(tr.calls) + _RECORDS_BYTES(tuple(tr.turns.values()))
                    released = len(out)
                    self._evict(tid, out)
                    self.stats.evicted_for_bytes += len(out) - released
                    held -= weight
        self._remember_judged(out[first:])
        self._bytes = held
        return out

    def _add_records_py(self, records: Iterable[ToolCall | Turn | Span], now_ns: int) -> list[Turn]:  # noqa: C901
        """add_records in Python: the reference of _cassembler.c, which follows it line by line (and hands it
        the calls it does not take: a subclass, unusual state or records)."""
        out: list[Turn] = []
        traces = self._traces
        links = self._links
        released = self._released
        judged_alone = self._judged_alone
        stats = self.stats
        max_pending = self.max_pending
        max_calls = self.max_calls_per_trace
        max_links = self.max_links_per_trace
        spare = self._spare
        for r in records:
            tid = r.trace_id
            tr = traces.get(tid)
            new = tr is None
            if tr is None:
                if len(traces) >= max_pending:
                    self._evict_oldest(out)
                if spare:
                    tr = traces[tid] = spare.pop()  # emptied by poll
                else:
                    tr = traces[tid] = _new(_Trace)
                    tr.calls = []
                    tr.turns = {}
                    tr.parents = {}
                    tr.waiting = tr.known = tr.since = None
                tr.first_seen_ns = now_ns
            held = False  # a record not held leaves a trace it made holding no record yet
            if type(r) is RunRoot:
                held = self._add_run(tid, tr, r, new, now_ns)
            elif isinstance(r, ToolCall):
                parents = tr.parents
                if r.span_id in parents:
                    stats.duplicates += _spans_of(r)
                else:
                    if len(parents) < max_links:
                        parents[r.span_id] = r.parent_span_id
                    if judged_alone and tid + r.span_id in judged_alone:  # a copy of a call judged already
                        stats.duplicates += _spans_of(r)
                    elif tid + r.parent_span_id in released:
                        stats.late_calls += _spans_of(r)
                    elif len(tr.calls) >= max_calls:
                        stats.oversized_calls += not isinstance(r, OfferedTools | InputMark | CallIdMark)  # no calls
                    else:
                        calls = tr.calls
                        if not calls:
                            if not (new or tr.turns):
                                links.pop(tid, None)  # it holds records now
                            if tr.first_seen_ns != now_ns:  # the turnless timeout counts from here
                                tr.first_seen_ns = now_ns
                                traces.move_to_end(tid)
                            tr.held_ns = now_ns
                            tr.since = None
                        elif tr.held_ns != now_ns:  # the calls held were held before now: their arrivals kept (_runs)
                            self._held_before(tr, now_ns)
                        calls.append(r)
                        held = True
            elif isinstance(r, Turn):
                held = self._hold_turn(tid, tr, r, now_ns, new)
            elif r.span_id in tr.parents or len(tr.parents) < max_links:
                tr.parents[r.span_id] = r.parent_span_id
                kind = getattr(r, "kind", None)
                if kind == KIND_SERVER or kind == KIND_CONSUMER:  # where a run's way up ends (_runs)
                    self._entry(tr, r)
            else:
                stats.oversized_spans += 1
            if new and not held:
                links[tid] = None
            waiting = tr.waiting
            if waiting is not None:  # RunRoots wait in it (_runs)
                if held and isinstance(r, ToolCall) and type(r) is not RunRoot:  # a call held
                    self._beside(tid, tr, r, now_ns)
                if r.span_id in waiting:  # for this span
                    self._arrived(tid, tr, r, now_ns)
        # not self.poll: add_records takes all it returns off the estimate once (_weigh)
        out.extend(_POLL_C(self, now_ns) if _POLL_C is not None else self._poll_py(now_ns))
        return out

    def _due_at(self, deadline: int) -> dict[str, str | list[str]]:
        due = self._due.get(deadline)
        if due is None:
            due = self._due[deadline] = {}
            heapq.heappush(self._deadlines, deadline)
        return due

    def _due_add(self, deadline: int, tid: str, sid: str) -> None:
        """Puts `sid` of trace `tid` among the entries due at `deadline`, after those of the trace due then."""
        due = self._due_at(deadline)
        sids = due.setdefault(tid, sid)
        if sids is not sid:  # the trace has another entry due then
            if isinstance(sids, str):
                due[tid] = [sids, sid]
            else:
                sids.append(sid)

    def _hold_turn(self, tid: str, tr: _Trace, turn: Turn, now_ns: int, new: bool, *, due: bool = True) -> bool:
        """Holds a turn arriving in the trace `tid` (made for it when `new`), due a grace period from now (unless not
        `due`: released at once by the caller); a copy, a late turn or one past the bound is dropped and counted.
        True when held."""
        sid = turn.span_id
        turns = tr.turns
        stats = self.stats
        if sid in turns or tid + sid in self._released:
            stats.duplicates += 1
        elif tid + sid in self._orphaned:
            stats.late_turns += 1
        elif len(turns) >= self.max_calls_per_trace:
            stats.oversized_spans += 1
        else:
            if not (new or turns or tr.calls):
                self._links.pop(tid, None)  # it holds records now
            turns[sid] = turn
            self._pending_turns += 1
            if due:
                self._due_add(now_ns + self.grace_ns, tid, sid)
            return True
        return False

    # RunRoots (monitor.assembly._runs), also called by the C assembler
    _add_run = add_run
    _arrived = arrived
    _beside = beside
    _entry = entry
    _held_before = held_before
    _release_due = release_due
    _release_turnless_runs = release_turnless
    _release_lone = release_lone

    def poll(self, now_ns: int) -> list[Turn]:
        """Turns whose grace period has passed, and turnless calls past the timeout. In C when the extension is
        loaded (the same results), else _poll_py."""
        out = _POLL_C(self, now_ns) if _POLL_C is not None else self._poll_py(now_ns)
        self._take_off(out)
        return out

    def _remember_judged(self, out: list[Turn]) -> None:
        """Remembers the calls of the turns released (turnless ones did already, in _release_turnless, and the records
        reconcile dropped from a turn at its release, in _release_turn): a copy of one arriving later (an exporter
        retry) is a duplicate, not a late call. And the intermediate spans they sat under (a chat span), whose links
        left with their trace: a call arriving later under one is a late call, not a turnless turn. Bounded as the
        released keys are."""
        judged, order, most = self._judged_alone, self._judged_alone_order, self._released_max
        released = self._released
        for t in out:
            if t.turnless:
                continue
            tid, sid = t.trace_id, t.span_id
            for c in t.calls:
                _remember(judged, order, tid + c.span_id, most)
                parent = c.parent_span_id
                if parent != sid:  # _remember keeps a key it holds where it is
                    _remember(released, self._released_order, tid + parent, most)

    def _take_off(self, out: list[Turn]) -> None:
        """Takes released turns off the running estimate (without their attributes' text: _budget), which is 0 with
        no trace pending; remembers their calls (_remember_judged)."""
        if out:
            self._remember_judged(out)
        self._bytes = self._bytes - _RELEASED_BYTES(out) if self._traces else 0

    def _poll_py(self, now_ns: int) -> list[Turn]:  # noqa: C901 - the usual release inline, the rest by _release_turn
        """poll in Python: the reference of _cassembler.c."""
        out: list[Turn] = []
        deadlines = self._deadlines
        traces = self._traces
        released = self._released
        order = self._released_order
        released_max = self._released_max
        spare = self._spare
        while deadlines and deadlines[0] <= now_ns:
            due = self._due.pop(heapq.heappop(deadlines))
            done = 0  # turns released inline
            try:
                for tid in sorted(due):
                    sids = due[tid]
                    tr = traces.get(tid)
                    if tr is not None and tr.waiting is not None:  # RunRoots wait in it (_runs)
                        self._release_due(tid, tr, sids, out, now_ns)
                        continue
                    if tr is None and tid.endswith(LONE_DUE):  # calls under none put off (_runs)
                        self._release_lone(tid, out, now_ns)
                        continue
                    if not isinstance(sids, str):  # several turns of the trace due together
                        if tr is not None:
                            self._release_turns(tid, tr, sorted(sids), out, now_ns)
                        continue
                    tr = traces.get(tid)
                    if tr is None:
                        continue
                    turns = tr.turns
                    if len(turns) == 1 and sids in turns:
                        calls = tr.calls
                        if _all_under(calls, sids):
                            # The usual case: the trace is this turn and calls right under it. All of it goes now, as
                            # _release_turn would release it.
                            turn = turns[sids]
                            if len(calls) > 1:
                                calls.sort(key=_call_key)
                            turn.calls = tuple(calls)
                            out.append(turn)
                            done += 1
                            _remember(released, order, tid + sids, released_max)
                            del traces[tid]
                            if len(spare) < _SPARE_MAX:  # its containers serve a new trace
                                calls.clear()
                                turns.clear()
                                tr.parents.clear()
                                tr.known = tr.since = None  # (since: the arrivals of calls held over requests)
                                spare.append(tr)
                            continue
                    if sids in turns:
                        self._release_turn(tid, tr, sids, out, now_ns)
            finally:  # an error midway (calls that cannot be ordered) keeps the count of those released
                self._pending_turns -= done
                self.stats.turns_completed += done
        cutoff = now_ns - self.turnless_timeout_ns
        for _ in range(len(traces)):  # each trace looked at once: a requeued one must not be seen again now
            tid, tr = next(iter(traces.items()))
            if tr.first_seen_ns > cutoff:
                break
            self._timed_out(tid, tr, out, now_ns)
        return out

    def _timed_out(self, tid: str, tr: _Trace, out: list[Turn], now_ns: int) -> None:
        """The turnless scan (poll) of a trace past the turnless timeout: its calls released as one turnless turn and
        the trace dropped, or looked at again a timeout later while a turn is in its grace period. Also for a trace
        whose calls under none were put off, out of the scan's order (_runs.release_lone)."""
        traces = self._traces
        if tr.turns:  # within a grace period: look again later
            tr.first_seen_ns = now_ns
            traces.move_to_end(tid)
            return
        if tr.waiting is not None:  # RunRoots wait: the calls under none of them go, the others wait (_runs)
            self._release_turnless_runs(tid, tr, out, now_ns)
            return
        if tr.calls:
            try:
                self._release_turnless(tid, tr, out)
            except BaseException:  # calls that cannot be ordered: still pending, looked at a timeout later
                tr.first_seen_ns = now_ns
                traces.move_to_end(tid)
                raise
        else:
            self._links.pop(tid, None)
        del traces[tid]

    def flush(self) -> list[Turn]:
        """Release everything pending (end of a replay, graceful shutdown): trace by trace, oldest first. The
        release is in C when the extension is loaded (the same results), else _release_all_py."""
        out = _RELEASE_ALL_C(self) if _RELEASE_ALL_C is not None else self._release_all_py()
        self._remember_judged(out)
        self._traces.clear()
        self._links.clear()
        self._pending_turns = 0
        self._due.clear()
        self._deadlines.clear()
        self._bytes = 0
        return out

    def _release_all_py(self) -> list[Turn]:
        """flush's release in Python, trace by trace: the reference of _cassembler.c's release_all (which releases the
        usual trace, one turn and calls right under it, inline). Leaves the emptied traces (flush then drops them)."""
        out: list[Turn] = []
        for tid, tr in list(self._traces.items()):
            self._flush_trace(tid, tr, out)
        return out

    def _flush_trace(self, tid: str, tr: _Trace, out: list[Turn]) -> None:
        """Release every turn of a trace (by start time) with its calls, then the calls left as one turnless turn."""
        settle_all(self, tid, tr)  # a RunRoot still waiting is its run's turn
        turns = tr.turns
        self._release_turns(tid, tr, sorted(turns, key=lambda s: turns[s].start_ns), out, None)
        self._release_turnless(tid, tr, out)

    def _evict_oldest(self, out: list[Turn]) -> None:
        """Makes room for a new trace: drops the oldest trace of parent links only (nothing to judge, not counted),
        else releases the oldest trace early (its turns, then its calls as turnless) and counts the turns released
        (each turn, and the turnless one)."""
        if self._links:
            del self._traces[self._links.popitem(last=False)[0]]
            return
        self._evict(next(iter(self._traces)), out)

    def _evict(self, tid: str, out: list[Turn]) -> None:
        """Releases the pending trace `tid` early (its turns, then its calls as turnless) and counts the turns
        released (each turn, and the turnless one)."""
        tr = self._traces.pop(tid)
        self._links.pop(tid, None)
        released = len(out)
        settle_all(self, tid, tr)  # a RunRoot still waiting is its run's turn
        try:
            self._release_turns(tid, tr, sorted(tr.turns, key=lambda s: tr.turns[s].start_ns), out, None)
            self._release_turnless(tid, tr, out)
        finally:  # also those released before an error midway
            self.stats.evicted += len(out) - released

    def _owner(self, tid: str, tr: _Trace, call: ToolCall) -> str | None:
        """The nearest turn ancestor of a call, or None while the chain is unknown or reaches no turn (or reaches a
        turn released already: a late call, under an intermediate span such as a requested call's chat span)."""
        parents = tr.parents
        sid = call.parent_span_id
        for _ in range(64):
            if sid in tr.turns:
                return sid
            nxt = parents.get(sid)
            if nxt is None:
                break
            sid = nxt
        if len(tr.turns) == 1 and sid and sid not in parents and tid + sid not in self._released:
            # The chain breaks at a span we never received (not sampled or exported): the one turn of the
            # trace that encloses the call in time is its turn.
            only = next(iter(tr.turns.values()))
            if only.start_ns <= call.start_ns and (call.end_ns <= only.end_ns or only.end_ns == 0):
                return only.span_id
        return None

    def _due_turns(self, tid: str, tr: _Trace, sids: list[str]) -> DueTurns:
        """The turns `sids` of a trace, to be released together (_due)."""
        return DueTurns(self, tid, tr, sids)

    def _release_turns(self, tid: str, tr: _Trace, order: list[str], out: list[Turn], now_ns: int | None) -> None:
        """Release the turns `order` of a trace (those it holds: several due together, or all of them at a flush or an
        eviction) in that order, each as _release_turn releases it, the trace's calls looked at once for all (_due)."""
        due = self._due_turns(tid, tr, order)
        turns = tr.turns
        try:
            for sid in order:
                if sid in turns:
                    due.release(sid, out, now_ns)
        finally:
            due.close()

    def _release_turn(self, tid: str, tr: _Trace, sid: str, out: list[Turn], now_ns: int | None) -> None:
        """Release the turn `sid` with its calls. With now_ns (a poll), a trace left empty is dropped, and calls left
        (of other turns) wait for theirs a whole turnless timeout from now; None (flush, eviction) keeps the trace."""
        calls = tr.calls
        if _all_under(calls, sid):  # the usual case: every call right under this turn, all its own
            self._release_with(tid, tr, sid, calls, [], out, now_ns)
            return
        mine: list[ToolCall] = []
        rest: list[ToolCall] = []
        for c in calls:
            (mine if c.parent_span_id == sid or self._owner(tid, tr, c) == sid else rest).append(c)
        self._release_with(tid, tr, sid, mine, rest, out, now_ns)

    def _release_with(
        self, tid: str, tr: _Trace, sid: str, mine: list[ToolCall], rest: list[ToolCall], out: list[Turn],
        now_ns: int | None,
    ) -> None:
        """_release_turn once the trace's calls are parted: `mine` the turn's (the trace's calls themselves when all
        are right under it), `rest` those the trace keeps."""
        offered: list[Definitions] = []
        given: str | None = None
        answer: str | None = None
        whole = mine is tr.calls
        runs: list[RunRoot] = []
        if not whole:  # requested calls, offered tools and input marks sit under their chat span, never right
            if tr.waiting is not None:  # under the turn, RunRoots waiting are steps of it (_runs)
                mine, runs = runs_among(mine)
            mine, offered, given, answer = take_offered(mine)  # under the turn; in arrival order
        if len(mine) > 1:  # first: calls that cannot be ordered raise with the turn still pending (its RunRoots
            mine.sort(key=_call_key)  # still waiting: steps of it once it is released)
        if not whole:
            gone: list[ToolCall] = []
            mine = reconcile(mine, gone)
            for c in gone:  # judged with the turn as the calls kept (_remember_judged): a copy is a duplicate
                _remember(self._judged_alone, self._judged_alone_order, tid + c.span_id, self._released_max)
        if runs:
            drop_runs(self, tid, tr, runs)
        turns = tr.turns
        turn = turns.pop(sid)
        self._pending_turns -= 1
        tr.calls = rest
        # The Turn was made by our normalizer and is not shared yet: fill in its calls (and the tools its chat spans
        # offered, the input and answer its marks gave) in place (much cheaper than dataclasses.replace on the hot
        # path).
        turn.calls = tuple(mine)
        if offered:
            turn.tool_definitions = joined(turn.tool_definitions, offered)
        if given or answer is not None:
            fill_in(turn, given, answer)
        out.append(turn)
        self.stats.turns_completed += 1
        # tid + sid may be in the set already: a span a call judged with another turn sat under (_remember_judged)
        _remember(self._released, self._released_order, tid + sid, self._released_max)
        self._after_release(tid, tr, len(rest), now_ns)

    def _after_release(self, tid: str, tr: _Trace, left: int, now_ns: int | None) -> None:
        """The end of a turn's release (_release_with; DueTurns.release, which counts the calls left itself): with
        now_ns (a poll), the `left` calls the trace still holds (of other turns) wait for theirs a whole turnless
        timeout from now, and a trace left empty is dropped; None (flush, eviction) keeps the trace as it is."""
        if now_ns is None:
            return
        tr.lone = None  # where RunRoots wait, the call under none kept may be gone (_runs.beside)
        if left:
            tr.first_seen_ns = now_ns
            self._traces.move_to_end(tid)
        elif not tr.turns:
            self._traces.pop(tid, None)

    def _top(self, tid: str, tr: _Trace, sid: str) -> str:
        """Up the chain of parents from `sid`: the first released turn on the way, else the span where the chain
        breaks (the span not received, or the root's empty parent id)."""
        parents = tr.parents
        released = self._released
        for _ in range(64):
            nxt = parents.get(sid)
            if nxt is None or tid + sid in released:
                break
            sid = nxt
        return sid

    def _release_turnless(self, tid: str, tr: _Trace, out: list[Turn]) -> None:
        """Release the calls of a trace as one turnless turn (those under a turn released meanwhile: late calls), with
        the tools its chat spans offered (those under a released turn: dropped); the inputs its chat spans were given
        are dropped (a turnless turn has no input). Tools offered and inputs alone make no turn. Calls that cannot be
        ordered raise before anything changed: they stay pending."""
        if not tr.calls:
            return
        kept: list[tuple[ToolCall, str]] = []
        offered: list[Definitions] = []
        late = 0
        for c in tr.calls:
            key = tid + self._top(tid, tr, c.parent_span_id)
            if key in self._released:  # under an intermediate span (a chat span), after its turn was released: late
                late += _spans_of(c)
            elif isinstance(c, OfferedTools):
                offered.append(c.definitions)
            elif not isinstance(c, InputMark | RunRoot):  # a turnless group has no input (a RunRoot never waits
                # here: flushes and evictions settle them first, the turnless scan hands over the calls under none)
                kept.append((c, key))
        calls = [c for c, _ in kept]
        if len(calls) > 1:
            calls.sort(key=_call_key)
        calls = reconcile(calls)
        self.stats.late_calls += late
        for c, key in kept:  # marks reconcile dropped too (a handoff, a task's call id): a copy is dropped at arrival,
            # not held a turnless timeout to release nothing
            _remember(self._judged_alone, self._judged_alone_order, tid + c.span_id, self._released_max)
            # Their turn, arriving later, is late only when some call was judged without it (not when reconciling
            # left none: a handoff and its transfer call)
            if calls and key != tid and key not in self._orphaned:
                _remember(self._orphaned, self._orphaned_order, key, self._released_max)
        tr.calls = []
        if not calls:
            return
        out.append(
            Turn(
                input_text="",
                calls=tuple(calls),
                trace_id=tid,
                start_ns=calls[0].start_ns,
                end_ns=max(c.end_ns for c in calls),
                tool_definitions=joined(None, offered) if offered else None,
                turnless=True,
            )
        )
        self.stats.turnless_completed += 1


_AddRecords = Callable[[TurnAssembler, Iterable[ToolCall | Turn | Span], int], list[Turn]]
_Poll = Callable[[TurnAssembler, int], list[Turn]]
_Count = Callable[["OrderedDict[str, _Trace]"], int | None]
_ReleaseAll = Callable[[TurnAssembler], list[Turn]]


def _load_c() -> tuple[_AddRecords, _Poll, _Count, _ReleaseAll] | tuple[None, None, None, None]:
    """add_records, poll, count_turnless and release_all (flush's) of the C assembler (_cassembler.c), given this
    module's classes and helpers; None when it is not loaded (see load_extension)."""
    mod = load_extension(
        "monitor.assembly._cassembler",
        TurnAssembler,
        _Trace,
        AssemblerStats,
        ToolCall,
        Turn,
        Span,
        deque,
        heapq.heappush,
        heapq.heappop,
        _call_key,
        _SPARE_MAX,
        RequestedCall,
        OfferedTools,
        _spans_of,
        HandoffMark,
        InputMark,
        RunRoot,
        KIND_SERVER,
        KIND_CONSUMER,
        RUN_MARKERS,
        CallIdMark,
    )
    if mod is None:
        return None, None, None, None
    return (
        cast(_AddRecords, mod.add_records),
        cast(_Poll, mod.poll),
        cast(_Count, mod.count_turnless),
        cast(_ReleaseAll, mod.release_all),
    )


_ADD_C, _POLL_C, _COUNT_C, _RELEASE_ALL_C = _load_c()


_Weigh = Callable[[Sequence[object]], int]


def _load_budget() -> tuple[_Weigh, Callable[[list[Turn]], int], Callable[[OrderedDict[str, _Trace]], int]]:
    """records_bytes, released_bytes and pending_bytes of _budget, in C (_cbudget.c) when it is loaded."""
    mod = load_extension(
        "monitor.assembly._cbudget", ToolCall, RequestedCall, HandoffMark, OfferedTools, Turn, Span, _Trace,
        record_bytes, released_bytes_py, RECORD_BYTES, DEFINITION_BYTES, MAX_DEPTH, InputMark, RunRoot, CallIdMark,
    )
    if mod is None:
        return records_bytes_py, released_bytes_py, pending_bytes_py
    records_c, released_c, pending_c = mod.records_bytes, mod.released_bytes, mod.pending_bytes

    def pending(traces: OrderedDict[str, _Trace]) -> int:
        n = pending_c(traces)
        return pending_bytes_py(traces) if n is None else cast(int, n)

    return cast(_Weigh, records_c), cast(Callable[[list[Turn]], int], released_c), pending


_RECORDS_BYTES, _RELEASED_BYTES, _PENDING_BYTES = _load_budget()


def records_bytes(records: Sequence[object]) -> int:
    """What records weigh, as turn assembly weighs them (_budget; in C when the extension is loaded)."""
    return _RECORDS_BYTES(records)
