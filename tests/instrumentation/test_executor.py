"""`ToolExecutor`: both OpenAI call shapes (dicts and SDK-like objects), sync and async, and the
failures the monitor must see (unknown tool, unparseable arguments) as ERROR spans."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import instrumentation as tw
from tests.instrumentation.conftest import Recorded


@tw.tool
def get_weather(city: str, unit: str = "c") -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "temp": 21, "unit": unit}


@tw.tool
async def search(query: str) -> list[str]:
    """Search the web."""
    await asyncio.sleep(0)
    return [query.upper()]


@tw.tool
def lines(n: int) -> Iterator[str]:
    for i in range(n):
        yield f"line {i}"


@tw.tool
async def chunks(n: int) -> AsyncIterator[str]:
    for i in range(n):
        yield f"chunk {i}"


def fail(message: str) -> None:
    """Always fails."""
    raise ValueError(message)


def chat_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def responses_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments, "id": "fc_1"}


def chat_object(call_id: str, name: str, arguments: str) -> SimpleNamespace:
    return SimpleNamespace(id=call_id, type="function", function=SimpleNamespace(name=name, arguments=arguments))


def responses_object(call_id: str, name: str, arguments: str) -> SimpleNamespace:
    return SimpleNamespace(type="function_call", call_id=call_id, name=name, arguments=arguments, id="fc_1")


@pytest.fixture
def executor() -> tw.ToolExecutor:
    return tw.ToolExecutor([get_weather, search, lines, chunks, fail])


@pytest.mark.parametrize("make", [chat_call, responses_call, chat_object, responses_object])
def test_execute_tool_calls_each_shape(capture: Recorded, executor: tw.ToolExecutor, make: Any) -> None:
    raw = '{"city": "Paris"}'
    [result] = executor.execute_tool_calls([make("call_1", "get_weather", raw)])
    assert result.output == {"city": "Paris", "temp": 21, "unit": "c"}
    assert result.error is None
    span = capture.named("execute_tool get_weather")
    assert span.kind is SpanKind.INTERNAL
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Current weather for a city.",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": raw,  # the model's own text, not re-serialized
        "gen_ai.tool.call.result": '{"city":"Paris","temp":21,"unit":"c"}',
    }
    message = result.to_message()
    if make in (chat_call, chat_object):
        assert message == {"role": "tool", "tool_call_id": "call_1", "content": '{"city":"Paris","temp":21,"unit":"c"}'}
    else:
        assert message == {"type": "function_call_output", "call_id": "call_1",
                           "output": '{"city":"Paris","temp":21,"unit":"c"}'}


def test_unknown_tool_raises_typed_error_and_records_span(capture: Recorded, executor: tw.ToolExecutor) -> None:
    with pytest.raises(tw.UnknownToolError) as info:
        executor.execute_tool_calls([chat_call("call_x", "get_wether", '{"city": "Rome"}')])
    assert info.value.tool_name == "get_wether" and info.value.call_id == "call_x"
    assert "available tools" in str(info.value) and "get_weather" in str(info.value)
    span = capture.named("execute_tool get_wether")
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_wether",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call_x",
        "error.type": "UnknownToolError",
        "gen_ai.tool.call.arguments": '{"city": "Rome"}',
    }


@pytest.mark.parametrize(("raw", "fragment"), [('{"city": "Ro', "not valid JSON"), ('["Rome"]', "JSON list"),
                                               ("42", "JSON int")])
def test_bad_arguments_raise_and_record(capture: Recorded, executor: tw.ToolExecutor, raw: str, fragment: str) -> None:
    with pytest.raises(tw.ToolArgumentsError, match=fragment) as info:
        executor.execute("get_weather", raw, call_id="call_b")
    assert isinstance(info.value, tw.ToolCallError) and info.value.arguments == raw
    span = capture.named("execute_tool get_weather")
    attrs = dict(span.attributes or {})
    assert span.status.status_code is StatusCode.ERROR
    assert attrs["error.type"] == "ToolArgumentsError"
    assert attrs["gen_ai.tool.call.arguments"] == raw
    assert attrs["gen_ai.tool.call.id"] == "call_b"


def test_error_results_for_the_model(recorded: Recorded) -> None:
    executor = tw.ToolExecutor([get_weather, fail], on_error="result")
    results = executor.execute_tool_calls([
        responses_call("c1", "nope", "{}"),
        responses_call("c2", "get_weather", "{bad"),
        responses_call("c3", "fail", '{"message": "boom"}'),
        responses_call("c4", "get_weather", '{"city": "Oslo"}'),
    ])
    assert [type(r.error).__name__ if r.error else None for r in results] == [
        "UnknownToolError", "ToolArgumentsError", "ValueError", None]
    assert results[2].to_message() == {"type": "function_call_output", "call_id": "c3",
                                       "output": "Error: ValueError: boom"}
    assert executor.execute("nope", {}).startswith("Error: UnknownToolError: unknown tool 'nope'")
    statuses = {(s.attributes or {})["gen_ai.tool.call.id"]: s.status.status_code for s in recorded.spans()}
    assert statuses["c1"] is statuses["c2"] is statuses["c3"] is StatusCode.ERROR
    assert statuses["c4"] is StatusCode.UNSET


def test_tool_exception_propagates_unchanged(recorded: Recorded, executor: tw.ToolExecutor) -> None:
    with pytest.raises(ValueError, match="boom"):
        executor.execute("fail", {"message": "boom"})
    span = recorded.named("execute_tool fail")
    assert (span.attributes or {})["error.type"] == "ValueError"


def test_execute_with_dict_and_generated_call_id(capture: Recorded, executor: tw.ToolExecutor) -> None:
    assert executor.execute("get_weather", {"city": "Lima", "unit": "f"})["unit"] == "f"
    attrs = dict(capture.named("execute_tool get_weather").attributes or {})
    assert str(attrs["gen_ai.tool.call.id"]).startswith("tw_")
    assert attrs["gen_ai.tool.call.arguments"] == '{"city":"Lima","unit":"f"}'


def test_a_call_id_that_is_not_a_string_still_runs_the_tool(capture: Recorded, executor: tw.ToolExecutor) -> None:
    """An int id (typed str, but some providers' dispatch loops pass what the model gave) raised AttributeError in
    the recording, and the tool never ran; `use_tool_call_id(None)` recorded the id 'None'."""
    assert executor.execute("get_weather", {"city": "Lima"}, call_id=7)["city"] == "Lima"  # type: ignore[arg-type]

    @tw.tool
    def ping() -> str:
        return "pong"

    with tw.use_tool_call_id(8):  # type: ignore[arg-type]
        assert ping() == "pong"
    with tw.use_tool_call_id(None):  # type: ignore[arg-type]
        assert ping() == "pong"
    ids = [str((s.attributes or {})["gen_ai.tool.call.id"]) for s in capture.spans()]
    assert ids[:2] == ["7", "8"] and ids[2].startswith("tw_"), ids


def test_empty_arguments_mean_no_arguments(recorded: Recorded) -> None:
    @tw.tool
    def ping() -> str:
        return "pong"

    executor = tw.ToolExecutor([ping])
    assert executor.execute("ping", "") == "pong"
    assert executor.execute("ping", None) == "pong"


def test_generator_tool_outputs_are_collected(capture: Recorded, executor: tw.ToolExecutor) -> None:
    [result] = executor.execute_tool_calls([chat_call("g1", "lines", '{"n": 2}')])
    assert result.output == ["line 0", "line 1"]
    attrs = dict(capture.named("execute_tool lines").attributes or {})
    assert attrs["gen_ai.tool.call.id"] == "g1"
    assert attrs["gen_ai.tool.call.result"] == '["line 0","line 1"]'


@pytest.mark.parametrize("name", ["get_weather", "search", "lines", "chunks"])
async def test_arguments_the_tool_does_not_take_are_an_error_span_for_every_kind(
    capture: Recorded, executor: tw.ToolExecutor, name: str
) -> None:
    """A model's made-up parameter: the call fails with the tool's TypeError, for a generator tool as for a plain
    one, and the monitor sees the failed call (it was missing for generator tools)."""
    with pytest.raises(TypeError, match="bogus"):
        await executor.aexecute_tool_calls([chat_call("b1", name, '{"bogus": 1}')])
    span = capture.named(f"execute_tool {name}")
    attrs = dict(span.attributes or {})
    assert span.status.status_code is StatusCode.ERROR and attrs["error.type"] == "TypeError"
    assert (attrs["gen_ai.tool.call.id"], attrs["gen_ai.tool.call.arguments"]) == ("b1", '{"bogus": 1}')


def test_async_tool_in_sync_execute_is_a_clear_error(executor: tw.ToolExecutor) -> None:
    with pytest.raises(TypeError, match="aexecute"):
        executor.execute("search", {"query": "x"})
    with pytest.raises(TypeError, match="aexecute"):
        executor.execute_tool_calls([chat_call("a", "search", '{"query": "x"}')])


async def test_async_execution(capture: Recorded, executor: tw.ToolExecutor) -> None:
    assert await executor.aexecute("search", '{"query": "otel"}', call_id="s1") == ["OTEL"]
    assert (await executor.aexecute("get_weather", {"city": "Kyiv"}))["city"] == "Kyiv"
    results = await executor.aexecute_tool_calls([
        chat_call("s2", "search", '{"query": "a"}'),
        chat_call("s3", "chunks", '{"n": 2}'),
        chat_call("s4", "lines", '{"n": 1}'),
    ])
    assert [r.output for r in results] == [["A"], ["chunk 0", "chunk 1"], ["line 0"]]
    ids = sorted(str((s.attributes or {})["gen_ai.tool.call.id"]) for s in capture.spans())
    assert ids[:4] == ["s1", "s2", "s3", "s4"]


async def test_concurrent_async_calls_keep_their_ids(capture: Recorded) -> None:
    @tw.tool
    async def slow(n: int) -> int:
        await asyncio.sleep(0.01 * (5 - n))
        return n

    executor = tw.ToolExecutor([slow])
    calls = [chat_call(f"c{n}", "slow", json.dumps({"n": n})) for n in range(5)]
    results = await executor.aexecute_tool_calls(calls, concurrent=True)
    assert [r.output for r in results] == [0, 1, 2, 3, 4]
    by_id = {(s.attributes or {})["gen_ai.tool.call.id"]: (s.attributes or {})["gen_ai.tool.call.result"]
             for s in capture.spans()}
    assert by_id == {f"c{n}": str(n) for n in range(5)}


async def test_async_unknown_tool_error_result(recorded: Recorded) -> None:
    executor = tw.ToolExecutor([search], on_error="result")
    [result] = await executor.aexecute_tool_calls([responses_call("u1", "nope", "{}")])
    assert isinstance(result.error, tw.UnknownToolError)
    assert recorded.named("execute_tool nope").status.status_code is StatusCode.ERROR


def test_registration_rules() -> None:
    executor = tw.ToolExecutor()

    def plain(x: int) -> int:
        """Plain function."""
        return x

    wrapped = executor.register(plain)
    assert tw.get_tool_spec(wrapped) is not None and "plain" in executor
    with pytest.raises(ValueError, match="already registered"):
        executor.register(tw.tool(name="plain")(lambda: 1))
    with pytest.raises(ValueError, match="already named"):
        executor.register(get_weather, name="weather")
    with pytest.raises(ValueError, match="on_error"):
        tw.ToolExecutor(on_error="ignore")  # type: ignore[arg-type]
    assert executor.definitions() == [{"type": "function", "name": "plain", "description": "Plain function.",
                                       "parameters": {"type": "object", "properties": {"x": {"type": "integer"}},
                                                      "required": ["x"], "additionalProperties": False}}]
    assert executor.openai_tools()[0]["function"]["name"] == "plain"


def test_unrecognized_call_shape_is_a_type_error(executor: tw.ToolExecutor) -> None:
    with pytest.raises(TypeError, match="unrecognized tool call"):
        executor.execute_tool_calls([{"name": "get_weather"}])


def test_failed_call_arguments_are_redacted_too(recorded: Recorded, executor: tw.ToolExecutor) -> None:
    tw.configure_content(capture_content=True, redact_keys=["password"])
    with pytest.raises(tw.UnknownToolError):
        executor.execute("login", '{"user": "ann", "password": "hunter2"}', call_id="r1")
    with pytest.raises(tw.ToolArgumentsError):
        executor.execute("get_weather", '{"password": "hunter2"', call_id="r2")
    first = dict(recorded.named("execute_tool login").attributes or {})
    assert first["gen_ai.tool.call.arguments"] == '{"user":"ann","password":"[REDACTED]"}'
    second = dict(recorded.named("execute_tool get_weather").attributes or {})
    assert second["gen_ai.tool.call.arguments"] == "[REDACTED: not JSON]"  # not JSON either: the monitor sees malformed
    assert second["toolwatch.content.error"] == "not_redactable"
    assert not any("hunter2" in str(v) for v in second.values())


def test_bound_method_tools_and_double_decoration(recorded: Recorded) -> None:
    class Service:
        def __init__(self, prefix: str) -> None:
            self.prefix = prefix

        @tw.tool
        def greet(self, who: str) -> str:
            """Greet someone."""
            return f"{self.prefix} {who}"

    executor = tw.ToolExecutor([Service("hi").greet])
    assert executor.execute("greet", '{"who": "ann"}', call_id="m1") == "hi ann"
    assert executor.definitions()[0]["parameters"]["properties"] == {"who": {"type": "string"}}
    assert tw.tool(get_weather) is get_weather
    with pytest.raises(ValueError, match="already a @tool"):
        tw.tool(name="other")(get_weather)
    get_weather("Rome")
    assert len([s for s in recorded.spans() if s.name == "execute_tool get_weather"]) == 1
