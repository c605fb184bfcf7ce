"""The normalizer's fast paths against straightforward references (the GenAI rules written plainly, with json).

The normalizer reads the instrumentation's compact messages with string operations, checks the usual attribute
types first, builds records field by field, finds tool definitions by length and, with the GenAI conventions
alone, dispatches spans in its own loop. Each of these must answer exactly what the plain rules answer.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from monitor.normalize import GenAIConvention, Normalizer, Rejected
from monitor.otlp import STATUS_ERROR, STATUS_UNSET, Span
from monitor.records import ToolCall, Turn

TRACE = "0af7651916cd43dd8448eb211c80319c"


def ref_text(raw: Any, roles: tuple[str, ...] | None = None) -> str | None:
    """message_text by json alone."""
    if not isinstance(raw, str):
        return None
    try:
        messages = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        return None
    texts = []
    for m in messages:
        if not isinstance(m, dict) or (roles is not None and m.get("role") not in roles):
            continue
        if isinstance(m.get("content"), str):
            texts.append(m["content"])
        parts = m.get("parts")
        if isinstance(parts, list):
            for p in parts:
                if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str):
                    texts.append(p["content"])
    return "\n".join(texts) if texts else None


def ref_structured(v: Any, obj: bool = False) -> Any:
    """A decoded arrayValue / kvlistValue as JSON data: a tuple of (str, value) pairs is an object; () is an object
    where one is expected, else an array."""
    if not isinstance(v, tuple):
        return v
    if v == ():
        return {} if obj else []
    if all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in v):
        return {k: ref_structured(x) for k, x in v}
    return [ref_structured(x) for x in v]


def ref_turn_text(raw: Any, roles: tuple[str, ...], empty_is_none: bool) -> str | None:
    """The text of the last run of consecutive messages in `roles`; of all messages when none is in them (or, with
    empty_is_none, when that text is empty). Text that is not JSON is itself."""
    if isinstance(raw, str):
        try:
            messages = json.loads(raw)
        except (ValueError, RecursionError):
            return raw
    elif isinstance(raw, tuple):
        messages = ref_structured(raw)
    else:
        return None
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        return None
    mine = [isinstance(m, dict) and m.get("role") in roles for m in messages]
    text = None
    if any(mine):
        end = max(i for i, x in enumerate(mine) if x)
        start = end
        while start > 0 and mine[start - 1]:
            start -= 1
        text = ref_text(json.dumps(messages[start : end + 1]))
    if not any(mine) or (empty_is_none and not text):
        text = ref_text(json.dumps(messages))
    return text


def ref_turn(span: Span) -> tuple[Turn, list[str]]:
    problems: list[str] = []
    attrs = span.attributes

    def str_attr(key: str) -> str | None:
        v = attrs.get(key)
        if v is None or isinstance(v, str):
            return v
        problems.append(key)
        return None

    agent = str_attr("gen_ai.agent.name")
    if agent is None and span.name.startswith("invoke_agent "):
        agent = span.name[len("invoke_agent ") :].strip()
    raw_in = attrs.get("gen_ai.input.messages")
    if raw_in is not None and not isinstance(raw_in, str | tuple):  # a tuple: the structured form
        problems.append("gen_ai.input.messages")
    text = ref_turn_text(raw_in, ("user",), False) or ""
    raw_out = attrs.get("gen_ai.output.messages")
    if raw_out is not None and not isinstance(raw_out, str | tuple):
        problems.append("gen_ai.output.messages")
    output = ref_turn_text(raw_out, ("assistant",), True)
    truncated = attrs.get("toolwatch.truncated")
    if truncated is not None and not isinstance(truncated, str | tuple):
        problems.append("toolwatch.truncated")  # says nothing: as if absent
        truncated = None
    if truncated is not None and "gen_ai.output.messages" in truncated:
        output = None  # a cut answer: not captured
    elif output is None and isinstance(raw_in, str | tuple) and span.status_code == STATUS_ERROR:
        output = ""  # messages captured (the input is), the turn failed without an answer
    conversation_id = str_attr("gen_ai.conversation.id")
    case_id = attrs.get("toolwatch.case.id")
    raw_defs = attrs.get("gen_ai.tool.definitions")
    try:
        defs = json.loads(raw_defs) if isinstance(raw_defs, str) else ref_structured(raw_defs)
    except ValueError:
        defs = None
    turn = Turn(
        input_text=text,
        agent=agent or "",
        trace_id=span.trace_id,
        span_id=span.span_id,
        conversation_id=conversation_id,
        case_id=None if case_id is None else str(case_id),
        output_text=output,
        tool_definitions=tuple(d for d in defs if isinstance(d, dict)) if isinstance(defs, list) else None,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        attributes=attrs,
        resource=span.resource,
    )
    return turn, problems


def ref_tool_call(span: Span) -> tuple[ToolCall | str, list[str]]:
    """The tool call (or the rejection reason) and the ignored attributes."""
    problems: list[str] = []
    attrs = span.attributes

    def json_attr(key: str) -> str | None:
        v = attrs.get(key)
        if v is None or isinstance(v, str):
            return v
        data = ref_structured(v, obj=True)  # a tuple: the structured form, counted unless an object as expected
        if not isinstance(data, dict):
            problems.append(key)
        try:
            return json.dumps(data)
        except (TypeError, ValueError):
            return None

    name = attrs.get("gen_ai.tool.name")
    if not isinstance(name, str) or not name:
        if name is not None:
            problems.append("gen_ai.tool.name")
        name = span.name[len("execute_tool ") :].strip() if span.name.startswith("execute_tool ") else ""
        if not name:
            return "missing_tool_name", problems
    error_type = attrs.get("error.type")
    if error_type is not None and not isinstance(error_type, str):
        problems.append("error.type")
        error_type = None
    if error_type is None and span.status_code == STATUS_ERROR:
        error_type = span.status_message or "error"
    call_id = attrs.get("gen_ai.tool.call.id")
    if call_id is not None and not isinstance(call_id, str):
        problems.append("gen_ai.tool.call.id")
        call_id = str(call_id)
    arguments = json_attr("gen_ai.tool.call.arguments")
    truncated = attrs.get("toolwatch.truncated")
    if truncated is not None and not isinstance(truncated, str | tuple):
        problems.append("toolwatch.truncated")
        truncated = None
    if arguments is not None and truncated is not None and "gen_ai.tool.call.arguments" in truncated:
        arguments = None
    call = ToolCall(
        name=name,
        call_id=call_id or "",
        arguments=arguments,
        result=json_attr("gen_ai.tool.call.result"),
        error_type=error_type,
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        attributes=attrs,
    )
    return call, problems


def compact(role: str, text: str, finish: str | None) -> str:
    msg: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish:
        msg["finish_reason"] = finish
    return json.dumps([msg], separators=(",", ":"))


texts = st.text(alphabet=st.sampled_from('ab "\\/n\u00e9\ud83d\x01\x7f\u2028'), max_size=10)
roles = st.sampled_from(["user", "assistant", "system", "", "us\\u0065r", 'a"b'])


def kv(**fields: Any) -> tuple[tuple[str, Any], ...]:
    """A kvlistValue as the decoders give it."""
    return tuple(fields.items())


def text_msg(role: str, text: str) -> tuple[tuple[str, Any], ...]:
    return kv(role=role, parts=(kv(type="text", content=text),))


# Messages values in the structured form (arrayValue of kvlistValue), as the decoders give them.
STRUCTURED = [
    (text_msg("user", "u"),),
    (text_msg("system", "s"), text_msg("user", "old"), text_msg("assistant", "a"), text_msg("user", "new"),
     text_msg("user", "more"), kv(role="tool", parts=(kv(type="tool_call_response", response="r"),))),
    (text_msg("assistant", "x"), kv(role="assistant", parts=(kv(type="tool_call", name="t", arguments=kv(a=1)),))),
    (kv(role="user", parts=()), kv(role="user", content="c")),
    (),
    text_msg("user", "one message, not in a list"),
]  # fmt: skip


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """Messages values near the compact form: exact, cut, padded, with the text unescaped, other shapes."""
    raw = compact(draw(roles), draw(texts), draw(st.sampled_from([None, "stop", "length", "tool_calls"])))
    kind = draw(st.integers(0, 6))
    if kind == 1:
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif kind == 2:
        raw = raw + draw(st.sampled_from(["", " ", "]", '"}]}]', ',"x":1}]']))
    elif kind == 3:
        at = raw.index('"content":"') + 11
        raw = raw[:at] + draw(texts) + '"}]}]'
    elif kind == 4:
        raw = json.dumps([{"role": "system", "parts": [{"type": "text", "content": "s"}]}, json.loads(raw)[0]])
    elif kind == 5:
        plain = [None, 7, ("a",), "", "plain text", "[]", '{"role":"user","content":""}']
        return draw(st.sampled_from([*plain, *STRUCTURED]))
    elif kind == 6:
        raw = raw.replace("\\\\", "\\", 1)
    return raw


@settings(max_examples=300, deadline=None)
@given(
    messages(),
    messages(),
    st.sampled_from([None, "a", 3, ""]),
    st.sampled_from([None, "c", 1.5]),
    st.sampled_from([STATUS_UNSET, STATUS_ERROR]),
    st.sampled_from([None, "gen_ai.output.messages", ("gen_ai.output.messages",), ("gen_ai.input.messages",), 5]),
)
@example('[{"role":"user","parts":[{"type":"text","content":"a\\nb"}]}]', None, "a", None, STATUS_ERROR, None)
@example('[{"role":"us\x01er","parts":[{"type":"text","content":"x"}]}]', None, None, None, STATUS_UNSET, None)
@example('[{"role":"user","parts":[{"type":"text","content":""}]}]', None, None, None, STATUS_ERROR, 5)  # bad list
@example(json.dumps([{"role": "system", "parts": [{"type": "text", "content": "s"}]}, {"role": "user"}]), "", "a", 1,
         STATUS_ERROR, ("gen_ai.output.messages",))  # fmt: skip
def test_turn_is_what_the_plain_rules_give(
    raw_in: Any, raw_out: Any, agent: Any, conversation: Any, status: int, truncated: Any
) -> None:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "toolwatch.case.id": 4}
    for key, v in (
        ("gen_ai.input.messages", raw_in),
        ("gen_ai.output.messages", raw_out),
        ("gen_ai.agent.name", agent),
        ("gen_ai.conversation.id", conversation),
        ("toolwatch.truncated", truncated),
    ):
        if v is not None:
            attrs[key] = v
    span = Span(TRACE, "b7ad6b7169203331", "", "invoke_agent  named ", 1, 5, 9, status, attributes=attrs)
    problems: list[str] = []
    got = GenAIConvention().normalize(span, problems)
    expect, expect_problems = ref_turn(span)
    assert got == expect
    assert problems == expect_problems


values = st.sampled_from(
    [None, "", "x", '{"a": 1}', 7, 2.5, True, ("a", 1), ("gen_ai.tool.call.arguments",), (), kv(a=1, b=("x", kv())),
     (("a", 1), ("b", 2)), (kv(a=1), 2)]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "gen_ai.tool.name": values,
            "gen_ai.tool.call.id": values,
            "gen_ai.tool.call.arguments": values,
            "gen_ai.tool.call.result": values,
            "error.type": values,
            "toolwatch.truncated": st.one_of(values, st.just("gen_ai.tool.call.arguments")),
        },
    ),
    st.sampled_from(["execute_tool", "execute_tool ", "execute_tool lookup", "execute_toolx"]),
    st.sampled_from([0, STATUS_ERROR]),
    st.sampled_from(["", "boom"]),
)
def test_tool_call_is_what_the_plain_rules_give(attrs: dict[str, Any], name: str, status: int, message: str) -> None:
    span = Span(TRACE, "c1", "t1", name, 1, 5, 9, status, message, {"gen_ai.operation.name": "execute_tool", **attrs})
    problems: list[str] = []
    got = GenAIConvention().normalize(span, problems)
    expect, expect_problems = ref_tool_call(span)
    if isinstance(expect, str):
        assert isinstance(got, Rejected) and got.reason == expect
    else:
        assert got == expect
    assert problems == expect_problems


def test_records_built_field_by_field_have_every_field() -> None:
    """Records are built without their __init__: every dataclass field must be set (a new field too)."""
    n = Normalizer()
    tool = Span(TRACE, "c1", "t1", "execute_tool x", 1, 1, 2, attributes={"gen_ai.operation.name": "execute_tool"})
    turn = Span(TRACE, "t1", "", "invoke_agent a", 1, 0, 3, attributes={"gen_ai.operation.name": "invoke_agent"})
    records, _ = n.split([tool, turn])
    for rec in records:
        assert isinstance(rec, ToolCall | Turn)
        values = {f.name: getattr(rec, f.name) for f in dataclasses.fields(rec)}  # AttributeError when unset
        assert rec == type(rec)(**values)
    assert isinstance(records[1], Turn) and records[1].calls == () and records[1].turnless is False


def test_tool_definitions_of_the_same_length_are_told_apart() -> None:
    n = Normalizer()
    a = json.dumps([{"type": "function", "name": "aa"}])
    b = json.dumps([{"type": "function", "name": "bb"}])
    assert len(a) == len(b)
    for i, raw in enumerate([a, b, a, a, b, "x" * len(a), b]):
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.tool.definitions": raw}
        turn = n.normalize(Span(TRACE, f"{i + 1:016x}", "", "invoke_agent a", attributes=attrs))
        assert isinstance(turn, Turn)
        expect = json.loads(raw) if raw[0] == "[" else None
        assert turn.tool_definitions == (tuple(expect) if expect else None)


class _Renamed(GenAIConvention):
    """A GenAI variant (its own normalize): the batch loop must call it, not the GenAI fast loop."""

    def normalize(self, span: Span, problems: list[str]) -> ToolCall | Turn | Rejected | None:
        if span.name == "mine":
            return Rejected("mine")
        return super().normalize(span, problems)


ops = st.sampled_from(["execute_tool", "invoke_agent", "chat", 3, None])
span_names = st.sampled_from(["execute_tool", "execute_tool t", "invoke_agent a", "invoke_agentx", "chat", "mine"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(ops, span_names, st.sampled_from([None, "t", 5]), st.sampled_from([None, 1, "[]"]))))
def test_split_counts_what_one_span_at_a_time_counts(shapes: list[tuple[Any, str, Any, Any]]) -> None:
    spans = []
    for i, (op, name, tool, messages) in enumerate(shapes):
        attrs: dict[str, Any] = {}
        for key, v in (("gen_ai.operation.name", op), ("gen_ai.tool.name", tool), ("gen_ai.input.messages", messages)):
            if v is not None:
                attrs[key] = v
        spans.append(Span(TRACE, f"{i + 1:016x}", "", name, 1, i, i + 1, attributes=attrs))
    for conventions in (None, [GenAIConvention()], [_Renamed()], [GenAIConvention(), GenAIConvention()]):
        batch, single = Normalizer(conventions), Normalizer(conventions)
        records, rejected = batch.split(spans)
        expect = []
        for s in spans:
            r = single.normalize(s)
            if not isinstance(r, Rejected):
                expect.append(s if r is None else r)
        assert records == expect
        assert rejected == single.rejected == batch.rejected
        assert batch.ignored_attributes == single.ignored_attributes


def test_definitions_found_by_length_are_bounded_too() -> None:
    from monitor.normalize import _genai

    n = Normalizer()
    for i in range(300):
        pad = "x" * (60_000 + i)  # each a new length: one entry per length, up to the bound
        raw = json.dumps([{"type": "function", "name": f"t{i}", "description": pad}])
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.tool.definitions": raw}
        turn = n.normalize(Span(TRACE, f"{i + 1:016x}", "", "invoke_agent a", attributes=attrs))
        assert isinstance(turn, Turn) and turn.tool_definitions is not None
        assert turn.tool_definitions[0]["name"] == f"t{i}"
    big = json.dumps([{"type": "function", "name": "big", "description": "x" * (1 << 17)}])
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.tool.definitions": big}
    n.normalize(Span(TRACE, "f" * 16, "", "invoke_agent a", attributes=attrs))
    assert len(_genai._DEFINITIONS_BY_LENGTH) <= 256 and len(big) not in _genai._DEFINITIONS_BY_LENGTH
    held = {id(raw): len(raw) for raw, _ in _genai._DEFINITIONS_BY_LENGTH.values()}
    held.update({id(raw): len(raw) for raw in _genai._DEFINITIONS_CACHE})
    assert sum(held.values()) <= 2 * 256 * 64 * 1024
