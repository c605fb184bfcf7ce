"""An exporter's retry of a request after the turn it held was judged: every record of it is a duplicate.

Reconcile (monitor.assembly._reconcile) drops, at a turn's release, the requested calls a call that ran accounts for,
the wrappers of calls (rule 0) and the handoffs with the requested calls they stand for. Those records were judged
with their turn as much as the calls kept: a copy of one (the chat span's request sent again, alone, as
BatchSpanProcessor splits a turn over requests, or the whole request) is a duplicate, never a call judged alone nor a
late call. Both paths: the C assembler (its own release of a turn under its chat spans, release_chat, and the Python
release it hands other turns to) and the Python reference alone.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from monitor.assembly import TurnAssembler
from monitor.otlp import Span
from monitor.records import HandoffMark, RequestedCall, ToolCall, Turn

S = 1_000_000_000
T = "0af7651916cd43dd8448eb211c80319c"
Record = ToolCall | Turn | Span
Batch = Callable[[], list[Record]]  # new records each time: a retry is decoded again


def the_turn() -> list[Record]:
    return [Turn("hi", trace_id=T, span_id="t", start_ns=0, end_ns=10 * S)]


def link(sid: str, parent: str) -> Span:
    return Span(T, sid, parent, "chat m", 1, S, 2 * S)


def chat(*names_ids: tuple[str, str]) -> list[Record]:
    """The chat span m (under the turn) and the calls it requested, as the normalizer makes them."""
    out: list[Record] = [link("m", "t")]
    for i, (n, cid) in enumerate(names_ids):
        r = RequestedCall(n, cid, trace_id=T, span_id=f"m#{i:02d}", parent_span_id="m", start_ns=S, end_ns=2 * S)
        out.append(r)
    return out


def ran(sid: str, parent: str, name: str = "f", cid: str = "x", start: int = 3) -> ToolCall:
    return ToolCall(name, cid, trace_id=T, span_id=sid, parent_span_id=parent, start_ns=start * S, end_ns=9 * S)


def handoff() -> list[Record]:
    """openai-agents' handoff span h (under the turn) and its mark, which stands for the requested transfer call."""
    mark = HandoffMark("transfer_to_b", trace_id=T, span_id="h#handoff", parent_span_id="h", start_ns=4 * S,
                       end_ns=5 * S)  # fmt: skip
    return [link("h", "t"), mark]


def judged_then_sent_again(
    first: list[Batch], again: Batch, release: str
) -> tuple[list[tuple[bool, list[tuple[str, str]]]], TurnAssembler]:
    """The batches added, the turn released (by a poll past the grace, or a flush), `again` added after it and every
    timeout passed: the turns released, each as (turnless, [(call name, record type)])."""
    a = TurnAssembler(grace_s=2, turnless_timeout_s=5)
    out: list[Turn] = []
    for b in first:
        out += a.add_records(b(), 0)
    out += a.poll(3 * S) if release == "poll" else a.flush()
    out += a.add_records(again(), 4 * S)
    out += a.poll(20 * S) + a.poll(40 * S)
    assert a.pending_traces == 0 and a.pending_turns == 0
    return [(t.turnless, [(c.name, type(c).__name__) for c in t.calls]) for t in out], a


def counts(a: TurnAssembler) -> tuple[int, int, int, int]:
    s = a.stats
    return s.turns_completed, s.turnless_completed, s.duplicates, s.late_calls


RELEASES = pytest.mark.parametrize("release", ["poll", "flush"])


@RELEASES
@pytest.mark.parametrize("link", [True, False], ids=["chat-span", "requested-only"])
def test_the_chat_span_sent_again_alone_after_its_call_ran_is_a_duplicate(
    asm_impl: str, release: str, link: bool
) -> None:
    """The common split: the turn and the call that ran in one request, the chat span that asked for it in another;
    that request sent again after the verdict. Its requested call was accounted for by the call that ran: a copy of
    it is a duplicate (the span, once), not a late call nor, without the chat span's link to its turn, a call judged
    alone at the turnless timeout."""
    turns, a = judged_then_sent_again(
        [lambda: [ran("e", "t"), *the_turn()], lambda: chat(("f", "x"), ("f", "x"))],  # the same id twice: a copy
        lambda: chat(("f", "x"), ("f", "x"))[0 if link else 1 :],
        release,
    )
    assert turns == [(False, [("f", "ToolCall")])]
    assert counts(a) == (1, 0, 1, 0)


@RELEASES
def test_the_whole_request_sent_again_is_duplicates_not_a_late_call(asm_impl: str, release: str) -> None:
    def request() -> list[Record]:
        return [*chat(("f", "x")), ran("e", "t"), *the_turn()]

    turns, a = judged_then_sent_again([request], request, release)
    assert turns == [(False, [("f", "ToolCall")])]
    assert counts(a) == (1, 0, 3, 0)  # the chat span, the call, the turn


@RELEASES
@pytest.mark.parametrize("again", ["wrapper", "all"])
def test_a_wrappers_span_sent_again_is_a_duplicate(asm_impl: str, release: str, again: str) -> None:
    """A wrapper's execute_tool span around the tool's own (rule 0: one call, the inner one kept)."""

    def request() -> list[Record]:
        return [ran("w", "t", start=2), ran("e", "w"), *the_turn()]

    turns, a = judged_then_sent_again([request], (lambda: [ran("w", "t", start=2)]) if again == "wrapper" else request,
                                      release)  # fmt: skip
    assert turns == [(False, [("f", "ToolCall")])]
    assert counts(a) == (1, 0, 1 if again == "wrapper" else 3, 0)


@RELEASES
@pytest.mark.parametrize("again", ["handoff", "chat"])
def test_a_handoff_sent_again_is_a_duplicate(asm_impl: str, release: str, again: str) -> None:
    """A handoff drops the transfer call the model asked for, then itself: the turn has no call. Its span, or the
    chat span that asked for it, sent again is a duplicate, not a late call."""
    turns, a = judged_then_sent_again(
        [lambda: [*chat(("transfer_to_b", "x")), *handoff(), *the_turn()]],
        handoff if again == "handoff" else lambda: chat(("transfer_to_b", "x")),
        release,
    )
    assert turns == [(False, [])]
    assert counts(a) == (1, 0, 1, 0)


@RELEASES
def test_a_requested_call_never_run_sent_again_stays_a_duplicate(asm_impl: str, release: str) -> None:
    """Reconcile keeps a requested call no call accounts for (judged with its turn): its copy was a duplicate
    already, and the call the model asked for again in the same span (a copy of its id) with it."""
    turns, a = judged_then_sent_again(
        [lambda: [*chat(("g", "y"), ("g", "y")), *the_turn()]], lambda: chat(("g", "y"), ("g", "y")), release
    )
    assert turns == [(False, [("g", "RequestedCall")])]
    assert counts(a) == (1, 0, 1, 0)


def test_what_reconcile_dropped_is_remembered_as_bounded_as_the_calls_judged(asm_impl: str) -> None:
    a = TurnAssembler(grace_s=2, turnless_timeout_s=5)
    a._released_max = 2
    a.add_records([ran("e", "t"), *the_turn(), *chat(("f", "x"), ("f", "x"))], 0)
    assert [t.span_id for t in a.poll(3 * S)] == ["t"]
    assert list(a._judged_alone_order) == [T + "m#01", T + "e"]  # m#00 forgotten first (in start order)
