"""Google's `google-genai` SDK with automatic function calling (a Python function passed as a tool, run by the SDK
itself), traced by OpenTelemetry's `opentelemetry-instrumentation-google-genai` and by OpenInference: the turns a user
means.

The spans are captures of real runs, offline, as OTLP JSON, one export request a line (exception stack traces
dropped: no machine path): google-genai 3.3.0 against a fake Gemini API on the loopback (the client's
`http_options` base URL) whose `generateContent` answers the question with a `functionCall` part (id `call_1`,
`get_weather({"city": "Paris"})`), then, given the `functionResponse`, with text; one
`client.models.generate_content(model=..., contents=question, config=GenerateContentConfig(tools=[get_weather,
get_forecast]))` call (opentelemetry-sdk 1.45.2, `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`):
- google_genai_otel_*: opentelemetry-instrumentation-google-genai 1.3b0 (opentelemetry-util-genai 1.3b0). It declares
  `google-genai>=1.32.0,<3`: with google-genai 3.3 `instrument()` instruments nothing (it logs so) unless given
  `skip_dep_check=True`, as these were. One `generate_content {model}` span for the whole call, the SDK's loop of
  model requests inside it: its input messages are the question, its output messages the final answer, so the
  `functionCall` the model asked for is recorded nowhere (no requested call); its `gen_ai.tool.definitions` name the
  tools with `parameters: null`. It wraps each function tool: the call the SDK runs is an `execute_tool {tool}` span
  under it, with its arguments and result (or error) and no call id.
- google_genai_openinference_*: openinference-instrumentation-google-genai 1.4.14. One `GenerateContent` LLM span for
  the whole call (its output messages the final answer), the tools in `llm.tools.N.tool.json_schema`; the calls of
  the SDK's loop, read from the response's `automatic_function_calling_history`, as top-level
  `message.tool_calls.{j}.tool_call.function.name` / `.arguments` (no `llm.output_messages.{i}.` prefix, no id). It
  traces no tool run. (Through `Chat.send_message`, tried but not kept, it made one LLM span per model request
  instead, the call in its output messages, as read for any LLM span.)
`*_tool` and `*_raises` run inside `agent_turn(question, agent="weather_agent", tools=[get_weather, get_forecast])`,
the tools `@tool` functions (the SDK runs them itself: no `use_tool_call_id`, so each records a fresh `tw_` id), the
turn's answer `set_output(response.text)`; in `*_raises` the model asks for `get_forecast`, which raises (the SDK
gives the model the error). `*_alone`: the same call without toolwatch (no turn, plain functions).

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json

import pytest

from monitor.assembly._reconcile import reconcile
from monitor.otlp import Span
from monitor.records import RequestedCall, ToolCall
from tests.monitor.service.captures import call_rows, capture, captured_turns, cpu_timed, offered_names
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert

QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris."
PARIS = {"city": "Paris"}
OFFERED = ["get_weather", "get_forecast"]
# the fresh id each `@tool` run recorded (the SDK runs the tool: no `use_tool_call_id`)
TOOL_IDS = {
    ("otel", "tool"): "tw_58181595bfec64c9",
    ("otel", "raises"): "tw_df2f0b3e80d048eb",
    ("openinference", "tool"): "tw_be11f608d4f5404a",
    ("openinference", "raises"): "tw_112b3bef6f34cf42",
}
RUNS = [("tool", "get_weather", None), ("raises", "get_forecast", "RuntimeError")]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("producer", ["otel", "openinference"])
@pytest.mark.parametrize(("run", "tool", "error"), RUNS)
def test_a_google_genai_automatic_function_call_in_a_turn_is_one_call(
    impl: str, producer: str, run: str, tool: str, error: str | None
) -> None:
    """One turn with its input, answer and tools offered, and the call the SDK ran once, with its arguments (a
    raising one with its error): OpenTelemetry's `execute_tool` span around the `@tool`'s own is that call, not a
    second one; OpenInference's call from the SDK's history (no id) is the `@tool` run of that name."""
    [turn] = captured_turns(f"google_genai_{producer}_{run}", impl)
    assert (turn.agent, turn.input_text, turn.output_text, turn.turnless) == ("weather_agent", QUESTION, ANSWER, False)
    assert call_rows(turn) == [(tool, TOOL_IDS[producer, run], PARIS, False, error)]
    assert offered_names(turn) == OFFERED


@pytest.mark.parametrize("impl", IMPLS)
def test_opentelemetry_google_genai_alone_is_the_call_that_ran_judged_alone(impl: str) -> None:
    """Without a turn: the `execute_tool` span the instrumentation wraps the function in is one turnless call, with
    its arguments and no id, and the tools the model request offered (by name: no parameters recorded)."""
    [group] = captured_turns("google_genai_otel_alone", impl)
    assert group.turnless
    assert call_rows(group) == [("get_weather", "", PARIS, False, None)]
    assert offered_names(group) == OFFERED


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("run", ["tool", "raises"])
def test_opentelemetry_google_genai_records_no_requested_call(impl: str, run: str) -> None:
    """The `generate_content` span's output messages are the final answer: no call the model asked for is read."""
    _impl(impl)
    records, problems = convert(capture(f"google_genai_otel_{run}"), impl)
    assert problems == []
    assert [r for r in records if isinstance(r, RequestedCall)] == []


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("run", "tool"), [("tool", "get_weather"), ("raises", "get_forecast")])
def test_an_openinference_google_genai_span_gives_the_calls_of_the_sdk_loop_as_requested(
    impl: str, run: str, tool: str
) -> None:
    """The LLM span's top-level `message.tool_calls.{j}` (the SDK's automatic function calling history) are the calls
    the model asked for: one requested call, with its arguments and no id."""
    _impl(impl)
    records, problems = convert(capture(f"google_genai_openinference_{run}"), impl)
    assert problems == []
    requested = [r for r in records if isinstance(r, RequestedCall)]
    assert [(r.name, r.call_id, json.loads(r.arguments or "null")) for r in requested] == [(tool, "", PARIS)]


@pytest.mark.parametrize("impl", IMPLS)
def test_openinference_google_genai_alone_is_the_call_its_model_asked_for(impl: str) -> None:
    """Without a turn and with no tool run traced: the call the SDK's loop made is one turnless requested call, with
    its arguments, and the tools the model request offered."""
    [group] = captured_turns("google_genai_openinference_alone", impl)
    assert group.turnless
    assert call_rows(group) == [("get_weather", "", PARIS, True, None)]
    assert offered_names(group) == OFFERED


@pytest.mark.parametrize("impl", IMPLS)
def test_openinference_google_genai_turn_without_its_tool_run_keeps_the_requested_call(impl: str) -> None:
    """The `@tool` span left out (lost, or the tool not decorated): the turn keeps the call the model asked for."""
    _impl(impl)
    spans = [s for s in capture("google_genai_openinference_tool") if not s.name.startswith("execute_tool")]
    turns, _ = assemble(spans, impl, flush=True)
    assert [(t.agent, call_rows(t)) for t in turns] == [("weather_agent", [("get_weather", "", PARIS, True, None)])]


@pytest.mark.parametrize("impl", IMPLS)
def test_opentelemetry_google_genai_wrapper_around_a_tool_without_a_turn_is_one_call(impl: str) -> None:
    """The turn span left out (`@tool` functions without `agent_turn`): the instrumentation's `execute_tool` span
    around the `@tool`'s own is still one turnless call."""
    _impl(impl)
    spans = [s for s in capture("google_genai_otel_tool") if not s.name.startswith("invoke_agent")]
    turns, _ = assemble(spans, impl, flush=True)
    assert [(t.turnless, call_rows(t)) for t in turns] == [
        (True, [("get_weather", TOOL_IDS["otel", "tool"], PARIS, False, None)])
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_tool_span_under_one_of_its_name_with_other_arguments_is_a_call_of_its_own(impl: str) -> None:
    """A tool that calls itself (other arguments): two calls, not a wrapper and its call."""
    _impl(impl)
    spans = capture("google_genai_otel_tool")
    for s in spans:
        if s.scope == "toolwatch.instrumentation" and s.name == "execute_tool get_weather":
            s.attributes["gen_ai.tool.call.arguments"] = '{"city": "Lyon"}'
    [turn] = assemble(spans, impl, flush=True)[0]
    assert call_rows(turn) == [
        ("get_weather", "", PARIS, False, None),
        ("get_weather", TOOL_IDS["otel", "tool"], {"city": "Lyon"}, False, None),
    ]


WRAPPER_SCOPE = "opentelemetry.instrumentation.google_genai"


def _wrapper_and_tool(spans: list[Span]) -> tuple[Span, Span]:
    """The instrumentation's `execute_tool` span and the `@tool`'s own under it."""
    [outer] = [s for s in spans if s.scope == WRAPPER_SCOPE and s.name.startswith("execute_tool")]
    [inner] = [s for s in spans if s.scope != WRAPPER_SCOPE and s.name.startswith("execute_tool")]
    return outer, inner


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("flush", [False, True])
def test_a_wrapper_right_under_the_turn_around_a_tool_of_its_name_is_one_call(impl: str, flush: bool) -> None:
    """The instrumentation's `execute_tool` span right under the turn (its model request span not received): the
    `@tool`'s own under it is still the one call, released by a poll or a flush, on both paths alike."""
    _impl(impl)
    spans = [s for s in capture("google_genai_otel_tool") if not s.name.startswith("generate_content")]
    outer, _ = _wrapper_and_tool(spans)
    [turn_span] = [s for s in spans if s.name.startswith("invoke_agent")]
    outer.parent_span_id = turn_span.span_id
    [turn] = assemble(spans, impl, flush=flush)[0]
    assert call_rows(turn) == [("get_weather", TOOL_IDS["otel", "tool"], PARIS, False, None)]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_tool_recording_no_content_inside_a_wrapper_that_does_keeps_the_wrappers_arguments(impl: str) -> None:
    """The `@tool`'s content capture off (toolwatch reads OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
    only: SPAN_ONLY, as the instrumentation is told, leaves it off), the wrapper's on: one call, the `@tool`'s, with
    the arguments and result the wrapper captured, not a call unjudged for its arguments."""
    _impl(impl)
    spans = capture("google_genai_otel_tool")
    _, inner = _wrapper_and_tool(spans)
    del inner.attributes["gen_ai.tool.call.arguments"], inner.attributes["gen_ai.tool.call.result"]
    [turn] = assemble(spans, impl, flush=True)[0]
    assert call_rows(turn) == [("get_weather", TOOL_IDS["otel", "tool"], PARIS, False, None)]
    assert turn.calls[0].result == "Sunny in Paris"


@pytest.mark.parametrize("impl", IMPLS)
def test_the_call_id_of_a_wrapper_merged_into_its_tool_still_accounts_for_the_requested_call(impl: str) -> None:
    """A wrapper recording the model's call id (`call_1`) around a `@tool` recording a fresh one, the model request
    span recording the call it asked for: one call that ran, not also a requested call never run."""
    _impl(impl)
    spans = capture("google_genai_otel_tool")
    outer, _ = _wrapper_and_tool(spans)
    outer.attributes["gen_ai.tool.call.id"] = "call_1"
    [chat] = [s for s in spans if s.name.startswith("generate_content")]
    chat.attributes["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": PARIS}]}])  # fmt: skip
    [turn] = assemble(spans, impl, flush=True)[0]
    assert call_rows(turn) == [("get_weather", TOOL_IDS["otel", "tool"], PARIS, False, None)]


def test_many_calls_under_one_with_large_arguments_are_reconciled_in_linear_time() -> None:
    """A call with 4 MiB of JSON arguments and 200 calls of its name right under it, each with other arguments (a
    hostile trace within the per-trace bound): its arguments are parsed once, not once per call under it (about
    0.07 s each: 14 s)."""

    big = "[" + "1," * (2 * 1024 * 1024 - 1) + "1]"
    outer = ToolCall("f", arguments=big, span_id="outer", parent_span_id="turn", start_ns=1)
    under = [ToolCall("f", arguments=f'{{"i": {i}}}', span_id=f"c{i}", parent_span_id="outer", start_ns=2 + i)
             for i in range(200)]  # fmt: skip
    kept, elapsed = cpu_timed(lambda: reconcile([outer, *under]))
    assert kept == [outer, *under]
    assert elapsed < 2.0, elapsed


@pytest.mark.parametrize("impl", IMPLS)
def test_a_tool_without_a_call_id_inside_a_wrapper_with_the_models_takes_no_other_requested_call(impl: str) -> None:
    """The wrapper records the model's call id (`call_1`), the `@tool` under it none; the model asked for a second call
    of the tool (`call_2`) never run. The wrapper's id accounts for `call_1` (rule 1), and the call kept is that call:
    it does not also pair by name (rule 2) with `call_2`, which stays a requested call never run."""
    _impl(impl)
    spans = capture("google_genai_otel_tool")
    outer, inner = _wrapper_and_tool(spans)
    outer.attributes["gen_ai.tool.call.id"] = "call_1"
    del inner.attributes["gen_ai.tool.call.id"]
    [chat] = [s for s in spans if s.name.startswith("generate_content")]
    chat.attributes["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": PARIS},
        {"type": "tool_call", "id": "call_2", "name": "get_weather", "arguments": {"city": "Rome"}}]}])  # fmt: skip
    [turn] = assemble(spans, impl, flush=True)[0]
    assert [(name, asked, args) for name, _, args, asked, _ in call_rows(turn)] == [
        ("get_weather", False, PARIS),
        ("get_weather", True, {"city": "Rome"}),
    ]


@pytest.mark.parametrize(("inner_id", "other_id"), [("", "call_2"), ("tw_1", ""), ("", "")])
def test_reconcile_a_call_merged_with_a_wrapper_of_a_requested_id_pairs_no_other(inner_id: str, other_id: str) -> None:
    """reconcile alone: the wrapper (`call_1`) around a call of its name and arguments (no id, or a fresh one) is one
    call, which accounts for the requested `call_1` and for no other requested call of that name (one of another id,
    or one without an id)."""
    wrapper = ToolCall("f", call_id="call_1", arguments="{}", span_id="w", parent_span_id="turn", start_ns=2)
    inner = ToolCall("f", call_id=inner_id, arguments="{}", span_id="i", parent_span_id="w", start_ns=3)
    asked = [RequestedCall("f", call_id=c, arguments="{}", span_id="chat", start_ns=1) for c in ("call_1", other_id)]
    kept = reconcile([*asked, wrapper, inner])
    assert [(c.call_id, isinstance(c, RequestedCall)) for c in kept] == [(other_id, True), (inner_id, False)]
