"""The GenAI normalizer in C (monitor/normalize/_cgenai.c) against its reference, _genai._convert_py.

Both run on the same spans; they must give the same `out` (records equal field by field and of the same types,
the same objects where the Python code passes objects through), the same `problems`, the same `rejected`, and
the same exception type with the same partial results when a value makes the Python code raise.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from monitor.normalize import Normalizer, _genai
from monitor.otlp import STATUS_ERROR, Span, SpanEvent, parse_protobuf
from monitor.otlp._accel import PURE_PYTHON_ENV
from monitor.records import CallIdMark, InputMark, OfferedTools, RequestedCall, RunRoot, ToolCall, Turn

Convert = Callable[[Iterable[Any], list[Any], list[str], dict[str, int]], None]
PY: Convert = _genai._convert_py
C: Convert | None = _genai._CONVERT_C
needs_c = pytest.mark.skipif(C is None, reason="the C normalizer is not loaded")

TRACE = "0af7651916cd43dd8448eb211c80319c"
IDENTITY_FIELDS = ("attributes", "resource", "tool_definitions", "calls")


def test_the_extension_is_built_and_loaded() -> None:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        assert C is None
        pytest.skip("pure Python requested")
    assert C is not None
    from monitor.normalize import _cgenai  # type: ignore[attr-defined]

    assert _cgenai.__file__.endswith(".so")
    # The records are filled slot by slot, the spans read from their slots (the classes are plain slotted ones).
    assert _cgenai.init(vars(_genai)) == {"span": True, "tool_call": True, "turn": True, "requested_call": True}


# ---- comparing the two ---------------------------------------------------------------------------------------


class S(str):
    """A str subclass: `type(x) is str` is False, isinstance(x, str) True."""


class Falsy(str):
    def __bool__(self) -> bool:
        return False


class Loud(str):
    """Equal to everything: `op == EXECUTE_TOOL` holds whatever the text."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class Boom:
    """Raises wherever it is converted or compared: both paths must raise the same way at the same point."""

    def __str__(self) -> str:
        raise RuntimeError("str")

    def __bool__(self) -> bool:
        raise RuntimeError("bool")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    __hash__ = object.__hash__


class FakeStr:
    """isinstance(x, str) holds (through __class__) though it is no str."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str


def run(convert: Convert, spans: list[Any], rejected0: dict[str, int]) -> tuple[list[Any], list[str], Any, Any]:
    out: list[Any] = []
    problems: list[str] = []
    rejected = dict(rejected0)
    exc: type[BaseException] | None = None
    try:
        convert(list(spans), out, problems, rejected)
    except Exception as e:  # noqa: BLE001 - the exception type is compared
        exc = type(e)
    return out, problems, list(rejected.items()), exc


_MISSING = object()


def fields(r: Any) -> dict[str, Any]:
    """Every slot of a record, its classes' too (RequestedCall adds none to ToolCall's)."""
    return {f: getattr(r, f, _MISSING) for c in reversed(type(r).__mro__) for f in vars(c).get("__slots__", ())}


def assert_same_record(p: Any, c: Any) -> None:
    assert type(p) is type(c)
    if type(p) not in (ToolCall, RequestedCall, OfferedTools, InputMark, CallIdMark, Turn, RunRoot):
        assert p is c  # other spans pass through as themselves
        return
    fp, fc = fields(p), fields(c)
    for name in fp:
        assert type(fp[name]) is type(fc[name]), name
        assert fp[name] == fc[name], name
        if name == "turn":  # a RunRoot's: the turn read of a copy of its span, new on each path
            assert_same_record(fp[name], fc[name])
            continue
        if name == "tool_definitions" and isinstance(p.attributes.get("gen_ai.tool.definitions"), tuple):
            continue  # the structured form is read anew each time (not cached): equal, not the same objects
        if name == "attributes" and type(p) in (OfferedTools, InputMark, CallIdMark, RunRoot):
            continue  # none of the span's: a new empty dict each
        if name == "attributes" and type(p) is RequestedCall:
            continue  # the span's without its message contents: a new dict per span (shared: see assert_same)
        if name in IDENTITY_FIELDS or fp[name] is _MISSING or fp[name] is None:
            assert fp[name] is fc[name], name


def assert_same(spans: list[Any], rejected0: dict[str, int] | None = None) -> tuple[list[Any], list[str], Any, Any]:
    assert C is not None
    py = run(PY, spans, rejected0 or {})
    c = run(C, spans, rejected0 or {})
    assert c[3] == py[3]  # the same exception, or none
    assert len(c[0]) == len(py[0])
    for p, r in zip(py[0], c[0], strict=True):
        assert_same_record(p, r)
    assert c[1] == py[1]  # problems: same order, same duplicates
    assert c[2] == py[2]  # rejected, in the same order
    assert sharing(c[0]) == sharing(py[0])
    return py


def sharing(out: list[Any]) -> list[bool]:
    """For each record after the first: whether it holds its predecessor's attributes (the same dict)."""
    return [getattr(a, "attributes", a) is getattr(b, "attributes", b) for a, b in zip(out, out[1:], strict=False)]


# ---- spans -----------------------------------------------------------------------------------------------------

PREFIXES = [
    _genai._USER_PARTS,
    _genai._ASSISTANT_PARTS,
    _genai._ROLE_PREFIX + 'system","parts":[{"type":"text","content":"',
    _genai._ROLE_PREFIX + 'us\\"er","parts":[{"type":"text","content":"',
    "",
    '[{"role":"user"',
]
ENDS = sorted(_genai._ENDS) + ["", "}]", '}],"finish_reason":"tool_calls"}]', "}]}] ", '"}]}]']
PIECES = [
    "a", " ", "é", "ā", "😀", "\u2028", "\x7f", "\x01", "\t", '"', "\\", "\ud800", "\udc00",
    "\\n", '\\"', "\\\\", "\\/", "\\b", "\\f", "\\r", "\\t", "\\u00e9", "\\u0041", "\\u0100", "\\uffff",
    "\\ud83d\\ude00", "\\ud800", "\\udc00", "\\ud800\\u0041", "\\ud800\\udbff", "\\ud800\\uZZZZ", "\\ud800\\x",
    "\\uD83D\\uDE00", "\\uZZZZ", "\\u12", "\\q", "\\x",
]  # fmt: skip


def _text_msg(role: str, text: str) -> tuple[tuple[str, Any], ...]:
    return (("role", role), ("parts", ((("type", "text"), ("content", text)),)))


# Messages in the structured form (an arrayValue of kvlistValues, as the decoders give them).
STRUCTURED = [
    (_text_msg("user", "u"),),
    (_text_msg("user", "old"), _text_msg("assistant", "a"), _text_msg("user", "new"), _text_msg("tool", "t")),
    (_text_msg("assistant", "x"),),
    (),
    (("role", "user"), ("content", "c")),
]



def _asked(*parts: Any, **message: Any) -> str:
    return json.dumps([{"role": "assistant", "parts": list(parts), **message}])


def _call(name: Any = "f", call_id: Any = _MISSING, arguments: Any = _MISSING) -> dict[str, Any]:
    part = {"type": "tool_call", "name": name, "id": call_id, "arguments": arguments}
    return {k: v for k, v in part.items() if v is not _MISSING}


_DEEP = '{"a":' * 60 + "1" + "}" * 60  # 64 levels with its message list, message, parts and part: C reads it
# Output texts of a chat span asking for calls: (the text, the requested calls, whether C reads it itself). C reads
# the common case (string ids, object / text / no arguments, at most MAX_REQUESTED_PER_SPAN parts, JSON messages);
# it hands anything Python would count as ignored to Python.
CHAT_OUTPUTS: list[tuple[str, int, bool]] = [
    (_asked({"type": "text", "content": "let me look"}, _call("f", "c1", {"a": 1, "b": [1.5, "é", None, True]}),
            _call("g", "c2", '{"x": 1}'), _call("h"), finish_reason="tool_calls"), 3, True),
    (_asked(_call("météo", "ид", {"城市": "東京", "emoji": "😀\u2028"})), 1, True),  # escaped (ensure_ascii)
    (json.dumps([{"role": "assistant", "parts": [_call("météo", "ид", {"城市": "東京 😀"}, )]}], ensure_ascii=False),
     1, True),
    (_asked(_call("f", "c1", None), _call("g", "", "")), 2, True),  # arguments null (absent), empty id and text
    (_asked(_call("f", "c1", {})), 1, True),
    (_asked(_call("f", "c1", {"n": [1e400, -1e400, -0.0, 12345678901234567890, 1.0, 0.1, 3]})), 1, True),
    ('[{"role":"assistant","parts":[{"type":"tool_call","name":"f","arguments":{"n":NaN,"d":1,"d":2}}]}]', 1, True),
    (_asked(_call("f", "c1", json.loads(_DEEP))), 1, True),
    (" \n" + _asked(_call("f")) + "\r\t ", 1, True),  # JSON's whitespace around the value
    (json.dumps({"role": "assistant", "parts": [_call("f", "c1")]}), 1, True),  # one message, not in a list
    (json.dumps([{"role": "user", "content": "x"}, {"role": "assistant", "parts": [_call("f", "1")]},
                 {"role": "assistant", "parts": [{"type": 1}, "x", 3, _call("g", "2"), {"type": "tool_call "}]}]),
     2, True),  # parts of several messages, numbered on; no parts; parts that are no tool_call
    (_asked({"type": "text", "content": 'no "tool_call" here'}), 0, True),  # the mark, no part
    (_asked({"type": "text", "content": "x", "nested": _call("f")}), 0, True),  # a part inside a part is not one
    (_asked(*[_call(f"t{i}", f"id{i}") for i in range(64)]), 64, True),  # at the bound
    (_asked(*[_call(f"t{i}", f"id{i}") for i in range(65)]), 64, False),  # past it: counted
    (_asked(_call("f", "c1", [1])), 1, False),  # arguments of another type: counted
    (_asked(_call("f", "c1", 5)), 1, False),
    (_asked(_call("f", "c1", True)), 1, False),
    (_asked(_call("f", 7)), 1, False),  # an id of another type: counted
    (_asked(_call("f", "c1"), _call(None, "c2")), 1, False),  # a part without a name: counted
    (_asked(_call("f", "c1"), _call("", "c2"), _call(" \t", "c3"), _call("\u3000", "c4"), _call(3)), 1, False),
    (_asked(_call("f", "c1", json.loads(_DEEP.replace("1", _DEEP)))), 1, False),  # deeper than C reads
    (_asked(_call("f", "c1", "x")).replace('"x"', '{"a":' * 5000 + "1" + "}" * 5000), 0, False),  # than json reads
    (_asked(_call("f", "c1", "]]]]}}}}" * 20 + '\\"[[[[{{{{' * 20)), 1, True),  # brackets in strings
    ('[{"role":"assistant","parts":[{"type":"tool_call","name":"f"', 0, False),  # cut JSON
    (_asked(_call("f")) + " x", 0, False),  # extra data
    ("\ufeff" + _asked(_call("f")), 0, False),  # a byte order mark
    ('"tool_call"', 0, False),  # JSON, not messages
    (json.dumps([{"role": "assistant", "parts": "tool_call"}]), 0, False),
    (json.dumps([_call("f"), 3]), 0, False),  # a message that is no object
]  # fmt: skip


# Output messages of a model request holding tool_call parts (read as requested calls), well and badly formed.
TOOL_CALLS = [
    '[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"f","arguments":{"a":1}}]}]',
    '[{"role":"assistant","parts":[{"type":"tool_call","name":"g","arguments":"{\\"b\\": 2}"},{"type":"tool_call"}]}]',
    '[{"role":"assistant","parts":[{"type":"tool_call","id":3,"name":"h","arguments":[1]}]},4]',
    '[{"role":"assistant","parts":[{"type":"tool_call","name":"f"',
    ((("role", "assistant"), ("parts", ((("type", "tool_call"), ("id", "c2"), ("name", "k"), ("arguments", ())),))),),
    *(out for out, _, _ in CHAT_OUTPUTS),
]


@st.composite
def message_values(draw: st.DrawFn) -> Any:
    kind = draw(st.integers(0, 9))
    if kind <= 4:  # near the compact form: a prefix, a body of JSON string pieces, an end
        body = "".join(draw(st.lists(st.sampled_from(PIECES), max_size=8)))
        if draw(st.booleans()):
            body = body[: draw(st.integers(0, len(body)))]
        raw = draw(st.sampled_from(PREFIXES)) + body + '"' + draw(st.sampled_from(ENDS))
        if kind == 4:  # a long text (past the stack buffer of the decoder)
            raw = raw.replace("a", "a\\n" * 300, 1)
        return S(raw) if draw(st.integers(0, 9)) == 0 else raw
    if kind <= 6:  # json's own encoding of any text, either way of escaping
        text = draw(st.text(st.characters(codec=None), max_size=12))
        role = draw(st.sampled_from(["user", "assistant", "tool"]))
        msg: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
        if draw(st.booleans()):
            msg["finish_reason"] = draw(st.sampled_from(["stop", "length"]))
        return json.dumps([msg], separators=(",", ":"), ensure_ascii=draw(st.booleans()))
    return draw(
        st.sampled_from(
            [None, 7, True, ("a",), "", "plain", "[]", '{"role":"user","content":"c"}', S("x"), Falsy("y"), FakeStr(),
             *STRUCTURED, *TOOL_CALLS]
        )
    )


def values(*extra: Any) -> st.SearchStrategy[Any]:
    """Attribute values of any kind (a key is left out when None is drawn)."""
    return st.one_of(
        st.sampled_from(
            [None, "", "x", "a b", 0, 3, True, 1.5, ("x",), (), (("k", 1), ("j", ())), S("sub"), Falsy("f"), *extra]
        ),
        st.text(max_size=6),
    )


DEFS = ['[{"type":"function","name":"f"}]', '[{"name":"g"},1]', "[", '{"a":1}', "[]"]


@st.composite
def spans(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["tool", "turn", "other"]))
    attrs: dict[Any, Any] = {}
    op: Any = {"tool": "execute_tool", "turn": "invoke_agent", "other": draw(st.sampled_from(["chat", "x"]))}[kind]
    how = draw(st.integers(0, 5))
    if how <= 2:
        attrs["gen_ai.operation.name"] = op
    elif how == 3:
        attrs["gen_ai.operation.name"] = draw(st.sampled_from([S(op), 5, None, ("execute_tool",), Loud("z")]))
    name = draw(
        st.sampled_from(
            [
                f"{op} named ",
                op,
                f"{op}x",
                f"{op}  ",
                "chat m",
                "",
                "invoke_agent a",
                "execute_tool t",
                S("execute_tool s"),
            ]
        )
    )
    keys = {
        "gen_ai.tool.name": values(Boom()),
        "gen_ai.tool.call.id": values(Boom()),
        "gen_ai.tool.call.arguments": values({"a": [1]}, [1, "x"], {1, 2}),
        "gen_ai.tool.call.result": values({"r": None}, float("nan")),
        "error.type": values(Boom()),
        "toolwatch.truncated": st.sampled_from(
            [None, ("gen_ai.tool.call.arguments",), ("x",), "gen_ai.tool.call.arguments", S("tool.call"), 3, ["x"],
             ("gen_ai.output.messages",), "gen_ai.output.messages", S("output.messages")]  # fmt: skip
        ),
        "gen_ai.agent.name": values(),
        "gen_ai.conversation.id": values(),
        "toolwatch.case.id": values(Boom()),
        "gen_ai.input.messages": message_values(),
        "gen_ai.output.messages": message_values(),
        "gen_ai.tool.definitions": st.one_of(
            st.sampled_from([None, 3, S(DEFS[0]), ((("type", "function"), ("name", "f")),)]), st.sampled_from(DEFS)
        ),
        "other.key": values(),
        "llm.request.type": values(),  # OpenLLMetry's marker: a model request with it may flatten its calls
        "gen_ai.completion.0.tool_calls.0.name": values(),
    }
    for key, strategy in keys.items():
        v = draw(strategy)
        if v is not None or draw(st.integers(0, 9)) == 0:  # None: mostly missing, sometimes present as None
            attrs[key] = v
    status: Any = draw(st.sampled_from([0, 1, STATUS_ERROR, STATUS_ERROR, 2.0, "2"]))
    message = draw(st.sampled_from(["", "boom", S("sub"), Falsy("f")]))
    span = Span(TRACE, f"{draw(st.integers(0, 99)):016x}", "", name, 1, draw(st.integers(0, 10**19)), 9)
    span.status_code, span.status_message, span.attributes, span.resource = status, message, attrs, {"service": "s"}
    return span


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.lists(spans(), max_size=6), st.sampled_from([{}, {"missing_tool_name": 2}, {"other": 1}]))
@example([], {})
def test_c_and_python_give_the_same_results(batch: list[Span], rejected0: dict[str, int]) -> None:
    assert_same(batch, rejected0)



_JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(), st.text(max_size=6))
_JSON = st.recursive(_JSON_LEAVES, lambda x: st.lists(x, max_size=3) | st.dictionaries(st.text(max_size=4), x,
                                                                                        max_size=3), max_leaves=8)
_NAMES = st.sampled_from(["f", "get_weather", "météo", "t\u2028", "\u3000x", " f "])
_BLANK = st.sampled_from([" ", "\u3000", "", "\x85", "\x1f", "\t\n"])  # no name: str.strip() leaves nothing
_ARGS = st.one_of(st.dictionaries(st.text(max_size=4), _JSON, max_size=3), st.text(max_size=6), st.none())


@st.composite
def chat_outputs(draw: st.DrawFn) -> str:
    """Output messages with tool_call parts of every shape (mostly the common one), written by json.dumps with any
    options, sometimes cut."""

    def part() -> Any:
        kind = draw(st.integers(0, 19))
        if kind == 0:
            return draw(_JSON)
        if kind == 1:
            return {"type": "text", "content": draw(st.sampled_from(['"tool_call"', "x"]))}
        p: dict[str, Any] = {"type": "tool_call" if kind > 2 else draw(_JSON)}
        odd = draw(st.integers(0, 9)) == 0  # a name, id or arguments of any JSON value
        for key, common in (("name", _NAMES), ("id", st.one_of(st.text(max_size=4), st.none())), ("arguments", _ARGS)):
            if draw(st.integers(0, 5)):
                p[key] = draw(st.one_of(common, _JSON, _BLANK) if odd else common)
        return p

    n = draw(st.sampled_from([0, 1, 1, 2, 3, 3, 64, 65]))
    messages: Any = [{"role": "assistant", "parts": [part() for _ in range(n)]}]
    if draw(st.booleans()):
        messages.append(draw(st.one_of(_JSON, st.just({"role": "assistant", "parts": [part(), part()]}))))
    if draw(st.integers(0, 5)) == 0:
        messages = messages[0]
    raw = json.dumps(messages, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1])),
                     separators=draw(st.sampled_from([None, (",", ":")])))  # fmt: skip
    if '"tool_call"' not in raw:
        raw += ' "tool_call"'
    if draw(st.integers(0, 9)) == 0:
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


@needs_c
@settings(max_examples=150, deadline=None)
@given(st.lists(chat_outputs(), min_size=1, max_size=3), st.sampled_from(["chat", "generate_content"]))
def test_c_and_python_read_chat_outputs_alike(outputs: list[str], op: str) -> None:
    assert_same([span_with({"gen_ai.operation.name": op, "gen_ai.output.messages": o, "k": 1}, "chat m")
                 for o in outputs])  # fmt: skip


# ---- particular cases ----------------------------------------------------------------------------------------


_ASKED = json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {}}]}])
_ANSWER = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}])
_MENTION = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": 'no "tool_call" here'}]}])
_EVENT = ("gen_ai.client.inference.operation.details", {"gen_ai.output.messages": _ASKED})


@pytest.mark.parametrize("impl", ["python", "c"])
def test_tool_call_arguments_nested_to_the_recursion_limit_never_raise(impl: str) -> None:
    """Arguments nested as deep as json parses, at every depth (wherever the stack is, some depth parses and is then too
    deep to encode again): one requested call, never a RecursionError that would lose the whole batch."""
    if impl == "c" and C is None:
        pytest.skip("the C normalizer is not built")
    convert = C if impl == "c" else PY
    assert convert is not None
    for depth in range(1, sys.getrecursionlimit() + 1):
        args = '{"a":' * depth + "{}" + "}" * depth
        text = f'[{{"role":"assistant","parts":[{{"type":"tool_call","id":"c1","name":"f","arguments":{args}}}]}}]'
        span = span_with({"gen_ai.operation.name": "chat", "gen_ai.output.messages": text}, "chat m")
        out, problems, rejected, exc = run(convert, [span], {})
        assert exc is None and rejected == [] and out[0] is span, depth
        if len(out) == 1:  # too deep to parse: not messages, counted
            assert problems == ["gen_ai.output.messages"], depth
            continue
        assert [type(r) for r in out] == [Span, RequestedCall], depth
        assert out[1].arguments in ('{"a": ' * depth + "{}" + "}" * depth, None), depth  # None: too deep to encode
        assert problems == [], depth


@needs_c
@pytest.mark.parametrize(
    ("attrs", "events", "asked"),
    [
        ({"gen_ai.output.messages": _ANSWER}, None, 0),  # the final answer: a parent link, nothing read (C alone)
        ({"gen_ai.output.messages": _ASKED}, None, 1),
        ({"gen_ai.output.messages": _MENTION}, None, 0),  # the mark in a text: read, asks for nothing
        ({"gen_ai.output.messages": S(_ANSWER)}, None, 0),  # not exactly a str: Python reads it
        ({"gen_ai.output.messages": _ANSWER}, [_EVENT], 0),  # events are not read beside the attribute
        ({}, [_EVENT], 1),  # without it they are (Strands)
        ({"gen_ai.output.messages": _ANSWER, "gen_ai.tool.definitions": '[{"name": "f"}]'}, None, 0),
        ({"gen_ai.output.messages": _ANSWER, "llm.request.type": "chat",
          "gen_ai.completion.0.tool_calls.0.name": "f"}, None, 1),  # OpenLLMetry's calls, the output asking none
        ({"gen_ai.output.messages": _ASKED, "toolwatch.truncated": ("gen_ai.output.messages",)}, None, 0),
    ],
)  # fmt: skip
def test_a_chat_spans_output_is_read_alike(attrs: dict[str, Any], events: Any, asked: int) -> None:
    """C answers a chat span whose output text holds no tool_call part itself (a parent link); both read the same."""
    span = span_with({"gen_ai.operation.name": "chat", **attrs}, "chat m")
    if events is not None:
        span.events = [SpanEvent(name, 9, attributes) for name, attributes in events]
    out, problems, _, _ = assert_same([span])
    assert out[0] is span and problems == []
    assert sum(type(r) is RequestedCall for r in out) == asked



@contextmanager
def handed_to_python() -> Iterator[list[Any]]:
    """The spans the C normalizer hands to _convert_py while the block runs (its init given a spy in its place)."""
    from monitor.normalize import _cgenai  # type: ignore[attr-defined]

    handed: list[Any] = []

    def spy(spans: Iterable[Any], out: list[Any], problems: list[str], rejected: dict[str, int]) -> None:
        spans = list(spans)
        handed.extend(spans)
        PY(spans, out, problems, rejected)

    _cgenai.init({**vars(_genai), "_convert_py": spy})
    try:
        yield handed
    finally:
        _cgenai.init(vars(_genai))


@needs_c
@pytest.mark.parametrize(("output", "asked", "in_c"), CHAT_OUTPUTS)
@pytest.mark.parametrize("op", ["chat", "text_completion", "generate_content"])
def test_a_chat_spans_tool_calls_are_read_alike(output: str, asked: int, in_c: bool, op: str) -> None:
    """C reads the common output texts of a model request itself (the same requested calls: names, ids, argument
    texts, span ids, attributes shared and without the message contents) and hands the others to Python."""
    attrs = {"gen_ai.operation.name": op, "gen_ai.input.messages": "[]", "gen_ai.output.messages": output, "k": 1,
             "gen_ai.system_instructions": "s"}  # fmt: skip
    span = span_with(attrs, "chat m")
    with handed_to_python() as handed:
        out, problems, _, exc = assert_same([span])
    assert exc is None and out[0] is span
    assert [type(r) for r in out[1:]] == [RequestedCall] * asked
    assert [r.span_id for r in out[1:]] == [f"{span.span_id}#{i:02d}" for i in range(asked)]
    assert all(r.attributes is out[1].attributes for r in out[1:])
    assert all(r.attributes == {"gen_ai.operation.name": op, "k": 1} for r in out[1:])
    assert handed == ([] if in_c else [span])
    assert problems == [] or not in_c  # what Python counts as ignored, C hands to it


@needs_c
def test_requested_calls_read_in_c_are_pythons() -> None:
    """The values of a few requested calls read by C: exact (the parity test compares them with Python's too)."""
    output, _, _ = CHAT_OUTPUTS[0]
    span = span_with({"gen_ai.operation.name": "chat", "gen_ai.output.messages": output}, "chat m")
    span.end_ns = 77
    with handed_to_python() as handed:
        out, _, _, _ = assert_same([span])
    assert handed == []
    assert [(r.name, r.call_id, r.arguments) for r in out[1:]] == [
        ("f", "c1", '{"a": 1, "b": [1.5, "\\u00e9", null, true]}'), ("g", "c2", '{"x": 1}'), ("h", "", None)
    ]  # fmt: skip
    for r in out[1:]:
        assert (r.trace_id, r.parent_span_id, r.start_ns, r.end_ns) == (TRACE, span.span_id, 77, 77)
        assert (r.result, r.error_type) == (None, None)


_ASKED_F = CHAT_OUTPUTS[0][0]


@needs_c
@pytest.mark.parametrize(
    ("attrs", "events"),
    [
        ({"gen_ai.tool.definitions": '[{"name": "f"}]'}, None),  # tools offered too
        ({"toolwatch.truncated": ("gen_ai.output.messages",)}, None),
        ({"toolwatch.truncated": ("x",)}, None),
        ({"toolwatch.truncated": 3}, None),
        ({"llm.request.type": "chat"}, None),  # OpenLLMetry's
        ({}, [_EVENT]),  # events (Strands)
        ({"gen_ai.operation.name": "embeddings"}, None),  # no model request
        ({"gen_ai.operation.name": S("chat")}, None),
        ({"gen_ai.output.messages": S(_ASKED_F)}, None),
    ],
)  # fmt: skip
def test_other_chat_spans_asking_for_calls_are_handed_to_python(attrs: dict[str, Any], events: Any) -> None:
    span = span_with({"gen_ai.operation.name": "chat", "gen_ai.output.messages": _ASKED_F, **attrs}, "chat m")
    if events is not None:
        span.events = [SpanEvent(name, 9, attributes) for name, attributes in events]
    with handed_to_python() as handed:
        assert_same([span])
    assert handed == [span]


@needs_c
def test_a_chat_span_whose_ids_cannot_be_read_is_handed_to_python() -> None:
    """A span whose fields are not set raises where Python raises (or not at all when no call is made)."""
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": _ASKED_F}
    mention = {**attrs, "gen_ai.output.messages": CHAT_OUTPUTS[11][0]}
    for a in (attrs, mention):
        unset = Span.__new__(Span)
        # the scope set: both read it for every span of another operation (google-adk's go to Python), and raise alike
        unset.attributes, unset.name, unset.events, unset.scope = a, "chat m", None, ""
        _, _, _, exc = assert_same([span_with(attrs, "chat m"), unset])
        assert exc is (AttributeError if a is attrs else None)
    odd = span_with(attrs, "chat m")
    odd.span_id = S(odd.span_id)  # formatted by Python
    assert_same([odd])
    unscoped = Span.__new__(Span)
    unscoped.attributes, unscoped.name, unscoped.events = attrs, "chat m", None
    with handed_to_python() as handed:
        assert assert_same([unscoped])[3] is AttributeError  # C hands a span with no scope to Python, which raises
    assert handed == [unscoped]
    for events in (Boom(), _MISSING):  # Python does not read the events beside the output: nothing raises
        eventful: Any = Span.__new__(Span)
        for f in Span.__slots__:
            if f != "events":
                setattr(eventful, f, getattr(odd, f))
        eventful.span_id = "b7ad6b7169203331"
        if events is not _MISSING:
            eventful.events = events
        with handed_to_python() as handed:
            assert assert_same([eventful])[3] is None
        assert handed == [eventful]


class _Val:
    """A value only the span's attributes hold (a weak reference tells whether it is still alive)."""


@needs_c
@pytest.mark.parametrize("change", ["replace the value", "add a key", "unset the span id"])
def test_an_attribute_key_that_runs_python_code_while_the_calls_keep_the_attributes(change: str) -> None:
    """Keeping a chat span's attributes for its requested calls tests each key against the message contents: a key
    that is a str subclass hashes in Python, which may change the attributes (or the span) meanwhile. C read the
    entry's key and value, borrowed, after it (a value freed there kept by the calls: used after it was freed), went
    on over a dict that changed size (Python raises), and read a span id unset meanwhile (a crash). Such a key's
    span is Python's, which copies the pairs it walks."""
    results = []
    for impl in (PY, C):
        assert impl is not None

        class Key(str):
            armed = False

            def __hash__(self) -> int:
                if Key.armed:
                    Key.armed = False
                    if change == "replace the value":
                        attrs[self] = "other"  # the value being copied: freed, but for the copy
                    elif change == "add a key":
                        attrs["new"] = 1
                    else:
                        del span.span_id
                return str.__hash__(self)

            __eq__ = str.__eq__

        attrs: dict[Any, Any] = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": _ASKED_F}
        attrs[Key("k")] = _Val()
        span = span_with(attrs, "chat m")
        value = weakref.ref(attrs["k"])
        Key.armed = True
        out, problems, _, exc = run(impl, [span], {})
        results.append(([type(r) for r in out], problems, exc))
        if change == "replace the value":
            assert value() is not None and out[1].attributes["k"] is value()
    assert results[0] == results[1]
    assert results[0][2] is {"replace the value": None, "add a key": RuntimeError}.get(change, AttributeError)


def span_with(attrs: Any, name: str = "execute_tool t", cls: type = Span) -> Any:
    s = cls(TRACE, "b7ad6b7169203331", "", name, 1, 5, 9)
    s.attributes = attrs
    return s


COMPACT = [
    _genai._USER_PARTS + 'a\\nb"}]}]',
    _genai._USER_PARTS + '\\ud83d\\ude00 \\u00e9 \\/ \\"q\\" \\\\"}]}]',
    _genai._USER_PARTS + '\\ud800 lone \\udc00 \\ud800\\u0041"}]}]',
    _genai._USER_PARTS + 'é😀 \\u0100"}],"finish_reason":"stop"}]',
    _genai._ASSISTANT_PARTS + 'x\\ty"}],"finish_reason":"length"}]',
    _genai._USER_PARTS + 'bad \\x escape"}]}]',
    _genai._USER_PARTS + 'control \x01 char"}]}]',
    _genai._USER_PARTS + 'cut \\u12"}]}]',
    _genai._USER_PARTS + "unterminated",
    _genai._USER_PARTS + 'ok"}]}] trailing',
]


@needs_c
@pytest.mark.parametrize("raw", COMPACT)
def test_compact_messages(raw: str) -> None:
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": raw, "gen_ai.output.messages": raw}
    out = assert_same([span_with(attrs, "invoke_agent a")])[0]
    assert out[0].input_text == _genai._turn_text(raw, ("user",), empty_is_none=False)


@needs_c
def test_every_scanstring_outcome_is_json_s() -> None:
    """The decoder against json's scanstring on every one- and two-piece body (all escapes, cuts, surrogates)."""
    bodies = [a + b for a in PIECES for b in PIECES] + ["a\\n" * 400 + "é", "\\u0100" * 300, "x" * 600]
    for body in bodies:
        for tail in ('"}]}]', "", '"'):
            raw = _genai._USER_PARTS + body + tail
            attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": raw}
            assert_same([span_with(attrs, "invoke_agent a")])


@needs_c
def test_spans_off_the_common_path_are_handed_to_python() -> None:
    class SubSpan(Span):
        __slots__ = ()

    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "error.type": 5}
    batch = [
        span_with(MappingProxyType(attrs)),
        span_with(attrs, cls=SubSpan),
        span_with(attrs),
        span_with({"gen_ai.tool.name": ""}, "execute_tool "),  # rejected
        span_with({}, "chat"),
    ]
    py = assert_same(batch, {"missing_tool_name": 1})
    assert [type(r) for r in py[0]] == [ToolCall, ToolCall, ToolCall, Span]
    assert py[1] == ["error.type"] * 3 + ["gen_ai.tool.name"]
    assert py[2] == [("missing_tool_name", 2)]
    # out, problems and rejected of other types: the whole batch goes to Python
    assert C is not None

    class L(list[Any]):
        pass

    out, problems = L(), L()
    C(iter(batch), out, problems, {})
    assert len(out) == 4 and problems == py[1]


@needs_c
def test_hostile_values_raise_as_in_python() -> None:
    unset = Span.__new__(Span)  # no slot set: reading any field raises AttributeError
    partial = Span.__new__(Span)
    partial.attributes, partial.name = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}, "n"
    partial_turn = Span.__new__(Span)
    partial_turn.attributes, partial_turn.name = {"gen_ai.operation.name": "invoke_agent"}, "n"
    ok = span_with({"gen_ai.tool.name": "t"})
    for bad in [
        unset,
        partial,
        partial_turn,
        span_with({"gen_ai.operation.name": Boom()}),
        span_with({Boom(): 1, "gen_ai.tool.name": "t"}),
        span_with({"gen_ai.tool.name": "t", "error.type": FakeStr()}),
        span_with({"toolwatch.case.id": Boom()}, "invoke_agent a"),
        span_with({"gen_ai.tool.name": Falsy("t")}),
        span_with(None),
        span_with(3),
        "not a span",
        None,
    ]:
        assert_same([ok, bad, ok])
    assert C is not None
    with pytest.raises(TypeError):
        C(5, [], [], {})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        C([], [], [])  # type: ignore[call-arg]


class Unclassed:
    """Raises when isinstance() asks for its class."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("class")


@needs_c
@pytest.mark.parametrize("truncated", [lambda: (Boom(),), Unclassed], ids=["`in` raises", "isinstance raises"])
@pytest.mark.parametrize("output", [5, {"a": 1}, "plain", None])
def test_the_output_type_problem_is_counted_before_the_truncation_is_read(
    truncated: Callable[[], Any], output: Any
) -> None:
    """Python counts an output value of the wrong type before it reads toolwatch.truncated; a truncation value that
    raises there left `problems` without that entry in C (the check ran after it)."""
    attrs = {"gen_ai.output.messages": output, "toolwatch.truncated": truncated()}
    _, problems, _, exc = assert_same([span_with(attrs, "invoke_agent a")])
    assert exc is RuntimeError
    assert problems == (["gen_ai.output.messages"] if type(output) in (int, dict) else [])


@needs_c
def test_the_bench_workload() -> None:
    """The instrumented triage agent's spans (what bench_stages decodes): the same records, and through split."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    try:
        from bench_serve import base_batches, retraced
    finally:
        sys.path.pop(0)
    batches = [parse_protobuf(retraced(r, 0)).spans for r in base_batches(1024)]
    for batch in batches:
        out = assert_same(batch)[0]
        assert sum(type(r) is Turn for r in out) > 200 and sum(type(r) is ToolCall for r in out) > 200
        assert any("\n" in (r.output_text or "") for r in out if type(r) is Turn)  # escaped text decoded
        assert all(r.tool_definitions for r in out if type(r) is Turn)
        records, rejected = Normalizer().split(batch)
        assert [fields(r) for r in records] == [fields(r) for r in out] and rejected == {}


# ---- leaks -----------------------------------------------------------------------------------------------------


@needs_c
def test_no_leaks_over_many_batches() -> None:
    """Memory stays flat, and the inputs' reference counts do not move, over many batches (every callback path)."""
    assert C is not None
    defs = '[{"type":"function","name":"f"}]'
    attrs_tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": 3, "gen_ai.tool.call.id": 7,
                  "gen_ai.tool.call.arguments": {"a": 1}, "gen_ai.tool.call.result": [1], "error.type": 2,
                  "toolwatch.truncated": 5}  # fmt: skip
    attrs_turn = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": 1, "gen_ai.input.messages": COMPACT[1],
                  "gen_ai.output.messages": "plain", "gen_ai.conversation.id": 2, "toolwatch.case.id": 3,
                  "gen_ai.tool.definitions": defs}  # fmt: skip
    batch = [
        span_with(attrs_tool),
        span_with({"gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": "{}", "toolwatch.truncated": ("x",)}),
        span_with(attrs_turn, "invoke_agent a"),
        span_with({"gen_ai.input.messages": COMPACT[0] * 3, "gen_ai.output.messages": 5}, "invoke_agent a"),
        span_with({"gen_ai.tool.name": ""}, "execute_tool "),
        span_with({}, "chat"),
        span_with(MappingProxyType({"gen_ai.tool.name": "t"})),
        *[span_with({"gen_ai.operation.name": "chat", "gen_ai.output.messages": out, "k": 1}, "chat m")
          for out, _, _ in CHAT_OUTPUTS if len(out) < 4000],  # read in C, or handed to Python
    ]  # fmt: skip
    failing = [span_with({"gen_ai.tool.name": "t"}), span_with({"toolwatch.case.id": Boom()}, "invoke_agent a")]
    watched = [batch[0], attrs_tool, attrs_turn, COMPACT[1], defs, batch[0].resource, *attrs_turn.values(),
               batch[-1], batch[-1].attributes, _ASKED_F]  # fmt: skip

    def rounds(n: int) -> None:
        for _ in range(n):
            C(batch, [], [], {})
            with pytest.raises(RuntimeError):
                C(failing, [], [], {})

    rounds(200)
    gc.collect()
    refs = [sys.getrefcount(o) for o in watched]
    blocks = sys.getallocatedblocks()
    rounds(3000)
    gc.collect()
    assert [sys.getrefcount(o) for o in watched] == refs
    assert sys.getallocatedblocks() - blocks < 200  # 30,000 records made and dropped


@needs_c
def test_a_record_class_with_a_foreign_slot_descriptor_is_never_slot_filled() -> None:
    # A ToolCall look-alike whose `attributes` descriptor belongs to another class, with an offset past the end of
    # its own objects: the C normalizer must not write there (it builds such records through setattr instead).
    import dataclasses

    from monitor.normalize import _cgenai  # type: ignore[attr-defined]
    from monitor.records import ToolCall

    big = type("Big", (), {"__slots__": tuple(f"s{i}" for i in range(40))})
    foreign = dataclasses.make_dataclass(
        "ForeignToolCall", [(f.name, f.type, f) for f in dataclasses.fields(ToolCall)], slots=True
    )
    setattr(foreign, "attributes", big.__dict__["s39"])  # the member descriptor itself, not a value
    ns = dict(vars(_genai), ToolCall=foreign)
    try:
        assert _cgenai.init(ns) == {"span": True, "tool_call": False, "turn": True, "requested_call": False}
        # the requested calls made as Python makes them (object.__new__, setattr), with the same values
        chat = span_with({"gen_ai.operation.name": "chat", "gen_ai.output.messages": _ASKED_F}, "chat m")
        assert [type(r) for r in assert_same([chat])[0]] == [Span] + [RequestedCall] * 3
    finally:
        assert _cgenai.init(vars(_genai)) == {"span": True, "tool_call": True, "turn": True, "requested_call": True}
