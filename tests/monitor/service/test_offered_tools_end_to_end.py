"""Tools offered only on model request spans, end to end: real SDK spans (GenAI chat spans, an OpenInference LLM span,
an OpenLLMetry chat span) over the real OTLP/HTTP exporter into `toolwatch serve` with a `from_definitions: true`
rule file, exact metric values; then `toolwatch replay` of the same spans gives the same figures.

A call of a tool offered on a chat span only (not on the turn span) is a catalog call: correct here, never a
hallucinated one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import Tracer

from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.spans import new_tracer, replay_counts
from tests.monitor.service.test_offered_tools import OPENAI_WEATHER, PARAMS, TIME, WEATHER, chat, oi_llm, tl_chat
from tests.monitor.service.test_requested_calls import Req, ran

A = "weather-bot"
RULES = f"""version: 1
agent: {A}
catalog: {{from_definitions: true}}
expect:
  - id: weather
    when: {{prefix: '[W]'}}
    call: [{{tool: get_weather, exactly: 1}}]
"""


@contextmanager
def _turn(tracer: Tracer, text: str) -> Iterator[None]:
    """A GenAI turn span offering no tools (the instrumentation puts them on its chat spans only)."""
    msgs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": A, "gen_ai.input.messages": msgs}
    with tracer.start_as_current_span(f"invoke_agent {A}", attributes=attrs):
        yield


def _spans() -> list[ReadableSpan]:
    provider, tracer, memory = new_tracer()
    oslo = {"city": "Oslo"}
    # The chat spans offer the tools (as JSON text): the call that ran is a correct call, schema-valid.
    with _turn(tracer, "[W] oslo"):
        chat(tracer, [WEATHER, TIME], Req("get_weather", "call_1"))
        ran(tracer, "get_weather", "call_1", oslo)
        chat(tracer, [WEATHER, TIME])  # the final answer
    # Offered as the structured value; an offered tool called past the expectation is an extra call (spurious), not
    # an unknown one.
    with _turn(tracer, "[W] paris"):
        chat(tracer, (WEATHER, TIME))
        ran(tracer, "get_weather", "call_2", {"city": "Paris"})
        ran(tracer, "get_time", "call_3", {})
    # A tool offered nowhere: hallucinated, and the weather call missed.
    with _turn(tracer, "[W] rome"):
        chat(tracer, [WEATHER])
        ran(tracer, "get_wether", "call_4", {"city": "Rome"})
    # OpenInference (openai-agents' shapes): the LLM span offers the tool in OpenAI's format.
    agent = {"openinference.span.kind": "AGENT", "agent.name": A, "input.value": "[W] bergen",
             "output.value": "Result: rain"}  # fmt: skip
    with tracer.start_as_current_span(A, attributes=agent):
        oi_llm(tracer, [OPENAI_WEATHER])
        tool = {"openinference.span.kind": "TOOL", "tool.name": "get_weather", "input.value": json.dumps({"city": "B"}),
                "input.mime_type": "application/json", "output.value": "rain"}  # fmt: skip
        with tracer.start_as_current_span("get_weather", attributes=tool):
            pass
    # OpenLLMetry (Traceloop): the chat span offers the tool as llm.request.functions; its arguments break the
    # offered schema (schema-invalid, still the correct tool).
    workflow = {"traceloop.span.kind": "workflow", "traceloop.entity.name": A,
                "traceloop.entity.input": json.dumps({"args": ["[W] lima"], "kwargs": {}})}  # fmt: skip
    with tracer.start_as_current_span(f"{A}.workflow", attributes=workflow):
        tl_chat(tracer, [{"name": "get_weather", "description": "Weather", "parameters": json.dumps(PARAMS)}])
        args: dict[str, Any] = {"args": [], "kwargs": {"town": "Lima"}}
        tool = {"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather",
                "traceloop.entity.input": json.dumps(args)}  # fmt: skip
        with tracer.start_as_current_span("get_weather.tool", attributes=tool):
            pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def _k(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted({"agent": A, **labels}.items()))


CALLS = "toolwatch_tool_calls_total"
# Tools the rule file does not declare have no label of their own (`__other__`): the outcomes tell them apart.
EXPECTED = {
    _k(CALLS, tool="__other__", outcome="correct"): 4,  # get_weather, offered on chat spans only
    _k(CALLS, tool="__other__", outcome="spurious"): 1,  # get_time: offered
    _k(CALLS, tool="__other__", outcome="hallucinated"): 1,  # get_wether: offered nowhere
    _k("toolwatch_judged_calls_total", tool="__other__"): 6,
    _k("toolwatch_missed_calls_total", tool="__other__"): 1,
    _k("toolwatch_turns_total", judged="true"): 5,
    _k("toolwatch_turn_checks_total", check="selection", result="pass"): 3,
    _k("toolwatch_turn_checks_total", check="selection", result="fail"): 2,
}


def test_tools_offered_on_chat_spans_join_the_catalog_in_serve_and_replay(serve: ServeFactory, tmp_path: Path) -> None:
    rules = tmp_path / "weather.yaml"
    rules.write_text(RULES, encoding="utf-8")
    spans: Sequence[ReadableSpan] = _spans()
    log = tmp_path / "verdicts.jsonl"
    _, server = serve(rules=(str(rules),), verdict_log=str(log), verdict_log_all=True)
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()  # type: ignore[no-untyped-call]
    wait_for(lambda: server.pipeline.turns_judged == 5)
    samples = scrape(server)
    assert {key: value(samples, key[0], **dict(key[1])) or 0 for key in EXPECTED} == EXPECTED
    assert server.pipeline.normalizer.ignored_attributes == {}
    assert server.pipeline.assembler.stats.late_calls == server.pipeline.assembler.stats.turnless_completed == 0

    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == 5)
    verdicts = {v["input"]: v for v in map(json.loads, log.read_text().splitlines())}
    outcomes = {t: [(c["name"], c["outcome"], c.get("schema_valid")) for c in v["calls"]] for t, v in verdicts.items()}
    assert outcomes == {
        "[W] oslo": [("get_weather", "correct", True)],
        "[W] paris": [("get_weather", "correct", True), ("get_time", "spurious", True)],
        "[W] rome": [("get_wether", "hallucinated", None)],
        "[W] bergen": [("get_weather", "correct", True)],
        "[W] lima": [("get_weather", "correct", False)],
    }

    assert replay_counts(tmp_path, spans, rules) == {
        "turns": 5,
        "judged_turns": 5,
        "judged_calls": 6,
        "correct": 4,
        "spurious": 1,
        "hallucinated": 1,
        "missed": 1,
        "expected_calls": 5,
    }
