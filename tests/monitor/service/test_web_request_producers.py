"""A framework's run inside a web framework's request: its outermost span is its turn (issue 4).

LangChain and LangGraph through OpenInference record no AGENT span (their run's turn is the root CHAIN span), nor
do OpenLIT's runs (a root `invoke_workflow` span); in production such a run executes inside a web request whose
server span is its parent. The spans are captures of real runs, offline, as OTLP JSON, one export request a line
(each request's spans flushed as one export request; the attributes the normalizer does not read for these spans
dropped to keep the files small: the inputs and outputs of nested chain and node spans and of OpenInference's LLM
spans, token counts, invocation parameters, the fake server's address): a FastAPI 0.165 app instrumented by
OpenTelemetry's opentelemetry-instrumentation-fastapi 0.66b2 (its ASGI middleware: a SERVER span `POST /chat` with
`http.*` attributes and its `http receive` / `http send` spans), requests made in process through httpx's
ASGITransport, the handler running a langgraph 1.2.24 `create_react_agent(ChatOpenAI(...), [get_weather,
get_forecast])` (langchain-core 1.8.3, langchain-openai 1.7.4) against a fake OpenAI chat-completions server on the
loopback that asks for `get_weather({"city": "Paris"})` (call id `call_1`), then answers "It is sunny in Paris."
(opentelemetry-sdk 1.45.2, one tracer provider; OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true):
- langgraph_request_openinference: openinference-instrumentation-langchain 0.1.80. The exporter encodes spans by
  tracer scope, so each request's line holds the FastAPI spans (the server span too) before the run's. Four
  requests, a trace each: `POST /chat`; `POST /chat` with a W3C `traceparent` header (the server span's parent a
  remote span never exported); `POST /chat-turn`, whose handler wraps the run in toolwatch's `agent_turn(question,
  agent="weather_agent")`; `POST /chat-split`, whose handler flushes the provider after the run, so that the run's
  spans and the request's own span are two export requests.
- openlit_langgraph_request: openlit 1.45.0 (`openlit.init(disable_metrics=True, disable_events=True,
  pricing_json=<a local empty file>, disabled_instrumentors=[httpx, requests, urllib, urllib3, asgi, fastapi,
  starlette, openai])`), the graph named `weather_agent`: `POST /chat` and `POST /chat-split`.

Replayed through the real normalizer and turn assembler (C and Python), by the replay engine and by `serve`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from monitor.assembly import TurnAssembler
from monitor.judge import Judge
from monitor.otlp import Span, parse_json
from monitor.records import Turn
from monitor.replay import Replayer
from monitor.replay._engine import request_clock
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict
from tests.monitor.service.captures import DATA, call_rows, capture, captured_turns
from tests.monitor.service.conftest import ServeFactory, wait_for
from tests.monitor.service.http_util import post
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble

OI = "langgraph_request_openinference"
OPENLIT = "openlit_langgraph_request"
QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris."
S = 10**9
# The call the `tools` node ran: LangChain's TOOL span through OpenInference records the bare string `Paris` as its
# input (no arguments read) and the ToolMessage it returned as its output: the call the model asked for is that call
# (paired by the message's id).
OI_RAN = ("get_weather", "call_1", None, False, None)
OPENLIT_RAN = ("get_weather", "call_1", {"city": "Paris"}, False, None)


def _lines(name: str) -> list[list[Span]]:
    """The spans of a capture, one list per export request."""
    return [parse_json(ln.encode()).spans for ln in (DATA / f"{name}.jsonl").read_text().splitlines() if ln]


def _named(spans: Sequence[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]


def _rows(turns: Sequence[Turn], spans: Sequence[Span]) -> list[tuple[object, ...]]:
    """Each turn by start time: (the name of its span, turnless, agent, input, answer, calls). The answer of a
    LangGraph run through OpenInference is its root's `output.value`'s last AI message (LangChain's `messages_to_dict`
    form, `{"type": "ai", "data": {...}}`)."""
    names = {s.span_id: s.name for s in spans}
    return [
        (names.get(t.span_id, ""), t.turnless, t.agent, t.input_text, t.output_text, call_rows(t))
        for t in sorted(turns, key=lambda t: t.start_ns)
    ]


OI_RUN = ("LangGraph", False, "LangGraph", QUESTION, ANSWER, [OI_RAN])
OPENLIT_RUN = ("invoke_workflow weather_agent", False, "weather_agent", QUESTION, ANSWER, [OPENLIT_RAN])


@pytest.mark.parametrize("impl", IMPLS)
def test_a_langgraph_run_through_openinference_in_a_request_is_its_root_chain(impl: str) -> None:
    """Under the request's server span (with or without a remote parent, in one export request or two) the graph's
    root CHAIN span is the turn, with its input, answer and the call its tools node ran; under `agent_turn` in the
    request the run is a step of that turn: one turn, the application's."""
    spans = capture(OI)
    assert _rows(captured_turns(OI, impl), spans) == [
        OI_RUN,
        OI_RUN,
        ("invoke_agent weather_agent", False, "weather_agent", QUESTION, ANSWER, [OI_RAN]),
        OI_RUN,
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openlit_langgraph_run_in_a_request_is_its_root_span(impl: str) -> None:
    """Under the request's server span the run's root `invoke_workflow` span is the turn, as at the root of its
    trace: named after the graph, given its first model request's user message; the nested `invoke_agent` spans of
    both OpenLIT instrumentations are its steps."""
    spans = capture(OPENLIT)
    assert _rows(captured_turns(OPENLIT, impl), spans) == [OPENLIT_RUN, OPENLIT_RUN]


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openlit_run_in_an_agent_turn_in_a_request_is_that_turn(impl: str) -> None:
    """The application's `agent_turn` span (openlit_openai_tool's, moved into the trace) between the request's span
    and the run's root: the run is a step of it, one turn."""
    spans = _lines(OPENLIT)[0]
    [root] = _named(spans, "invoke_workflow weather_agent")
    [request] = _named(spans, "POST /chat")
    [wrapper] = _named(capture("openlit_openai_tool"), "invoke_agent weather_agent")
    wrapper = replace(wrapper, trace_id=root.trace_id, parent_span_id=request.span_id, start_ns=root.start_ns - 1,
                      end_ns=root.end_ns + 1)  # fmt: skip
    spans[spans.index(root)] = replace(root, parent_span_id=wrapper.span_id)
    for order in ([*spans, wrapper], [wrapper, *spans]):
        _impl(impl)
        turns, _ = assemble(order, impl, flush=True)
        assert [(t.span_id, t.agent, t.input_text, call_rows(t)) for t in turns] == [
            (wrapper.span_id, "weather_agent", QUESTION, [OPENLIT_RAN])
        ]


def _replayed(batches: Sequence[Sequence[Span]], impl: str) -> list[Turn]:
    """The turns these export requests make, in this order, as the replay engine assembles them (Replayer.feed: its
    clock the requests' span times, a poll before each request's records are added), flushed at the end."""
    _impl(impl)
    a = TurnAssembler(grace_s=0.2, turnless_timeout_s=0.5)
    add = a.add_records if impl == "c" else a._add_records_py
    poll = a.poll if impl == "c" else a._poll_py
    turns: list[Turn] = []
    clock = 0
    for spans in batches:
        clock = max(clock, request_clock(spans))
        turns += poll(clock)
        records, _ = a.normalizer.split(spans)
        turns += add(records, clock)
    return turns + a.flush()


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", [OI, OPENLIT])
def test_the_run_and_the_request_span_in_two_export_requests_either_order_are_the_same_turn(
    impl: str, name: str
) -> None:
    """`POST /chat-split`: the run's spans, then the request's own span in a later export request, as exported;
    and the other way round (an exporter's retry, a Collector): the same turn."""
    run, request = _lines(name)[-2:]
    spans = [*run, *request]
    expected = [OI_RUN if name == OI else OPENLIT_RUN]
    assert _rows(_replayed([run, request], impl), spans) == expected
    assert _rows(_replayed([request, run], impl), spans) == expected


@pytest.mark.parametrize("impl", IMPLS)
def test_a_run_whose_parent_is_never_sent_is_its_turn_by_the_turnless_timeout(impl: str) -> None:
    """The request's spans not exported (the run's root under a span toolwatch never gets): the run's root waits for
    its parent, and is the turn once the turnless timeout has passed, not before; with the request's server span
    (whose own parent, a remote one, never comes) it is the turn after the grace period."""
    spans = _lines(OI)[1]
    run = [s for s in spans if s.scope != "opentelemetry.instrumentation.fastapi"]
    _impl(impl)
    for given, due in ((run, 5), (spans, 1)):
        a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
        add = a.add_records if impl == "c" else a._add_records_py
        poll = a.poll if impl == "c" else a._poll_py
        records, _ = a.normalizer.split(given)
        assert add(records, 0) == []
        early = poll(due * S - 1)
        late = poll(due * S)
        assert (early, _rows(late, spans)) == ([], [OI_RUN])
        assert a.pending_traces == 0


RULES = """
version: 1
catalog:
  tools:
    - name: get_weather
      schema: {type: object}
    - name: get_forecast
expect:
  - id: weather
    when: {contains: "weather in"}
    call:
      - tool: get_weather
"""


@pytest.mark.parametrize("name", [OI, OPENLIT])
def test_serve_and_replay_judge_the_same_turns_either_order(serve: ServeFactory, tmp_path: Path, name: str) -> None:
    """Posted to `serve` over HTTP (its clock the arrival) and replayed (the spans' times), the request's span before
    or after the run's: the same turns, each the run's, judged with the call it made."""
    rules = tmp_path / "weather.yaml"
    rules.write_text(RULES, encoding="utf-8")
    lines = [ln for ln in (DATA / f"{name}.jsonl").read_text().splitlines() if ln]
    lines = [*lines[:-2], lines[-1], lines[-2]]  # the last request's span first
    log = tmp_path / "verdicts.jsonl"
    _, server = serve(rules=(str(rules),), verdict_log=str(log), verdict_log_all=True, grace_s=0.2,
                      turnless_timeout_s=0.5)  # fmt: skip
    for line in lines:
        status, _, _ = post(server.endpoint, line.encode(), "application/json")
        assert status == 200
    expected = len(lines) - 1
    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= expected)
    served = sorted(
        (r["trace_id"], r["span_id"], r["agent"], r["turnless"], r["input"], [c["name"] for c in r["calls"]])
        for r in map(json.loads, log.read_text().splitlines())
    )
    verdicts: list[TurnVerdict] = []
    engine = Replayer(Judge(load_rules([rules])), verdicts.append, grace_s=0.2, turnless_timeout_s=0.5)
    for line in lines:
        engine.feed(parse_json(line.encode()))
    engine.finish()
    replayed = sorted(
        (v.trace_id, v.span_id, v.agent, v.turnless, v.input_text, [c.name for c in v.calls]) for v in verdicts
    )
    assert served == replayed
    assert len(replayed) == expected and not any(r[3] for r in replayed)
    assert all(r[4] == QUESTION and r[5] == ["get_weather"] for r in replayed)
