"""Calls the model requested as OpenInference and OpenLLMetry (Traceloop) record them: flattened attributes of their
LLM / chat spans, mapped to the same RequestedCall records as the GenAI `tool_call` parts and reconciled alike.

Real OTel SDK spans with the producers' attribute shapes, encoded as OTLP and decoded by the monitor, through the
real normalizer and assembler: the C paths and their Python references, which must agree.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.trace import Tracer

from monitor._json import loads_bounded
from monitor.assembly import TurnAssembler
from monitor.normalize import GenAIConvention, Normalizer
from monitor.normalize import _lcmessages as lc
from monitor.normalize._requested import MAX_REQUESTED_PER_SPAN
from monitor.otlp import Span
from monitor.records import HandoffMark, OfferedTools, RequestedCall, Turn
from tests.monitor.service.test_requested_calls import IMPLS, S, _impl, _one, assemble, calls_of, convert, record

OI_OUT = "llm.output_messages"  # the ignored-attribute key of an OpenInference LLM span's requested calls
TL_OUT = "gen_ai.completion"  # the ignored-attribute key of an OpenLLMetry chat span's requested calls
OI_SCOPE = "openinference.instrumentation.openai_agents"


def _oi_call(i: int, j: int, field: str) -> str:
    return f"llm.output_messages.{i}.message.tool_calls.{j}.tool_call.{field}"


def oi_llm(tracer: Tracer, *calls: tuple[Any, Any, Any], message: int = 0, extra: dict[str, Any] | None = None) -> None:
    """An OpenInference LLM span (openai-agents' shape: every function call of the response under one output message);
    `calls` (name, id, arguments), a None value left out."""
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "llm.model_name": "m",
        "input.value": '[{"role": "user", "content": "hi"}]',
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "the whole history",
        f"llm.output_messages.{message}.message.role": "assistant",
        "llm.tools.0.tool.json_schema": '{"type": "function"}',
    }
    for j, (name, cid, args) in enumerate(calls):
        for field, v in (("function.name", name), ("id", cid), ("function.arguments", args)):
            if v is not None:
                attrs[_oi_call(message, j, field)] = v
    attrs.update(extra or {})
    with tracer.start_as_current_span("response", attributes=attrs):
        pass


def tl_chat(
    tracer: Tracer, *calls: tuple[Any, Any, Any], completion: int = 0, extra: dict[str, Any] | None = None
) -> None:
    """An OpenLLMetry chat span (opentelemetry-instrumentation-openai's shape): `calls` (name, id, arguments); `extra`
    attributes too (newer versions add `gen_ai.operation.name`)."""
    attrs: dict[str, Any] = {
        "llm.request.type": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "m",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "the whole history",
        f"gen_ai.completion.{completion}.role": "assistant",
        f"gen_ai.completion.{completion}.finish_reason": "tool_calls",
        "llm.request.functions.0.name": "get_weather",
    }
    for j, (name, cid, args) in enumerate(calls):
        for field, v in (("name", name), ("id", cid), ("arguments", args)):
            if v is not None:
                attrs[f"gen_ai.completion.{completion}.tool_calls.{j}.{field}"] = v
    attrs.update(extra or {})
    with tracer.start_as_current_span("openai.chat", attributes=attrs):
        pass


@contextmanager
def oi_agent(tracer: Tracer, text: str, name: str = "incident-triage") -> Iterator[None]:
    attrs = {"openinference.span.kind": "AGENT", "input.value": text, "agent.name": name}
    with tracer.start_as_current_span(name, attributes=attrs):
        yield


def oi_tool(tracer: Tracer, name: str, arguments: dict[str, Any]) -> None:
    """openai-agents' function span through OpenInference: a TOOL span with `tool.name`, no call id."""
    attrs = {"openinference.span.kind": "TOOL", "tool.name": name, "input.value": json.dumps(arguments),
             "input.mime_type": "application/json", "output.value": "ok"}  # fmt: skip
    with tracer.start_as_current_span(name, attributes=attrs):
        pass


def oi_handoff(tracer: Tracer, to_agent: str) -> None:
    """openai-agents' handoff span through OpenInference: a TOOL span without `tool.name`."""
    with tracer.start_as_current_span(f"handoff to {to_agent}", attributes={"openinference.span.kind": "TOOL"}):
        pass


def requested(out: list[Any]) -> list[tuple[str, str, str | None]]:
    return [(r.name, r.call_id, r.arguments) for r in out if isinstance(r, RequestedCall)]


# ---- the normalizer ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openinference_llm_span_gives_itself_and_its_tool_calls(impl: str) -> None:
    _impl(impl)
    spans = record(lambda t: oi_llm(t, ("lookup", "call_1", '{"q": 1}'), ("lookpu", "call_2", None), message=1))
    out, problems = convert(spans, impl)
    span = spans[0]
    assert out[0] is span and problems == []
    assert requested(out) == [("lookup", "call_1", '{"q": 1}'), ("lookpu", "call_2", None)]
    for i, r in enumerate(out[1:]):
        assert (r.span_id, r.parent_span_id, r.trace_id) == (f"{span.span_id}#{i:02d}", span.span_id, span.trace_id)
        assert r.start_ns == r.end_ns == span.end_ns
        assert r.result is None and r.error_type is None
        # the span's attributes without the message contents
        assert r.attributes == {k: v for k, v in span.attributes.items() if k.split(".")[1] in ("system", "model_name")
                                or k == "openinference.span.kind"}  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openllmetry_chat_span_gives_itself_and_its_tool_calls(impl: str) -> None:
    _impl(impl)
    spans = record(lambda t: tl_chat(t, ("get_weather", "c1", '{"city": "Oslo"}'), ("get_wether", None, "{}")))
    out, problems = convert(spans, impl)
    span = spans[0]
    assert out[0] is span and problems == []
    assert requested(out) == [("get_weather", "c1", '{"city": "Oslo"}'), ("get_wether", "", "{}")]
    # and the tool it offered (monitor.normalize._offered)
    assert [r.span_id for r in out[1:]] == [f"{span.span_id}#00", f"{span.span_id}#01", f"{span.span_id}#tools"]
    assert out[1].attributes == {"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "m"}


@pytest.mark.parametrize("impl", IMPLS)
def test_tool_calls_are_read_in_message_then_call_order(impl: str) -> None:
    _impl(impl)

    def build(t: Tracer) -> None:
        attrs = {"openinference.span.kind": "LLM"}
        for i, j, name in ((10, 0, "d"), (2, 1, "c"), (2, 0, "b"), (0, 11, "a2"), (0, 2, "a1")):
            attrs[_oi_call(i, j, "function.name")] = name
        with t.start_as_current_span("llm", attributes=attrs):
            pass

    out, _ = convert(record(build), impl)
    assert [r.name for r in out[1:]] == ["a1", "a2", "b", "c", "d"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("producer", "key"), [("oi", OI_OUT), ("tl", TL_OUT)])
def test_bad_values_are_ignored_and_counted_under_one_key_never_raised(impl: str, producer: str, key: str) -> None:
    _impl(impl)
    calls = [
        (None, "x1", "{}"),  # no name: not a call, counted
        ("", "x2", None),  # an empty name: likewise
        (7, "x3", None),  # a name of another type: likewise
        ("f", 12, None),  # an id of another type: read as text, counted
        ("g", "x5", 3),  # arguments of another type: not captured, counted
    ]
    spans = record(lambda t: (oi_llm if producer == "oi" else tl_chat)(t, *calls))
    out, problems = convert(spans, impl)
    assert out[0] is spans[0]
    assert requested(out) == [("f", "12", None), ("g", "x5", None)]
    assert problems == [key] * 5


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("producer", "key"), [("oi", OI_OUT), ("tl", TL_OUT)])
def test_a_call_key_whose_index_cannot_be_read_is_counted(impl: str, producer: str, key: str) -> None:
    """A key of a requested call's field whose message or call index is no index (past 9 digits, not digits) is a
    call that cannot be read: ignored and counted (once per key), never raised; other keys under the prefix are not
    calls (not counted)."""
    _impl(impl)
    if producer == "oi":
        name = "tool_call.function.name"
        attrs = {"openinference.span.kind": "LLM", "llm.output_messages.0.message.role": "assistant",
                 "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "f"}  # fmt: skip
        calls, other = f"{OI_OUT}.{{i}}.message.tool_calls.{{j}}.{name}", f"{OI_OUT}.{{i}}.message.tool_calls.{{j}}.x"
    else:
        name = "name"
        attrs = {"llm.request.type": "chat", "gen_ai.completion.0.role": "assistant",
                 "gen_ai.completion.0.tool_calls.0.name": "f"}  # fmt: skip
        calls, other = f"{TL_OUT}.{{i}}.tool_calls.{{j}}.{name}", f"{TL_OUT}.{{i}}.tool_calls.{{j}}.x"
    bad = [("99999999999", "0"), ("0", "1" * 40), ("a", "0"), ("0", "-1"), ("", "0")]
    for i, j in bad:
        attrs[calls.format(i=i, j=j)] = "g"
        attrs[other.format(i=i, j=j)] = "h"

    def build(t: Tracer) -> None:
        with t.start_as_current_span("response", attributes=attrs):
            pass

    spans = record(build)
    out, problems = convert(spans, impl)
    assert out[0] is spans[0]
    assert requested(out) == [("f", "", None)]
    assert problems == [key] * len(bad)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("producer", "key"), [("oi", OI_OUT), ("tl", TL_OUT)])
def test_requested_calls_per_span_are_bounded_and_the_rest_counted(impl: str, producer: str, key: str) -> None:
    _impl(impl)
    n = MAX_REQUESTED_PER_SPAN + 3
    calls = [(f"t{i}", None, None) for i in range(n)]  # one attribute each: within the SDK's attribute limit
    spans = record(lambda t: (oi_llm if producer == "oi" else tl_chat)(t, *calls))
    out, problems = convert(spans, impl)
    assert [r.name for r in out[1:] if isinstance(r, RequestedCall)] == [f"t{i}" for i in range(MAX_REQUESTED_PER_SPAN)]
    assert problems == [key] * 3


@pytest.mark.parametrize("impl", IMPLS)
def test_spans_without_tool_calls_are_parent_links_as_before(impl: str) -> None:
    _impl(impl)

    def build(t: Tracer) -> None:
        oi_llm(t)
        tl_chat(t)
        with t.start_as_current_span("other", attributes={"llm.output_messages.0.message.tool_calls.0.x": "y"}):
            pass

    spans = record(build)
    out, problems = convert(spans, impl)
    # The OpenLLMetry span offers a tool (monitor.normalize._offered): that is no call either.
    assert [r for r in out if not isinstance(r, OfferedTools)] == spans and problems == []
    assert [(type(r), r.parent_span_id) for r in out[2:3]] == [(OfferedTools, spans[1].span_id)]


def test_the_normalizer_with_several_conventions_reads_them_too() -> None:
    def build(t: Tracer) -> None:
        oi_llm(t, ("a", "1", None))
        tl_chat(t, ("b", "2", None))
        strands_chat(t, ("c", "3", {}), latest=False)
        oi_handoff(t, "Billing")

    spans = record(build)
    n = Normalizer([GenAIConvention(), GenAIConvention()])
    out, _ = n.split(spans)
    assert requested(out) == [("a", "1", None), ("b", "2", None), ("c", "3", "{}")]
    assert [r.name for r in out if isinstance(r, HandoffMark)] == ["transfer_to_billing"]
    assert [r for r in out if isinstance(r, Span)] == spans


OP_CHAT = {"gen_ai.operation.name": "chat"}
OUT = "gen_ai.output.messages"


def _parts(*names: str) -> str:
    parts = [{"type": "tool_call", "id": f"m_{n}", "name": n, "arguments": {}} for n in names]
    return json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "let me look"}, *parts]}])


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openllmetry_chat_span_with_a_genai_operation_gives_the_same_calls(impl: str) -> None:
    """Newer OpenLLMetry versions add `gen_ai.operation.name` to their chat spans (read the GenAI way): without
    output messages, the calls it flattens are read as from the span without the operation, the same records."""
    _impl(impl)
    calls = (("get_weather", "c1", '{"city": "Oslo"}'), ("get_wether", None, "{}"))
    history = {"gen_ai.input.messages": json.dumps([{"role": "user", "parts": []}])}  # not kept either

    def build(t: Tracer) -> None:
        tl_chat(t, *calls, extra={**OP_CHAT, **history})
        tl_chat(t, *calls)

    spans = record(build)
    (out, problems), (plain, _) = convert(spans[:1], impl), convert(spans[1:], impl)
    assert out[0] is spans[0] and problems == []
    assert requested(out) == requested(plain) == [("get_weather", "c1", '{"city": "Oslo"}'), ("get_wether", "", "{}")]
    assert [r.span_id for r in out[1:] if isinstance(r, RequestedCall)] == [
        f"{spans[0].span_id}#00",
        f"{spans[0].span_id}#01",
    ]
    assert out[1].attributes == {**plain[1].attributes, **OP_CHAT}
    assert [type(r) for r in out] == [type(r) for r in plain] == [Span, RequestedCall, RequestedCall, OfferedTools]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("output", "want", "problems"),
    [
        (_parts("from_messages"), [("from_messages", "m_from_messages", "{}")], []),  # never both: the messages'
        ('[{"role":"assistant","parts":[{"type":"tool_call"', [("flat", "c1", None)], [OUT]),  # cannot be read
        (json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "no call"}]}]), [("flat", "c1", None)],
         []),  # holds no tool_call part
    ],
    ids=["tool-call-parts", "not-json", "no-tool-call-part"],
)  # fmt: skip
def test_an_openllmetry_chat_span_with_output_messages_reads_one_of_the_two(
    impl: str, output: str, want: list[tuple[str, str, str | None]], problems: list[str]
) -> None:
    """The output messages' tool_call parts when they hold some, else the flattened calls: never both."""
    _impl(impl)
    spans = record(lambda t: tl_chat(t, ("flat", "c1", None), extra={**OP_CHAT, OUT: output}))
    out, got = convert(spans, impl)
    assert out[0] is spans[0] and requested(out) == want and got == problems


@pytest.mark.parametrize("impl", IMPLS)
def test_flattened_calls_of_a_genai_chat_span_are_read_only_with_openllmetrys_marker(impl: str) -> None:
    """`llm.request.type` marks OpenLLMetry's spans: a GenAI chat span without it stays a parent link (its other
    attributes are not looked at)."""
    _impl(impl)

    def build(t: Tracer) -> None:
        attrs = {**OP_CHAT, "gen_ai.completion.0.tool_calls.0.name": "f"}
        with t.start_as_current_span("chat m", attributes=attrs):
            pass

    spans = record(build)
    assert convert(spans, impl) == (spans, [])


def test_the_normalizer_with_several_conventions_reads_a_genai_openllmetry_span_alike() -> None:
    def build(t: Tracer) -> None:
        tl_chat(t, ("a", "1", None), extra=OP_CHAT)
        tl_chat(t, ("b", "2", None), extra={**OP_CHAT, OUT: '[{"parts":[{"type":"tool_call"'})  # cut: counted
        tl_chat(t, ("c", "3", None), extra={**OP_CHAT, OUT: _parts("d")})

    spans = record(build)
    several, alone = Normalizer([_Nothing(), GenAIConvention()]), Normalizer()
    (got, _), (want, _) = several.split(spans), alone.split(spans)
    assert requested(got) == requested(want) == [("a", "1", None), ("b", "2", None), ("d", "m_d", "{}")]
    assert several.ignored_attributes == alone.ignored_attributes == {OUT: 1}


class _Nothing:
    """A convention that maps no span."""

    def normalize(self, span: Span, problems: list[str]) -> None:
        return None


# ---- LangChain.js through OpenInference: the calls' ids in the LLM span's output -------------------------------

LC_JS = "@arizeai/openinference-instrumentation-langchain"
LC_PY = "openinference.instrumentation.langchain"


def lc_output(*calls: tuple[str, Any], forms: tuple[str, ...] = ("additional_kwargs", "tool_calls"),
              skipped: int = 0) -> str:  # fmt: skip
    """A LangChain LLM run's output as OpenInference's LangChain.js instrumentation records it (`output.value`, JSON as
    JSON.stringify writes it): the first set of generations, `skipped` generations without a message, then one whose
    AIMessage is serialized (`{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}`), its calls
    (name, id) in OpenAI's form under `additional_kwargs.tool_calls` (which the instrumentation flattens into
    `llm.output_messages`, leaving their ids out) and in LangChain's under `tool_calls`, or in `forms` only."""
    raw = [{"id": cid, "type": "function", "function": {"name": n, "arguments": "{}"}} for n, cid in calls]
    parsed = [{"name": n, "args": {}, "type": "tool_call", "id": cid} for n, cid in calls]
    kwargs: dict[str, Any] = {"id": "chatcmpl-1", "content": "", "additional_kwargs": {}, "type": "ai",
                              "tool_calls": [], "invalid_tool_calls": []}  # fmt: skip
    if "additional_kwargs" in forms:
        kwargs["additional_kwargs"] = {"tool_calls": raw}
    if "tool_calls" in forms:
        kwargs["tool_calls"] = parsed
    message = {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "AIMessage"], "kwargs": kwargs}
    generations = [{"text": ""}] * skipped + [{"text": "", "message": message}]
    return json.dumps({"generations": [generations], "llmOutput": {}}, separators=(",", ":"))


def lc_llm(output: str | None, *calls: tuple[Any, Any, Any], scope: str = LC_JS) -> list[Span]:
    """An LLM span of LangChain.js through OpenInference: its output messages' `calls` (name, id, arguments; an id
    None left out, as the instrumentation leaves it), `output` its `output.value`."""
    extra = {} if output is None else {"output.value": output, "output.mime_type": "application/json"}
    return [replace(s, scope=scope) for s in record(lambda t: oi_llm(t, *calls, extra=extra))]


TWO = (("get_weather", None, '{"city": "Paris"}'), ("get_weather", None, '{"city": "Lyon"}'))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("scope", [LC_JS, LC_PY])
@pytest.mark.parametrize("forms", [("additional_kwargs", "tool_calls"), ("additional_kwargs",), ("tool_calls",)])
def test_a_langchain_llm_spans_call_ids_are_read_from_its_output(impl: str, scope: str, forms: tuple[str, ...]) -> None:
    """The output messages name no id; the run's output (the AIMessage, serialized) does: each call the `j`th of the
    message's `additional_kwargs.tool_calls` (the list the output messages were flattened from), else of its
    `tool_calls`, its id taken when it names the same tool."""
    _impl(impl)
    output = lc_output(("get_weather", "call_1"), ("get_weather", "call_2"), forms=forms)
    out, problems = convert(lc_llm(output, *TWO, scope=scope), impl)
    assert requested(out) == [
        ("get_weather", "call_1", '{"city": "Paris"}'),
        ("get_weather", "call_2", '{"city": "Lyon"}'),
    ]
    assert problems == []


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("output", "ids"),
    [
        (lc_output(("get_weather", "call_1"), ("get_time", "call_2")), ["call_1", ""]),  # another tool: not its id
        (lc_output(("get_weather", "call_1")), ["call_1", ""]),  # no second call
        (lc_output(("get_weather", "call_1"), ("get_weather", "call_2"), skipped=1), ["call_1", "call_2"]),
        (lc_output(("get_weather", 7), ("get_weather", "")), ["", ""]),  # an id of another type, an empty one
        (lc_output(("get_weather", "call_1"), ("get_weather", "call_2"))[:-2], ["", ""]),  # cut: no JSON
        ("It is sunny.", ["", ""]),
        ('{"generations": "none"}', ["", ""]),
        ('{"generations": [[{"message": {"kwargs": {"additional_kwargs": {"tool_calls": 3}}}}]]}', ["", ""]),
        ('["tool_calls"]', ["", ""]),
        (None, ["", ""]),
    ],
)  # fmt: skip
def test_what_names_no_call_in_a_langchain_llm_output_gives_no_id(impl: str, output: str | None,
                                                                  ids: list[str]) -> None:  # fmt: skip
    """An output that cannot be read, or names no call of that tool at that place, gives no id: never counted (the
    output messages were read as they are)."""
    _impl(impl)
    out, problems = convert(lc_llm(output, *TWO), impl)
    assert [r[1] for r in requested(out)] == ids and problems == []


@pytest.mark.parametrize("impl", IMPLS)
def test_an_id_the_output_messages_give_is_kept_and_another_producers_output_is_not_read(impl: str) -> None:
    _impl(impl)
    output = lc_output(("get_weather", "call_1"), ("get_weather", "call_2"))
    calls = (("get_weather", "own", '{"city": "Paris"}'), TWO[1])
    assert [r[1] for r in requested(convert(lc_llm(output, *calls), impl)[0])] == ["own", "call_2"]
    other = convert(lc_llm(output, *TWO, scope="openinference.instrumentation.openai"), impl)[0]
    assert [r[1] for r in requested(other)] == ["", ""]


# ---- LangChain.js through OpenInference: calls only in the message's parsed `tool_calls` ---------------------------


def lc_parsed(*calls: Any, invalid: tuple[Any, ...] = (), content: Any = "") -> dict[str, Any]:
    """An AIMessage serialized as LangChain.js' `toJSON` gives it in an LLM run's output when its integration fills
    only the parsed `tool_calls` (the shape of the captures langgraphjs_{anthropic,ollama,google}_openinference_invalid:
    @langchain/anthropic's `additional_kwargs` hold the response's other fields, no `tool_calls`): `calls` each
    `{"name", "args", "id", "type": "tool_call"}` (or as given when not a tuple), `invalid` each LangChain's
    `{"name", "args" (the text the model gave), "id", "error", "type": "invalid_tool_call"}`."""
    parsed = [{"name": c[0], "args": c[1], "id": c[2], "type": "tool_call"} if isinstance(c, tuple) else c
              for c in calls]  # fmt: skip
    bad = [{"name": n, "args": a, "id": cid, "error": "Malformed args.", "type": "invalid_tool_call"}
           for n, a, cid in invalid]  # fmt: skip
    kwargs = {"content": content, "additional_kwargs": {"id": "msg_01", "type": "message", "role": "assistant",
              "stop_reason": "tool_use"}, "tool_calls": parsed, "id": "msg_01", "invalid_tool_calls": bad}  # fmt: skip
    return {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "AIMessage"], "kwargs": kwargs}


def lc_generations(*messages: dict[str, Any], scope: str = LC_JS) -> str:
    """A LangChain LLM run's output (`output.value`) of these messages, as JSON.stringify writes it (LangChain.js'
    instrumentation), or json.dumps (Python's: `scope` LC_PY)."""
    generations = [{"text": "", "message": m} for m in messages]
    value = {"generations": [generations], "llmOutput": {}}
    return json.dumps(value) if scope == LC_PY else json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("scope", [LC_JS, LC_PY])
def test_calls_only_in_a_langchain_messages_tool_calls_are_read_from_the_runs_output(impl: str, scope: str) -> None:
    """The output messages hold no call (the instrumentation flattens only `additional_kwargs.tool_calls`); the run's
    output does: each of the message's `tool_calls`, then its `invalid_tool_calls` (arguments the model gave that
    are no JSON object: never run), is a requested call, its id the call's (none: ""), its arguments an object given
    as JSON text (as a GenAI tool_call part's are), a text as it is."""
    _impl(impl)
    output = lc_generations(lc_parsed(("get_weather", {"city": "Paris", "days": [1, 2]}, "toolu_01"),
                                      {"name": "get_time", "args": {}, "type": "tool_call"},
                                      invalid=(("get_weather", '{"city": ', "toolu_03"),),
                                      content=[{"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                                                "input": {"city": "Paris", "days": [1, 2]}}]), scope=scope)  # fmt: skip
    out, problems = convert(lc_llm(output, scope=scope), impl)
    assert requested(out) == [
        ("get_weather", "toolu_01", '{"city": "Paris", "days": [1, 2]}'),
        ("get_time", "", "{}"),
        ("get_weather", "toolu_03", '{"city": '),
    ]
    assert problems == []
    [llm] = [r for r in out if isinstance(r, Span)]
    calls = [r for r in out if isinstance(r, RequestedCall)]
    assert [r.parent_span_id for r in calls] == [llm.span_id] * 3
    assert not [k for r in calls for k in r.attributes if k.startswith(("output.", "llm.output_messages"))]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("scope", [LC_JS, LC_PY])
def test_a_message_whose_only_calls_are_invalid_gives_them(impl: str, scope: str) -> None:
    """A message whose every call is invalid (arguments that do not parse to an object, as a streamed call's
    malformed JSON gives them): `"tool_calls":[]` beside `"invalid_tool_calls":[{...}]`. Its calls were asked for and
    never ran (LangGraph's ToolNode runs `tool_calls` only): each is a requested call, its arguments the text the
    model gave."""
    _impl(impl)
    message = lc_parsed(invalid=(("get_weather", '{"city": 42}}', "toolu_01"), ("get_time", "UTC", "toolu_02")))
    out, problems = convert(lc_llm(lc_generations(message, scope=scope), scope=scope), impl)
    assert requested(out) == [("get_weather", "toolu_01", '{"city": 42}}'), ("get_time", "toolu_02", "UTC")]
    assert problems == []


@pytest.mark.parametrize("impl", IMPLS)
def test_a_message_whose_calls_were_flattened_is_not_read_again_another_is(impl: str) -> None:
    """Per message: the first's calls are in the output messages (OpenAI's form, their ids read from the output), the
    second's only in its parsed `tool_calls`: each call once, in message order."""
    _impl(impl)
    first = json.loads(lc_output(("get_weather", "call_1")))["generations"][0][0]["message"]
    output = lc_generations(first, lc_parsed(("get_time", {"zone": "UTC"}, "call_2")))
    spans = lc_llm(output, ("get_weather", None, '{"city": "Paris"}'))
    spans = [replace(s, attributes={**s.attributes, "llm.output_messages.1.message.role": "assistant"}) for s in spans]
    out, problems = convert(spans, impl)
    assert requested(out) == [("get_weather", "call_1", '{"city": "Paris"}'), ("get_time", "call_2", '{"zone": "UTC"}')]
    assert problems == []


@pytest.mark.parametrize("impl", IMPLS)
def test_a_message_without_flattened_calls_beside_one_whose_calls_have_ids_is_read(impl: str) -> None:
    """As above, Python's instrumentation: the first message's flattened calls name their ids (none is missing), so
    the output is read only because the second output message has no call flattened while the output lists some."""
    _impl(impl)
    first = json.loads(lc_output(("get_weather", "call_1")))["generations"][0][0]["message"]
    output = lc_generations(first, lc_parsed(("get_time", {"zone": "UTC"}, "call_2")), scope=LC_PY)
    spans = lc_llm(output, ("get_weather", "call_1", '{"city": "Paris"}'), scope=LC_PY)
    spans = [replace(s, attributes={**s.attributes, "llm.output_messages.1.message.role": "assistant"}) for s in spans]
    out, problems = convert(spans, impl)
    assert requested(out) == [("get_weather", "call_1", '{"city": "Paris"}'), ("get_time", "call_2", '{"zone": "UTC"}')]
    assert problems == []


@pytest.mark.parametrize("impl", IMPLS)
def test_parsed_calls_that_cannot_be_read_are_counted_and_bounded(impl: str) -> None:
    """As a flattened call: one that is no object or has no name is counted under `llm.output_messages`, so is an id
    of another type (converted) or arguments that are no object (given as JSON text); past MAX_REQUESTED_PER_SPAN the
    rest are counted."""
    _impl(impl)
    output = lc_generations(lc_parsed({"args": {}, "id": "x"}, 3, ("get_weather", [1], 5)))
    out, problems = convert(lc_llm(output), impl)
    assert requested(out) == [("get_weather", "5", "[1]")]
    assert problems == [OI_OUT] * 4
    many = [("get_weather", {"city": f"c{i}"}, f"call_{i}") for i in range(MAX_REQUESTED_PER_SPAN + 3)]
    out, problems = convert(lc_llm(lc_generations(lc_parsed(*many))), impl)
    assert [r[1] for r in requested(out)] == [f"call_{i}" for i in range(MAX_REQUESTED_PER_SPAN)]
    assert problems == [OI_OUT] * 3
    # the bound counts the calls given in (i, j) order: a flattened message's before, a call without a name not
    first = json.loads(lc_output(("get_weather", "flat_1"), ("get_weather", "flat_2")))["generations"][0][0]["message"]
    flat = (("get_weather", None, "{}"), ("get_weather", None, "{}"))
    spans = lc_llm(lc_generations(first, lc_parsed({"args": {}}, *many)), *flat)
    spans = [replace(s, attributes={**s.attributes, "llm.output_messages.1.message.role": "assistant"}) for s in spans]
    out, problems = convert(spans, impl)
    assert [r[1] for r in requested(out)] == ["flat_1", "flat_2"] + [f"call_{i}" for i in
                                                                     range(MAX_REQUESTED_PER_SPAN - 2)]  # fmt: skip
    assert problems == [OI_OUT] * (1 + 5)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    "output",
    [
        lc_generations(lc_parsed()),  # an answer: `"tool_calls":[]`
        lc_generations(lc_parsed(("get_weather", {}, "toolu_01")))[:-2],  # cut: no JSON
        '{"generations": [[{"message": {"kwargs": {"tool_calls": [{"name": "get_weather"}]}}}]]}'[:-1],
        '{"tool_calls":[{"name": "get_weather"}]}',  # no generations
        '{"generations":[[{"text":"","message":{"kwargs":{"tool_calls":{"name":"get_weather"}}}}]]}',  # not a list
        "get_weather",
    ],
)  # fmt: skip
def test_a_langchain_output_naming_no_parsed_call_gives_none_uncounted(impl: str, output: str) -> None:
    _impl(impl)
    out, problems = convert(lc_llm(output), impl)
    assert requested(out) == [] and problems == []


@pytest.mark.parametrize("impl", IMPLS)
def test_parsed_calls_of_another_producers_llm_span_are_not_read(impl: str) -> None:
    _impl(impl)
    output = lc_generations(lc_parsed(("get_weather", {"city": "Paris"}, "toolu_01")))
    out, _ = convert(lc_llm(output, scope="openinference.instrumentation.openai"), impl)
    assert requested(out) == []


@pytest.mark.parametrize("impl", IMPLS)
def test_an_ordinary_langchain_llm_span_is_not_parsed(impl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its output is parsed only for a call it may name that its output messages leave out: an answer (its messages'
    `"tool_calls":[]`) is not, nor are calls the output messages give whole (Python's instrumentation: with ids)."""
    _impl(impl)
    texts: list[str] = []

    def counted(text: str) -> Any:
        texts.append(text)
        return loads_bounded(text)

    monkeypatch.setattr(lc, "loads_bounded", counted)
    convert(lc_llm(lc_generations(lc_parsed())), impl)
    output = lc_output(("get_weather", "call_1"), ("get_weather", "call_2"))
    calls = (("get_weather", "call_1", '{"city": "Paris"}'), ("get_weather", "call_2", '{"city": "Lyon"}'))
    out, _ = convert(lc_llm(output, *calls, scope=LC_PY), impl)
    assert len(requested(out)) == 2
    assert texts == []
    convert(lc_llm(lc_generations(lc_parsed(("get_weather", {}, "toolu_01")))), impl)
    assert len(texts) == 1  # the spy sees a parse when there is one


# ---- reconciled in their turns -------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openinference_turn_keeps_the_call_that_ran_once_and_the_unknown_one_requested(impl: str) -> None:
    _impl(impl)

    def build(t: Tracer) -> None:
        with oi_agent(t, "[AUTH] login failure"):
            oi_llm(t, ("pull_auth_telemetry", "call_a", '{"log_excerpt": "x"}'), ("pull_auth_telemtry", "call_b", None))
            oi_tool(t, "pull_auth_telemetry", {"log_excerpt": "x"})  # no call id: paired by name (rule 2)
            oi_llm(t)

    turns, _ = assemble(record(build), impl)
    assert calls_of(_one(turns)) == [  # in start order: the requested call at its model request's end
        ("pull_auth_telemtry", "call_b", None, True),
        ("pull_auth_telemetry", "", '{"log_excerpt": "x"}', False),
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openai_agents_handoff_is_no_call_requested_or_run(impl: str) -> None:
    _impl(impl)

    def build(t: Tracer) -> None:
        with oi_agent(t, "[BILL] refund blocked", name="Triage"):
            oi_llm(t, ("transfer_to_billing_agent", "call_h", None))
            oi_handoff(t, "Billing agent")
            with t.start_as_current_span("Billing agent", attributes={"openinference.span.kind": "AGENT"}):
                oi_llm(t, ("pull_billing_telemetry", "call_b", '{"log_excerpt": "x"}'))
                oi_tool(t, "pull_billing_telemetry", {"log_excerpt": "x"})

    turns, _ = assemble(record(build), impl)
    assert calls_of(_one(turns)) == [("pull_billing_telemetry", "", '{"log_excerpt": "x"}', False)]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_transfer_call_with_no_handoff_in_its_turn_stays_a_requested_call(impl: str) -> None:
    _impl(impl)

    def build(t: Tracer) -> None:
        with oi_agent(t, "[BILL] refund blocked"):
            oi_llm(t, ("transfer_to_billing_agent", "call_h", None))

    turns, _ = assemble(record(build), impl)
    assert calls_of(_one(turns)) == [("transfer_to_billing_agent", "call_h", None, True)]


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openllmetry_turn_pairs_its_tool_span_by_name(impl: str) -> None:
    _impl(impl)

    def build(t: Tracer) -> None:
        attrs = {"traceloop.span.kind": "workflow", "traceloop.entity.name": "weather",
                 "traceloop.entity.input": json.dumps({"args": ["weather in Oslo?"], "kwargs": {}})}  # fmt: skip
        with t.start_as_current_span("weather.workflow", attributes=attrs):
            tl_chat(t, ("get_weather", "c1", '{"city": "Oslo"}'), ("get_forecast", "c2", "{}"))
            tool = {"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather",
                    "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"city": "Oslo"}})}  # fmt: skip
            with t.start_as_current_span("get_weather.tool", attributes=tool):
                pass

    turns, _ = assemble(record(build), impl)
    turn: Turn = _one(turns)
    assert turn.input_text == "weather in Oslo?"
    assert calls_of(turn) == [("get_forecast", "c2", "{}", True), ("get_weather", "", '{"city": "Oslo"}', False)]


# ---- Strands Agents: a chat span's output in its span events --------------------------------------------------


def strands_chat(tracer: Tracer, *uses: tuple[str, str, dict[str, Any]], latest: bool) -> None:
    """Strands' chat span: `gen_ai.operation.name` chat, the model's output in a span event, its tool uses `(name,
    toolUseId, input)`: a `gen_ai.choice` event (`message`: the content blocks' JSON), or with
    gen_ai_latest_experimental the details event's `gen_ai.output.messages` (GenAI messages, `tool_call` parts)."""
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.system": "strands-agents", "gen_ai.request.model": "m"}
    with tracer.start_as_current_span("chat", attributes=attrs) as span:
        history = [{"role": "user", "parts": [{"type": "tool_call", "name": "old", "id": "h0", "arguments": {}}]}]
        if latest:  # the input (the history, with earlier turns' calls): not what the model asked for now
            span.add_event(STRANDS_DETAILS, {"gen_ai.input.messages": json.dumps(history)})
        else:
            span.add_event("gen_ai.user.message", {"content": json.dumps([{"text": "hi"}])})
        if latest:
            parts: list[dict[str, Any]] = [{"type": "text", "content": "let me look"}]
            parts += [{"type": "tool_call", "name": n, "id": i, "arguments": a} for n, i, a in uses]
            out = [{"role": "assistant", "parts": parts, "finish_reason": "tool_use"}]
            span.add_event(STRANDS_DETAILS, {"gen_ai.output.messages": json.dumps(out)})
        else:
            blocks: list[dict[str, Any]] = [{"text": "let me look"}]
            blocks += [{"toolUse": {"toolUseId": i, "name": n, "input": a}} for n, i, a in uses]
            span.add_event("gen_ai.choice", {"finish_reason": "tool_use", "message": json.dumps(blocks)})


STRANDS_DETAILS = "gen_ai.client.inference.operation.details"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("latest", [False, True], ids=["choice", "details"])
def test_a_strands_chat_span_gives_the_calls_its_output_event_holds(impl: str, latest: bool) -> None:
    _impl(impl)
    spans = record(lambda t: strands_chat(t, ("lookup", "tu1", {"q": 1}), ("lookpu", "tu2", {}), latest=latest))
    out, problems = convert(spans, impl)
    span = spans[0]
    assert out[0] is span and problems == []
    assert requested(out) == [("lookup", "tu1", '{"q": 1}'), ("lookpu", "tu2", "{}")]
    assert [(r.span_id, r.parent_span_id, r.start_ns) for r in out[1:]] == [
        (f"{span.span_id}#00", span.span_id, span.end_ns),
        (f"{span.span_id}#01", span.span_id, span.end_ns),
    ]
    assert out[1].attributes == span.attributes


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("latest", [False, True], ids=["choice", "details"])
def test_a_strands_chat_span_without_tool_use_is_a_parent_link(impl: str, latest: bool) -> None:
    _impl(impl)
    spans = record(lambda t: strands_chat(t, latest=latest))
    out, problems = convert(spans, impl)
    assert out == spans and problems == []


@pytest.mark.parametrize("impl", IMPLS)
def test_a_strands_tool_use_that_cannot_be_read_is_counted(impl: str) -> None:
    _impl(impl)

    def build(t: Tracer) -> None:
        with t.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}) as span:
            blocks = [{"toolUse": "x"}, {"toolUse": {"toolUseId": "a"}}, {"toolUse": {"name": "f", "input": {}}}]
            span.add_event("gen_ai.choice", {"message": json.dumps(blocks)})

    out, problems = convert(record(build), impl)
    assert requested(out) == [("f", "", "{}")]
    assert problems == ["gen_ai.output.messages"] * 2


@pytest.mark.parametrize("impl", IMPLS)
def test_a_strands_tool_use_nested_about_as_deep_as_json_goes_is_counted_never_raised(impl: str) -> None:
    _impl(impl)
    limit = sys.getrecursionlimit()
    # json.loads takes the blocks at some depth near the limit (where depends on the stack) that json.dumps of the
    # same input as output messages (a level deeper) cannot take: every depth around there.
    depths = range(limit - 400, limit + 3)

    def build(t: Tracer) -> None:
        for d in depths:
            with t.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}) as span:
                use = '{"toolUse": {"toolUseId": "a", "name": "f", "input": ' + "[" * d + "]" * d + "}}"
                span.add_event("gen_ai.choice", {"message": f"[{use}]"})

    spans = record(build)
    for span in spans:
        out, problems = convert([span], impl)  # one by one: a span that raised would lose the others of its batch
        assert out[0] is span
        assert problems == ["gen_ai.output.messages"]  # a list input (not an object), or a value too deep to read


@pytest.mark.parametrize("impl", IMPLS)
def test_a_strands_turn_keeps_the_call_that_ran_once_and_the_unknown_one_requested(impl: str) -> None:
    _impl(impl)

    def build(t: Tracer) -> None:
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
        with t.start_as_current_span("invoke_agent a", attributes=attrs) as turn:
            turn.add_event("gen_ai.user.message", {"content": json.dumps([{"text": "[AUTH] login failure"}])})
            strands_chat(t, ("pull_auth_telemetry", "tu1", {"q": 1}), ("pull_auth_telemtry", "tu2", {}), latest=False)
            tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pull_auth_telemetry",
                    "gen_ai.tool.call.id": "tu1"}  # fmt: skip
            with t.start_as_current_span("execute_tool pull_auth_telemetry", attributes=tool) as s:
                s.add_event("gen_ai.tool.message", {"role": "tool", "content": '{"q": 1}', "id": "tu1"})

    turns, _ = assemble(record(build), impl)
    turn = _one(turns)
    assert turn.input_text == "[AUTH] login failure"
    assert calls_of(turn) == [
        ("pull_auth_telemtry", "tu2", "{}", True),
        ("pull_auth_telemetry", "tu1", '{"q": 1}', False),
    ]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("flush", [False, True], ids=["poll", "flush"])
def test_a_handoff_in_a_turnless_group_drops_its_transfer_call_and_itself(impl: str, flush: bool) -> None:
    _impl(impl)

    def build(t: Tracer) -> None:  # under a span never received: no turn, the calls judged alone
        with t.start_as_current_span("lost"):
            oi_llm(t, ("transfer_to_billing", "h1", None), ("lookpu", "c1", None))
            oi_handoff(t, "Billing")

    spans = [s for s in record(build) if s.name != "lost"]
    turns, _ = assemble(spans, impl, flush=flush)
    assert [(t.turnless, calls_of(t)) for t in turns] == [(True, [("lookpu", "c1", None, True)])]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("asked", [False, True], ids=["mark-only", "with-transfer-call"])
def test_a_turnless_group_the_handoff_rule_empties_leaves_its_late_turn_to_be_judged(impl: str, asked: bool) -> None:
    """A handoff span (a parent link before handoffs were marked) and the transfer call it stands for, waiting longer
    than the turnless timeout for their turn: nothing is judged alone, so the turn arriving later is no late turn (its
    calls were not judged without it): it is judged, not dropped."""
    _impl(impl)

    def build(t: Tracer) -> None:
        with oi_agent(t, "[BILL] refund blocked", name="Triage"):
            if asked:
                oi_llm(t, ("transfer_to_billing_agent", "call_h", None))
            oi_handoff(t, "Billing agent")

    spans = record(build)
    records, _ = convert(spans, impl)
    turn = [r for r in records if isinstance(r, Turn)]
    rest = [r for r in records if not isinstance(r, Turn)]
    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    python = impl == "python"
    add, poll = (a._add_records_py, a._poll_py) if python else (a.add_records, a.poll)
    assert add(rest, 0) == [] and poll(10 * S) == []  # the group's calls past the timeout: nothing left to judge
    turns = add(turn, 11 * S) + poll(20 * S)
    assert [(t.turnless, t.input_text, calls_of(t)) for t in turns] == [(False, "[BILL] refund blocked", [])]
    assert a.stats.late_turns == 0
