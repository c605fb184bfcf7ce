"""The GenAI normalizer: messages text (fast and general paths agree), tolerant attribute handling."""

from __future__ import annotations

import json

from hypothesis import example, given
from hypothesis import strategies as st

from monitor.normalize import Normalizer, Rejected, message_text
from monitor.otlp import Span
from monitor.records import ToolCall, Turn


@given(st.text(), st.sampled_from(["user", "assistant", "system"]), st.sampled_from([None, "stop", "length"]))
def test_message_text_reads_what_json_holds(text: str, role: str, finish: str | None) -> None:
    msg: dict[str, object] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish:
        msg["finish_reason"] = finish
    for raw in (json.dumps([msg], separators=(",", ":")), json.dumps([msg]), json.dumps([msg], ensure_ascii=False)):
        assert message_text(raw) == text
        assert message_text(raw, roles=(role,)) == text
        assert message_text(raw, roles=("tool",)) is None


@given(
    st.text(alphabet=st.sampled_from('ab"\\/n\u00e9\ud83d\x01'), max_size=12),
    st.sampled_from(["user", "assistant"]),
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=0, max_value=3),
)
@example("a\x01b", "user", 0, 0)  # a raw control character: invalid JSON, so the raw text
def test_message_text_fast_path_agrees_with_json_on_near_misses(text: str, role: str, cut: int, extra: int) -> None:
    """The string-operation fast path answers exactly what the general JSON path answers, also for texts that are
    almost the instrumentation's compact form (escapes, stray quotes and backslashes, cut or padded endings)."""
    raw = json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}], separators=(",", ":"))
    variants = [raw, raw[: min(cut, len(raw))], raw[:-1] + '"}]}]'[:extra], raw.replace("\\\\", "\\", 1)]
    at = raw.index('"content":"') + 11
    variants.append(raw[:at] + text + '"}]}]')  # the text unescaped as the content string
    for v in variants:
        # A leading space keeps the fast path out (it only takes text starting with the compact prefix).
        general = message_text(" " + v, roles=(role,))
        expect = v if general == " " + v else general  # not JSON: both answer the raw text itself
        assert message_text(v, roles=(role,)) == expect


def test_message_text_several_parts_and_plain_text() -> None:
    raw = json.dumps(
        [
            {
                "role": "user",
                "parts": [{"type": "text", "content": "a"}, {"type": "image"}, {"type": "text", "content": "b"}],
            }
        ]
    )
    assert message_text(raw) == "a\nb"
    assert message_text("just text, not JSON") == "just text, not JSON"
    assert message_text(json.dumps([{"role": "user", "content": "old style"}])) == "old style"
    assert message_text(42) is None and message_text("[]") is None


def _span(name: str, attrs: dict[str, object], status: int = 0) -> Span:
    return Span("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "", name, 1, 1, 2, status, "boom", attrs)


def test_tool_call_fields_and_tolerance() -> None:
    n = Normalizer()
    call = n.normalize(
        _span(
            "execute_tool get",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get",
                "gen_ai.tool.call.id": 7,
                "gen_ai.tool.call.arguments": ("a", 1),
                "error.type": 5,
            },
            status=2,
        )
    )
    assert isinstance(call, ToolCall)
    assert (call.name, call.call_id, call.arguments, call.error_type) == ("get", "7", '["a", 1]', "boom")
    # An array is read, but counted: the conventions expect an object (a kvlistValue, see below).
    assert n.ignored_attributes == {"gen_ai.tool.call.id": 1, "gen_ai.tool.call.arguments": 1, "error.type": 1}
    assert isinstance(n.normalize(_span("execute_tool", {"gen_ai.operation.name": "execute_tool"})), Rejected)
    assert n.rejected == {"missing_tool_name": 1}
    assert n.normalize(_span("GET /health", {"http.method": "GET"})) is None


def test_turn_fields() -> None:
    n = Normalizer()
    turn = n.normalize(
        _span(
            "invoke_agent triage",
            {
                "gen_ai.input.messages": json.dumps(
                    [
                        {"role": "system", "parts": [{"type": "text", "content": "sys"}]},
                        {"role": "user", "parts": [{"type": "text", "content": "[AUTH] x"}]},
                    ]
                ),
                "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text","content":"Result: y"}]}]',
                "gen_ai.tool.definitions": '[{"type":"function","name":"t"}]',
                "gen_ai.conversation.id": "c1",
                "toolwatch.case.id": 12,
            },
        )
    )
    assert isinstance(turn, Turn)
    assert (turn.agent, turn.input_text, turn.output_text, turn.conversation_id, turn.case_id) == (
        "triage",
        "[AUTH] x",
        "Result: y",
        "c1",
        "12",
    )
    assert turn.tool_definitions == ({"type": "function", "name": "t"},)


def test_tool_definitions_cache_is_bounded_in_bytes() -> None:
    # The parsed-definitions cache is shared by every turn; it must not keep large texts that a client made up
    # (256 entries of 1 MiB each would hold 256 MiB after the traffic stopped).
    from monitor.normalize import _genai

    n = Normalizer()
    pad = "x" * (1 << 20)
    for i in range(300):
        defs = json.dumps([{"type": "function", "name": f"t{i}", "description": pad}])
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.tool.definitions": defs}
        turn = n.normalize(Span("0" * 31 + "1", f"{i + 1:016x}", "", "invoke_agent a", attributes=attrs))
        assert isinstance(turn, Turn) and turn.tool_definitions is not None
        assert turn.tool_definitions[0]["name"] == f"t{i}"
    held = sum(len(raw) for raw in _genai._DEFINITIONS_CACHE)
    assert held <= 64 << 20


def test_structured_values_as_the_decoders_give_them() -> None:
    # OTLP kvlistValue -> a tuple of (key, value) pairs, arrayValue -> a tuple: read as the JSON they stand for.
    n = Normalizer()
    args = (("city", "Oslo"), ("days", (1, 2)), ("opts", ()), ("where", (("lat", 1.5),)))
    call = n.normalize(
        _span(
            "execute_tool get",
            {"gen_ai.tool.name": "get", "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": ()},
        )
    )
    assert isinstance(call, ToolCall)
    assert json.loads(call.arguments or "") == {"city": "Oslo", "days": [1, 2], "opts": [], "where": {"lat": 1.5}}
    assert call.result == "{}"  # an empty kvlistValue: the conventions expect an object
    part = (("type", "text"), ("content", "[AUTH] now"))
    history = (
        (("role", "user"), ("parts", ((("type", "text"), ("content", "[BILL] before")),))),
        (("role", "assistant"), ("parts", ((("type", "text"), ("content", "done")),))),
        (("role", "user"), ("parts", ((("type", "blob"), ("modality", "image"), ("content", "AA==")), part))),
    )
    defs = ((("type", "function"), ("name", "get"), ("parameters", (("type", "object"), ("required", ("city",))))),)
    turn = n.normalize(
        _span(
            "invoke_agent a",
            {
                "gen_ai.input.messages": history,
                "gen_ai.output.messages": ((("role", "assistant"), ("parts", (part,))),),
                "gen_ai.tool.definitions": defs,
            },
        )
    )
    assert isinstance(turn, Turn)
    assert (turn.input_text, turn.output_text) == ("[AUTH] now", "[AUTH] now")
    assert turn.tool_definitions == (
        {"type": "function", "name": "get", "parameters": {"type": "object", "required": ["city"]}},
    )
    assert n.ignored_attributes == {}


def test_turn_input_is_the_last_run_of_user_messages() -> None:
    def text(messages: list[tuple[str, str]]) -> str:
        raw = json.dumps([{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in messages])
        turn = Normalizer().normalize(_span("invoke_agent a", {"gen_ai.input.messages": raw}))
        assert isinstance(turn, Turn)
        return turn.input_text

    history = [("system", "s"), ("user", "old"), ("assistant", "a"), ("user", "new"), ("user", "more")]
    assert text(history) == "new\nmore"
    assert text([("user", "q"), ("assistant", "calling"), ("tool", "[BILL] result")]) == "q"
    assert text([("system", "only instructions"), ("developer", "d")]) == "only instructions\nd"  # no user: all
