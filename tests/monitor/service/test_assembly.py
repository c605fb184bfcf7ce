"""Turn assembly: grouping under the nearest turn, grace, turnless timeout, bounds, order."""

from __future__ import annotations

from monitor.assembly import TurnAssembler
from monitor.otlp import Span

S = 1_000_000_000
T1 = "0af7651916cd43dd8448eb211c80319c"
T2 = "1af7651916cd43dd8448eb211c80319c"


def turn(trace: str, sid: str, parent: str = "", agent: str = "a", start: int = 0, end: int = 10 * S) -> Span:
    return Span(
        trace,
        sid,
        parent,
        f"invoke_agent {agent}",
        1,
        start,
        end,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]',
        },
    )


def call(trace: str, sid: str, parent: str, name: str, start: int = S, end: int = 2 * S) -> Span:
    return Span(
        trace,
        sid,
        parent,
        f"execute_tool {name}",
        1,
        start,
        end,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name},
    )


def other(trace: str, sid: str, parent: str, start: int = S, end: int = 3 * S) -> Span:
    return Span(trace, sid, parent, "chat model", 3, start, end)


def test_calls_under_intermediate_spans_in_start_order_and_grace() -> None:
    a = TurnAssembler(grace_s=2.0)
    now = 100 * S
    # Children end (and are exported) before their parents; the intermediate chat span comes later.
    assert a.add([call(T1, "c2", "m1", "second", start=5 * S), call(T1, "c1", "m1", "first", start=2 * S)], now) == []
    assert a.add([turn(T1, "t1")], now) == []
    assert a.add([other(T1, "m1", "t1")], now + 1 * S) == []  # within the grace period
    assert a.poll(now + 2 * S - 1) == []
    (done,) = a.poll(now + 2 * S)
    assert [c.name for c in done.calls] == ["first", "second"]
    assert done.agent == "a" and done.input_text == "hi" and not done.turnless
    assert a.pending_traces == 0 and a.pending_turns == 0


def test_nested_agents_take_their_own_calls() -> None:
    a = TurnAssembler(grace_s=0)
    spans = [
        call(T1, "c1", "sub", "inner"),
        turn(T1, "sub", parent="top", agent="helper", start=S, end=5 * S),
        call(T1, "c2", "top", "outer"),
        turn(T1, "top", agent="boss"),
    ]
    done = {t.agent: [c.name for c in t.calls] for t in a.add(spans, 0)}
    assert done == {"helper": ["inner"], "boss": ["outer"]}


def test_turnless_calls_after_the_timeout_and_late_children_dropped() -> None:
    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=30.0)
    assert a.add([call(T2, "c1", "gone", "lonely")], 0) == []
    assert a.poll(29 * S) == []
    (alone,) = a.poll(30 * S)
    assert alone.turnless and [c.name for c in alone.calls] == ["lonely"] and alone.agent == ""
    # A child arriving after its turn was judged is dropped and counted, not judged twice.
    a.add([turn(T1, "t1"), call(T1, "c1", "t1", "x")], 40 * S)
    assert len(a.poll(41 * S)) == 1
    a.add([call(T1, "c9", "t1", "late")], 42 * S)
    assert a.stats.late_calls == 1
    a.add([turn(T1, "t1")], 43 * S)  # and a retried turn span is a duplicate
    assert a.stats.duplicates == 1 and a.flush() == []


def test_pending_traces_are_bounded_oldest_released_early() -> None:
    a = TurnAssembler(grace_s=60, max_pending=2, max_calls_per_trace=2)
    traces = [f"{i:032x}" for i in range(1, 4)]
    out = []
    for i, t in enumerate(traces):
        out += a.add([turn(t, f"{i + 1:016x}"), call(t, f"{i + 10:016x}", f"{i + 1:016x}", "x")], 0)
    assert a.stats.evicted == 1 and a.pending_traces == 2
    assert [t.trace_id for t in out] == [traces[0]] and len(out[0].calls) == 1
    a.add([call(traces[1], f"{n:016x}", f"{2:016x}", "x") for n in range(50, 55)], 0)
    assert a.stats.oversized_calls == 4  # two calls per trace at most
    assert sorted(t.trace_id for t in a.flush()) == traces[1:]


def test_missing_intermediate_span_falls_back_to_the_enclosing_turn() -> None:
    a = TurnAssembler(grace_s=0)
    (done,) = a.add([call(T1, "c1", "never-sent", "x", start=2 * S, end=3 * S), turn(T1, "t1")], 0)
    assert [c.name for c in done.calls] == ["x"]


def test_rejected_spans_are_counted_by_the_normalizer() -> None:
    a = TurnAssembler(grace_s=0)
    bad = Span(T1, "c1", "t1", "execute_tool", 1, 0, 1, attributes={"gen_ai.operation.name": "execute_tool"})
    a.add([bad, turn(T1, "t1")], 0)
    assert a.normalizer.rejected == {"missing_tool_name": 1}


def test_pending_turn_count_follows_adds_and_releases() -> None:
    a = TurnAssembler(grace_s=1.0, max_pending=2)
    a.add([turn(T1, "t1"), turn(T1, "t2"), turn(T2, "t3")], 0)
    assert a.pending_turns == 3
    assert len(a.poll(S)) == 3 and a.pending_turns == 0
    a.add([turn(T1, "t4")], 2 * S)
    a.add([turn(T2, "t5")], 2 * S)
    a.add([turn("2" * 32, "t6")], 2 * S)  # evicts T1's trace
    assert a.stats.evicted == 1 and a.pending_turns == 2
    assert len(a.flush()) == 2 and a.pending_turns == 0


def test_zero_turnless_timeout_with_a_turn_in_its_grace_period_returns() -> None:
    a = TurnAssembler(grace_s=2.0, turnless_timeout_s=0)
    now = 100 * S
    assert a.add([turn(T1, "t1"), call(T1, "c1", "t1", "x")], now) == []
    (turnless,) = a.add([call(T2, "c9", "", "y")], now)  # a turnless trace goes at once
    assert turnless.turnless and [c.name for c in turnless.calls] == ["y"]
    assert a.poll(now) == []  # returns while the turn waits for its grace period
    (done,) = a.poll(now + 2 * S)
    assert [c.name for c in done.calls] == ["x"] and not done.turnless


def test_one_trace_cannot_hold_unbounded_spans_or_turns() -> None:
    # max_pending bounds traces, max_calls_per_trace the calls of one; the other spans (parent links) and the
    # turn spans of one trace are bounded too, and what is refused is counted.
    a = TurnAssembler(grace_s=60, turnless_timeout_s=60, max_calls_per_trace=10)
    a.add([turn(T1, "t0"), call(T1, "c0", "m0", "x"), other(T1, "m0", "t0")], 0)
    a.add([other(T1, f"{n:016x}", "t0") for n in range(1, 50_001)], 0)
    a.add([turn(T1, f"{n:016x}", parent="t0") for n in range(100_001, 100_501)], 0)
    tr = a._traces[T1]
    assert len(tr.parents) <= 10 * 10 and len(tr.turns) <= 10 and a.pending_turns <= 10
    assert a.stats.oversized_spans == 50_000 + 500 - (len(tr.parents) - 2) - (len(tr.turns) - 1)
    # The call under the early chat span still belongs to its turn.
    done = {t.span_id: [c.name for c in t.calls] for t in a.flush()}
    assert done["t0"] == ["x"]


def test_the_turnless_timeout_counts_from_the_first_call_not_the_first_span_of_the_trace() -> None:
    # A span of the trace (a database query before the agent ran) arrived 29 s before the turn's call: the call still
    # waits the whole timeout for its turn, which ends 2 s later.
    a = TurnAssembler(grace_s=2, turnless_timeout_s=30)
    assert a.add([other(T1, "db", "root")], 0) == []
    assert a.add([call(T1, "c1", "t1", "x", start=28 * S, end=29 * S)], 29 * S) == []
    assert a.poll(30 * S) == [] and a.pending_turnless == 1
    assert a.add([turn(T1, "t1", parent="root", start=27 * S, end=31 * S)], 31 * S) == []
    (done,) = a.poll(33 * S)
    assert not done.turnless and [c.name for c in done.calls] == ["x"]
    assert a.stats.turnless_completed == 0


def test_calls_left_by_a_released_turn_wait_a_whole_timeout_for_theirs() -> None:
    # Two turns of one conversation share the trace. The second turn's call arrives while the first is in its grace
    # period; the first is released without it, and it waits for its own turn from then on.
    a = TurnAssembler(grace_s=2, turnless_timeout_s=30)
    a.add([call(T1, "c1", "m1", "first", end=2 * S), other(T1, "m1", "t1", end=3 * S)], 0)
    a.add([turn(T1, "t1", end=10 * S)], 10 * S)
    a.add([call(T1, "c2", "t2", "second", start=11 * S, end=11 * S)], 11 * S)
    (first,) = a.poll(12 * S)
    assert [c.name for c in first.calls] == ["first"]
    assert a.poll(35 * S) == []
    a.add([turn(T1, "t2", start=10 * S, end=35 * S)], 35 * S)
    (second,) = a.poll(37 * S)
    assert not second.turnless and [c.name for c in second.calls] == ["second"]


def test_a_late_call_under_an_intermediate_span_is_counted_late_not_judged_alone() -> None:
    a = TurnAssembler(grace_s=2, turnless_timeout_s=30)
    a.add([turn(T1, "t1"), call(T1, "c1", "t1", "x")], 0)
    (done,) = a.poll(2 * S)
    assert [c.name for c in done.calls] == ["x"]
    # A call under a chat span, both exported after the turn was judged (and the same call sent again).
    a.add([call(T1, "c2", "m1", "y"), other(T1, "m1", "t1")], 3 * S)
    a.add([call(T1, "c2", "m1", "y")], 4 * S)
    assert a.poll(40 * S) == []
    assert (a.stats.late_calls, a.stats.duplicates, a.stats.turnless_completed) == (1, 1, 0)
    assert a.pending_traces == 0


def test_a_turn_arriving_after_its_calls_were_judged_alone_is_dropped_and_counted() -> None:
    # The turn outlasted the turnless timeout: its calls were judged alone. Judged now, it would count every call
    # it expects as missed although they were made.
    a = TurnAssembler(grace_s=2, turnless_timeout_s=30)
    a.add([call(T1, "c1", "m1", "x", end=2 * S), other(T1, "m1", "t1", end=3 * S)], 5 * S)
    (alone,) = a.poll(35 * S)
    assert alone.turnless and [c.name for c in alone.calls] == ["x"]
    assert a.add([turn(T1, "t1", end=40 * S)], 40 * S) == []
    assert a.poll(42 * S) == [] and a.flush() == []
    assert (a.stats.late_turns, a.stats.turns_completed, a.pending_turns) == (1, 0, 0)


def test_traces_of_other_spans_only_are_evicted_before_a_trace_holding_a_turn() -> None:
    # The bound is full of traces holding only other spans (HTTP, DB spans of other requests, routed to the monitor
    # by the Collector). The oldest pending trace holds a turn in its grace period: its first span (a DB query before
    # the agent ran) arrived long before. A new trace must make room by dropping a trace of other spans (nothing to
    # judge there), not by judging the turn early without the call still on its way.
    a = TurnAssembler(grace_s=2, turnless_timeout_s=30, max_pending=3)
    assert a.add([other(T1, "db", "root")], 0) == []
    assert a.add([turn(T1, "t1", parent="root", start=S, end=10 * S)], 10 * S) == []
    assert a.add([other(f"{n:032x}", "h", "") for n in (1, 2)], 10 * S) == []
    assert a.add([other(f"{n:032x}", "h", "") for n in (3, 4)], 11 * S) == []  # the bound: two traces dropped
    assert a.pending_traces == 3 and a.stats.evicted == 0
    a.add([call(T1, "c1", "t1", "x", start=2 * S, end=9 * S)], 11 * S)  # its tool ran in another process
    (done,) = a.poll(12 * S)
    assert done.trace_id == T1 and [c.name for c in done.calls] == ["x"]
    assert (a.stats.turns_completed, a.stats.late_calls, a.stats.evicted) == (1, 0, 0)


def test_a_trace_holding_records_is_evicted_once_no_trace_of_other_spans_is_left() -> None:
    a = TurnAssembler(grace_s=60, max_pending=2)
    a.add([turn(T1, "t1"), other(T2, "h", "")], 0)
    a.add([call(T2, "c1", "t9", "x")], 0)  # T2 holds a call now: both hold records
    (early,) = a.add([other("3" * 32, "h", "")], S)
    assert early.trace_id == T1 and a.stats.evicted == 1
    assert a.add([other("4" * 32, "h", "")], S) == []  # the trace of other spans goes, T2's call stays
    assert a.stats.evicted == 1 and a.pending_turnless == 1 and a.pending_traces == 2


def test_a_copy_of_a_call_judged_alone_is_a_duplicate_not_judged_again() -> None:
    # An exporter retried a request whose response was lost: the copy of a turnless call arrives after that call was
    # judged alone.
    a = TurnAssembler(grace_s=2, turnless_timeout_s=30)
    a.add([call(T1, "c1", "m1", "x"), other(T1, "m1", "t1")], 0)
    (alone,) = a.poll(30 * S)
    assert alone.turnless and [c.name for c in alone.calls] == ["x"]
    assert a.add([call(T1, "c1", "m1", "x")], 31 * S) == []
    assert a.poll(70 * S) == [] and a.flush() == []
    assert (a.stats.turnless_completed, a.stats.duplicates) == (1, 1)


def test_a_copy_of_a_call_arriving_after_its_turn_was_judged_is_a_duplicate_not_a_late_call() -> None:
    a = TurnAssembler(grace_s=2.0)
    now = 100 * S
    assert a.add([call(T1, "c1", "t1", "x"), turn(T1, "t1")], now) == []
    (done,) = a.poll(now + 2 * S)
    assert [c.name for c in done.calls] == ["x"]
    assert a.add([call(T1, "c1", "t1", "x")], now + 5 * S) == []  # the exporter's retry of the same request
    assert a.poll(now + 60 * S) == []
    assert a.stats.duplicates == 1 and a.stats.late_calls == 0
    assert a.add([call(T1, "c2", "t1", "y")], now + 61 * S) == []  # a call the turn did not have: late
    assert a.stats.late_calls == 1 and a.stats.duplicates == 1


def test_a_call_arriving_under_a_chat_span_after_its_turn_was_judged_is_a_late_call_not_a_turnless_turn() -> None:
    a = TurnAssembler(grace_s=2.0, turnless_timeout_s=30.0)
    now = 100 * S
    assert a.add([other(T1, "m1", "t1"), call(T1, "c1", "m1", "x"), turn(T1, "t1")], now) == []
    (done,) = a.poll(now + 2 * S)
    assert [c.name for c in done.calls] == ["x"] and a.pending_traces == 0
    assert a.add([call(T1, "c2", "m1", "y")], now + 4 * S) == []  # a sibling, in another process, too late
    assert a.poll(now + 60 * S) == []  # not judged alone
    assert a.stats.late_calls == 1 and a.stats.turnless_completed == 0 and a.pending_traces == 0
