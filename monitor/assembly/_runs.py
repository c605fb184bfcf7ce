"""A framework's run under another span: its outermost span is its turn, or a step of the run or turn above it.

LangChain and LangGraph through OpenInference record a run's turn as its root CHAIN span, Traceloop as its root
`workflow` span, OpenLIT as its root `invoke_workflow` / `invoke_agent` span. In production such a run executes inside
a web request, whose server span is its parent; or inside the application's own turn (`agent_turn`), or inside another
run. The normalizer makes such a span with a parent a RunRoot (monitor.records): the turn it is at the root, and its
parent link. Which one it is depends on what is above it, which arrives after it (a span ends, and is exported, before
its parent): so turn assembly holds it, as a call of its trace, and settles it when its parent arrives:

- a step of a run (its turn read is dropped; its calls go to the turn above, or are judged turnless) when its parent
  is a turn (pending or released), a call, another RunRoot, or a span of a run (a GenAI operation's, OpenInference's,
  OpenLLMetry's: _markers.RUN_MARKERS);
- its run's turn (held as a turn arriving then: released after the grace period with the calls under it) when its
  parent is a SERVER or CONSUMER span (the start of a request's or a message's work in this process: nothing above it
  is this run's), or the root of the trace;
- under any other span (one of the application's own), the span above that decides, and so on: a run under a span of
  the application's own inside its `agent_turn` is a step of that turn; while a span on the way has not arrived, the
  RunRoot waits for it.

A RunRoot whose parent (or a span above it) never arrives, a remote parent never exported, is its run's turn once the
turnless timeout has passed since it arrived (a due entry of its own, its span id and `#run`, taken off again when a
span of the export request it came in settles it), released then with its calls: never later. The RunRoots of a trace
due together are made turns together, its calls looked at once for all of them. Flushing and evicting a trace make each
RunRoot still waiting a turn. The other calls of a trace where RunRoots wait keep their turnless timeout, as in a trace
without them: at it, those under none of the RunRoots (up their parent links) are judged alone, and a RunRoot's release
does not restart it. It counts from the first of them held (beside: a call under none arriving when the trace holds
none, or calls left under none by RunRoots settled as steps of no turn, or made turns not held: a late turn, a copy),
not from the RunRoots or the calls under them, which are no turnless group (a call under none arriving after a RunRoot
was judged as early as a second after it arrived, its turn arriving within the timeout then a late turn). When the call
that started it is found under a run later (its parent spans arriving after it, or a run's turn taking it as the one
whose time encloses it), it counts from the earliest arrival among the calls still under none (tr.since and tr.held_ns,
kept for every call held: held_before): put off at the turnless scan, or when the last RunRoot stops waiting, out of the
scan's order, with a due entry of its own (the trace's id and `#lone`: release_lone); the call that started it judged
the calls beside it up to a timeout early. So for the calls held before the RunRoots began to wait (a call under a span
not arrived yet, the trace's first, then a call under none and a RunRoot above the first, children first: the call under
none was judged by the first's clock). Nor are the RunRoots and the calls under them turnless ones for
`toolwatch_pending_turns{kind="turnless"}` (holds_alone): they will be their runs' turns or steps.

The spans that arrived before a RunRoot are known by their parent links only: on the way up from a RunRoot's parent a
turn (pending or released) or a RunRoot settles it as a step, a SERVER or CONSUMER span of no run (each remembered as
it arrives, in the trace's `known`, with the RunRoots: span id -> whether it is part of a run) or the root of the trace
as the turn; a span of a run that arrived before the RunRoot under it (rare: a span ends after its children; across
export requests, a Collector or a retry may reorder them) is gone by as the application's own would be.

A RunRoot settled as a step is remembered (TurnAssembler._steps, bounded as the released turns are): a copy of it
arriving after its trace was released (an exporter's retry of the request that held it, without the spans above it)
is no run's root waiting for a parent that never comes again, then a turn of its own at the turnless timeout; and a
RunRoot under it is a step too. A RunRoot past its trace's bound of parent links is dropped and counted
(oversized_spans), as any span past it: what a trace remembers of its spans (`known`) stays within that bound.

Pending RunRoots are calls of their trace (bounded by max_calls_per_trace, weighed, evicted with it, keeping it from
being dropped as a trace of links only); the trace's `waiting` maps each span id awaited to the RunRoots waiting for it
(None while none waits: the per-record check of the C assembler is one pointer compare), `roots` holds their span ids
and `lone` a call held under none of them (None when not known), set when they begin to wait: a call added costs a
parent walk or two (beside), the trace's calls are looked at once when none is known. These functions are
TurnAssembler's methods (_assembler.py); the C assembler calls them for RunRoots, for records awaited, for SERVER and
CONSUMER spans, and for the traces with RunRoots waiting when they are due, past the turnless timeout, flushed or
evicted, and for the due entries of calls under none put off (release_lone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.normalize._markers import RUN_MARKERS
from monitor.otlp import KIND_CONSUMER, KIND_SERVER, Span
from monitor.records import RunRoot, ToolCall, Turn

if TYPE_CHECKING:
    from monitor.assembly._assembler import TurnAssembler, _Trace
    from monitor.assembly._due import DueTurns

RUN_DUE = "#run"  # a waiting RunRoot's timeout among the due entries: its span id and this (no turn's span id)
LONE_DUE = "#lone"  # calls under none put off (_put_off) among the due entries: their trace's id and this (no trace's)
_MAX_DEPTH = 64  # spans walked up from a RunRoot's parent (as _owner walks)


def _of_run(span: Span) -> bool:
    attrs = span.attributes
    return any(k in attrs for k in RUN_MARKERS)


def _verdict(asm: TurnAssembler, tid: str, tr: _Trace, sid: str, r: ToolCall | Turn | Span | None = None) -> bool | str:
    """What a RunRoot whose parent is `sid` is: a step (True), its run's turn (False), or not known until the span id
    returned arrives. `r` is the record of `sid` just added (None: `sid` is read from the trace)."""
    if r is not None:
        if not isinstance(r, Span) or _of_run(r):  # a turn, a call, a RunRoot, a span of a run
            return True
        if r.kind == KIND_SERVER or r.kind == KIND_CONSUMER:
            return False
        sid = r.parent_span_id
    turns, parents, known, released, steps = tr.turns, tr.parents, tr.known, asm._released, asm._steps
    for _ in range(_MAX_DEPTH):
        if not sid:
            return False  # the root of the trace
        if sid in turns or tid + sid in released or tid + sid in steps:
            return True
        if known is not None:
            k = known.get(sid)
            if k is not None:
                return k
        nxt = parents.get(sid)
        if nxt is None:
            return sid  # not arrived
        sid = nxt
    return False


def _know(tr: _Trace, sid: str, of_run: bool) -> None:
    if tr.known is None:
        tr.known = {}
    tr.known[sid] = of_run


def _step(asm: TurnAssembler, tid: str, tr: _Trace, sid: str) -> None:
    """A RunRoot settled as a step: known as one in its trace, and remembered (bounded) after its trace is gone."""
    _know(tr, sid, True)
    key = tid + sid
    steps = asm._steps
    if key not in steps:
        steps.add(key)
        order = asm._steps_order
        order.append(key)
        if len(order) > asm._released_max:
            steps.discard(order.popleft())


def _wait(tr: _Trace, sid: str, run: RunRoot) -> None:
    if tr.waiting is None:
        tr.waiting = {}
        tr.roots = set()
        tr.lone = None  # a call under none of them held: not known yet (beside)
    tr.waiting.setdefault(sid, []).append(run)
    tr.roots.add(run.span_id)


def _unhold(tr: _Trace, run: RunRoot) -> None:
    """Takes a settled RunRoot off the trace's calls (the very record: an equal copy is another). Looked for from the
    last: one settled is most often among the last added (the spans above it come after it)."""
    calls = tr.calls
    for i in range(len(calls) - 1, -1, -1):
        if calls[i] is run:
            del calls[i]
            if tr.lone is not None and i < tr.checked:  # (arrived: tr.waiting is not None, tr.lone set)
                tr.checked -= 1
            return


def _forget(tr: _Trace, run: RunRoot) -> None:
    """Takes a RunRoot off the trace's waiting lists."""
    waiting = tr.waiting
    if waiting is None:
        return
    tr.roots.discard(run.span_id)
    tr.lone = None
    for sid, runs in list(waiting.items()):
        for i, x in enumerate(runs):
            if x is run:
                del runs[i]
                if not runs:
                    del waiting[sid]
                if not waiting:
                    tr.waiting = None
                return


def add_run(asm: TurnAssembler, tid: str, tr: _Trace, run: RunRoot, new: bool, now_ns: int) -> bool:
    """A RunRoot given to turn assembly: settled now when what is above it is known (a step: a parent link; the turn:
    held as a turn), else held as a call of its trace until its parent arrives or its timeout. True when the trace
    holds it or its turn."""
    sid = run.span_id
    parents = tr.parents
    if sid in parents:  # a copy (an exporter's retry): of a turn when it was made one
        if sid in tr.turns or tid + sid in asm._released:
            asm.stats.duplicates += 1
        return False
    if len(parents) >= asm.max_links_per_trace:  # past the trace's bound of links: dropped, as any span past it
        asm.stats.oversized_spans += 1
        return False
    parents[sid] = run.parent_span_id
    # a copy of a step, its trace released since: a step again
    verdict = True if tid + sid in asm._steps else _verdict(asm, tid, tr, run.parent_span_id)
    if verdict is True:
        _step(asm, tid, tr, sid)
        return False
    if verdict is False:
        return asm._hold_turn(tid, tr, run.turn, now_ns, new)
    calls = tr.calls
    if len(calls) >= asm.max_calls_per_trace:  # no room to wait: a parent link
        asm.stats.oversized_spans += 1
        return False
    if not calls:
        if not (new or tr.turns):
            asm._links.pop(tid, None)  # it holds records now
        if tr.first_seen_ns != now_ns:  # the turnless timeout of its trace counts from here
            tr.first_seen_ns = now_ns
            asm._traces.move_to_end(tid)
        tr.held_ns = now_ns
        tr.since = None
    elif tr.held_ns != now_ns:  # (as a call held: add_records)
        held_before(asm, tr, now_ns)
    calls.append(run)
    _wait(tr, verdict, run)
    _know(tr, sid, True)
    asm._due_add(now_ns + asm.turnless_timeout_ns, tid, sid + RUN_DUE)
    return True


def arrived(asm: TurnAssembler, tid: str, tr: _Trace, r: ToolCall | Turn | Span, now_ns: int) -> None:
    """A record whose span id RunRoots wait for was added: each is settled by it (or waits for a span above it)."""
    waiting = tr.waiting
    runs = waiting.pop(r.span_id, None) if waiting is not None else None
    if waiting is None or not runs:
        return
    verdict = _verdict(asm, tid, tr, "", r)
    if isinstance(verdict, str):  # the same RunRoots wait, for a span above
        for run in runs:
            _wait(tr, verdict, run)
        return
    roots = tr.roots
    others = roots.difference(run.span_id for run in runs)
    # steps under another RunRoot waiting: the calls under them still are (tr.lone, tr.checked hold)
    kept = verdict is True and all(_under(tr.parents, run.parent_span_id, others) for run in runs)
    loose = not kept and verdict is True and not tr.turns and _alone(tr, roots, None) is None  # none held before
    turned = False
    for run in runs:
        roots.discard(run.span_id)
        _unhold(tr, run)
        _undue(asm, tid, run.span_id, now_ns + asm.turnless_timeout_ns)
        if verdict is False:  # (the calls under it are its turn's)
            turned = asm._hold_turn(tid, tr, run.turn, now_ns, False) or turned
        else:
            _step(asm, tid, tr, run.span_id)
    if verdict is False and not turned and not tr.turns:  # no turn held (a late turn, a copy): the calls under them
        # are under none, as under steps of no turn (they kept the clock of the last turnless scan: judged up to a
        # timeout early). Looked at only then (none held before: under none of the RunRoots as they were)
        loose = _alone(tr, roots.union(run.span_id for run in runs), None) is None
    if not waiting:
        tr.waiting = None
    if not kept:  # the calls under them are under a turn, or under none of the RunRoots now: none known to be under
        # one (tr.checked), but the call under none kept still is (fewer RunRoots wait), and the next to come is judged
        # with it (forgotten, the next looked at every call before it again: quadratic in nested runs settled so)
        lone = tr.lone  # (none kept once none waits: a trace spared holds no call)
        tr.lone = None if lone is None or not waiting or _under(tr.parents, lone.parent_span_id, roots) else lone
        tr.checked = 0
    if loose:  # steps of no turn (or a turn not held), and no call under none was held: the timeout of the calls under
        # them from now
        _restart(asm, tid, tr, now_ns)
    if not waiting:
        _reclock(asm, tid, tr)


def _restart(asm: TurnAssembler, tid: str, tr: _Trace, now_ns: int) -> None:
    """The trace's turnless timeout counts from now."""
    if tr.first_seen_ns != now_ns:
        tr.first_seen_ns = now_ns
        asm._traces.move_to_end(tid)


def _alone(tr: _Trace, roots: set[str], but: ToolCall | None) -> ToolCall | None:
    """A call the trace holds (other than `but`, the last) that is no RunRoot and under none of `roots`: the one kept
    in tr.lone when it still is, else the first found after the calls known to be under one (tr.checked: they stay so
    while no RunRoot leaves, or calls; else tr.lone is None, or tr.checked 0, and all are looked at)."""
    parents = tr.parents
    lone = tr.lone
    if lone is not None and not _under(parents, lone.parent_span_id, roots):
        return lone
    calls = tr.calls
    i = 0 if lone is None else tr.checked
    for i in range(i, len(calls)):
        c = calls[i]
        if c is but or (not isinstance(c, RunRoot) and not _under(parents, c.parent_span_id, roots)):
            tr.checked = i
            return None if c is but else c
    tr.checked = len(calls)
    return None


def beside(asm: TurnAssembler, tid: str, tr: _Trace, call: ToolCall, now_ns: int) -> None:
    """A call held in a trace where RunRoots wait (add_records, before `arrived`). The first under none of them the
    trace holds starts the trace's turnless timeout now, as the first call of a trace without RunRoots: counted from
    the RunRoots or the calls under them (no turnless group), or from the last turnless scan, it judged the call early.
    One held is kept (tr.lone): while it is still under none (its parent links checked again: a span above it may have
    come since), a call arriving under none is judged with it, one parent walk each; the trace's calls are looked at
    once when none is kept (the RunRoots began to wait, a turnless scan or a turn's release took calls) or it is no
    longer under none. Where the timeout counts from when the call that started it is found under a run later: the
    arrivals of the calls (_start)."""
    roots = tr.roots
    if _under(tr.parents, call.parent_span_id, roots):
        return
    held = _alone(tr, roots, call)  # (tr.checked: where `call` is, or the one found)
    tr.lone = call if held is None else held
    if held is None:  # none held beside it (it would be judged with them, as in a trace without RunRoots)
        _restart(asm, tid, tr, now_ns)


def _undue(asm: TurnAssembler, tid: str, sid: str, deadline: int) -> None:
    """Takes the timeout of a RunRoot settled off the entries due at `deadline`, when it is among them: one settled by
    a span of the export request it came in (the usual case) leaves nothing due after it."""
    due = asm._due.get(deadline)
    if due is None:
        return
    sids = due.get(tid)
    key = sid + RUN_DUE
    if sids == key:
        del due[tid]
    elif isinstance(sids, list) and key in sids:
        sids.remove(key)
        if not sids:
            del due[tid]


def entry(asm: TurnAssembler, tr: _Trace, span: Span) -> None:
    """A SERVER or CONSUMER span (a parent link): remembered as where a RunRoot's way up ends (its run's turn), or as a
    span of a run (a step) when it is one, for the RunRoots under it that arrive after it."""
    _know(tr, span.span_id, _of_run(span))


def release_due(asm: TurnAssembler, tid: str, tr: _Trace, sids: str | list[str], out: list[Turn], now_ns: int) -> None:
    """The due entries of a trace with RunRoots waiting (poll): its turns due released, and the RunRoots whose timeout
    it is made their runs' turns together, each released with the calls under it. The trace's calls are looked at once
    for all of them (_settle_due, then _due for its turns), not once a run or a turn: 1,000 runs timing out in a trace
    took 0.56 s of a poll so. The calls they leave keep their turnless timeout, counted from their arrival as in a trace
    without RunRoots (a run's release restarted it: a call beside a run whose parent never came waited twice the
    timeout)."""
    order = (sids,) if isinstance(sids, str) else sorted(sids)
    mine = _settle_due(asm, tid, tr, order, now_ns)
    due: DueTurns | None = None
    try:
        due = asm._due_turns(tid, tr, [sid for sid in order if not sid.endswith(RUN_DUE)])
        for sid in order:
            if asm._traces.get(tid) is not tr:  # released whole meanwhile
                return
            if sid.endswith(RUN_DUE):
                run = mine.pop(sid, None)
                if run is not None:
                    _release_run(asm, tid, tr, run, out)
            elif sid in tr.turns:
                due.release(sid, out, now_ns)
    finally:  # a release that raised (calls that cannot be ordered): the calls of the runs not released stay held
        if due is not None:
            due.close()
        for _, calls in mine.values():
            tr.calls.extend(calls)
    if not tr.calls and not tr.turns:  # as _release_turn drops a trace it leaves empty
        asm._traces.pop(tid, None)
    elif tr.waiting is None:
        _reclock(asm, tid, tr)


def _settle_due(
    asm: TurnAssembler, tid: str, tr: _Trace, order: tuple[str, ...] | list[str], now_ns: int
) -> dict[str, tuple[str, list[ToolCall]]]:
    """The RunRoots still waiting whose timeouts are among `order`: taken off the trace's waiting lists and calls, held
    as their runs' turns (in that order), and the calls under each taken off the trace's calls, in one pass over
    them: its due entry -> (its turn's span id, its calls). A call goes to its nearest turn among those pending, the
    runs' ones included (TurnAssembler._owner)."""
    waiting = tr.waiting
    due = {sid[: -len(RUN_DUE)] for sid in order if sid.endswith(RUN_DUE)}
    if waiting is None or not due:
        return {}
    runs: dict[str, RunRoot] = {}
    for awaited, waiters in list(waiting.items()):
        kept = [run for run in waiters if run.span_id not in due]
        if len(kept) < len(waiters):
            runs.update((run.span_id, run) for run in waiters if run.span_id in due)
            if kept:
                waiting[awaited] = kept
            else:
                del waiting[awaited]
    if not waiting:
        tr.waiting = None
    if not runs:
        return {}
    tr.roots.difference_update(runs)
    tr.lone = None  # the calls change
    settled = {id(run) for run in runs.values()}
    tr.calls = [c for c in tr.calls if id(c) not in settled]  # the very records (an equal copy is another)
    mine: dict[str, tuple[str, list[ToolCall]]] = {}
    groups: dict[str, list[ToolCall]] = {}
    for sid in order:
        run = runs.get(sid[: -len(RUN_DUE)]) if sid.endswith(RUN_DUE) else None
        if run is not None and asm._hold_turn(tid, tr, run.turn, now_ns, False, due=False):
            mine[sid] = (run.turn.span_id, groups.setdefault(run.turn.span_id, []))
    if not groups:
        return mine
    rest: list[ToolCall] = []
    turns = tr.turns
    for c in tr.calls:
        parent = c.parent_span_id
        group = groups.get(parent) if parent in turns else groups.get(asm._owner(tid, tr, c) or "")
        (rest if group is None else group).append(c)
    tr.calls = rest
    return mine


def _release_run(asm: TurnAssembler, tid: str, tr: _Trace, run: tuple[str, list[ToolCall]], out: list[Turn]) -> None:
    """Releases a run's turn held by _settle_due with the calls found under it (the trace's others set aside)."""
    sid, calls = run
    held = tr.calls
    tr.calls = calls
    try:
        asm._release_turn(tid, tr, sid, out, None)  # None: the trace's turnless timeout is left as it is
    finally:
        left = tr.calls  # none, or all of them when it raised
        tr.calls = held
        held.extend(left)


def release_turnless(asm: TurnAssembler, tid: str, tr: _Trace, out: list[Turn], now_ns: int) -> None:
    """The turnless timeout of a trace holding no turn where RunRoots wait (poll): its calls under none of them (up
    their parent links) are released as one turnless turn, as in a trace without RunRoots; the RunRoots and the calls
    under them wait for their own timeouts, the trace looked at again a turnless timeout from now. Put off when the
    earliest of them arrived less than the timeout ago (_start: the call that started their clock is under a run
    now)."""
    calls, roots, parents = tr.calls, tr.roots, tr.parents  # (the RunRoots held are the ones waiting: tr.roots)
    held: list[ToolCall] = []
    alone: list[ToolCall] = []
    for c in calls:
        (held if isinstance(c, RunRoot) or _under(parents, c.parent_span_id, roots) else alone).append(c)
    if alone:
        start = _start(tr, alone)
        if start > now_ns - asm.turnless_timeout_ns:  # the call that started their clock is under a run now
            _put_off(asm, tid, tr, start)
            return
    tr.first_seen_ns = now_ns
    tr.lone = None  # none held now (but: calls that cannot be ordered): the next to arrive starts the timeout (beside)
    asm._traces.move_to_end(tid)
    if not alone:
        return
    tr.calls = alone
    try:
        asm._release_turnless(tid, tr, out)
    except BaseException:  # calls that cannot be ordered: all still held, looked at a timeout later
        tr.calls = calls
        raise
    tr.calls = held


def held_before(asm: TurnAssembler, tr: _Trace, now_ns: int) -> None:
    """A call held at `now_ns` in a trace holding calls held before (the last at tr.held_ns): the arrivals of those
    held then (the last ones held: none is in tr.since yet, the calls held before them are) kept in tr.since, the
    others' arrival now_ns. Each call's arrival is kept once (the calls are looked at from the last up to the first
    kept): a trace whose calls all come in one request (the usual) keeps none, and only its clock (first_seen_ns) said
    where the timeout of a call held before RunRoots began to wait counted from: the call that set it found under a run
    then, the calls beside it were judged up to a timeout early. Bounded: at twice max_calls_per_trace, those of the
    calls still held are kept (fewer than max_calls_per_trace), before the calls held last are added (fewer too): under
    three times max_calls_per_trace entries, their keys the span ids `parents` holds. Not kept with a trace spared
    (poll, release_inline)."""
    since = tr.since
    calls = tr.calls
    if since is None:
        since = tr.since = {}
    elif len(since) >= 2 * asm.max_calls_per_trace:
        since = tr.since = {c.span_id: since[c.span_id] for c in calls if c.span_id in since}
    last = tr.held_ns
    for i in range(len(calls) - 1, -1, -1):
        sid = calls[i].span_id
        if sid in since:
            break
        since[sid] = last
    tr.held_ns = now_ns


def _start(tr: _Trace, calls: list[ToolCall]) -> int:
    """Where the turnless timeout of `calls` (held by a trace where RunRoots wait or waited) counts from: the earliest
    arrival among them (tr.since, tr.held_ns)."""
    since, last = tr.since, tr.held_ns
    if since is None:  # all arrived then
        return last
    return min(since.get(c.span_id, last) for c in calls)


def _put_off(asm: TurnAssembler, tid: str, tr: _Trace, start: int) -> None:
    """The turnless timeout of the trace's calls under none counts from `start`, after its clock: the call that started
    it was found under a run since (its parent spans arriving after it, or a run's turn taking it as the one whose time
    encloses it). The clock set so, and due a timeout after it (an entry of its own: LONE_DUE, release_lone): the
    turnless scan reads the traces in the order of their clocks, which this one leaves (moved last: it holds up no
    trace after it)."""
    tr.first_seen_ns = start
    asm._traces.move_to_end(tid)
    asm._due_at(start + asm.turnless_timeout_ns)[tid + LONE_DUE] = LONE_DUE


def _reclock(asm: TurnAssembler, tid: str, tr: _Trace) -> None:
    """After the last RunRoot waiting in a trace was settled or made its turn (arrived, release_due): its calls, with no
    turn pending, are judged together at its clock, as in a trace without RunRoots; put off when the call that started
    it is no longer among them (_put_off): every call arrived after it. The calls are looked at up to the first that
    still sets the clock (arrived no later: usually the first), not all of them each time: that was quadratic in the
    calls of a trace whose runs stop waiting one after another."""
    calls = tr.calls
    if calls and not tr.turns and asm._traces.get(tid) is tr:
        first, since, last = tr.first_seen_ns, tr.since, tr.held_ns
        for c in calls:
            if (last if since is None else since.get(c.span_id, last)) <= first:  # the clock is still this call's
                break
        else:
            _put_off(asm, tid, tr, _start(tr, calls))


def release_lone(asm: TurnAssembler, key: str, out: list[Turn], now_ns: int) -> None:
    """The due entry of calls under none put off (poll; `key` their trace's id and LONE_DUE): the trace, when it is
    still pending and its clock has passed the turnless timeout (not restarted since), looked at as the turnless scan
    would (TurnAssembler._timed_out)."""
    tid = key[: -len(LONE_DUE)]
    tr = asm._traces.get(tid)
    if tr is not None and tr.first_seen_ns <= now_ns - asm.turnless_timeout_ns:
        asm._timed_out(tid, tr, out, now_ns)


def holds_alone(tr: _Trace) -> bool:
    """Whether a trace where RunRoots wait holds a call under none of them (what the turnless gauge counts: the
    RunRoots and the calls under them will be their runs' turns or steps, not a turnless group)."""
    calls, roots, parents = tr.calls, tr.roots, tr.parents
    return any(not isinstance(c, RunRoot) and not _under(parents, c.parent_span_id, roots) for c in calls)


def _under(parents: dict[str, str], sid: str, roots: set[str]) -> bool:
    """Whether `sid` is one of `roots` or a span under one, up its parent links (at most _MAX_DEPTH)."""
    for _ in range(_MAX_DEPTH):
        if sid in roots:
            return True
        nxt = parents.get(sid)
        if nxt is None:
            return False
        sid = nxt
    return False


def settle_all(asm: TurnAssembler, tid: str, tr: _Trace) -> None:
    """Every RunRoot still waiting in a trace made its run's turn (a flush, an eviction: its parent never came)."""
    waiting = tr.waiting
    if waiting is None:
        return
    tr.waiting = None
    for runs in waiting.values():
        for run in runs:
            _unhold(tr, run)
            asm._hold_turn(tid, tr, run.turn, 0, False, due=False)


def runs_among(calls: list[ToolCall]) -> tuple[list[ToolCall], list[RunRoot]]:
    """`calls` (a turn's, at its release) without the RunRoots waiting among them (found under the turn by the time
    the chain of parents breaks at a span not received: steps of it), and those RunRoots in their order. Nothing
    changes yet: a release that raises after (calls that cannot be ordered) leaves them waiting (drop_runs)."""
    kept: list[ToolCall] = []
    runs: list[RunRoot] = []
    for c in calls:
        if isinstance(c, RunRoot):
            runs.append(c)
        else:
            kept.append(c)
    return kept, runs


def drop_runs(asm: TurnAssembler, tid: str, tr: _Trace, runs: list[RunRoot]) -> None:
    """The RunRoots `runs_among` found among the calls of a turn released: steps of it, which wait no longer."""
    for run in runs:
        _forget(tr, run)
        _step(asm, tid, tr, run.span_id)
