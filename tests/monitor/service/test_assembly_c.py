"""The C assembler (_cassembler.c) against the Python reference (_add_records_py / _poll_py / _release_all_py).

Random sequences of records, polls and flushes go to an assembler running C and to one running Python: the same
turns must come out (the same record objects, in the same order, with the same calls), and the state must stay the
same (traces in the same order with the same calls, turns and parent links; the traces of links only, the due
buckets, the heap, the released keys, the calls judged alone, stats and pending counts). C and Python calls are also
mixed on one assembler. Hand cases cover each branch, the fallbacks (subclasses, unusual state, unusual records) and
reference counts and memory over many rounds.
"""

from __future__ import annotations

import copy
import gc
import random
import sys
import tracemalloc
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from monitor.assembly import TurnAssembler, _assembler
from monitor.otlp import KIND_SERVER, Span, accelerated
from monitor.records import CallIdMark, HandoffMark, InputMark, OfferedTools, RequestedCall, RunRoot, ToolCall, Turn

from .test_assembly_fast import BOUNDS, SIDS, TRACES
from .test_requested_calls import _spied

pytestmark = pytest.mark.skipif(_assembler._ADD_C is None, reason="the C assembler is not loaded")


class PythonAssembler(TurnAssembler):
    """The Python reference only (the C functions hand subclasses to it anyway)."""

    def add_records(
        self, records: Iterable[ToolCall | Turn | Span], now_ns: int, weight: int | None = None
    ) -> list[Turn]:
        out = self._add_records_py(records, now_ns)
        self._remember_judged(out)  # as add_records (_weigh) does
        return out

    def poll(self, now_ns: int) -> list[Turn]:
        out = self._poll_py(now_ns)
        self._remember_judged(out)  # as poll (_take_off) does
        return out


Spec = tuple[str, str, str, str, int, int]

# The reference's records (test_assembly_fast), requested calls: "req0" / "req1" the first / second call a chat span
# (the parent) requested (a dropped one counts as its span: only the first is counted), and the tools a chat span
# offered (a few definitions, some shared). A call kind may name a call id after a colon ("call:a", "req0:a": the
# reconciliation by id), and "handoff" is a handoff mark (it drops a requested call of its name). "input" is the input
# a model request span saw (InputMark: the earliest gives a turn without input its input), "turn0" a turn without
# input, "task:a" the call id a ToolNode task's span holds (CallIdMark: given to the call without an id under it).
# "run" is a run's root under another span (RunRoot: settled as a turn or a step by what arrives above it), "server" a
# SERVER span (where a run's way up ends: its turn), "marked" a span of a run (OpenInference's: a step),
# "server_marked" a SERVER span of a run (a step).
record = st.tuples(
    st.sampled_from(
        ["call", "turn", "other", "req0", "req1", "offered", "offered2", "offered3"]
        + ["call:a", "call:b", "req0:a", "req1:b", "req2:a", "req0:c", "handoff", "input", "input", "turn0"]
        + ["task:a", "task:b"]
        + ["run", "run", "run", "server", "marked", "server_marked"]
    ),
    st.sampled_from(TRACES),
    st.sampled_from(SIDS),
    st.sampled_from(SIDS),  # parent
    st.integers(0, 4),  # start
    st.integers(0, 6),  # end
)
any_record = record

# add through C, through the Python add_records (its poll then runs in C), poll in C or in Python, flush
step: st.SearchStrategy[tuple[str, list[Spec], int]] = st.one_of(
    st.tuples(st.sampled_from(["add", "add_py"]), st.lists(any_record, max_size=10), st.integers(0, 3)),
    st.tuples(st.sampled_from(["poll", "poll_py"]), st.just([]), st.integers(0, 3)),
    st.tuples(st.just("flush"), st.just([]), st.just(0)),
)


OFFERED: dict[str, tuple[dict[str, Any], ...]] = {
    "offered": ({"name": "a"}, {"name": "b"}),
    "offered2": ({"name": "b", "description": "2nd"}, {"name": "c"}),
    "offered3": ({"function": {"name": "d"}}, {"type": "function"}),
}


def build(kind: str, tid: str, sid: str, parent: str, start: int, end: int) -> ToolCall | Turn | Span:
    kind, _, cid = kind.partition(":")
    if kind == "call":
        return ToolCall("tool", cid, trace_id=tid, span_id=sid, parent_span_id=parent, start_ns=start, end_ns=end)
    if kind == "handoff":
        return HandoffMark("tool", trace_id=tid, span_id=f"{sid}#handoff", parent_span_id=parent, start_ns=start,
                           end_ns=end)  # fmt: skip
    if kind == "requested":
        return RequestedCall("tool", trace_id=tid, span_id=sid, parent_span_id=parent, start_ns=start, end_ns=end)
    if kind in OFFERED:
        return OfferedTools("", trace_id=tid, span_id=sid, parent_span_id=parent, start_ns=start, end_ns=end,
                            definitions=OFFERED[kind])  # fmt: skip
    if kind == "task":
        return CallIdMark("tool", cid, trace_id=tid, span_id=f"{sid}#call", parent_span_id=sid, start_ns=start,
                          end_ns=end)  # fmt: skip
    if kind == "input":  # its text names it: which one gave a turn its input
        return InputMark("", arguments=f"{sid}@{start}", trace_id=tid, span_id=f"{sid}#input", parent_span_id=parent,
                         start_ns=start, end_ns=end)  # fmt: skip
    if kind in ("turn", "turn0"):
        return Turn("hi" if kind == "turn" else "", trace_id=tid, span_id=sid, start_ns=start, end_ns=end)
    if kind == "run":
        turn = Turn("run", trace_id=tid, span_id=sid, start_ns=start, end_ns=end)
        return RunRoot("", trace_id=tid, span_id=sid, parent_span_id=parent, start_ns=start, end_ns=end, turn=turn)
    if kind == "server":
        return Span(tid, sid, parent, "POST /chat", KIND_SERVER, start, end)
    if kind == "server_marked":
        return Span(tid, sid, parent, "tools/call", KIND_SERVER, start, end, attributes={"gen_ai.operation.name": "x"})
    if kind == "marked":
        return Span(tid, sid, parent, "chain", 1, start, end, attributes={"openinference.span.kind": "CHAIN"})
    if kind.startswith("req"):  # its span id as the normalizer makes it (the chat span's and the index)
        return RequestedCall("tool", cid, trace_id=tid, span_id=f"{parent}#0{kind[3:]}", parent_span_id=parent,
                             start_ns=start, end_ns=end)  # fmt: skip
    return Span(tid, sid, parent, "chat", 1, start, end)


class Side:
    """One assembler and every record given to it, numbered: an output is described by the numbers of its
    records, so two sides compare by identity (the same records, not equal copies)."""

    def __init__(self, asm: TurnAssembler) -> None:
        self.asm = asm
        self.index: dict[int, int] = {}
        self.keep: list[Any] = []  # every record stays alive: ids stay unique
        self.released: list[Turn] = []  # every turn it released, in order
        self.at: list[int] = []  # when each was released (ns)

    def records(self, specs: Iterable[Spec]) -> list[ToolCall | Turn | Span]:
        out = [build(*s) for s in specs]
        for r in [*out, *(r.turn for r in out if isinstance(r, RunRoot))]:
            self.index[id(r)] = len(self.keep)
            self.keep.append(r)
        return out

    def ref(self, r: Any) -> Any:
        return self.index.get(id(r), ("new", type(r).__name__))

    def turns(self, turns: list[Turn]) -> list[Any]:
        return [
            (
                self.ref(t),
                t.trace_id,
                t.span_id,
                t.input_text,
                t.turnless,
                t.start_ns,
                t.end_ns,
                tuple(self.ref(c) for c in t.calls),
                t.tool_definitions,
            )
            for t in turns
        ]

    def state(self) -> Any:
        a = self.asm
        traces = [
            (
                tid,
                tr.first_seen_ns,
                [self.ref(c) for c in tr.calls],
                [(s, self.ref(t)) for s, t in tr.turns.items()],
                list(tr.parents.items()),
                None if tr.waiting is None else [(s, [self.ref(r) for r in runs]) for s, runs in tr.waiting.items()],
                None if tr.known is None else list(tr.known.items()),
                None if tr.waiting is None else (sorted(tr.roots), self.ref(tr.lone)),
                # the arrivals of the calls held (when it holds some: set then)
                (tr.held_ns, None if tr.since is None else sorted(tr.since.items())) if tr.calls else None,
            )
            for tid, tr in a._traces.items()
        ]
        for tr in a._traces.values():  # the span ids of the RunRoots waiting are those of the RunRoots held
            assert tr.waiting is None or tr.roots == {c.span_id for c in tr.calls if isinstance(c, RunRoot)}
        turnless = _turnless_ref(a)
        # counted in C (_cassembler.count_turnless) as in Python
        assert a.pending_turnless == _assembler._count_turnless_py(a._traces) == turnless
        return (
            traces,
            turnless,
            a.stats,
            a.pending_traces,
            a.pending_turns,
            a.next_deadline_ns(),
            sorted(a._deadlines),
            {d: dict(e) for d, e in a._due.items()},
            list(a._released_order),
            a._released,
            list(a._orphaned_order),
            a._orphaned,
            list(a._links),
            list(a._judged_alone_order),
            a._judged_alone,
            list(a._steps_order),
            a._steps,
        )


def run_both(
    steps: list[tuple[str, list[Spec], int]], make: Callable[[type[TurnAssembler]], TurnAssembler]
) -> tuple[Side, Side]:
    c, py = Side(make(TurnAssembler)), Side(make(PythonAssembler))
    now = 0
    for op, specs, dt in steps:
        now += dt * 10**9
        if op in ("add", "add_py"):
            add = c.asm.add_records if op == "add" else c.asm._add_records_py
            got = add(c.records(specs), now)
            if op == "add_py":
                c.asm._remember_judged(got)  # as add_records does
            expect = py.asm.add_records(py.records(specs), now)
        elif op in ("poll", "poll_py"):
            got = c.asm.poll(now) if op == "poll" else c.asm._poll_py(now)
            if op == "poll_py":
                c.asm._remember_judged(got)  # as poll does
            expect = py.asm.poll(now)
        else:
            got, expect = c.asm.flush(), py.asm.flush()
        assert c.turns(got) == py.turns(expect)
        assert c.state() == py.state()
        c.released += got
        py.released += expect
        c.at += [now] * len(got)
    return c, py


# A turn under its chat span whose requested call ran (released in C, release_chat), then that chat span sent again.
CHAT_SENT_AGAIN: list[tuple[str, list[Spec], int]] = [
    ("add", [("other", "a", "m1", "t1", 0, 1), ("req0:a", "a", "", "m1", 1, 1), ("req1:a", "a", "", "m1", 1, 1)], 0),
    ("add", [("call:a", "a", "c1", "t1", 2, 3), ("turn", "a", "t1", "", 0, 6)], 0),
    ("poll", [], 3),
    ("add", [("other", "a", "m1", "t1", 0, 1), ("req0:a", "a", "", "m1", 1, 1), ("req1:a", "a", "", "m1", 1, 1)], 0),
    ("poll", [], 3),
]


@settings(max_examples=400, deadline=None)
@given(st.lists(step, max_size=14), *BOUNDS)
@example(CHAT_SENT_AGAIN, 1, 1, 3, 3, 2)
def test_c_matches_python(
    steps: list[tuple[str, list[Spec], int]], grace: int, timeout: int, max_pending: int, max_calls: int, remember: int
) -> None:
    def make(cls: type[TurnAssembler]) -> TurnAssembler:
        a = cls(grace_s=grace, turnless_timeout_s=timeout, max_pending=max_pending, max_calls_per_trace=max_calls)
        a._released_max = remember
        return a

    run_both(steps, make)


# The usual shapes, larger: many traces of a turn with calls right under it (some under an intermediate span, some
# turnless), arriving split over requests, with the default bounds.
usual_trace = st.tuples(
    st.integers(0, 30),  # trace number
    st.integers(0, 3),  # calls
    st.sampled_from(["under", "nested", "turnless", "late", "chat", "chat-turnless", "requested", "requested2"]),
)


def trace_specs(n: int, calls: int, shape: str) -> list[Spec]:
    tid = f"{n:032x}"
    turn = f"t{n}"
    parent = "m" if shape == "nested" else turn
    out: list[Spec] = [("other", tid, "m", turn, 1, 5)] if shape not in ("under", "turnless", "late") else []
    if shape.startswith("chat"):  # a model request span offering tools, twice (the same definitions again)
        out += [("offered", tid, "m#tools", "m", 1, 5), ("other", tid, "n", turn, 2, 5)]
        out += [("offered", tid, "n#tools", "n", 2, 5), ("offered2", tid, "n#t2", "n", 2, 5)]
    if shape.startswith("requested"):  # a chat span asking for the calls (by id k0, k1): some ran, some did not
        out += [("req0:k0", tid, "", "m", 2, 2), ("req1:k1", tid, "", "m", 2, 2)]
        if shape == "requested2":  # a second chat span: one id asked again (a copy), one never run, one id-less
            out += [("other", tid, "n", turn, 3, 5), ("req0:k1", tid, "", "n", 4, 4), ("req1:k7", tid, "", "n", 4, 4)]
            out += [("req2", tid, "", "n", 4, 4)] if calls == 3 else []
        out += [(f"call:k{i}", tid, f"c{i}", turn, 3 - i % 2, 4) for i in range(calls)]
        calls = 0
    out += [("call", tid, f"c{i}", parent, 3 - i % 2, 4) for i in range(calls)]
    if shape not in ("turnless", "chat-turnless"):
        out.append(("turn", tid, turn, "", 0, 6))
    if shape == "late":  # a call after its turn
        out.append(("call", tid, "c9", turn, 2, 3))
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(usual_trace, max_size=12), st.integers(0, 2)), max_size=10), st.integers(1, 40))
def test_c_matches_python_on_usual_traces(requests: list[tuple[list[Any], int]], max_pending: int) -> None:
    steps: list[tuple[str, list[Spec], int]] = []
    for traces, dt in requests:
        specs = [s for t in traces for s in trace_specs(*t)]
        half = len(specs) // 2
        steps += [("add", specs[:half], dt), ("add", specs[half:], 0)]
    steps.append(("poll", [], 40))
    run_both(steps, lambda cls: cls(grace_s=1, turnless_timeout_s=5, max_pending=max_pending))


# ---- hand cases ---------------------------------------------------------------------------------------------


def test_count_turnless_answers_none_for_what_it_does_not_know() -> None:
    """Anything but plain _Trace values with a list of calls and a dict of turns is left to the Python count."""
    count = _assembler._COUNT_C
    assert count is not None
    a = TurnAssembler()
    a.add_records([ToolCall("t", trace_id="a" * 32, span_id="c1", parent_span_id="x", end_ns=1)], 1)
    assert count(a._traces) == 1 == a.pending_turnless
    odd: OrderedDict[str, Any] = OrderedDict(x=object())
    assert count(odd) is None and count([]) is None  # type: ignore[arg-type]
    a._traces["b" * 32] = copy.copy(a._traces["a" * 32])
    a._traces["b" * 32].calls = tuple(a._traces["b" * 32].calls)  # type: ignore[assignment]  # not a list: Python counts
    assert count(a._traces) is None and a.pending_turnless == 2


def test_accelerated_reports_the_assembler() -> None:
    assert accelerated()["assembly"] is True


def hand(steps: list[tuple[str, list[Spec], int]], **kw: Any) -> tuple[Side, Side]:
    def make(cls: type[TurnAssembler]) -> TurnAssembler:
        args = {"grace_s": 1, "turnless_timeout_s": 5, **kw}
        remember = args.pop("released_max", None)
        a = cls(**args)
        if remember is not None:
            a._released_max = remember
        return a

    return run_both(steps, make)


# A framework's run in a web request (RunRoots, monitor.assembly._runs): the request's span `w` (SERVER, at the
# root or under a remote parent `r` never sent), the run's root `x` under it, or under the application's own span `u`
# (under `w`), or under its `agent_turn` `t` (under `w`), or under a span `q` never sent; a nested run `y` under `x`, a
# span of a run `m` (OpenInference's) under `x` and a nested run `z` under it; calls under `y`, `x` and `z`.
RUN_SHAPES = ("web", "remote", "plain", "turn", "lost")


def run_trace(n: int, shape: str) -> list[Spec]:
    tid = f"{n:032x}"
    top = {"turn": "t", "plain": "u", "lost": "q"}.get(shape, "w")
    out: list[Spec] = [
        ("call", tid, "c0", "y", 2, 3), ("run", tid, "y", "x", 1, 4), ("call", tid, "c1", "x", 4, 5),
        ("call", tid, "c2", "z", 5, 6), ("run", tid, "z", "m", 5, 7), ("marked", tid, "m", "x", 5, 8),
        ("run", tid, "x", top, 1, 9),
    ]  # fmt: skip
    if shape == "turn":
        out.append(("turn", tid, "t", "w", 0, 10))
    if shape == "plain":
        out.append(("other", tid, "u", "w", 0, 10))
    if shape != "lost":
        out.append(("server", tid, "w", "r" if shape == "remote" else "", 0, 11))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.sampled_from(RUN_SHAPES)), min_size=1, max_size=4,
             unique_by=lambda t: t[0]),
    st.randoms(use_true_random=False),
    st.integers(1, 4),
    st.booleans(),
)  # fmt: skip
def test_c_matches_python_on_runs_under_other_spans(
    traces: list[tuple[int, str]], rnd: Any, batches: int, in_order: bool
) -> None:
    """Whatever the order the spans come in (children first, as exported, or any other) and however split into
    requests: the same turns on both paths, each run one turn (its root's, or the application's `agent_turn`) with its
    three calls, once its RunRoots are settled (by the spans above them, or by the flush for those never sent)."""
    specs = [s for t in traces for s in run_trace(*t)]
    if not in_order:
        rnd.shuffle(specs)
    cut = sorted(rnd.sample(range(len(specs) + 1), min(batches, len(specs) + 1)))
    steps: list[tuple[str, list[Spec], int]] = [("add", specs[a:b], 0) for a, b in zip([0, *cut], [*cut, len(specs)])]
    steps.append(("flush", [], 0))
    c, _ = hand(steps, max_calls_per_trace=10)
    expected = {(f"{n:032x}", "t" if shape == "turn" else "x") for n, shape in traces}
    rows = {(t.trace_id, t.span_id, t.turnless, tuple(sorted(x.span_id for x in t.calls))) for t in c.released}
    assert rows == {(tid, sid, False, ("c0", "c1", "c2")) for tid, sid in expected}


@pytest.mark.parametrize("shape", RUN_SHAPES)
def test_a_run_under_other_spans_waits_no_longer_than_the_turnless_timeout(shape: str) -> None:
    """Added at 0, in the order exported: the run is one turn after the grace period (1 s) when the spans above its
    root have come, at the turnless timeout (5 s) when they never come; nothing is left pending."""
    due = 5 if shape == "lost" else 1
    steps: list[tuple[str, list[Spec], int]] = [("add", run_trace(0, shape), 0)]
    for t in range(1, 6):
        steps.append(("poll", [], 1))
        c, _ = hand(steps)
        assert [(x.span_id, x.turnless) for x in c.released] == ([] if t < due else [("t" if shape == "turn" else "x",
                                                                                           False)])  # fmt: skip
    assert c.asm.pending_traces == 0



@pytest.mark.parametrize("shape", RUN_SHAPES)
def test_a_step_of_a_run_sent_again_after_its_turn_is_no_turn_of_its_own(shape: str) -> None:
    """A nested run's root `v` under the span of a run `m`, with no call of its own (DSPy's `ChatAdapter.__call__`
    CHAIN, its one child an LLM span), is a step. An exporter's retry of the request that held it (its spans exported
    before `m`'s), after the run's turn was judged and its trace released: a copy of a step settled already, not a run's
    root waiting for a parent that never comes again, then a turn of its own at the turnless timeout (a phantom turn
    with no call: judged, it would count every call it expects missed)."""
    tid = f"{0:032x}"
    first = run_trace(0, shape)
    first.insert(0, ("run", tid, "v", "m", 6, 7))
    steps: list[tuple[str, list[Spec], int]] = [("add", first, 0), ("poll", [], 6)]
    steps += [("add", [("run", tid, "v", "m", 6, 7)], 1), ("poll", [], 6), ("flush", [], 0)]
    c, _ = hand(steps)
    assert [(x.span_id, x.turnless, len(x.calls)) for x in c.released] == [("t" if shape == "turn" else "x", False, 3)]
    assert c.asm.stats.duplicates == 0 and not c.asm.pending_traces


@pytest.mark.parametrize("shape", RUN_SHAPES)
def test_runs_settled_in_the_request_they_came_in_leave_nothing_due(shape: str) -> None:
    """A RunRoot waits from its arrival, its timeout due then; settled by a span of the same export request (the
    spans above it come after it: the usual case), it leaves no entry due: what is due is the turns' grace periods
    and the timeouts of the RunRoots still waiting (a run whose parent never came), not one entry per settled RunRoot
    kept for a turnless timeout after its trace is gone."""
    c, _ = hand([("add", run_trace(0, shape), 0)])
    due = sorted((d, tid, (sids,) if isinstance(sids, str) else tuple(sids)) for d, e in c.asm._due.items()
                 for tid, sids in e.items())  # fmt: skip
    tid = f"{0:032x}"
    turn = "t" if shape == "turn" else "x"
    assert due == ([(5 * 10**9, tid, ("x#run",))] if shape == "lost" else [(10**9, tid, (turn,))])


def test_a_trace_left_holding_nothing_by_a_step_keeps_its_links_for_the_spans_to_come() -> None:
    """A nested run's root `z` settled as a step by the span of a run `m` above it leaves its trace holding no record,
    but its parent links and the SERVER span `w` known, sent earlier (reordered: a retry, a Collector's batching). The
    trace stays pending (a trace of links, until the turnless scan): the run's root `x` under `w`, arriving next, is
    its run's turn at once, released a grace period later with the call under `z`. Dropped with the trace, `w` and
    `z` were forgotten: `x` waited for `w` until its timeout, the call under `z` held as under none of the runs."""
    tid = f"{0:032x}"
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("run", tid, "z", "m", 5, 7), ("server", tid, "w", "", 0, 11), ("marked", tid, "m", "x", 5, 8)], 0),
    ]
    c, _ = hand(steps)
    assert c.asm.pending_traces == 1 and not c.asm._traces[tid].calls and not c.asm._traces[tid].turns
    steps += [("add", [("run", tid, "x", "w", 1, 9), ("call", tid, "c2", "z", 5, 6)], 1), ("poll", [], 1)]
    c, _ = hand(steps)
    assert [(t.span_id, t.turnless, [x.span_id for x in t.calls]) for t in c.released] == [("x", False, ["c2"])]
    assert c.at == [2 * 10**9] and not c.asm.pending_traces


def test_the_runs_known_in_a_trace_are_bounded_by_its_links() -> None:
    """Past a trace's bound of parent links, a RunRoot is dropped and counted as any span past it: what the trace
    remembers of its spans (`known`, each RunRoot's verdict) stays within that bound however many arrive."""
    runs = [("run", T, f"x{i}", "t", 1, 2) for i in range(100)]
    c, _ = hand([("add", [("turn", T, "t", "", 0, 5)], 0), ("add", runs[:50], 0), ("add", runs[50:], 0)],
                max_calls_per_trace=2)  # fmt: skip
    tr = c.asm._traces[T]
    assert len(tr.parents) == 20 and len(tr.known or ()) <= 20
    assert c.asm.stats.oversized_spans == 80


T, U = "a" * 32, "b" * 32


def _turnless_ref(a: TurnAssembler) -> int:
    """The traces the turnless gauge counts, by its definition: no turn held, and a call held that is no RunRoot
    waiting and under none (up its parent links), so judged alone at the timeout unless its turn arrives."""
    n = 0
    for tr in a._traces.values():
        roots = {c.span_id for c in tr.calls if isinstance(c, RunRoot)}
        for c in tr.calls:
            if isinstance(c, RunRoot):
                continue
            sid: str | None = c.parent_span_id
            for _ in range(64):
                if sid is None or sid in roots:
                    break
                sid = tr.parents.get(sid)
            if sid is None or sid not in roots:
                break
        else:
            continue
        n += not tr.turns
    return n


@pytest.mark.parametrize("impl", ["c", "python"])
def test_a_trace_where_runs_wait_counts_as_turnless_only_for_calls_under_none(
    impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run whose root waits for a parent never sent (`q`), with its calls (one right under it, one under its chat
    span `m`), is no turnless trace: at its timeout it is its run's turn with those calls. A call under a span never
    sent (`p`) in that trace is: judged alone at the timeout. Neither is a pending turn before the root is one."""
    if impl == "python":
        monkeypatch.setattr(_assembler, "_COUNT_C", None)
    a = TurnAssembler(grace_s=1, turnless_timeout_s=5)
    side = Side(a)
    run = [("run", T, "x", "q", 1, 9), ("call", T, "c1", "x", 2, 3), ("other", T, "m", "x", 2, 5),
           ("call", T, "c2", "m", 3, 4)]  # fmt: skip
    a.add_records(side.records(run), 0)
    assert (a.pending_turnless, a.pending_turns, a.pending_traces) == (0, 0, 1)
    a.add_records(side.records([("run", U, "y", "q", 1, 9)]), 0)  # a trace of a waiting root alone
    assert (a.pending_turnless, a.pending_traces) == (0, 2)
    a.add_records(side.records([("call", T, "c9", "p", 2, 3)]), 0)
    assert a.pending_turnless == 1 == _turnless_ref(a)
    a.add_records(side.records([("turn", U, "t", "", 0, 9)]), 0)
    assert (a.pending_turnless, a.pending_turns) == (1, 1)


Released = dict[int, list[tuple[str, bool, tuple[str, ...]]]]


def _released_by(steps: list[tuple[str, list[Spec], int]], until: int) -> Released:
    """When (whole seconds, polled every second up to `until`) each turn came out, on both paths (run_both)."""
    out: Released = {}
    now = sum(dt for _, _, dt in steps)
    seen = 0
    for t in range(now, until + 1):
        c, _ = hand([*steps, *([("poll", [], 1)] * (t - now))])
        for x in c.released[seen:]:
            out.setdefault(t, []).append((x.span_id, x.turnless, tuple(sorted(c.span_id for c in x.calls))))
        seen = len(c.released)
    return out


def test_a_turnless_call_beside_a_waiting_run_is_judged_at_the_timeout() -> None:
    """A call under a span never sent (`p`), in the request of a run whose root waits for a parent never sent: judged
    alone at the turnless timeout (5 s) after it arrived, as in a trace without runs, and the run is its turn then
    with its call. It waited twice that: the run's release restarted the timeout of the calls it left."""
    specs: list[Spec] = [("call", T, "c9", "p", 0, 1), ("call", T, "c1", "x", 2, 3), ("run", T, "x", "q", 1, 9)]
    assert _released_by([("add", specs, 0)], 12) == {5: [("x", False, ("c1",)), ("", True, ("c9",))]}


def test_a_turnless_call_before_a_waiting_run_is_judged_at_the_timeout() -> None:
    """The call alone at 0, the run (its root waiting for a parent never sent) at 2: the call is judged alone at 5,
    the run its turn at 7. The call waited until 12: the turnless scan put off a trace where a root waits, then the
    run's release restarted the call's timeout."""
    steps: list[tuple[str, list[Spec], int]] = [("add", [("call", T, "c9", "p", 0, 1)], 0)]
    steps.append(("add", [("call", T, "c1", "x", 2, 3), ("run", T, "x", "q", 1, 9)], 2))
    assert _released_by(steps, 14) == {5: [("", True, ("c9",))], 7: [("x", False, ("c1",))]}


def test_calls_under_a_waiting_run_wait_for_it_past_the_timeout() -> None:
    """The run's calls arrived (at 0) before its root (at 2, waiting for a parent never sent): at the turnless
    timeout of the calls (5) they are no turnless group but wait for the root, whose turn they are at its own (7);
    the call under nothing is judged alone at 5."""
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("call", T, "c1", "x", 0, 1), ("other", T, "m", "x", 0, 2), ("call", T, "c2", "m", 0, 1),
                 ("call", T, "c9", "p", 0, 1)], 0),
        ("add", [("run", T, "x", "q", 0, 9)], 2),
    ]  # fmt: skip
    assert _released_by(steps, 14) == {5: [("", True, ("c9",))], 7: [("x", False, ("c1", "c2"))]}


def test_calls_under_none_after_nested_runs_settled_as_steps_keep_the_clock_of_the_first() -> None:
    """Two nested runs' roots (`y`, `z`, under spans `s1`, `s2` not sent yet) wait beside the root `x` (waiting for a
    parent never sent); the calls under none `a` (at 1) and `b` (at 2) start the turnless timeout at 1. At 3 `s1` and
    `s2` arrive under `x` (`y` and `z` steps of its run, taken off the calls before `a` and `b`) and so does `a`'s
    parent: `a` is under `x` now. The call under none `c` (at 4) is judged with `b`, whose timeout counts from its
    arrival (2): at 7, after `x`'s turn took `a` at 5. The calls known to be under a run (tr.checked) shift with the
    roots taken off before them; counted past `b`, `c` restarted the clock and they were judged at 9."""
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("run", T, "x", "q", 0, 1), ("run", T, "y", "s1", 1, 2), ("run", T, "z", "s2", 1, 2)], 0),
        ("add", [("call", T, "a", "p1", 1, 2)], 1), ("add", [("call", T, "b", "p2", 2, 3)], 1),
        ("add", [("other", T, "s1", "x", 1, 2), ("other", T, "s2", "x", 1, 2), ("other", T, "p1", "x", 1, 2)], 1),
        ("add", [("call", T, "c", "p3", 4, 5)], 1),
    ]  # fmt: skip
    assert _released_by(steps, 12) == {5: [("x", False, ("a",))], 7: [("", True, ("b", "c"))]}


def test_a_call_under_none_held_before_runs_wait_is_judged_a_timeout_after_it_arrived() -> None:
    """A call under `y` at 0 (under none then: `y` not sent yet), starting its trace's turnless timeout; at 1, children
    first, a call under none `a0` and the nested run's root `y` (waiting for `x`, never sent). The call under `y` is
    then under a run: `a0` is judged alone at 6, a turnless timeout after it arrived. It was judged at 5, by the clock
    of the call held before the root began to wait (its turn arriving between 5 and 6 then a late turn)."""
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("call", T, "c0", "y", 0, 1)], 0),
        ("add", [("call", T, "a0", "p", 5, 6), ("run", T, "y", "x", 0, 3)], 1),
    ]
    judged = {t: x for t, xs in _released_by(steps, 12).items() for x in xs if x[1]}
    assert judged == {6: ("", True, ("a0",))}


# A call under none (`c9`, under a span never sent) arriving at 4 in a trace where a run's root (`x`, under a span
# never sent) waits or has waited: since 0 with its call, since 2, or since 3 with its call there since 0; or since
# 0 with another run's (`y`) at 2 sent children first (its call under none until its chat span `m` and `y` came).
LATE_BESIDE_RUNS: dict[str, list[tuple[str, list[Spec], int]]] = {
    "run first": [("add", [("call", T, "c1", "x", 0, 1), ("run", T, "x", "q", 0, 3)], 0)],
    "run later": [("add", [("call", T, "c1", "x", 2, 3), ("run", T, "x", "q", 2, 3)], 2)],
    "calls first": [("add", [("call", T, "c1", "x", 0, 1)], 0), ("add", [("run", T, "x", "q", 0, 3)], 3)],
    "another run": [
        ("add", [("call", T, "c1", "x", 0, 1), ("run", T, "x", "q", 0, 3)], 0),
        ("add", [("call", T, "c2", "m", 2, 3), ("other", T, "m", "y", 2, 3), ("run", T, "y", "q", 2, 3)], 2),
    ],
}


@pytest.mark.parametrize("shape", LATE_BESIDE_RUNS)
def test_a_call_under_none_arriving_after_a_run_waits_its_own_timeout(shape: str) -> None:
    """A call under none is judged alone a turnless timeout (5 s) after it arrived, as in a trace without the run: at
    9, not when the timeout counted from the run's root or its calls (which are no turnless group) passes, 1 to 3 s
    after it arrived (its turn arriving within the timeout then a late turn)."""
    steps = [*LATE_BESIDE_RUNS[shape]]
    steps.append(("add", [("call", T, "c9", "p", 4, 5)], 4 - sum(dt for _, _, dt in steps)))
    judged = {t: x for t, xs in _released_by(steps, 14).items() for x in xs if x[1]}
    assert judged == {9: ("", True, ("c9",))}


def test_a_run_made_a_late_turn_leaves_its_calls_a_timeout_from_then() -> None:
    """A call under `x` (never sent until 6) is judged alone at 5 (its trace's turnless timeout), beside a nested run's
    root `y` waiting for `x`; at 6 a call under `y` comes, with `x` (a run's root under the SERVER span `w`: its run's
    turn, arriving after a call under it was judged alone, a late turn, dropped) and a call under none (`c9`). The call
    under `y` is then under no turn and no RunRoot waits: it and `c9` are judged alone a turnless timeout from then, at
    11, as calls arriving in a trace that holds none. They were judged at 10, the clock of the last turnless scan (5):
    `c9` 1 s early, its turn arriving within the timeout then a late turn."""
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("call", T, "c1", "x", 4, 5)], 0),
        ("add", [("run", T, "y", "x", 1, 4)], 4),
        ("poll", [], 1),
        ("add", [("call", T, "c0", "y", 2, 3), ("run", T, "x", "w", 1, 9), ("server", T, "w", "", 0, 11),
                 ("call", T, "c9", "p", 10, 11)], 1),
    ]  # fmt: skip
    c, _ = hand([*steps, *[("poll", [], 1)] * 7])
    judged = [(at // 10**9, x.turnless, sorted(y.span_id for y in x.calls)) for x, at in zip(c.released, c.at)]
    assert judged == [(5, True, ["c1"]), (11, True, ["c0", "c9"])]
    assert c.asm.stats.late_turns == 1 and not c.asm.pending_traces


# A call `c` held under none of the waiting RunRoots (under `s`, not sent yet) at 1, starting the turnless timeout of
# the calls under none; a call under none `b` at 3, judged with it; `c` then under a run: its parent `s` arriving
# under a RunRoot still waiting (`y`, made its turn at its timeout, 7) or under one made its turn at its timeout (`x`,
# 5), or taken by that turn as the one whose time encloses it (its parent never sent). A call `u` of another trace at 4
# (judged alone at 9) comes before it in the turnless scan's order.
UNDER_A_RUN_LATER: dict[str, list[tuple[str, list[Spec], int]]] = {
    "under a run still waiting": [
        ("add", [("run", T, "x", "q", 1, 2)], 0), ("add", [("call", T, "c", "s", 5, 6)], 1),
        ("add", [("run", T, "y", "r", 3, 8)], 1), ("add", [("call", T, "b", "p", 10, 11)], 1),
        ("add", [("other", T, "s", "y", 5, 7), ("call", U, "u", "p", 1, 2)], 1),
    ],
    "under a run made its turn": [
        ("add", [("run", T, "x", "q", 1, 2)], 0), ("add", [("call", T, "c", "s", 5, 6)], 1), ("poll", [], 1),
        ("add", [("call", T, "b", "p", 10, 11)], 1),
        ("add", [("other", T, "s", "x", 5, 7), ("call", U, "u", "p", 1, 2)], 1),
    ],
    "taken by a run's turn": [
        ("add", [("run", T, "x", "q", 0, 9)], 0), ("add", [("call", T, "c", "s", 5, 6)], 1), ("poll", [], 1),
        ("add", [("call", T, "b", "p", 10, 11)], 1), ("add", [("call", U, "u", "p", 1, 2)], 1),
    ],
}  # fmt: skip


@pytest.mark.parametrize("shape", UNDER_A_RUN_LATER)
def test_calls_beside_one_found_under_a_run_later_are_judged_a_timeout_after_the_first_still_under_none(
    shape: str,
) -> None:
    """The call under none `b` is judged alone a turnless timeout after it arrived (3), at 8: the call that started
    the clock of the calls under none (`c`, at 1) was found under a run since (it is its run's turn's), and a timeout
    from it (6) judged `b` 2 s early (its turn arriving within the timeout then a late turn)."""
    steps = [*UNDER_A_RUN_LATER[shape], *[("poll", [], 1)] * 8]
    c, _ = hand(steps)
    judged = [(at // 10**9, x.span_id, sorted(y.span_id for y in x.calls)) for x, at in zip(c.released, c.at)]
    assert (8, "", ["b"]) in judged and all(t == 8 or "b" not in calls for t, _, calls in judged), judged
    assert (9, "", ["u"]) in judged and not c.asm.pending_traces


def _runs_beside(alone: tuple[int, int]) -> st.SearchStrategy[list[tuple[int, str, int]]]:
    """Up to three traces (by number), each a run of one of RUN_SHAPES with `alone` calls under none beside it."""
    return st.lists(st.tuples(st.integers(0, 6), st.sampled_from(RUN_SHAPES), st.integers(*alone)), min_size=1,
                    max_size=3, unique_by=lambda t: t[0])


def _gaps(most: int) -> st.SearchStrategy[list[int]]:
    """Seconds between requests."""
    return st.lists(st.integers(0, 4), min_size=1, max_size=most)


@settings(max_examples=200, deadline=None)
@given(_runs_beside((0, 2)), st.randoms(use_true_random=False), _gaps(5))
def test_calls_under_none_beside_runs_are_judged_within_the_timeout(
    traces: list[tuple[int, str, int]], rnd: Any, gaps: list[int]
) -> None:
    """Runs in requests (any order, split over requests some seconds apart), with calls under a span never sent
    (`p`) beside them: the same turns on both paths; and where the run's parent never comes (no turn ever in its
    grace period: one puts off the calls beside it until a timeout after its release), each call is judged by the
    first poll a turnless timeout (5 s) after it arrived, whether the run's roots still wait or not."""
    specs: list[Spec] = []
    for n, shape, alone in traces:
        specs += run_trace(n, shape) + [("call", f"{n:032x}", f"a{k}", "p", 10 + k, 11 + k) for k in range(alone)]
    rnd.shuffle(specs)
    cut = sorted(rnd.sample(range(len(specs) + 1), min(len(gaps), len(specs) + 1)))
    steps: list[tuple[str, list[Spec], int]] = []
    arrived: dict[tuple[str, str], int] = {}
    now = 0
    for (a, b), gap in zip(zip([0, *cut], [*cut, len(specs)]), [0, *gaps]):
        now += gap * 10**9
        steps.append(("add", specs[a:b], gap))
        arrived.update(((s[1], s[2]), now) for s in specs[a:b] if s[2].startswith("a"))
    steps += [("poll", [], 1)] * 12
    c, _ = hand(steps, max_calls_per_trace=10)
    polls = sorted({sum(dt for _, _, dt in steps[: i + 1]) * 10**9 for i in range(len(steps))})
    judged = {(t.trace_id, x.span_id): at for t, at in zip(c.released, c.at) for x in t.calls}
    lost = {f"{n:032x}" for n, shape, _ in traces if shape == "lost"}
    for (tid, sid), at in arrived.items():
        if tid in lost:
            assert judged[tid, sid] <= min(p for p in polls if p >= at + 5 * 10**9), (tid, sid, at)


@settings(max_examples=200, deadline=None)
@given(_runs_beside((1, 3)), st.randoms(use_true_random=False), _gaps(4), _gaps(4), st.integers(0, 3))
# a run's root made a late turn (its call under none judged alone first) left the call under it judged with the calls
# beside it by the clock of the last turnless scan: 1 s early (test_a_run_made_a_late_turn_leaves_its_calls_...)
@example([(0, "lost", 1), (1, "web", 1), (2, "web", 3)], random.Random(444), [0, 1, 4, 1], [0], 0)
# the call that started the clock of the calls under none found under a run later (taken by a run's turn as the one
# whose time encloses it, its trace's links gone with an earlier release; or its parent spans arriving after it): the
# calls beside it judged 1 and 2 s early (test_calls_beside_one_found_under_a_run_later_...)
@example([(0, "web", 1), (1, "web", 1), (2, "lost", 1)], random.Random(328), [0, 1, 4, 0], [1], 0)
@example([(3, "lost", 3), (2, "remote", 2)], random.Random(158737279), [3, 4, 4, 3], [1, 2, 0, 0], 0)
def test_calls_under_none_arriving_beside_runs_are_judged_no_earlier_than_the_timeout(
    traces: list[tuple[int, str, int]], rnd: Any, run_gaps: list[int], call_gaps: list[int], early: int
) -> None:
    """Runs sent in requests some seconds apart (any order), then calls under a span never sent (`p`) in requests some
    seconds apart, `early` of them sent among the runs' spans (held before the runs' roots began to wait, or while they
    wait; a call under a run held first, its root after them): the same turns on both paths, and each group of them
    judged alone comes out no earlier than a turnless timeout (5 s) after the first call held with them arrived, whether
    the runs' roots still wait, were settled or made turns at their own timeout: not from a run's root or the calls
    under it, nor from a call held under none by the links known then and found under a run later (a call judged
    earlier, its turn arriving within the timeout, is a late turn). Where the runs' parent never comes (no turn in a
    grace period to put them off), no later than the first poll a timeout after the first of them arrived."""
    runs = [s for n, shape, _ in traces for s in run_trace(n, shape)]
    calls = [("call", f"{n:032x}", f"a{k}", "p", 10 + k, 11 + k) for n, _, alone in traces for k in range(alone)]
    rnd.shuffle(runs)
    rnd.shuffle(calls)
    alone = len(calls)
    if early:
        runs += calls[:early]
        calls = calls[early:]
        rnd.shuffle(runs)
    steps: list[tuple[str, list[Spec], int]] = []
    arrived: dict[tuple[str, str], int] = {}
    now = 0
    for specs, gaps in ((runs, run_gaps), (calls, call_gaps)):
        cut = sorted(rnd.sample(range(len(specs) + 1), min(len(gaps) - 1, len(specs) + 1)))
        for (a, b), gap in zip(zip([0, *cut], [*cut, len(specs)]), gaps):
            now += gap
            steps.append(("add", specs[a:b], gap))
            arrived.update(((s[1], s[2]), now) for s in specs[a:b])
    steps += [("poll", [], 1)] * 14
    c, _ = hand(steps, max_calls_per_trace=10)
    polls = sorted({sum(dt for _, _, dt in steps[: i + 1]) for i in range(len(steps))})
    lost = {f"{n:032x}" for n, shape, _ in traces if shape == "lost"}
    # a call judged late (under a turn released before it) was held with the calls beside it, and their timeout counted
    # from the first of them, as in a trace without runs
    late = {k for k in arrived if k[1][0] == "c"} - {(t.trace_id, x.span_id) for t in c.released for x in t.calls}
    judged = 0
    for t, at in zip(c.released, c.at):
        mine = [arrived[t.trace_id, x.span_id] for x in t.calls if x.span_id.startswith("a")]
        if not t.turnless or not mine:
            continue
        held = [arrived[t.trace_id, x.span_id] for x in t.calls] + [arrived[k] for k in late if k[0] == t.trace_id]
        assert at >= (min(held) + 5) * 10**9, (t.trace_id, [x.span_id for x in t.calls], min(held), at)
        if t.trace_id in lost:
            assert at <= min(p for p in polls if p >= min(mine) + 5) * 10**9, (t.trace_id, min(mine), at)
        judged += len(mine)
    assert judged == alone


def _on_path(impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The assembler's C extension unhooked for `impl` "python" (the reference path), left for "c"."""
    if impl == "python":
        for name in ("_ADD_C", "_POLL_C", "_COUNT_C", "_RELEASE_ALL_C"):
            monkeypatch.setattr(_assembler, name, None)


def _lines_run(work: Callable[[], Any]) -> tuple[int, Any]:
    """Python lines run by `work()` (the work counted, not timed), and what it returned."""
    lines = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines
        lines += event == "line"
        return tracer

    sys.settrace(tracer)
    try:
        out = work()
    finally:
        sys.settrace(None)
    return lines, out


def _lines_to_release(n: int) -> int:
    """Python lines run by the poll that makes n runs of one trace (each root waiting for a parent never sent, a
    call under it) their turns at their timeout: the work, counted, not timed."""
    a = TurnAssembler(grace_s=1, turnless_timeout_s=5, max_calls_per_trace=4 * n)
    side = Side(a)
    specs: list[Spec] = []
    for i in range(n):
        start = 10 * i  # none encloses another's call
        specs += [("call", T, f"c{i}", f"x{i}", start + 2, start + 3), ("run", T, f"x{i}", f"q{i}", start, start + 9)]
    a.add_records(side.records(specs), 0)
    lines, out = _lines_run(lambda: a.poll(5 * 10**9))
    assert sorted((t.span_id, t.calls[0].span_id) for t in out) == sorted((f"x{i}", f"c{i}") for i in range(n))
    assert not a.pending_traces
    return lines


@pytest.mark.parametrize("impl", ["c", "python"])
def test_many_runs_timing_out_in_one_trace_cost_linear_work(impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """1000 runs' roots timing out together in one trace took 0.56 s of one poll: each run's release walked every
    call of the trace. Four times the runs must cost about four times the work (it was sixteen)."""
    _on_path(impl, monkeypatch)
    small, large = _lines_to_release(50), _lines_to_release(200)
    assert large < 6 * small, (small, large)



def _lines_to_add(n: int) -> int:
    """Python lines run adding n runs to one trace where a run waits, one record a request: each run's call before its
    root (children first: under none when it arrives, so looked at as a call under none would be), a nested run's root
    under it before it, each root under a span never sent; then a call under none. The work, counted, not timed."""
    a = TurnAssembler(grace_s=1, turnless_timeout_s=5, max_calls_per_trace=4 * n)
    side = Side(a)
    specs: list[Spec] = [("run", T, "w", "q", 0, 1)]
    for i in range(n):
        specs += [("call", T, f"c{i}", f"v{i}", 2, 3), ("run", T, f"v{i}", f"x{i}", 1, 4),
                  ("run", T, f"x{i}", f"q{i}", 0, 9)]  # fmt: skip
    specs.append(("call", T, "a", "p", 2, 3))
    lines, _ = _lines_run(lambda: [a.add_records(side.records([spec]), 0) for spec in specs])
    tr = a._traces[T]
    assert len(tr.calls) == 2 * n + 2 and tr.lone is tr.calls[-1] and tr.first_seen_ns == 0
    return lines


@pytest.mark.parametrize("impl", ["c", "python"])
def test_calls_added_beside_waiting_runs_cost_linear_work(impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the turnless timeout of a call under none arriving beside waiting runs counts from (_runs.beside) is
    found without looking at every call the trace holds for each: four times the runs, about four times the work."""
    _on_path(impl, monkeypatch)
    small, large = _lines_to_add(50), _lines_to_add(200)
    assert large < 6 * small, (small, large)


def _lines_to_settle(n: int) -> int:
    """Python lines run adding, one record a request, a run sent before (its root `L` under a span never sent, waiting,
    n calls under it) and then another run's n nested runs, children first: each one's call, its root, then the span
    of a run above it (`m{i}`, its parent `o` not sent yet: the outer run's root, still to come), which settles it as
    a step of no turn. Its call is under none of the RunRoots waiting from then on. The work, counted, not timed."""
    a = TurnAssembler(grace_s=1, turnless_timeout_s=5, max_calls_per_trace=4 * n)
    side = Side(a)
    specs: list[Spec] = [("call", T, f"c{i}", "L", 1, 2) for i in range(n)]
    specs.append(("run", T, "L", "q", 0, 3))
    for i in range(n):
        specs += [("call", T, f"d{i}", f"z{i}", 5, 6), ("run", T, f"z{i}", f"m{i}", 5, 7),
                  ("marked", T, f"m{i}", "o", 5, 8)]  # fmt: skip
    lines, _ = _lines_run(lambda: [a.add_records(side.records([spec]), 0) for spec in specs])
    tr = a._traces[T]
    assert len(tr.calls) == 2 * n + 1 and tr.roots == {"L"} and tr.first_seen_ns == 0
    return lines


@pytest.mark.parametrize("impl", ["c", "python"])
def test_nested_runs_settled_as_steps_beside_a_waiting_run_cost_linear_work(
    impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each nested run settled as a step of no turn (not under another RunRoot waiting) forgot the call under none
    the trace holds (tr.lone), though it still is one: the next call under none looked at every call before it again
    (under the run waiting since before), n times. Four times the runs must cost about four times the work."""
    _on_path(impl, monkeypatch)
    small, large = _lines_to_settle(50), _lines_to_settle(200)
    assert large < 6 * small, (small, large)


def _lines_to_stop_waiting(n: int) -> int:
    """Python lines run adding, one record a request, 4n calls under a span never sent (`p`), then n runs nested in
    runs whose roots come last, in the order exported: each nested run's root (`z{i}`, waiting for the span of a run
    `m{i}` above it), a call beside it (under `m{i}`, held while the root waits), then `m{i}`, which settles the root as
    a step of no turn: no RunRoot waits in the trace from then on, until the next. The work, counted, not timed."""
    a = TurnAssembler(grace_s=1, turnless_timeout_s=5, max_calls_per_trace=8 * n)
    side = Side(a)
    specs: list[Spec] = [("call", T, f"c{i}", "p", 1, 2) for i in range(4 * n)]
    for i in range(n):
        specs += [("run", T, f"z{i}", f"m{i}", 5, 7), ("call", T, f"e{i}", f"m{i}", 7, 8),
                  ("marked", T, f"m{i}", "o", 5, 9)]  # fmt: skip
    lines, _ = _lines_run(lambda: [a.add_records(side.records([spec]), 0) for spec in specs])
    tr = a._traces[T]
    assert len(tr.calls) == 5 * n and tr.waiting is None and tr.first_seen_ns == 0
    return lines


@pytest.mark.parametrize("impl", ["c", "python"])
def test_runs_that_stop_waiting_one_after_another_cost_linear_work(impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each time the last RunRoot waiting in a trace stops waiting, where the turnless timeout of its calls counts from
    is looked at again (_runs._reclock): found at the first call that still sets it, not by the earliest arrival among
    every call the trace holds (n times: quadratic in the calls of a trace, 0.025 s of CPU for a trace of 999 such
    steps against 0.007 s before). Four times the runs must cost about four times the work."""
    _on_path(impl, monkeypatch)
    small, large = _lines_to_stop_waiting(50), _lines_to_stop_waiting(200)
    assert large < 6 * small, (small, large)


def test_the_usual_trace_is_released_inline_and_its_containers_reused() -> None:
    c, _ = hand([("add", [("call", T, "c2", "t", 3, 4), ("call", T, "c1", "t", 2, 3), ("turn", T, "t", "", 0, 5)], 0)])
    out = c.asm.poll(10**9)
    assert [c.ref(t) for t in out] == [2] and [c.ref(x) for x in out[0].calls] == [1, 0]  # sorted by start
    (spare,) = c.asm._spare
    assert not spare.calls and not spare.turns and not spare.parents and not c.asm.pending_traces
    c.asm.add_records(c.records([("call", U, "c", "", 0, 1)]), 10**9)
    assert c.asm._traces[U] is spare and not c.asm._spare


def test_duplicates_late_calls_oversize_and_eviction() -> None:
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("call", T, "c", "t", 0, 1), ("call", T, "c", "t", 0, 1), ("turn", T, "t", "", 0, 2)], 0),
        ("add", [("turn", T, "t", "", 0, 2), ("call", T, "c2", "t", 0, 1), ("call", T, "c3", "t", 0, 1)], 0),
        ("add", [("turn", T, "t2", "", 0, 2), ("turn", T, "t3", "", 0, 2), ("other", T, "o1", "t", 0, 1)], 0),
        ("add", [("other", T, "o1", "t", 0, 1)] + [("other", T, f"o{i}", "t", 0, 1) for i in range(30)], 0),
        ("add", [("call", U, "u", "x", 0, 1)], 0),  # evicts T
        ("add", [("call", T, "c4", "t", 0, 1), ("turn", T, "t", "", 0, 2)], 1),  # late call, released turn again
    ]
    c, _ = hand(steps, max_calls_per_trace=2, max_pending=1)
    s = c.asm.stats  # 20 parent links kept per trace: c, c2, c3, o1, o0, o2..o16: o17..o29 and t3 oversized
    # Evicted: T's turns t and t2, then U's call as a turnless turn.
    assert (s.duplicates, s.oversized_calls, s.oversized_spans, s.evicted, s.late_calls) == (3, 1, 13 + 1, 3, 1)


def test_a_chat_span_dropped_counts_once_however_many_calls_it_requested() -> None:
    """toolwatch_spans_dropped_total counts spans: a chat span's requested calls dropped together (a copy while
    pending, a copy of calls judged, alone or with their turn, late after their turn) count once, as the span."""
    chat = [("other", T, "m", "t", 0, 1), ("req0", T, "", "m", 1, 1), ("req1", T, "", "m", 1, 1)]
    alone = [("other", U, "m", "s", 0, 1), ("req0", U, "", "m", 1, 1), ("req1", U, "", "m", 1, 1)]
    late = [("other", T, "n", "t", 0, 1), ("req0", T, "", "n", 1, 1), ("req1", T, "", "n", 1, 1)]
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [*chat, ("turn", T, "t", "", 0, 2), *alone], 0),
        ("add", chat + alone, 0),  # both sent again while pending: 1 + 1
        ("poll", [], 6),  # T's turn judged with its two calls, U's calls judged alone
        ("add", alone, 0),  # a copy of calls judged alone: 1
        ("add", chat, 0),  # T's chat span again after its turn was judged with its calls: a copy, 1
        ("add", late, 0),  # another chat span of T's after its turn was judged: late, 1
        ("poll", [], 6),
    ]
    c, _ = hand(steps)
    s = c.asm.stats
    assert (s.duplicates, s.late_calls, s.turns_completed, s.turnless_completed) == (4, 1, 1, 1)


def test_several_turns_due_together_nested_calls_and_the_turnless_scan() -> None:
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("turn", T, "t2", "", 0, 9), ("turn", T, "t1", "", 0, 9), ("call", T, "c", "m", 1, 2)], 0),
        ("add", [("other", T, "m", "t1", 0, 3), ("turn", U, "t", "", 0, 9), ("call", U, "c", "x", 1, 2)], 0),
        ("poll", [], 1),  # several due together: _release_turn; U's call is not right under its turn
        ("add", [("call", "x", "c", "p", 0, 1), ("turn", "y", "t", "", 0, 1)], 0),
        ("add", [("turn", "y", "t9", "", 0, 1)], 4),  # y's second turn keeps it pending past the timeout
        ("poll", [], 1),  # x released turnless, y moved to the end
        ("poll", [], 10),
    ]
    c, _ = hand(steps)
    # U's call sits under a span never received, inside its one turn's time: that turn's
    assert c.asm.stats.turnless_completed == 1 and not c.asm.pending_traces


def test_traces_of_links_only_go_first_at_the_bound_and_copies_of_calls_judged_alone_are_duplicates() -> None:
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("other", T, "m", "t", 0, 1), ("turn", T, "t", "", 0, 2), ("other", U, "h", "", 0, 1)], 0),
        ("add", [("call", "x", "c", "p", 0, 1), ("other", "y", "h", "", 0, 1)], 0),  # U goes: nothing judged
        ("poll", [], 1),  # T released, y dropped at the timeout, x's call judged alone
        # a retried turn and a copy of the call judged alone make traces of links only
        ("add", [("turn", T, "t", "", 0, 2), ("call", "x", "c", "p", 0, 1), ("call", "z", "c", "t", 0, 1)], 1),
        # a late call; v makes room by dropping T (links only: the retried turn), then holds a call
        ("add", [("call", T, "c", "t", 0, 1), ("other", "v", "h", "", 0, 1), ("call", "v", "c", "h", 0, 1)], 0),
    ]
    c, _ = hand(steps, max_pending=3, grace_s=1, turnless_timeout_s=1)
    s = c.asm.stats
    assert (s.evicted, s.turns_completed, s.turnless_completed, s.duplicates, s.late_calls) == (0, 1, 1, 2, 1)
    assert list(c.asm._traces) == ["x", "z", "v"] and list(c.asm._links) == ["x"]  # made by a copy not held


def test_released_keys_are_forgotten() -> None:
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("turn", t, "t", "", 0, 1) for t in "abcde"], 0),
        ("poll", [], 1),
        ("add", [("turn", "a", "t", "", 0, 1), ("turn", "e", "t", "", 0, 1)], 0),  # a forgotten, e a duplicate
    ]
    c, _ = hand(steps, released_max=2)
    assert list(c.asm._released_order) == ["dt", "et"] and c.asm.stats.duplicates == 1


def test_flush_releases_the_usual_trace_in_c_and_hands_the_others_to_flush_trace() -> None:
    """At a flush (the end of a replay) a trace that is one turn with its calls right under it, or under a direct
    child span of it (y: a chat span), is released in C, in trace order among the others; a trace of several turns, of
    calls alone, or whose containers were replaced from outside goes to _flush_trace. Both sides compare equal at each
    step (hand runs them)."""
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("call", U, "c2", "t", 3, 4), ("call", U, "c1", "t", 2, 3), ("turn", U, "t", "", 0, 5)], 0),
        ("add", [("turn", T, "t2", "", 1, 9), ("turn", T, "t1", "", 0, 9), ("call", T, "c", "t2", 1, 2)], 0),
        ("add", [("call", "x", "c", "p", 0, 1), ("turn", "y", "t", "", 0, 1), ("other", "y", "m", "t", 0, 1)], 0),
        ("add", [("call", "y", "c", "m", 0, 1), ("turn", "z", "t", "", 0, 1), ("call", "z", "c", "t", 0, 1)], 0),
    ]
    c, py = hand(steps, grace_s=100)
    handed: list[str] = []
    flush_trace = c.asm._flush_trace

    def counted(tid: str, tr: Any, out: list[Turn]) -> None:
        handed.append(tid)
        flush_trace(tid, tr, out)

    c.asm._flush_trace = counted  # type: ignore[method-assign]
    for side in (c, py):  # z's calls replaced by a tuple: the general path (in Python, for both sides)
        side.asm._traces["z"].calls = tuple(side.asm._traces["z"].calls)  # type: ignore[assignment]
    got, expect = c.asm.flush(), py.asm.flush()
    assert c.turns(got) == py.turns(expect) and c.state() == py.state()
    assert [(t.trace_id, t.span_id) for t in got] == [(U, "t"), (T, "t1"), (T, "t2"), ("x", ""), ("y", "t"), ("z", "t")]
    assert [c.ref(x) for x in got[0].calls] == [1, 0]  # sorted by start
    assert handed == [T, "x", "z"] and c.asm.stats.turns_completed == 5 and not c.asm.pending_traces


# ---- a turn whose calls sit under its chat spans ----------------------------------------------------------------


def chat_case(steps: list[tuple[str, list[Spec], int]], **kw: Any) -> tuple[Side, list[str]]:
    """run_both(steps) (both sides compared at each step), with the turns the C side handed to the Python release
    (_spied)."""
    handed: list[list[str]] = []

    def make(cls: type[TurnAssembler]) -> TurnAssembler:
        a = cls(**{"grace_s": 5, "turnless_timeout_s": 30, **kw})
        if cls is TurnAssembler:
            handed.append(_spied(a))
        return a

    c, _ = run_both(steps, make)
    return c, handed[0]


def released(c: Side) -> list[tuple[str, list[tuple[int, str, bool]]]]:
    """Each turn the C side released: its span id, and each call's record number, call id and whether requested."""
    return [(t.span_id, [(c.ref(x), x.call_id, isinstance(x, RequestedCall)) for x in t.calls]) for t in c.released]


CHAT_M: list[Spec] = [("other", T, "m", "t", 1, 2), ("req0:a", T, "", "m", 2, 2), ("req1:b", T, "", "m", 2, 2)]
RAN_AB: list[Spec] = [("call:b", T, "c2", "t", 4, 5), ("call:a", T, "c1", "t", 3, 4)]
TURN_T: list[Spec] = [("turn", T, "t", "", 0, 6)]
Steps = list[tuple[str, list[Spec], int]]


def _end(flush: bool) -> tuple[str, list[Spec], int]:
    return ("flush", [], 0) if flush else ("poll", [], 10)


@pytest.mark.parametrize(
    ("arrival", "ran"),
    [
        ([("add", CHAT_M + RAN_AB + TURN_T, 0)], (4, 3)),  # the chat span before its turn span (as they end)
        ([("add", TURN_T + RAN_AB, 0), ("add", CHAT_M, 1)], (2, 1)),  # after its turn span, within the grace
        ([("add", CHAT_M[1:] + RAN_AB, 0), ("add", TURN_T + CHAT_M[:1], 1)], (3, 2)),  # its link last
    ],
    ids=["chat-first", "chat-after-turn", "link-last"],
)
@pytest.mark.parametrize("flush", [False, True], ids=["poll", "flush"])
def test_requested_calls_that_ran_are_released_in_c_as_the_calls_that_ran(
    arrival: Steps, ran: tuple[int, int], flush: bool
) -> None:  # ran: the numbers of the records of a's and b's calls that ran
    """A turn whose requested calls sit under its chat span (a direct child of the turn) and reconcile by call id with
    the calls that ran: those kept, in their place (by start), the requested ones dropped; released without
    _release_turn (the trace spared), the same turn, stats and state as in Python."""
    c, handed = chat_case([*arrival, _end(flush)])
    assert released(c) == [("t", [(ran[0], "a", False), (ran[1], "b", False)])]
    assert handed == [] and not c.asm.pending_traces and c.asm.stats.turns_completed == 1
    assert len(c.asm._spare) == 1


@pytest.mark.parametrize("flush", [False, True], ids=["poll", "flush"])
def test_two_chat_spans_a_repeated_id_and_calls_not_run_are_released_in_c(flush: bool) -> None:
    """Two chat spans: the second asks for b again (a copy: dropped) and for c, which never ran (kept, requested, in
    start order); an executed call under a chat span counts as the turn's too."""
    steps: Steps = [
        ("add", CHAT_M + [("other", T, "n", "t", 5, 6), ("req0:b", T, "", "n", 6, 6), ("req1:c", T, "", "n", 6, 6)], 0),
        ("add", [("call:a", T, "c1", "m", 3, 4), ("call:b", T, "c2", "t", 4, 5), *TURN_T], 1),
        _end(flush),
    ]
    c, handed = chat_case(steps)
    assert released(c) == [("t", [(6, "a", False), (7, "b", False), (5, "c", True)])]
    assert handed == [] and not c.asm.pending_traces


@pytest.mark.parametrize("flush", [False, True], ids=["poll", "flush"])
def test_requested_calls_none_of_which_ran_keep_the_first_of_each_id(flush: bool) -> None:
    steps: Steps = [
        ("add", [("other", T, "m", "t", 1, 2), ("req0:a", T, "", "m", 2, 2), ("req1:a", T, "", "m", 2, 2)], 0),
        ("add", [("other", T, "n", "t", 1, 2), ("req0:b", T, "", "n", 1, 1), *TURN_T], 0),
        _end(flush),
    ]
    c, handed = chat_case(steps)
    assert released(c) == [("t", [(4, "b", True), (1, "a", True)])]
    assert handed == []


@pytest.mark.parametrize(
    "extra",
    [
        [("req2", T, "", "m", 2, 2)],  # an id-less requested call: paired by name
        [("call", T, "c3", "t", 5, 5)],  # an id-less executed call: paired by name
        [("handoff", T, "h", "m", 5, 5)],  # a handoff: drops the requested call of its name
        [("offered", T, "m#tools", "m", 1, 2)],  # tools offered: the turn's definitions
        [("other", T, "g", "m", 1, 2), ("call:d", T, "c3", "g", 5, 5)],  # a call further down
        [("call:d", T, "c3", "x", 5, 5)],  # under a span never received (the turn encloses it in time)
        [("turn", T, "t2", "m", 1, 5), ("call:d", T, "c3", "t2", 5, 5)],  # a nested turn
    ],
    ids=["idless-requested", "idless-executed", "handoff", "offered", "deeper", "unknown-parent", "nested-turn"],
)
@pytest.mark.parametrize("flush", [False, True], ids=["poll", "flush"])
def test_other_turns_with_requested_calls_are_handed_to_release_turn(extra: list[Spec], flush: bool) -> None:
    """Anything but the common shape goes to the Python release: the same results (compared at each step)."""
    c, handed = chat_case([("add", CHAT_M + RAN_AB + extra + TURN_T, 0), _end(flush)])
    assert "t" in handed and c.asm.stats.turns_completed == len(handed)


def test_requested_calls_that_cannot_be_ordered_raise_and_stay_pending_as_in_python() -> None:
    class NoOrder:
        def __lt__(self, other: object) -> bool:
            raise ArithmeticError("lt")

        __gt__ = __lt__

    sides = Side(TurnAssembler(grace_s=1)), Side(PythonAssembler(grace_s=1))
    for side in sides:
        recs = side.records([*CHAT_M, *RAN_AB, *TURN_T])
        for r in recs[1:3]:
            r.start_ns = NoOrder()  # type: ignore[assignment]
        assert side.asm.add_records(recs, 0) == []
        with pytest.raises(ArithmeticError, match="lt"):
            side.asm.poll(10**9)
    c, py = sides
    assert c.state() == py.state() and c.asm.pending_turns == 1 and not c.asm._spare


@pytest.mark.parametrize("which", ["executed", "requested"])
def test_call_names_that_cannot_be_hashed_raise_as_in_python(which: str) -> None:
    """Reconciling by id, Python looks each call that ran (whose id no requested call has) up by name among the
    requested calls left, and files each requested call left by its name: a name that cannot be hashed raises there.
    C released such a turn (its rule 1 reads no name); a call with a name not exactly a str goes to _release_turn."""
    sides = Side(TurnAssembler(grace_s=1)), Side(PythonAssembler(grace_s=1))
    for side in sides:
        recs = side.records([*CHAT_M, ("req2:c", T, "", "m", 2, 2), ("call:d", T, "c2", "t", 4, 5), *TURN_T])
        call = recs[4 if which == "executed" else 3]
        assert isinstance(call, ToolCall)
        call.name = ["tool"]  # type: ignore[assignment]
        assert side.asm.add_records(recs, 0) == []
        with pytest.raises(TypeError, match="unhashable"):
            side.asm.poll(10**10)
    c, py = sides
    assert c.state() == py.state() and c.asm.pending_turns == 1


@pytest.mark.parametrize("change", ["requested", "handoff", "turn"])
def test_a_trace_changed_while_its_calls_are_sorted_is_released_as_in_python(change: str) -> None:
    """Sorting a turn's calls under its chat span runs Python code (start times compared): a call made a requested
    one or a handoff there, or a turn added to the trace, is read as Python reads it after its sort (C had checked the
    calls' kinds before the sort only, and the turns not again: a requested call left unreconciled, a handoff kept as
    a call, the added turn dropped with the trace)."""
    sides = Side(TurnAssembler(grace_s=1)), Side(PythonAssembler(grace_s=1))
    for side in sides:
        chat, x, y, turn = side.records([("other", T, "m", "t", 1, 2), ("call:a", T, "x", "m", 3, 4),
                                         ("call:a", T, "y", "t", 5, 6), *TURN_T])  # fmt: skip
        asm = side.asm

        class Start(int):
            def __lt__(self, other: object) -> bool:
                if change == "turn":
                    asm._traces[T].turns.setdefault("t2", Turn("hi", trace_id=T, span_id="t2"))
                else:
                    y.__class__ = RequestedCall if change == "requested" else HandoffMark
                return int(self) < other  # type: ignore[operator]

            __gt__ = __lt__
            __hash__ = int.__hash__

        x.start_ns = Start(3)
        assert asm.add_records([chat, x, y, turn], 0) == []
        side.released += asm.poll(10**10)
    c, py = sides
    assert c.turns(c.released) == py.turns(py.released) and c.state() == py.state()


# ---- fallbacks ------------------------------------------------------------------------------------------------


class Counting(TurnAssembler):
    """Counts the calls handed to the Python methods."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.py = 0

    def _add_records_py(self, records: Iterable[Any], now_ns: int) -> list[Turn]:
        self.py += 1
        return super()._add_records_py(records, now_ns)

    def _poll_py(self, now_ns: int) -> list[Turn]:
        self.py += 1
        return super()._poll_py(now_ns)


def test_a_subclass_runs_the_python_code_and_an_exact_assembler_does_not() -> None:
    sub = Counting(grace_s=0)
    recs: list[Any] = [ToolCall("x", trace_id=T, span_id="c", parent_span_id="t"), Turn("", trace_id=T, span_id="t")]
    (out,) = sub.add_records(recs, 1)
    assert out.calls == (recs[0],) and sub.py == 2  # add_records, then its poll
    a = TurnAssembler(grace_s=0)
    calls: list[str] = []

    def add_py(records: Iterable[Any], now_ns: int) -> list[Turn]:
        calls.append("add")
        return []

    def poll_py(now_ns: int) -> list[Turn]:
        calls.append("poll")
        return []

    a._add_records_py = add_py  # type: ignore[method-assign]
    a._poll_py = poll_py  # type: ignore[method-assign]
    (out,) = a.add_records([ToolCall("x", trace_id=T, span_id="c", parent_span_id="t"), Turn("", trace_id=T)], 1)
    assert a.poll(2) == [] and calls == []
    assert a.add_records(iter([]), 2) == [] and calls == ["add"]
    a.max_pending = 2**63  # an unusual bound: Python's
    assert a.poll(2) == [] and calls == ["add", "poll"]


def test_requested_calls_and_offered_tools_are_taken_in_c() -> None:
    """The records of model request spans are calls to C (the Python release then joins and reconciles them)."""
    a = TurnAssembler(grace_s=0)
    a._add_records_py = None  # type: ignore[assignment, method-assign]  # C must not hand the batch over
    recs: list[Any] = [
        Span(T, "m", "t", "chat", 1, 1, 2),
        RequestedCall("f", trace_id=T, span_id="m#00", parent_span_id="m", start_ns=2, end_ns=2),
        OfferedTools("", trace_id=T, span_id="m#tools", parent_span_id="m", definitions=({"name": "f"},)),
        Turn("", trace_id=T, span_id="t"),
    ]
    (out,) = a.add_records(recs, 1)
    assert out.calls == (recs[1],) and out.tool_definitions == ({"name": "f"},)


@pytest.mark.parametrize("flush", [False, True])
def test_input_marks_go_to_the_python_code_and_give_a_turn_without_input_its_input(flush: bool) -> None:
    """C hands a request holding an InputMark to the Python code, and its trace to _release_turn (poll or flush),
    with the same results: the earliest mark gives the turn without input its input; a turn with one keeps it. (A
    mark is under its model request span, never right under a turn, as a requested call.)"""
    steps: list[tuple[str, list[Spec], int]] = [
        ("add", [("other", T, "m1", "t1", 1, 2), ("other", T, "m2", "t1", 0, 1), ("call", T, "c1", "m1", 1, 2)], 0),
        ("add", [("input", T, "m1", "m1", 1, 2), ("input", T, "m2", "m2", 0, 1), ("turn0", T, "t1", "", 0, 3)], 0),
        ("add", [("other", T, "m3", "t2", 1, 2), ("input", T, "m3", "m3", 1, 2), ("turn", T, "t2", "", 0, 3)], 0),
        ("flush" if flush else "poll", [], 5),
    ]
    c, _ = run_both(steps, lambda cls: cls(grace_s=1))
    assert sorted((t.span_id, t.input_text, len(t.calls)) for t in c.released) == [("t1", "m2@0", 1), ("t2", "hi", 0)]


class MyCall(ToolCall):
    __slots__ = ()


class Plain:
    """Not a record class: taken as another span, as isinstance does."""

    def __init__(self, tid: str, sid: str, parent: str) -> None:
        self.trace_id, self.span_id, self.parent_span_id = tid, sid, parent


def _records() -> list[Any]:
    return [Turn("hi", trace_id=T, span_id="t"), ToolCall("x", trace_id=T, span_id="c", parent_span_id="t")]


@pytest.mark.parametrize(
    "records",
    [
        lambda: [MyCall("x", trace_id=T, span_id="c", parent_span_id="t"), Turn("hi", trace_id=T, span_id="t")],
        lambda: [Plain(T, "m", "t"), ToolCall("x", trace_id=T, span_id="c", parent_span_id="m")],
        lambda: tuple(_records()),
        lambda: iter(_records()),
        lambda: (r for r in _records()),
        lambda: [Turn("hi", trace_id=type("S", (str,), {})(T), span_id="t")],
    ],
    ids=["subclass", "not-a-record", "tuple", "iterator", "generator", "str-subclass-id"],
)
def test_unusual_records_give_the_python_results(records: Callable[[], Iterable[Any]]) -> None:
    c, py = Side(TurnAssembler(grace_s=0)), Side(PythonAssembler(grace_s=0))
    got = []
    for side in (c, py):
        recs = records()
        if not isinstance(recs, list | tuple):  # numbered as they are taken
            recs = list(recs)
            given: Iterable[Any] = iter(recs)
        else:
            given = recs
        for r in recs:
            side.index[id(r)] = len(side.keep)
            side.keep.append(r)
        got.append(side.turns(side.asm.add_records(given, 1)))
    assert got[0] == got[1]
    assert c.state() == py.state()


def test_unusual_records_raise_as_in_python() -> None:
    for cls in (TurnAssembler, PythonAssembler):
        a = cls(grace_s=0)
        bad = ToolCall("x", trace_id=T, span_id="c", parent_span_id=None)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            a.add_records([bad], 0)
        assert a.pending_traces == 1  # as far as Python got
        unset = object.__new__(Turn)
        with pytest.raises(AttributeError):
            a.add_records([unset], 0)


@pytest.mark.parametrize(
    "change",
    [
        lambda a: setattr(a, "max_pending", 2**70),
        lambda a: setattr(a, "grace_ns", 2**63),
        lambda a: setattr(a, "_released", type("S", (set,), {})(a._released)),
        lambda a: setattr(a, "_traces", type("O", (OrderedDict,), {})(a._traces)),
        lambda a: setattr(a, "stats", copy.copy(a.stats)),
        lambda a: setattr(a._traces[T], "turns", type("D", (dict,), {})(a._traces[T].turns)),
        lambda a: setattr(a._traces[T], "calls", type("L", (list,), {})(a._traces[T].calls)),
        lambda a: setattr(a._traces[T], "parents", type("D", (dict,), {})(a._traces[T].parents)),
    ],
    ids=["big-bound", "big-grace", "set-subclass", "odict-subclass", "stats-copy", "turns", "calls", "parents"],
)
def test_unusual_state_gives_the_python_results(change: Callable[[TurnAssembler], None]) -> None:
    first: list[Spec] = [("call", T, "c", "t", 1, 2), ("other", T, "m", "t", 0, 3), ("turn", T, "t", "", 0, 3)]
    then: list[Spec] = [("call", T, "c2", "m", 1, 2), ("call", U, "c", "t", 0, 1), ("turn", U, "t", "", 0, 1)]
    c, py = Side(TurnAssembler(grace_s=1)), Side(PythonAssembler(grace_s=1))
    for side in (c, py):
        side.asm.add_records(side.records(first), 0)
        change(side.asm)
    for op, now in (("add", 0), ("poll", 10**9), ("add", 10**9), ("poll", 10**10)):
        if op == "add":
            got, expect = c.asm.add_records(c.records(then), now), py.asm.add_records(py.records(then), now)
        else:
            got, expect = c.asm.poll(now), py.asm.poll(now)
        assert c.turns(got) == py.turns(expect)
        assert c.state() == py.state()


@pytest.mark.parametrize("now", [0, -5 * 10**9, 2**62, 2**63 - 2 * 10**9, 2**63 - 1, -(2**63), 2**64])
@pytest.mark.parametrize("grace", [0, 1])
def test_times_near_and_past_64_bits(now: int, grace: int) -> None:
    """now_ns plus the grace (or minus the timeout) past 64 bits: Python's (exact) arithmetic, as in Python."""
    specs: list[Spec] = [("call", T, "c", "t", 0, 1), ("turn", T, "t", "", 0, 1), ("call", U, "c", "x", 0, 1)]
    c, py = Side(TurnAssembler(grace_s=grace, turnless_timeout_s=1)), Side(PythonAssembler(grace_s=grace))
    py.asm.turnless_timeout_ns = c.asm.turnless_timeout_ns
    for at in (now, now + 10**9, now + 2 * 10**9):
        got, expect = c.asm.add_records(c.records(specs), at), py.asm.add_records(py.records(specs), at)
        assert c.turns(got) == py.turns(expect)
        assert c.turns(c.asm.poll(at)) == py.turns(py.asm.poll(at))
        assert c.state() == py.state()


def test_a_trace_changed_from_outside_is_used_as_python_would() -> None:
    """Containers of another type inside a trace go through the abstract API: their own methods are called."""

    class Calls(list[ToolCall]):
        def sort(self, *args: Any, **kw: Any) -> None:
            super().sort(*args, **kw)
            self.reverse()

    for cls in (TurnAssembler, PythonAssembler):
        a = cls(grace_s=0)
        calls = [ToolCall("x", trace_id=T, span_id=s, parent_span_id="t", start_ns=n) for n, s in enumerate("ab")]
        a.add_records(calls, 0)
        a._traces[T].calls = Calls(a._traces[T].calls)
        (turn,) = a.add_records([Turn("hi", trace_id=T, span_id="t")], 0)
        assert [x.span_id for x in turn.calls] == ["b", "a"]


# ---- references and memory ------------------------------------------------------------------------------------


def test_references_are_released() -> None:
    a = TurnAssembler(grace_s=1)
    tid, sid, now = "f" * 32, "t" + "0" * 15, 10**18
    call = ToolCall("x", trace_id=tid, span_id="c", parent_span_id=sid)
    turn = Turn("hi", trace_id=tid, span_id=sid)
    other = Span(tid, "m", sid, "chat")
    objs = (call, turn, other, tid, sid, a.stats, a._traces, a._released)
    before = [sys.getrefcount(o) for o in objs]
    assert a.add_records([other, call, turn], now) == []
    (out,) = a.poll(now + 10**9)
    assert out is turn and turn.calls == (call,)
    turn.calls = ()
    del out
    key = a._released_order.pop()  # the released key (a new string) is the only trace left
    a._released.discard(key)
    assert [sys.getrefcount(o) for o in objs] == before


def requested_of(tid: str, start: Callable[[], Any]) -> list[RequestedCall]:
    """Two calls a chat span "m" requested (ids k and l), each starting at start()."""
    return [
        RequestedCall("x", k, trace_id=tid, span_id=f"m#0{i}", parent_span_id="m", start_ns=start())
        for i, k in enumerate("kl")
    ]


def test_memory_stays_flat_when_python_code_raises_midway() -> None:
    """The error paths release what they hold: start times that cannot be compared (a sort in the inline release of
    poll or flush, of calls under a chat span, in _release_turn, in _release_turnless, in an eviction), counters that
    cannot be added to,
    containers whose methods raise. Measured when written: 2 blocks gained over the 400 rounds."""

    class NoOrder:
        def __lt__(self, other: object) -> bool:
            raise ArithmeticError("lt")

        __gt__ = __le__ = __ge__ = __lt__

    class NoAdd(int):
        def __add__(self, other: object) -> int:
            raise ArithmeticError("add")

        __radd__ = __iadd__ = __add__

    class NoAppend(list[ToolCall]):
        def append(self, x: ToolCall) -> None:
            raise ArithmeticError("append")

    def call(sid: str, parent: str = "t", start: Any = 1, tid: str = T) -> ToolCall:
        return ToolCall("x", trace_id=tid, span_id=sid, parent_span_id=parent, start_ns=start)

    def turn(sid: str = "t", start: Any = 0, tid: str = T) -> Turn:
        return Turn("hi", trace_id=tid, span_id=sid, start_ns=start)

    def one_round() -> int:
        raised = 0
        steps: list[Callable[[TurnAssembler], object]] = [
            lambda a: a.add_records([call("c", start=NoOrder()), call("d", start=NoOrder()), turn()], 0),
            lambda a: a.poll(10**10),  # the inline release sorts the calls
            lambda a: a.add_records([call("e", "u", NoOrder()), call("f", start=NoOrder()), turn("u")], 10**10),
            lambda a: a.poll(2 * 10**10),  # _release_turn sorts them
            lambda a: a.add_records([call("g", "zz", NoOrder(), "b" * 32), call("h", "zz", NoOrder(), "b" * 32)], 0),
            lambda a: a.poll(10**12),  # _release_turnless sorts them
            lambda a: a.add_records([call("i", "w", NoOrder(), "d" * 32), call("j", "w", NoOrder(), "d" * 32),
                                     turn("w", tid="d" * 32)], 10**12),
            lambda a: a.add_records([Span("e" * 32, "m", "t", "chat"), *requested_of("e" * 32, NoOrder),
                                     turn(tid="e" * 32)], 10**12),
            lambda a: a.poll(3 * 10**12),  # the release of requested calls under a chat span (release_chat) sorts them
            lambda a: a.flush(),  # the inline release of flush (release_all) sorts them
        ]
        for step in steps:
            a = TurnAssembler(grace_s=1, turnless_timeout_s=3)
            for s in steps[: steps.index(step)]:
                try:
                    s(a)
                except ArithmeticError:
                    pass
            try:
                step(a)
            except ArithmeticError:
                raised += 1
        a = TurnAssembler(max_pending=1)
        a.add_records([turn(start=NoOrder()), turn("u", start=NoOrder())], 0)
        with pytest.raises(ArithmeticError):
            a.add_records([turn(tid="c" * 32)], 1)  # the eviction sorts the turns
        a = TurnAssembler()
        a.add_records([call("c"), turn()], 0)
        a.stats.duplicates = NoAdd(0)
        with pytest.raises(ArithmeticError):
            a.add_records([call("c"), turn()], 0)
        a._pending_turns = NoAdd(0)
        with pytest.raises(ArithmeticError):
            a.add_records([turn("v")], 0)
        a = TurnAssembler()
        a.add_records([turn()], 0)
        a._traces[T].calls = NoAppend()
        with pytest.raises(ArithmeticError):
            a.add_records([call("c")], 1)
        return raised

    assert one_round() > 0
    for _ in range(50):
        one_round()
    gc.collect()
    blocks = sys.getallocatedblocks()
    for _ in range(400):
        one_round()
    gc.collect()
    assert sys.getallocatedblocks() - blocks < 400  # one object kept per error path would be 4,000 or more


def test_references_are_released_by_flush() -> None:
    a = TurnAssembler(grace_s=1)
    tid, sid, now = "f" * 32, "t" + "0" * 15, 10**18
    calls = [ToolCall("x", trace_id=tid, span_id=c, parent_span_id=sid, start_ns=9 - i) for i, c in enumerate("cd")]
    turn = Turn("hi", trace_id=tid, span_id=sid)
    objs = (*calls, turn, tid, sid, a.stats, a._traces, a._released)
    before = [sys.getrefcount(o) for o in objs]
    assert a.add_records([*calls, turn], now) == []
    (out,) = a.flush()
    assert out is turn and turn.calls == (calls[1], calls[0]) and a.stats.turns_completed == 1
    turn.calls = ()
    del out
    key = a._released_order.pop()  # the released key (a new string) is the only trace left
    a._released.discard(key)
    assert [sys.getrefcount(o) for o in objs] == before


def test_memory_stays_flat_over_many_rounds() -> None:
    a = TurnAssembler(grace_s=1, turnless_timeout_s=3, max_pending=50)
    a._released_max = 200

    def rounds(start: int, n: int) -> None:
        for i in range(start, start + n):
            tid = f"{i:032x}"
            recs: list[Any] = [
                ToolCall("x", trace_id=tid, span_id="c", parent_span_id="t", start_ns=1),
                ToolCall("x", trace_id=tid, span_id="d", parent_span_id="m", start_ns=0),
                Span(tid, "m", "t", "chat"),
                Turn("hi", trace_id=tid, span_id="t"),
                ToolCall("x", trace_id=f"{i + 7:032x}", span_id="c", parent_span_id="none"),  # turnless
            ]
            a.add_records(recs, i * 10**8)
        a.poll((start + n) * 10**8 + 10**10)

    rounds(0, 3000)
    gc.collect()
    tracemalloc.start()
    try:
        rounds(3000, 3000)
        gc.collect()
        first, _ = tracemalloc.get_traced_memory()
        rounds(6000, 20000)
        gc.collect()
        last, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert last - first < 64 * 1024, (first, last)


def _released_inline_keeps(batches: list[list[list[Any]]]) -> int:
    """Bytes an assembler still holds (tracemalloc) once it released inline the 1,100 one-turn traces each of
    `batches` gives (their requests, each added a nanosecond after the one before, the trace's first at its index)."""
    a = TurnAssembler(grace_s=1, turnless_timeout_s=5, max_pending_bytes=1 << 40)
    a._released_max = 100
    now = 10**18
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i, requests in enumerate(batches):
            for j, request in enumerate(requests):
                a.add_records(request, now + i + j)
        out = a.poll(now + 10**10)
        assert len(out) == 1100 and all(len(t.calls) == 100 for t in out) and not a.pending_traces
        del out
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return after - before


@pytest.mark.parametrize("impl", ["c", "python"])
def test_a_run_whose_root_came_before_its_calls_leaves_no_more_behind(
    impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's root that came before the 100 calls under it, then its SERVER span, leaves as little behind once
    released as one that came after them (the same turns, released inline): what a trace keeps while RunRoots wait
    goes with it, not with the emptied traces kept for reuse (1,024 of them: memory no bound counts). (The arrivals of
    calls held across requests: test_the_arrivals_of_calls_held_over_requests_go_with_their_trace.)"""
    _on_path(impl, monkeypatch)

    def traces(root_first: bool) -> list[list[list[Any]]]:
        out: list[list[list[Any]]] = []
        for t in range(1100):
            tid = f"{t:032x}"
            root = RunRoot("", trace_id=tid, span_id="x", parent_span_id="w", start_ns=1, end_ns=9,
                           turn=Turn("run", trace_id=tid, span_id="x", start_ns=1, end_ns=9))  # fmt: skip
            calls = [ToolCall("x", trace_id=tid, span_id=f"c{i}", parent_span_id="x", start_ns=2) for i in range(100)]
            server = Span(tid, "w", "", "POST /chat", KIND_SERVER, 0, 10)
            out.append([[root, *calls] if root_first else [*calls, root], [server]])
        return out

    assert _released_inline_keeps(traces(True)) - _released_inline_keeps(traces(False)) < 256 * 1024


@pytest.mark.parametrize("impl", ["c", "python"])
def test_the_arrivals_of_calls_held_over_requests_go_with_their_trace(
    impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The arrivals of the calls of a trace held over several requests (_Trace.since: up to three times
    max_calls_per_trace, kept for the case RunRoots wait) go when the trace is released: not kept with the emptied
    traces kept for reuse (1,024 of them), memory no bound counts, until each is reused and holds a call again. Turns
    whose 100 calls came in two requests leave as little behind once released inline as ones whose calls came in one
    (1.6 MB more when the spares kept them)."""
    _on_path(impl, monkeypatch)

    def traces(split: bool) -> list[list[list[Any]]]:
        out: list[list[list[Any]]] = []
        for t in range(1100):
            tid = f"{t:032x}"
            calls = [
                ToolCall("x", trace_id=tid, span_id=f"{i:016x}", parent_span_id="t", start_ns=2) for i in range(100)
            ]
            turn = Turn("turn", trace_id=tid, span_id="t", start_ns=1, end_ns=9)
            out.append([calls[:50], calls[50:], [turn]] if split else [calls, [turn]])
        return out

    assert _released_inline_keeps(traces(True)) - _released_inline_keeps(traces(False)) < 256 * 1024


# ---- Python code run in the middle of add_records (an eviction sorts what it releases) ----------------------------


def _evicting(on_compare: Callable[[], None]) -> tuple[TurnAssembler, TurnAssembler]:
    """Two assemblers (C, Python) holding one trace of two turns whose start times run `on_compare` when the eviction
    sorts them: the next new trace evicts it (max_pending=1)."""

    class Start:
        def __lt__(self, other: object) -> bool:
            on_compare()
            return False

        __gt__ = __lt__

    pair = []
    for add in ("add_records", "_add_records_py"):
        asm = TurnAssembler(max_pending=1)
        turns = [Turn("x", trace_id="A", span_id=f"a{i}", start_ns=Start()) for i in (1, 2)]  # type: ignore[arg-type]
        getattr(asm, add)(turns, 0)
        pair.append(asm)
    return pair[0], pair[1]


@pytest.mark.parametrize("kind", ["call", "turn", "span"])
def test_a_record_emptied_during_an_eviction_raises_as_in_python(kind: str) -> None:
    """The C code read the record's ids after the eviction without looking again (a crash before the fix)."""
    errors = []
    for py in (False, True):
        if kind == "call":
            victim: Any = ToolCall("t", trace_id="B", span_id="s9", parent_span_id="p")
        elif kind == "turn":
            victim = Turn("x", trace_id="B", span_id="s9")
        else:
            victim = Span(trace_id="B", span_id="s9", parent_span_id="p", name="n")

        def empty(v: Any = victim) -> None:
            if hasattr(v, "span_id"):
                del v.span_id

        c, p = _evicting(empty)
        asm, add = (p, p._add_records_py) if py else (c, c.add_records)
        with pytest.raises(AttributeError) as info:
            add([victim], 1)
        errors.append(str(info.value))
        assert asm.stats.evicted == 2  # the trace's two turns
    assert errors[0] == errors[1]


def test_records_replaced_during_an_eviction_are_added_as_python_adds_them() -> None:
    class OtherCall(ToolCall):
        __slots__ = ()

    results = []
    for py in (False, True):
        records: list[Any] = [ToolCall("t", trace_id="B", span_id=f"s{i}", parent_span_id="p") for i in (1, 2)]

        def replace_second(records: list[Any] = records) -> None:
            records[1] = OtherCall("t", trace_id="B", span_id="s2", parent_span_id="p")

        c, p = _evicting(replace_second)
        asm = p if py else c
        out = (asm._add_records_py if py else asm.add_records)(records, 1)
        tr = asm._traces["B"]
        results.append(([t.span_id for t in out], [type(x).__name__ for x in tr.calls], dict(tr.parents), asm.stats))
    assert results[0] == results[1]
    assert results[0][1] == ["ToolCall", "OtherCall"]


def test_an_error_keeps_the_counts_so_far_and_raises_the_first_error() -> None:
    """On an error the counts of the records before it are still added to the stats (as Python adds them as it
    goes), with the error set aside meanwhile: a stats value whose += runs Python code lost it before the fix. So is
    the count of the turns held before it (pending: they were left uncounted on both paths)."""

    class Count(int):
        def __iadd__(self, other: int) -> Count:
            return Count(int(self) + other)

    class Parents(dict[str, str]):
        def __contains__(self, key: object) -> bool:
            if key == "boom":
                raise LookupError("boom")
            return dict.__contains__(self, key)

    seen = []
    for py in (False, True):
        asm = TurnAssembler()
        add = asm._add_records_py if py else asm.add_records
        asm.stats.duplicates = Count(0)
        add([ToolCall("t", trace_id="A", span_id="s1", parent_span_id="p")], 0)
        asm._traces["A"].parents = Parents(asm._traces["A"].parents)
        with pytest.raises(LookupError, match="boom"):
            add(
                [
                    ToolCall("t", trace_id="A", span_id="s1", parent_span_id="p"),  # a duplicate: counted
                    Turn("hi", trace_id="A", span_id="t1"),  # held: pending
                    ToolCall("t", trace_id="A", span_id="boom", parent_span_id="p"),
                ],
                1,
            )
        seen.append((asm.stats, asm.pending_turns))
    assert seen[0] == seen[1] and seen[0][0].duplicates == 1 and seen[0][1] == 1


@pytest.mark.parametrize("mark", [InputMark, HandoffMark, CallIdMark])
def test_a_batch_holding_a_mark_is_added_by_the_c_code(mark: type[ToolCall]) -> None:
    """InputMark, HandoffMark and CallIdMark (ToolCall subclasses of the same slots) are taken as calls by the C
    add_records: a batch holding one (every batch of openai-agents' or google-adk's spans) went to the Python code, 1.8
    times the cost per record (a CallIdMark's: 2-3 times, 512 records); the C code counts a copy of one as Python
    counts it (an input mark, a task's call id: 0 spans, a handoff: 1)."""
    a = TurnAssembler()
    added: list[int] = []
    py_add = a._add_records_py

    def spy(records: Any, now_ns: int) -> list[Turn]:
        added.append(len(list(records)))
        return py_add(records, now_ns)

    a._add_records_py = spy  # type: ignore[method-assign]
    m = mark(name="transfer_to_b" if mark is HandoffMark else "", arguments="question", trace_id="t" * 32,
             span_id="m" * 16, parent_span_id="l" * 16, start_ns=1, end_ns=2)
    turn = Turn(input_text="", trace_id="t" * 32, span_id="a" * 16, start_ns=0, end_ns=3, agent="x")
    link = Span("t" * 32, "l" * 16, "a" * 16, "response")
    a.add_records([turn, link, m], 0)
    a.add_records([copy.copy(m)], 0)
    assert added == [] and a.stats.duplicates == (1 if mark is HandoffMark else 0)
    [released] = a.flush()
    assert released.calls == () and released.input_text == ("question" if mark is InputMark else "")


@pytest.mark.parametrize("cls", [TurnAssembler, PythonAssembler])
def test_marks_and_offered_tools_over_the_call_bound_are_no_oversized_calls(cls: type[TurnAssembler]) -> None:
    """Past max_calls_per_trace a record is dropped; the input a model span was given and the tools it offered are
    no calls: they are not counted as oversized calls (a call is, once)."""
    a = cls(max_calls_per_trace=1)
    common = {"trace_id": "t" * 32, "parent_span_id": "l" * 16, "start_ns": 1, "end_ns": 2}
    a.add_records([ToolCall(name="f", span_id="c" * 16, **common)], 0)  # type: ignore[arg-type]
    over = [InputMark(name="", arguments="q", span_id="m" * 16, **common),  # type: ignore[arg-type]
            CallIdMark(name="f", call_id="c", span_id="k" * 16, **common),  # type: ignore[arg-type]
            OfferedTools(name="", span_id="o" * 16, definitions=({"name": "f"},), **common),  # type: ignore[arg-type]
            ToolCall(name="g", span_id="d" * 16, **common)]  # type: ignore[arg-type]  # fmt: skip
    a.add_records(over, 0)
    assert a.stats.oversized_calls == 1
