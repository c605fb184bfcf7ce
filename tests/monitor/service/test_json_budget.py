"""JSON text in span attributes is parsed within a memory budget (monitor._json).

A text of tiny containers parses to ~24x its size; such a text past the budget is refused as invalid JSON is (counted
where invalid JSON is counted), in C and in Python alike, and a long ordinary text is still read.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor._json import BUDGET, PER_TOKEN, PLAIN_CHARS, estimate, loads_bounded
from monitor.judge import Judge
from monitor.normalize import Normalizer
from monitor.normalize._genai import OUTPUT_MESSAGES
from monitor.normalize._requested import MAX_REQUESTED_PER_SPAN
from monitor.otlp import Span, request_to_json
from monitor.records import Turn
from monitor.verdict import ViolationKind
from tests.monitor.judge.helpers import call, judge_for
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.http_util import post
from tests.monitor.service.spans import record_turns, to_request
from tests.monitor.service.test_bad_input import GOOD, assert_still_serving
from tests.monitor.service.test_bad_input import _span as _json_span
from tests.monitor.service.test_normalize_c import C, assert_same, needs_c

TRACE = "0af7651916cd43dd8448eb211c80319c"
N = 4_000_000  # empty objects: a 12 MB text that parses to ~290 MB
JSON_MIME = "application/json"
MAX_GROWTH = 4  # what reading one such attribute may allocate, in multiples of the text's length


def dense(head: str = "") -> str:
    """`[head{},{},...]`: 12 MB of JSON that json.loads builds ~290 MB from."""
    return "[" + head + ",".join(["{}"] * N) + "]"


def peak(fn: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def dense_text() -> Iterator[str]:
    yield dense()


def test_the_estimate_refuses_dense_text_and_passes_long_strings(dense_text: str) -> None:
    assert estimate(dense_text) > BUDGET
    with pytest.raises(ValueError, match="MiB budget"):
        loads_bounded(dense_text)
    long = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "x" * 4000}]}] * 4000)
    assert len(long) > PLAIN_CHARS and estimate(long) <= BUDGET
    assert loads_bounded(long)[0]["role"] == "user"
    assert loads_bounded("[{}, {}]") == [{}, {}]  # short texts: json.loads as it is


def test_the_estimate_counts_four_bytes_a_character_unless_ascii_without_escapes() -> None:
    """A character may build 4 bytes in a parsed str: so counted unless the text is ASCII with no `\\u` escape."""
    assert estimate("a" * 100) == 100
    assert estimate("é" * 100) == estimate("a" * 99 + "😀") == 400
    assert estimate('"\\u00e9' + "a" * 93) == 400
    assert estimate("[" + "," * 9) == 10 + PER_TOKEN * 10


def _span(name: str, attrs: dict[str, Any], span_id: str = "b7ad6b7169203331", scope: str = "") -> Span:
    return Span(TRACE, span_id, "", name, 1, 1, 2, attributes=attrs, scope=scope)


def _normalize_peak(span: Span) -> tuple[Normalizer, Any, int]:
    n = Normalizer()
    result, used = peak(lambda: n.split([span])[0])  # as serve reads a batch (in C when it is built)
    return n, result, used


def test_dense_output_messages_are_refused_and_counted_in_bounded_memory() -> None:
    text = dense('{"role":"assistant","parts":[{"type":"tool_call","name":"x","arguments":{}}]},')
    span = _span("chat m", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": text})
    n, _, used = _normalize_peak(span)
    assert used < MAX_GROWTH * len(text), f"{used >> 20} MiB for a {len(text) >> 20} MiB text"
    assert n.counts()[1].get(OUTPUT_MESSAGES) == 1  # counted as an ignored gen_ai.output.messages


@needs_c
def test_c_hands_a_long_output_text_to_python_with_the_same_records() -> None:
    assert C is not None
    asked = '{"role":"assistant","parts":[{"type":"tool_call","name":"x","arguments":{"k":1}}]},'
    dense_span = _span("chat m", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": dense(asked)})
    out, problems, _, _ = assert_same([dense_span])
    assert problems == [OUTPUT_MESSAGES]
    # long but ordinary: read (a call asked for), the same records on both paths
    one = json.dumps({"role": "user", "parts": [{"type": "text", "content": "y" * 2000}]})
    filler = ",".join([one] * 600)
    ordinary = _span("chat m", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": f"[{filler},{asked[:-1]}]"})
    out, problems, _, _ = assert_same([ordinary])
    assert problems == [] and [getattr(r, "name", None) for r in out[1:]] == ["x"]


@pytest.mark.parametrize(
    ("name", "attrs", "scope"),
    [
        ("invoke_agent a", {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": "TEXT"}, ""),
        ("agent", {"openinference.span.kind": "AGENT", "input.value": "TEXT", "input.mime_type": JSON_MIME}, ""),
        ("ai.generateText", {"ai.operationId": "ai.generateText", "ai.prompt": "TEXT"}, "ai"),
    ],
    ids=["genai-input", "openinference-input", "vercel-prompt"],
)
def test_dense_input_is_read_in_bounded_memory(dense_text: str, name: str, attrs: dict[str, Any], scope: str) -> None:
    span = _span(name, {k: dense_text if v == "TEXT" else v for k, v in attrs.items()}, scope=scope)
    _, _, used = _normalize_peak(span)
    assert used < MAX_GROWTH * len(dense_text), f"{used >> 20} MiB for a {len(dense_text) >> 20} MiB text"


def test_a_dense_langchain_llm_output_is_read_for_call_ids_in_bounded_memory() -> None:
    """A LangChain.js LLM span's output (`output.value`), read for the ids its output messages leave out, is parsed
    within the budget too: a dense one is refused, the call read without an id, nothing counted."""
    text = dense('{"generations":[],"tool_calls":[]},')
    attrs = {"openinference.span.kind": "LLM", "output.value": text,
             "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "x"}  # fmt: skip
    span = _span("ChatOpenAI", attrs, scope="@arizeai/openinference-instrumentation-langchain")
    n, records, used = _normalize_peak(span)
    assert used < MAX_GROWTH * len(text), f"{used >> 20} MiB for a {len(text) >> 20} MiB text"
    assert [(r.name, r.call_id) for r in records[1:]] == [("x", "")] and n.counts()[1] == {}


def test_a_dense_langchain_llm_output_is_read_for_parsed_calls_in_bounded_memory() -> None:
    """One whose output messages hold no call, read for the calls its message's parsed `tool_calls` hold: a dense
    output is refused, no call read, nothing counted."""
    text = dense('{"generations":[],"tool_calls":[{"name":"x","args":{}}]},')
    attrs = {"openinference.span.kind": "LLM", "output.value": text, "llm.output_messages.0.message.role": "assistant"}
    span = _span("ChatAnthropic", attrs, scope="@arizeai/openinference-instrumentation-langchain")
    n, records, used = _normalize_peak(span)
    assert used < MAX_GROWTH * len(text), f"{used >> 20} MiB for a {len(text) >> 20} MiB text"
    assert records[1:] == [] and n.counts()[1] == {}

def test_many_parsed_calls_past_the_bound_are_counted_not_built() -> None:
    """An output within the budget whose message's parsed `tool_calls` number many times MAX_REQUESTED_PER_SPAN:
    the first are read, the rest counted without being made into calls first (reading it allocates little more than
    parsing it: building each call's slot and arguments' text doubled it)."""
    n_calls = 100_000
    call = {"name": "x", "args": {"a": 1}, "id": "i", "type": "tool_call"}
    message = {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "AIMessage"],
               "kwargs": {"content": "", "additional_kwargs": {}, "tool_calls": [call] * n_calls,
                          "invalid_tool_calls": []}}  # fmt: skip
    text = json.dumps({"generations": [[{"text": "", "message": message}]]}, separators=(",", ":"))
    attrs = {"openinference.span.kind": "LLM", "output.value": text, "llm.output_messages.0.message.role": "assistant"}
    span = _span("ChatAnthropic", attrs, scope="@arizeai/openinference-instrumentation-langchain")
    _, parsing = peak(lambda: loads_bounded(text))
    n, records, used = _normalize_peak(span)
    assert used < 1.3 * parsing, f"{used >> 20} MiB to read it, {parsing >> 20} MiB to parse it"
    assert len(records[1:]) == MAX_REQUESTED_PER_SPAN
    assert n.counts()[1] == {"llm.output_messages": n_calls - MAX_REQUESTED_PER_SPAN}


def test_a_16_mb_conversation_is_still_read() -> None:
    messages = [{"role": "user", "parts": [{"type": "text", "content": f"m{i} " + "z" * 8000}]} for i in range(2000)]
    messages.append({"role": "user", "parts": [{"type": "text", "content": "THE LAST QUESTION"}]})
    text = json.dumps(messages)
    assert len(text) > 16_000_000
    span = _span("invoke_agent a", {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": text})
    _, result, _ = _normalize_peak(span)
    turns = [r for r in result if isinstance(r, Turn)]
    assert turns and "THE LAST QUESTION" in turns[0].input_text and "m1999 " in turns[0].input_text


@pytest.mark.parametrize("prefix", ["[ARG1]", "[AB]"], ids=["one-call-plan", "general-path"])
def test_dense_call_arguments_are_malformed_in_bounded_memory(tmp_path: Path, dense_text: str, prefix: str) -> None:
    judge: Judge = judge_for(tmp_path)
    args = '{"x": 1, "s": ' + dense_text + "}"
    calls = (call("a", args),) if prefix == "[ARG1]" else (call("a", args), call("b", "{}"))
    t = Turn(prefix + " go", calls)
    v, used = peak(lambda: judge.judge(t))
    assert used < MAX_GROWTH * len(args), f"{used >> 20} MiB for {len(args) >> 20} MiB of arguments"
    c = v.calls[0]
    assert c.schema_valid is False and [x.kind for x in c.violations] == [ViolationKind.MALFORMED]
    assert "MiB budget" in c.violations[0].message


def test_serve_counts_a_dense_attribute_it_did_not_read_and_stays_up(serve: ServeFactory) -> None:
    _, server = serve()
    asked = '{"role":"assistant","parts":[{"type":"tool_call","name":"x","arguments":{}}]},'
    good = json.loads(request_to_json(to_request(record_turns(GOOD))))
    attrs: dict[str, object] = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": dense(asked)}
    chat = _json_span(TRACE, "00f067aa0ba90301", "chat m", attrs)
    good["resourceSpans"].append({"scopeSpans": [{"spans": [chat]}]})
    body = json.dumps(good).encode()
    assert len(body) < 16 << 20  # within the default --max-body-bytes
    status, resp, _ = post(server.endpoint, body, "application/json")
    assert status == 200, resp[:300]
    wait_for(lambda: server.pipeline.turns_judged >= 1)
    s = scrape(server)
    assert value(s, "toolwatch_span_attributes_ignored_total", attribute=OUTPUT_MESSAGES) == 1
    assert (
        value(s, "toolwatch_tool_calls_total", agent="incident-triage", tool="pull_auth_telemetry", outcome="correct")
        == 1
    )
    assert_still_serving(server)


@needs_c
@pytest.mark.parametrize("delta", [-1, 0, 1], ids=["under", "at", "past"])
@pytest.mark.parametrize("fill", ["é", "😀", "a"], ids=["latin1", "astral", "ascii"])
def test_c_and_python_agree_at_the_plain_length(delta: int, fill: str) -> None:
    """Output messages of PLAIN_CHARS characters (counted in characters, not bytes) C reads itself, one more it hands
    to Python: the same records and problems either side, the call read on both."""
    asked = '{"role":"assistant","parts":[{"type":"tool_call","name":"x","id":"c1","arguments":{"k":"v"}}]}'
    head = '[{"role":"user","parts":[{"type":"text","content":"'
    tail = '"}]},' + asked + "]"
    n = PLAIN_CHARS + delta
    text = head + fill * (n - len(head) - len(tail)) + tail
    assert len(text) == n
    span = _span("chat m", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": text})
    out, problems, _, _ = assert_same([span])
    assert problems == [] and [getattr(r, "name", None) for r in out[1:]] == ["x"]
