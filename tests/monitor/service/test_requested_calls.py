"""Calls the model requested (tool_call parts of chat spans) reconciled with the calls that ran (execute_tool spans).

Real OTel SDK spans, encoded as OTLP and decoded by the monitor, through the real normalizer and assembler: the C
paths and their Python references, which must agree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Tracer

from monitor.assembly import TurnAssembler, _assembler
from monitor.normalize import GenAIConvention, Normalizer, _genai
from monitor.normalize._requested import MAX_REQUESTED_PER_SPAN
from monitor.otlp import Span, parse_protobuf
from monitor.records import RequestedCall, ToolCall, Turn
from tests.monitor.service.spans import new_tracer, to_request

OUT = "gen_ai.output.messages"
S = 1_000_000_000


@dataclass
class Req:
    """One tool_call part: arguments a dict (an object), a str (JSON text as is) or None (left out)."""

    name: str
    id: str | None = None
    arguments: object | None = None

    def part(self) -> dict[str, Any]:
        p: dict[str, Any] = {"type": "tool_call", "name": self.name}
        if self.id is not None:
            p["id"] = self.id
        if self.arguments is not None:
            p["arguments"] = self.arguments
        return p


def chat(tracer: Tracer, *reqs: Req, output: str | None = None, op: str = "chat", history: str | None = None) -> None:
    """A model request span; with `reqs` its output messages hold a text part and their tool_call parts; with
    `history` its input messages hold that user text."""
    attrs = {"gen_ai.operation.name": op, "gen_ai.request.model": "m"}
    if history is not None:
        attrs["gen_ai.input.messages"] = json.dumps([{"role": "user", "parts": [{"type": "text", "content": history}]}])
    if output is None and reqs:
        parts = [{"type": "text", "content": "let me look"}] + [r.part() for r in reqs]
        output = json.dumps([{"role": "assistant", "parts": parts, "finish_reason": "tool_call"}])
    if output is not None:
        attrs[OUT] = output
    with tracer.start_as_current_span(f"{op} m", attributes=attrs):
        pass


def ran(tracer: Tracer, name: str, call_id: str | None = None, arguments: object | None = None) -> None:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if call_id is not None:
        attrs["gen_ai.tool.call.id"] = call_id
    if arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = json.dumps(arguments)
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs):
        pass


@contextmanager
def agent_turn(tracer: Tracer, text: str = "[AUTH] login failure", agent: str = "a") -> Iterator[None]:
    msgs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent, "gen_ai.input.messages": msgs}
    with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attrs):
        yield


def decoded(spans: Sequence[ReadableSpan]) -> list[Span]:
    return list(parse_protobuf(to_request(spans).SerializeToString()).spans)


def record(build: Any) -> list[Span]:
    provider, tracer, memory = new_tracer()
    build(tracer)
    provider.shutdown()
    return decoded(memory.get_finished_spans())


IMPLS = ["c", "python"]


def _impl(impl: str) -> None:
    if impl == "c" and (_genai._CONVERT_C is None or _assembler._ADD_C is None):
        pytest.skip("the C normalizer or assembler is not loaded")


def convert(spans: Sequence[Span], impl: str) -> tuple[list[Any], list[str]]:
    out: list[Any] = []
    problems: list[str] = []
    rejected: dict[str, int] = {}
    conv = _genai._CONVERT_C if impl == "c" else _genai._convert_py
    assert conv is not None
    conv(spans, out, problems, rejected)
    assert rejected == {}
    return out, problems


def assemble(spans: Sequence[Span], impl: str, *, flush: bool = False) -> tuple[list[Turn], TurnAssembler]:
    """Every span added at 0, then released by a poll past the grace period (or by a flush)."""
    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    records, _ = convert(spans, impl)
    python = impl == "python"
    out = (a._add_records_py if python else a.add_records)(records, 0)
    if flush:
        out += a._release_all_py() if python else []
        out += a.flush()  # after the Python release: drops the emptied traces, releases nothing more
    else:
        out += (a._poll_py if python else a.poll)(10 * S)
    return out, a


def calls_of(t: Turn) -> list[tuple[str, str, str | None, bool]]:
    return [(c.name, c.call_id, c.arguments, isinstance(c, RequestedCall)) for c in t.calls]


# ---- the normalizer ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
def test_a_chat_span_gives_itself_and_one_requested_call_per_tool_call_part(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        chat(tracer, Req("get_weather", "call_1", {"city": "Paris"}), Req("get_time", "call_2", '{"tz": "CET"}'),
             history="hello " * 10_000)

    (span,) = spans = record(build)
    assert "gen_ai.input.messages" in span.attributes
    (out, problems) = convert(spans, impl)
    assert out[0] is span and problems == []
    assert [type(r) for r in out[1:]] == [RequestedCall, RequestedCall]
    first, second = out[1:]
    assert (first.name, first.call_id, json.loads(first.arguments)) == ("get_weather", "call_1", {"city": "Paris"})
    assert (second.name, second.call_id, second.arguments) == ("get_time", "call_2", '{"tz": "CET"}')
    for i, r in enumerate(out[1:]):
        assert r.parent_span_id == span.span_id and r.span_id == f"{span.span_id}#{i:02d}"
        assert r.trace_id == span.trace_id and r.start_ns == r.end_ns == span.end_ns
        assert r.result is None and r.error_type is None
        # The span's attributes, but not its message contents: a pending call does not hold the conversation.
        content = ("gen_ai.output.messages", "gen_ai.input.messages")
        assert r.attributes == {k: v for k, v in span.attributes.items() if k not in content}
        assert r.attributes is out[1].attributes


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("reqs", "calls", "problems"),
    [
        ([Req("f", "c1", {"a": 1, "b": [1.5, None]}), Req("g", "c2", '{"x": 1}'), Req("h")],
         [("f", "c1", '{"a": 1, "b": [1.5, null]}'), ("g", "c2", '{"x": 1}'), ("h", "", None)], 0),
        ([Req("météo", "ид", {"城市": "東京 😀"})],
         [("météo", "ид", '{"\\u57ce\\u5e02": "\\u6771\\u4eac \\ud83d\\ude00"}')], 0),  # json.dumps' escapes
        ([Req("f", "c1", {}), Req("g", "c2", "")], [("f", "c1", "{}"), ("g", "c2", "")], 0),
        ([Req("f", "c1", [1]), Req("g", "c2", 5), Req("h", "c3", True)],
         [("f", "c1", "[1]"), ("g", "c2", "5"), ("h", "c3", "true")], 3),  # arguments of another type: counted
        ([Req("f", "c1"), Req("", "c2"), Req("\u3000", "c3"), Req("g", "c4")], [("f", "c1", None), ("g", "c4", None)],
         2),  # no name (blank): counted; the calls numbered on
    ],
)  # fmt: skip
def test_each_tool_call_part_is_one_requested_call(
    impl: str, reqs: list[Req], calls: list[tuple[str, str, str | None]], problems: int
) -> None:
    """Through the OTel SDK and OTLP: a chat span's tool_call parts, each read to the values the C reader and the
    Python reader both give (names, ids, argument texts as json.dumps writes an object, span ids numbered on)."""
    _impl(impl)
    (span,) = spans = record(lambda t: chat(t, *reqs))
    out, got = convert(spans, impl)
    assert out[0] is span
    assert [(r.name, r.call_id, r.arguments) for r in out[1:]] == calls
    assert [r.span_id for r in out[1:]] == [f"{span.span_id}#{i:02d}" for i in range(len(calls))]
    assert got == [OUT] * problems


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("op", ["text_completion", "generate_content"])
def test_every_model_operation_is_read_and_no_other(impl: str, op: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        chat(tracer, Req("f", "1"), op=op)
        chat(tracer, Req("g", "2"), op="embeddings")

    spans = record(build)
    out, _ = convert(spans, impl)
    assert [type(r).__name__ for r in out] == ["Span", "RequestedCall", "Span"]


@pytest.mark.parametrize("impl", IMPLS)
def test_without_captured_output_a_chat_span_is_a_parent_link_as_before(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        chat(tracer)
        chat(tracer, output=json.dumps([{"role": "assistant", "parts": []}]))

    spans = record(build)
    out, problems = convert(spans, impl)
    assert out == spans and problems == []


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("output", "calls", "problems"),
    [
        ('[{"role":"assistant","parts":[{"type":"tool_call","name":"f"', [], 1),  # cut JSON
        ('"tool_call"', [], 1),  # JSON, not messages
        (
            json.dumps([{"role": "assistant", "parts": [{"type": "tool_call"}, {"type": "tool_call", "name": ""}]}]),
            [],
            2,
        ),  # parts without a name: each counted
        (
            json.dumps(
                [{"role": "assistant", "parts": [{"type": "tool_call", "name": "f", "id": 7, "arguments": [1]}]}]
            ),
            [("f", "7", "[1]")],
            2,
        ),
        (json.dumps([{"role": "assistant", "parts": "tool_call"}, 3]), [], 2),
        (json.dumps([{"role": "assistant", "content": "tool_call"}]), [], 0),  # the plain content form: no parts
        (json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": '"tool_call"'}]}]), [], 0),  # said
        ('[{"parts":[{"type":"tool_call","name":"f"}]}] x', [], 1),  # extra data
    ],
)
def test_bad_output_messages_are_ignored_and_counted_never_raised(
    impl: str, output: str, calls: list[tuple[str, str, str]], problems: int
) -> None:
    _impl(impl)
    spans = record(lambda t: chat(t, output=output))
    out, got = convert(spans, impl)
    assert out[0] is spans[0]
    assert [(r.name, r.call_id, r.arguments) for r in out[1:]] == calls
    assert got == [OUT] * problems


@pytest.mark.parametrize("impl", IMPLS)
def test_requested_calls_per_span_are_bounded_and_the_rest_counted(impl: str) -> None:
    _impl(impl)
    n = MAX_REQUESTED_PER_SPAN + 3
    spans = record(lambda t: chat(t, *[Req(f"t{i}", f"id{i}") for i in range(n)]))
    out, problems = convert(spans, impl)
    assert [r.name for r in out[1:]] == [f"t{i}" for i in range(MAX_REQUESTED_PER_SPAN)]
    assert problems == [OUT] * 3


@pytest.mark.parametrize("impl", IMPLS)
def test_an_output_cut_by_the_instrumentation_was_not_captured(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        attrs = {
            "gen_ai.operation.name": "chat",
            OUT: '[{"role":"assistant","parts":[{"type":"tool_call","na',
            "toolwatch.truncated": (OUT,),
        }
        with tracer.start_as_current_span("chat m", attributes=attrs):
            pass

    spans = record(build)
    assert convert(spans, impl) == (spans, [])


class _Nothing:
    """A convention that maps no span."""

    def normalize(self, span: Span, problems: list[str]) -> None:
        return None


def test_several_conventions_read_requested_calls_as_the_genai_one_alone() -> None:
    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, Req("f", "call_1", {"a": 1}), Req("", "call_2"))
            ran(tracer, "f", "call_1")

    spans = record(build)
    alone, several = Normalizer(), Normalizer([_Nothing(), GenAIConvention()])
    (got, _), (want, _) = several.split(spans), alone.split(spans)
    assert [type(r) for r in got] == [type(r) for r in want] == [Span, RequestedCall, ToolCall, Turn]
    assert got[1] == want[1] and several.ignored_attributes == alone.ignored_attributes == {OUT: 1}
    assert Normalizer([_Nothing()]).split(spans)[0] == spans  # without the GenAI conventions, none is read


def test_the_normalizer_counts_what_it_ignored() -> None:
    n = Normalizer()
    spans = record(lambda t: chat(t, output='[{"parts":[{"type":"tool_call","name":"f"'))
    n.split(spans)
    assert n.ignored_attributes == {OUT: 1} and n.rejected == {}


# ---- turn assembly -------------------------------------------------------------------------------------------


def _one(turns: list[Turn]) -> Turn:
    (t,) = turns
    return t


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("flush", [False, True], ids=["poll", "flush"])
def test_a_turn_of_chat_spans_only_gets_the_requested_calls(impl: str, flush: bool) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, Req("pull_auth_telemetry", "call_a", {"log_excerpt": "x"}))
            chat(tracer, Req("pull_support_telemetry", "call_b", {"log_excerpt": "y"}))
            chat(tracer)  # the final answer

    turns, a = assemble(record(build), impl, flush=flush)
    t = _one(turns)
    assert calls_of(t) == [
        ("pull_auth_telemetry", "call_a", '{"log_excerpt": "x"}', True),
        ("pull_support_telemetry", "call_b", '{"log_excerpt": "y"}', True),
    ]
    assert not t.turnless and a.pending_traces == 0 and a.stats.duplicates == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_a_requested_call_that_ran_is_counted_once_as_the_call_that_ran(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, Req("f", "call_1", {"q": "asked"}), Req("g", "call_2", {"q": "asked"}))
            ran(tracer, "g", "call_2", {"q": "ran"})
            ran(tracer, "f", "call_1", {"q": "ran"})

    t = _one(assemble(record(build), impl)[0])
    assert calls_of(t) == [("g", "call_2", '{"q": "ran"}', False), ("f", "call_1", '{"q": "ran"}', False)]


@pytest.mark.parametrize("impl", IMPLS)
def test_an_id_less_executed_call_pairs_in_order_with_a_requested_call_of_its_name(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, Req("f", "call_1", {"n": 1}))
            ran(tracer, "f", None, {"n": 1})  # our wrapper, given no id
            chat(tracer, Req("f", "call_2", {"n": 2}), Req("h", None, {"n": 3}))
            ran(tracer, "h", "fw_9")  # the framework's own id: the requested one had none
            chat(tracer)

    t = _one(assemble(record(build), impl)[0])
    # call_1 ran (id-less), h ran; call_2 was requested and never ran.
    assert calls_of(t) == [("f", "", '{"n": 1}', False), ("f", "call_2", '{"n": 2}', True), ("h", "fw_9", None, False)]


@pytest.mark.parametrize("impl", IMPLS)
def test_two_different_ids_are_two_calls_and_a_repeated_id_one(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, Req("f", "call_1"), Req("f", "call_1"))
            ran(tracer, "f", "other")

    t = _one(assemble(record(build), impl)[0])
    assert [(c.call_id, isinstance(c, RequestedCall)) for c in t.calls] == [("call_1", True), ("other", False)]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", [1, 3])
def test_a_chat_span_sent_again_is_one_duplicate(impl: str, n: int) -> None:
    """toolwatch_spans_dropped_total counts spans: a chat span sent again (an exporter retry) is one duplicate,
    however many calls it requested; they are not counted twice in the turn."""
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, *[Req(f"f{i}", f"call_{i}") for i in range(n)])

    spans = record(build)
    turns, a = assemble(spans + spans[:1], impl)  # the chat span twice
    assert [c.call_id for c in _one(turns).calls] == [f"call_{i}" for i in range(n)]
    assert (a.stats.duplicates, a.stats.late_calls) == (1, 0)


def _add_poll(a: TurnAssembler, impl: str) -> tuple[Any, Any]:
    if impl != "python":
        return a.add_records, a.poll

    def add(records: Any, now: int) -> list[Turn]:
        out = a._add_records_py(records, now)
        a._remember_judged(out)  # as add_records does
        return out

    def poll(now: int) -> list[Turn]:
        out = a._poll_py(now)
        a._remember_judged(out)  # as poll does
        return out

    return add, poll


@pytest.mark.parametrize("impl", IMPLS)
def test_a_chat_span_judged_alone_and_sent_again_is_one_duplicate(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with tracer.start_as_current_span("session"):
            chat(tracer, Req("f", "call_1"), Req("g", "call_2"), Req("h", "call_3"))

    spans = record(build)
    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    add, poll = _add_poll(a, impl)
    turns = add(convert(spans, impl)[0], 0) + poll(6 * S)  # judged alone
    turns += add(convert(spans[:1], impl)[0], 7 * S) + poll(20 * S)  # the chat span again
    assert [(t.turnless, [c.call_id for c in t.calls]) for t in turns] == [(True, ["call_1", "call_2", "call_3"])]
    assert (a.stats.duplicates, a.stats.late_calls, a.stats.turnless_completed) == (1, 0, 1)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("again", [False, True], ids=["late", "sent-again-after-judged"])
def test_a_chat_span_arriving_after_its_turn_was_judged_is_one_late_call(impl: str, again: bool) -> None:
    """Its turn was judged without (late) or with (a retry after the verdict) its requested calls: either way the
    span is dropped, counted once (as a late call, or as a duplicate: its calls were judged), and the turn is not
    judged again."""
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, Req("f", "call_1"), Req("g", "call_2"), Req("h", "call_3"))

    spans = record(build)
    chat_span, turn_span = spans
    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    add, poll = _add_poll(a, impl)
    turns = add(convert(spans if again else [turn_span], impl)[0], 0) + poll(2 * S)
    turns += add(convert([chat_span], impl)[0], 3 * S) + poll(10 * S) + poll(20 * S)
    assert [len(t.calls) for t in turns] == [3 if again else 0]
    assert (a.stats.late_calls, a.stats.duplicates, a.pending_traces) == ((0, 1, 0) if again else (1, 0, 0))


@pytest.mark.parametrize("impl", IMPLS)
def test_turnless_calls_are_reconciled_too(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with tracer.start_as_current_span("session"):
            chat(tracer, Req("f", "call_1"), Req("unknown_tool", "call_2"))
            ran(tracer, "f", "call_1")

    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    records, _ = convert(record(build), impl)
    python = impl == "python"
    assert (a._add_records_py if python else a.add_records)(records, 0) == []
    t = _one((a._poll_py if python else a.poll)(6 * S))
    assert t.turnless and calls_of(t) == [("unknown_tool", "call_2", None, True), ("f", "call_1", None, False)]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_late_chat_span_of_a_released_nested_turn_is_late_not_a_call_of_the_outer_turn(impl: str) -> None:
    """A sub-agent's turn released with the call that ran, then its chat span arriving late: its requested call is a
    late call (as the call that ran would be), never a call of the enclosing turn, which would count it twice."""
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer, "[OUTER] delegate", "outer"), agent_turn(tracer, "[AUTH] inner", "inner"):
            chat(tracer, Req("pull_auth_telemetry", "call_1"))
            ran(tracer, "pull_auth_telemetry", "call_1")

    spans = record(build)
    by_name = {s.name: s for s in spans}
    first = [by_name["execute_tool pull_auth_telemetry"], by_name["invoke_agent inner"]]
    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    python = impl == "python"
    add, poll = (a._add_records_py, a._poll_py) if python else (a.add_records, a.poll)
    turns = add(convert(first, impl)[0], 0) + poll(2 * S)  # the inner turn, released with the call that ran
    turns += add(convert([by_name["chat m"]], impl)[0], 3 * S)  # its chat span, late
    turns += add(convert([by_name["invoke_agent outer"]], impl)[0], 3 * S) + poll(10 * S) + poll(20 * S)
    assert [(t.agent, calls_of(t)) for t in turns] == [
        ("inner", [("pull_auth_telemetry", "call_1", None, False)]),
        ("outer", []),
    ]
    assert a.stats.late_calls == 1


def _spied(a: TurnAssembler) -> list[str]:
    """The turns the assembler hands to its Python release, as they are handed: each goes through _release_with once
    (from _release_turn, or from the release of several turns of a trace together, _due)."""
    handed: list[str] = []
    release = a._release_with

    def counted(
        tid: str, tr: Any, sid: str, mine: list[ToolCall], rest: list[ToolCall], out: list[Turn], now_ns: int | None
    ) -> None:
        handed.append(sid)
        release(tid, tr, sid, mine, rest, out, now_ns)

    a._release_with = counted  # type: ignore[method-assign]
    return handed


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("when", ["all-at-once", "chat-first", "chat-after-turn"])
@pytest.mark.parametrize("flush", [False, True], ids=["poll", "flush"])
def test_a_turn_of_two_chat_spans_is_reconciled_by_call_id_whenever_its_chat_spans_arrive(
    impl: str, when: str, flush: bool
) -> None:
    """Two chat spans: the first asks for f and g (both ran), the second for g again (the same id: a copy) and for h,
    which never ran; then the final answer. The calls that ran are kept, in their place, with h after them as
    requested. The chat spans arrive with the turn, before it (an earlier request) or after it (a later request,
    within the grace period). The C assembler releases this turn itself: none handed to _release_turn."""
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, Req("f", "call_1", {"q": "asked"}), Req("g", "call_2"))
            ran(tracer, "g", "call_2", {"q": "ran g"})
            ran(tracer, "f", "call_1", {"q": "ran f"})
            chat(tracer, Req("g", "call_2"), Req("h", "call_3", {"q": "h"}))
            chat(tracer)

    spans = record(build)
    chats = [s for s in spans if s.name.startswith("chat")]
    others = [s for s in spans if not s.name.startswith("chat")]
    batches = {"all-at-once": [spans], "chat-first": [chats, others], "chat-after-turn": [others, chats]}[when]
    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    handed = _spied(a)
    add, poll = _add_poll(a, impl)
    turns: list[Turn] = []
    for i, batch in enumerate(batches):
        turns += add(convert(batch, impl)[0], i * S // 2)
    if flush:
        turns += (a._release_all_py() if impl == "python" else []) + a.flush()
    else:
        turns += poll(10 * S)
    assert calls_of(_one(turns)) == [
        ("g", "call_2", '{"q": "ran g"}', False),
        ("f", "call_1", '{"q": "ran f"}', False),
        ("h", "call_3", '{"q": "h"}', True),
    ]
    assert handed == ([] if impl == "c" else [_one(turns).span_id])
    assert (a.pending_traces, a.stats.turns_completed, a.stats.duplicates, a.stats.late_calls) == (0, 1, 0, 0)


@pytest.mark.parametrize("impl", IMPLS)
def test_requested_calls_not_run_with_a_repeated_id_give_one_call_each(impl: str) -> None:
    _impl(impl)

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer):
            chat(tracer, Req("f", "call_1"), Req("f", "call_1"), Req("g", "call_2"))
            chat(tracer, Req("g", "call_2"))

    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    handed = _spied(a)
    add, poll = _add_poll(a, impl)
    t = _one(add(convert(record(build), impl)[0], 0) + poll(10 * S))
    assert calls_of(t) == [("f", "call_1", None, True), ("g", "call_2", None, True)]
    assert handed == ([] if impl == "c" else [t.span_id])


def test_c_and_python_assemble_requested_calls_alike() -> None:
    _impl("c")

    def build(tracer: Tracer) -> None:
        for k in range(3):
            with agent_turn(tracer, f"[AUTH] {k}"):
                chat(tracer, Req("f", f"c{k}"), Req("g"), Req("h", f"h{k}"))
                ran(tracer, "f", f"c{k}")
                ran(tracer, "g")

    spans = record(build)
    got = [assemble(spans, impl) for impl in IMPLS]
    (c_turns, c_asm), (py_turns, py_asm) = got
    assert [calls_of(t) for t in c_turns] == [calls_of(t) for t in py_turns]
    assert [[c.span_id for c in t.calls] for t in c_turns] == [[c.span_id for c in t.calls] for t in py_turns]
    assert c_asm.stats == py_asm.stats
    assert [len(t.calls) for t in c_turns] == [3, 3, 3]


def test_requested_calls_stay_exact_records_for_the_c_assembler() -> None:
    """The C assembler takes RequestedCall records as calls (not handing the batch to Python)."""
    _impl("c")
    assert RequestedCall.__basicsize__ == ToolCall.__basicsize__
    a = TurnAssembler()
    calls: list[Any] = []

    def spy(records: Any, now_ns: int) -> list[Turn]:
        calls.append(records)
        return []

    a._add_records_py = spy  # type: ignore[method-assign]
    records, _ = convert(record(lambda t: chat(t, Req("f", "1"))), "c")
    a.add_records(records, 0)
    assert calls == [] and a.pending_traces == 1


# ---- the verdict's reason ------------------------------------------------------------------------------------


@pytest.mark.parametrize("c_plans", [True, False], ids=["c-dispatch", "python"])
def test_the_reason_names_the_calls_requested_and_not_run(c_plans: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.judge import Judge, _plan
    from monitor.rules import load_rules
    from tests.monitor.service.conftest import RULES

    if c_plans and _plan._C is None:
        pytest.skip("the C plans are not loaded")
    if not c_plans:
        monkeypatch.setattr(_plan, "_C", None)
    judge = Judge(load_rules([RULES]))
    x = {"log_excerpt": "x"}
    A = "incident-triage"

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer, "[AUTH] one ran, one refused", A):
            chat(tracer, Req("pull_auth_telemetry", "a1", x), Req("pull_auth_telemetrie", "a2", x))
            ran(tracer, "pull_auth_telemetry", "a1", x)
        with agent_turn(tracer, "[AUTH] model layer only", A):
            chat(tracer, Req("pull_auth_telemetry", "a3", x))
        with agent_turn(tracer, "[AUTH] tool layer only", A):
            ran(tracer, "pull_auth_telemetry", "a4", x)

    turns, _ = assemble(record(build), "c" if _assembler._ADD_C is not None else "python")
    by_input = {t.input_text: judge.judge(t) for t in turns}
    refused, model_only, tool_only = (
        by_input[f"[AUTH] {k}"] for k in ("one ran, one refused", "model layer only", "tool layer only")
    )
    assert refused.reason.endswith("; requested, not run: pull_auth_telemetrie"), refused.reason
    assert "unknown tool 'pull_auth_telemetrie'" in refused.reason
    # Without any executed call, the tool layer may just not be instrumented: nothing said.
    assert model_only.reason == tool_only.reason == "ok (auth): pull_auth_telemetry"


@pytest.mark.parametrize("c_plans", [True, False], ids=["c-dispatch", "python"])
def test_a_long_reason_still_names_the_calls_requested_and_not_run(
    c_plans: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reason cut at its bound keeps the note at its end: the rest of the reason is cut, not the note."""
    from monitor.judge import Judge, _plan
    from monitor.judge._reason import MAX_REASON
    from monitor.rules import load_rules
    from tests.monitor.service.conftest import RULES

    if c_plans and _plan._C is None:
        pytest.skip("the C plans are not loaded")
    if not c_plans:
        monkeypatch.setattr(_plan, "_C", None)
    judge = Judge(load_rules([RULES]))
    x = {"log_excerpt": "x"}

    def build(tracer: Tracer) -> None:
        with agent_turn(tracer, "[AUTH] many made-up tools", "incident-triage"):
            chat(tracer, Req("pull_auth_telemetrie", "a0", x))
            for k in range(8):
                ran(tracer, f"a_tool_name_the_model_made_up_number_{k}", f"r{k}", x)

    (turn,) = assemble(record(build), "c" if _assembler._ADD_C is not None else "python")[0]
    v = judge.judge(turn)
    assert len(v.reason) <= MAX_REASON
    assert v.reason.startswith("failed (auth): missed pull_auth_telemetry; unknown tool 'pull_auth_telemetrie'; ")
    assert v.reason.endswith("...; requested, not run: pull_auth_telemetrie"), v.reason


@pytest.mark.parametrize("impl", IMPLS)
def test_structured_output_messages_read_an_empty_arguments_value_as_an_object(impl: str) -> None:
    """The structured form (an arrayValue of kvlistValues, as the decoders give them): an empty kvlistValue and an
    empty arrayValue look alike, and the arguments of a tool call are an object (as an execute_tool span's are)."""
    _impl(impl)
    (span,) = record(lambda t: chat(t, Req("f", "c0")))

    def part(cid: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (("type", "tool_call"), ("id", cid), ("name", "f"), ("arguments", args))

    parts = (part("c1", ()), part("c2", (("city", "Oslo"), ("opts", ()))))
    span.attributes = {**span.attributes, OUT: ((("role", "assistant"), ("parts", parts)),)}
    out, problems = convert([span], impl)
    assert [(r.call_id, r.arguments) for r in out[1:]] == [("c1", "{}"), ("c2", '{"city": "Oslo", "opts": []}')]
    assert problems == []
    call = GenAIConvention().normalize(
        replace(span, attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "f",
                                  "gen_ai.tool.call.arguments": ()}),  # fmt: skip
        [],
    )
    assert isinstance(call, ToolCall) and call.arguments == out[1].arguments  # as the call that ran reads it
