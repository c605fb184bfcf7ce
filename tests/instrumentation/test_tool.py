"""`@tool`: exact span names, kinds, attributes, status and structure for each kind of function."""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import json
import weakref
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, StatusCode

import instrumentation as tw
from instrumentation._stats import STATS
from tests.instrumentation.conftest import Recorded, make_recorded


def base(name: str, call_id: str, description: str = "") -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": call_id,
    }
    if description:
        attributes["gen_ai.tool.description"] = description
    return attributes


@tw.tool
def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


@tw.tool(name="divide_numbers", description="Divide.")
def divide(a: float, b: float) -> float:
    return a / b


def test_plain_function_span_capture_off(recorded: Recorded) -> None:
    assert add(2, b=3) == 5
    span = recorded.named("execute_tool add")
    assert span.kind is SpanKind.INTERNAL
    call_id = span.attributes["gen_ai.tool.call.id"]  # type: ignore[index]
    assert isinstance(call_id, str) and call_id.startswith("tw_") and len(call_id) == 19
    assert dict(span.attributes or {}) == base("add", call_id, "Add two numbers.")
    assert span.status.status_code is StatusCode.UNSET
    assert span.parent is None


def test_plain_function_span_capture_on(capture: Recorded) -> None:
    assert add(2, b=3) == 5
    span = capture.named("execute_tool add")
    attrs = dict(span.attributes or {})
    call_id = attrs["gen_ai.tool.call.id"]
    assert attrs == {
        **base("add", str(call_id), "Add two numbers."),
        "gen_ai.tool.call.arguments": '{"a":2,"b":3}',
        "gen_ai.tool.call.result": "5",
    }


def test_named_tool_and_error_status(capture: Recorded) -> None:
    with pytest.raises(ZeroDivisionError):
        divide(1, 0)
    span = capture.named("execute_tool divide_numbers")
    attrs = dict(span.attributes or {})
    assert attrs["error.type"] == "ZeroDivisionError"
    assert attrs["gen_ai.tool.description"] == "Divide."
    assert "gen_ai.tool.call.result" not in attrs
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ZeroDivisionError: division by zero"
    assert [e.name for e in span.events] == ["exception"]


def test_error_message_and_stack_trace_are_cut_at_the_content_limit(capture: Recorded) -> None:
    tw.configure_content(max_content_length=64)

    @tw.tool
    def shout(text: str) -> str:
        raise ValueError(text * 2)

    with pytest.raises(ValueError) as raised:
        shout("y" * 100)
    assert str(raised.value) == "y" * 200  # the tool's exception is untouched
    span = capture.named("execute_tool shout")
    assert span.status.description == ("ValueError: " + "y" * 200)[:64]
    [event] = span.events
    attrs = dict(event.attributes or {})
    assert attrs["exception.type"] == "ValueError"
    assert attrs["exception.message"] == "y" * 64
    stacktrace = str(attrs["exception.stacktrace"])
    # its beginning and its end (the exception's own line), around an ellipsis
    assert stacktrace == "Traceback (most recent call las…" + "y" * 31 + "\n", stacktrace


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_an_exception_whose_str_raises_still_fails_the_span(capture: Recorded) -> None:
    # str() of the exception raised inside the recording: the span kept error.type but its status stayed UNSET (a
    # success to a backend that reads the status) and had no exception event.
    @tw.tool
    def odd() -> None:
        raise Unprintable("x")

    with pytest.raises(Unprintable) as raised:
        odd()
    assert raised.value.args == ("x",)
    span = capture.named("execute_tool odd")
    assert dict(span.attributes or {})["error.type"] == "Unprintable"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "Unprintable: <unprintable Unprintable>"
    [event] = span.events
    attrs = dict(event.attributes or {})
    assert attrs["exception.message"] == "<unprintable Unprintable>"
    assert "Unprintable" in str(attrs["exception.stacktrace"])
    assert STATS.instrumentation_errors == 0


def test_a_failed_call_formats_its_exception_once(capture: Recorded) -> None:
    """The exception event was made by the SDK's `record_exception`, which formats the whole stack trace and the
    message again before taking the ones given: each failed call formatted its traceback twice (about a third of the
    cost of a failed call, 20 ms for a RecursionError's). The event is the same, made once: the exception's text is
    read once for the message and once in the stack trace."""
    texts: list[int] = []

    class Counted(Exception):
        def __str__(self) -> str:
            texts.append(1)
            return "counted"

    @tw.tool
    def failing() -> None:
        raise Counted

    with pytest.raises(Counted):
        failing()
    assert len(texts) == 2
    [event] = capture.named("execute_tool failing").events
    attrs = dict(event.attributes or {})
    assert event.name == "exception"
    assert attrs["exception.type"] == f"{__name__}.test_a_failed_call_formats_its_exception_once.<locals>.Counted"
    assert attrs["exception.message"] == "counted" and attrs["exception.escaped"] == "False"
    assert str(attrs["exception.stacktrace"]).startswith("Traceback (most recent call last):")
    assert str(attrs["exception.stacktrace"]).endswith("Counted: counted\n")


def test_error_without_capture_has_no_message(recorded: Recorded) -> None:
    with pytest.raises(ZeroDivisionError):
        divide(1, 0)
    span = recorded.named("execute_tool divide_numbers")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is None
    assert span.events == ()
    assert span.attributes is not None and span.attributes["error.type"] == "ZeroDivisionError"


async def test_async_function(capture: Recorded) -> None:
    @tw.tool
    async def fetch(url: str) -> dict[str, str]:
        """Fetch a page."""
        await asyncio.sleep(0)
        return {"url": url}

    assert inspect.iscoroutinefunction(fetch)
    assert await fetch("http://x") == {"url": "http://x"}
    span = capture.named("execute_tool fetch")
    attrs = dict(span.attributes or {})
    assert attrs == {**base("fetch", str(attrs["gen_ai.tool.call.id"]), "Fetch a page."),
                     "gen_ai.tool.call.arguments": '{"url":"http://x"}', "gen_ai.tool.call.result": '{"url":"http://x"}'}
    assert span.kind is SpanKind.INTERNAL and span.status.status_code is StatusCode.UNSET


def test_generator(capture: Recorded) -> None:
    @tw.tool
    def count(n: int) -> Iterator[int]:
        yield from range(n)

    unused = count(3)
    del unused  # a generator never iterated records nothing
    with tw.use_tool_call_id("call_g"):
        gen = count(3)
    assert capture.spans() == []
    assert list(gen) == [0, 1, 2]
    span = capture.named("execute_tool count")
    assert dict(span.attributes or {}) == {**base("count", "call_g"), "gen_ai.tool.call.arguments": '{"n":3}',
                                           "gen_ai.tool.call.result": "[0,1,2]", "toolwatch.tool.yielded": 3}
    assert span.kind is SpanKind.INTERNAL and span.status.status_code is StatusCode.UNSET


class Chunk:
    """A yielded item that can be watched for being freed."""

    def __init__(self, i: int) -> None:
        self.i = i

    def __repr__(self) -> str:
        return f"Chunk({self.i})"


def test_generator_items_are_recorded_as_yielded_and_not_kept(capture: Recorded) -> None:
    """Each item is serialized when it is yielded: the recorder held up to 256 items until the end (a tool streaming
    10 MB chunks kept 2.5 GB alive), and an item changed by the caller afterwards was recorded changed."""

    @tw.tool
    def stream(n: int) -> Iterator[Any]:
        for i in range(n):
            yield Chunk(i)
        yield {"state": "yielded"}

    gen = stream(3)
    first = next(gen)
    watch = weakref.ref(first)
    del first
    gc.collect()
    assert watch() is None  # freed while the iteration goes on
    rest = list(gen)
    rest[-1]["state"] = "changed by the caller"
    span = capture.named("execute_tool stream")
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.tool.call.result"] == '["Chunk(0)","Chunk(1)","Chunk(2)",{"state":"yielded"}]'
    assert attrs["toolwatch.tool.yielded"] == 4


async def test_async_generator_items_are_not_kept_either(capture: Recorded) -> None:
    @tw.tool
    async def stream(n: int) -> AsyncIterator[Chunk]:
        for i in range(n):
            yield Chunk(i)

    agen = stream(2)
    first = await agen.__anext__()
    watch = weakref.ref(first)
    del first
    gc.collect()
    assert watch() is None
    assert [c.i async for c in agen] == [1]
    attrs = dict(capture.named("execute_tool stream").attributes or {})
    assert attrs["gen_ai.tool.call.result"] == '["Chunk(0)","Chunk(1)"]'


def test_generator_items_past_the_content_limit_are_cut_as_one_list(capture: Recorded) -> None:
    tw.configure_content(max_content_length=100)

    @tw.tool
    def words(n: int) -> Iterator[str]:
        for i in range(n):
            yield f"word{i:03d}"

    assert len(list(words(300))) == 300
    attrs = dict(capture.named("execute_tool words").attributes or {})
    whole = "[" + ",".join(f'"word{i:03d}"' for i in range(300)) + "]"
    assert attrs["gen_ai.tool.call.result"] == whole[:100]
    assert attrs["toolwatch.truncated"] == ("gen_ai.tool.call.result",)
    assert attrs["toolwatch.tool.yielded"] == 300


def test_generator_closed_early_is_not_an_error(capture: Recorded) -> None:
    @tw.tool
    def count(n: int) -> Generator[int, None, None]:
        yield from range(n)

    gen = count(10)
    assert next(gen) == 0
    gen.close()
    span = capture.named("execute_tool count")
    assert span.status.status_code is StatusCode.UNSET
    assert span.attributes is not None and span.attributes["toolwatch.tool.yielded"] == 1


def test_generator_raising(capture: Recorded) -> None:
    @tw.tool
    def broken() -> Iterator[int]:
        yield 1
        raise KeyError("gone")

    with pytest.raises(KeyError):
        list(broken())
    span = capture.named("execute_tool broken")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "KeyError"


async def test_async_generator(capture: Recorded) -> None:
    @tw.tool
    async def stream(n: int) -> AsyncIterator[str]:
        for i in range(n):
            await asyncio.sleep(0)
            yield f"chunk{i}"

    with tw.agent_turn("stream it", agent="streamer"):
        assert [c async for c in stream(2)] == ["chunk0", "chunk1"]
    span, turn = capture.named("execute_tool stream"), capture.named("invoke_agent streamer")
    attrs = dict(span.attributes or {})
    assert attrs == {**base("stream", str(attrs["gen_ai.tool.call.id"])), "gen_ai.tool.call.arguments": '{"n":2}',
                     "gen_ai.tool.call.result": '["chunk0","chunk1"]', "toolwatch.tool.yielded": 2}
    assert span.parent is not None and span.parent.span_id == turn.context.span_id


def test_methods_static_and_class_methods(capture: Recorded) -> None:
    class Tools:
        factor = 3

        def __init__(self) -> None:
            self.offset = 10

        @tw.tool
        def shift(self, x: int) -> int:
            """Shift x."""
            return x + self.offset

        @staticmethod
        @tw.tool
        def double(x: int) -> int:
            return 2 * x

        @classmethod
        @tw.tool
        def scale(cls, x: int) -> int:
            return cls.factor * x

    tools = Tools()
    assert tools.shift(1) == 11
    assert Tools.double(4) == 8
    assert Tools.scale(2) == 6
    args = {s.name: (s.attributes or {})["gen_ai.tool.call.arguments"] for s in capture.spans()}
    assert args == {"execute_tool shift": '{"x":1}', "execute_tool double": '{"x":4}', "execute_tool scale": '{"x":2}'}
    spec = tw.get_tool_spec(tools.shift)
    assert spec is not None and spec.parameters["properties"] == {"x": {"type": "integer"}}


async def test_callable_objects_and_partials(capture: Recorded) -> None:
    """A callable object or a partial is a tool once named. An object with an async `__call__` is an async tool:
    its span covers the await, records the result and the failure (it ended at once with the coroutine's repr)."""

    class Lookup:
        async def __call__(self, key: str) -> str:
            await asyncio.sleep(0)
            if key == "missing":
                raise KeyError(key)
            return key.upper()

    class Count:
        def __call__(self, text: str) -> int:
            return len(text)

    lookup = tw.tool(name="lookup")(Lookup())
    count = tw.tool(name="count")(Count())
    scaled = tw.tool(name="scaled")(functools.partial(lambda factor, x: factor * x, 3))
    assert inspect.iscoroutinefunction(lookup)
    assert await lookup("a") == "A" and count("abc") == 3 and scaled(x=2) == 6
    with pytest.raises(KeyError):
        await lookup("missing")
    found = [(s.name, s.status.status_code, (s.attributes or {}).get("gen_ai.tool.call.result"))
             for s in capture.spans()]
    assert found == [("execute_tool lookup", StatusCode.UNSET, '"A"'), ("execute_tool count", StatusCode.UNSET, "3"),
                     ("execute_tool scaled", StatusCode.UNSET, "6"), ("execute_tool lookup", StatusCode.ERROR, None)]


def test_decorating_staticmethod_object_is_rejected() -> None:
    with pytest.raises(TypeError, match="above @tool"):
        tw.tool(staticmethod(len))


def test_nested_tool_is_child_with_own_call_id(recorded: Recorded) -> None:
    @tw.tool
    def outer() -> int:
        return add(1)

    with tw.use_tool_call_id("call_outer"):
        assert outer() == 2
    inner_span, outer_span = recorded.named("execute_tool add"), recorded.named("execute_tool outer")
    assert outer_span.attributes is not None and outer_span.attributes["gen_ai.tool.call.id"] == "call_outer"
    assert inner_span.attributes is not None and inner_span.attributes["gen_ai.tool.call.id"] != "call_outer"
    assert inner_span.parent is not None and inner_span.parent.span_id == outer_span.context.span_id
    assert inner_span.context.trace_id == outer_span.context.trace_id


def test_use_tool_call_id_with_name_only_applies_to_that_tool(recorded: Recorded) -> None:
    with tw.use_tool_call_id("call_9", tool_name="divide_numbers"):
        add(1)
        divide(4, 2)
    assert (recorded.named("execute_tool add").attributes or {})["gen_ai.tool.call.id"] != "call_9"
    assert (recorded.named("execute_tool divide_numbers").attributes or {})["gen_ai.tool.call.id"] == "call_9"


async def test_use_tool_call_id_with_name_is_not_taken_by_a_tool_called_inside_another(recorded: Recorded) -> None:
    """The id is for a call made directly in the block: a named tool called from inside another tool (sync or
    async) took it, because only the tool that took the id hid it from the tools it called."""

    @tw.tool
    def outer() -> int:
        return int(divide(4, 2))

    @tw.tool
    async def async_outer() -> int:
        return int(divide(9, 3))

    with tw.use_tool_call_id("call_9", tool_name="divide_numbers"):
        outer()
        await async_outer()
        divide(1, 1)
    divides = [s for s in recorded.spans() if s.name == "execute_tool divide_numbers"]
    ids = [(s.attributes or {})["gen_ai.tool.call.id"] for s in divides]
    assert len(ids) == 3 and ids[0] != "call_9" and ids[1] != "call_9" and ids[2] == "call_9"


def test_redaction_by_key_and_pattern(recorded: Recorded) -> None:
    tw.configure_content(capture_content=True, redact_keys=["Password"], redact_pattern=r"token$")

    @tw.tool
    def login(user: str, password: str, extra: dict[str, Any]) -> str:
        return "ok"

    login("ann", "hunter2", {"api_token": "t", "nested": [{"password": "p"}], "keep": 1})
    args = json.loads(str((recorded.named("execute_tool login").attributes or {})["gen_ai.tool.call.arguments"]))
    assert args == {"user": "ann", "password": "[REDACTED]",
                    "extra": {"api_token": "[REDACTED]", "nested": [{"password": "[REDACTED]"}], "keep": 1}}


def test_broken_redaction_hook_leaves_arguments_out(recorded: Recorded) -> None:
    def hook(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("hook bug")

    tw.configure_content(capture_content=True, redact_hook=hook)
    assert add(1, 2) == 3
    attrs = dict(recorded.named("execute_tool add").attributes or {})
    assert "gen_ai.tool.call.arguments" not in attrs
    assert attrs["toolwatch.content.error"] == "redaction_failed"
    assert attrs["gen_ai.tool.call.result"] == "3"
    assert STATS.redaction_failures == 1


def test_redaction_hook_result_is_recorded(recorded: Recorded) -> None:
    tw.configure_content(capture_content=True, redact_hook=lambda name, a: {k: v for k, v in a.items() if k != "b"})
    add(1, 2)
    assert (recorded.named("execute_tool add").attributes or {})["gen_ai.tool.call.arguments"] == '{"a":1}'


def test_truncation_is_marked(recorded: Recorded) -> None:
    tw.configure_content(capture_content=True, max_content_length=32)

    @tw.tool
    def echo(text: str) -> str:
        return text

    echo("x" * 100)
    attrs = dict(recorded.named("execute_tool echo").attributes or {})
    assert attrs["gen_ai.tool.call.arguments"] == '{"text":"' + "x" * 23
    assert attrs["gen_ai.tool.call.result"] == '"' + "x" * 31
    assert attrs["toolwatch.truncated"] == ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")


def test_unserializable_arguments_fall_back_to_repr(capture: Recorded) -> None:
    class Thing:
        def __repr__(self) -> str:
            return "<Thing>"

    @tw.tool
    def use(thing: Any) -> Any:
        return thing

    thing = Thing()
    assert use(thing) is thing
    attrs = dict(capture.named("execute_tool use").attributes or {})
    assert attrs["gen_ai.tool.call.arguments"] == '{"thing":"<Thing>"}'
    assert attrs["gen_ai.tool.call.result"] == '"<Thing>"'
    assert STATS.serialization_fallbacks == 2


def test_circular_value_gets_a_marker(capture: Recorded) -> None:
    @tw.tool
    def take(data: dict[str, Any]) -> None:
        return None

    data: dict[str, Any] = {}
    data["self"] = data
    take(data)
    attrs = dict(capture.named("execute_tool take").attributes or {})
    assert attrs["gen_ai.tool.call.arguments"] == '"<unserializable dict: RecursionError>"'


def test_failing_span_processor_never_reaches_the_tool(recorded: Recorded) -> None:
    from opentelemetry.sdk.trace import SpanProcessor

    class Exploding(SpanProcessor):
        def on_end(self, span: Any) -> None:
            raise RuntimeError("processor bug")

    recorded.provider.add_span_processor(Exploding())
    assert add(1, 1) == 2
    assert STATS.instrumentation_errors == 1


async def test_not_sampled_makes_no_span_and_runs_the_tool() -> None:
    rec = make_recorded(sampler=ALWAYS_OFF)
    tw.configure_content(capture_content=True)

    @tw.tool
    def gen() -> Iterator[int]:
        yield 1

    @tw.tool
    async def agen() -> AsyncIterator[int]:
        yield 2

    @tw.tool
    async def coro() -> int:
        return 3

    assert add(1, 1) == 2
    assert list(gen()) == [1]
    assert [x async for x in agen()] == [2]
    assert await coro() == 3
    assert rec.spans() == []


def test_parent_not_sampled_children_not_sampled() -> None:
    rec = make_recorded(sampler=ParentBased(TraceIdRatioBased(0.0)))
    with tw.agent_turn("hi", agent="a"):
        assert add(1, 1) == 2
    assert rec.spans() == []


def test_tool_under_turn_is_child(recorded: Recorded) -> None:
    with tw.agent_turn("hi", agent="bot"):
        add(1)
    turn, call = recorded.named("invoke_agent bot"), recorded.named("execute_tool add")
    assert call.parent is not None and call.parent.span_id == turn.context.span_id


def test_unknown_sampler_records_arguments_after_start() -> None:
    rec = make_recorded(sampler=TraceIdRatioBased(1.0))  # not parent-based: sampling known only at start
    tw.configure_content(capture_content=True)
    with tw.use_tool_call_id("call_r"):
        assert add(2, 2) == 4
    attrs = dict(rec.named("execute_tool add").attributes or {})
    assert attrs == {**base("add", "call_r", "Add two numbers."), "gen_ai.tool.call.arguments": '{"a":2,"b":2}',
                     "gen_ai.tool.call.result": "4"}
    rec_off = make_recorded(sampler=TraceIdRatioBased(0.0))
    assert add(1, 1) == 2
    assert rec_off.spans() == []



def _strict_provider() -> Any:
    """A tracer provider of another vendor (over the real SDK) whose spans raise where the SDK logs."""
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.trace import TracerProvider

    sdk = TracerProvider()

    class Strict(trace_api.NonRecordingSpan):
        def __init__(self, inner: Any) -> None:
            super().__init__(inner.get_span_context())
            self.inner = inner

        def is_recording(self) -> bool:
            return True

        def set_attribute(self, key: str, value: Any) -> None:
            raise ValueError(f"attribute {key} refused")

        def end(self, end_time: int | None = None) -> None:
            self.inner.end(end_time)

    class StrictTracer(trace_api.Tracer):
        def __init__(self, inner: trace_api.Tracer) -> None:
            self.inner = inner

        def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace_api.Span:
            return Strict(self.inner.start_span(name, *args, **kwargs))

        def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    class StrictProvider(trace_api.TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> trace_api.Tracer:
            return StrictTracer(sdk.get_tracer(*args, **kwargs))

    return StrictProvider()


def test_failing_result_attribute_never_reaches_the_tool() -> None:
    # The tool's return value is untouched when recording it fails.
    tw.set_tracer_provider(_strict_provider())
    tw.configure_content(capture_content=True)
    STATS.reset()
    assert add(1, 2) == 3
    assert STATS.instrumentation_errors == 1


async def test_failing_yield_count_attribute_never_reaches_the_generator() -> None:
    @tw.tool
    def count(n: int) -> Generator[int, None, None]:
        yield from range(n)

    @tw.tool
    async def acount(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    tw.set_tracer_provider(_strict_provider())
    for capture in (False, True):
        tw.configure_content(capture_content=capture)
        assert list(count(3)) == [0, 1, 2]
        assert [x async for x in acount(2)] == [0, 1]
        gen = count(5)
        assert next(gen) == 0
        gen.close()  # closing early is not an error either


def test_a_large_generator_item_is_not_kept_as_json_either(capture: Recorded) -> None:
    """Past the content limit the list is cut: the JSON of a large item (10 MB chunks) was kept whole until the
    iteration ended, three times the memory of the unwrapped generator. Only what the attribute keeps is kept."""
    import tracemalloc

    @tw.tool
    def stream(n: int) -> Iterator[str]:
        for _ in range(n):
            yield "x" * (4 << 20)

    gen = stream(2)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        first = next(gen)
        del first
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 1 << 20, held
    assert len(list(gen)) == 1
    attrs = dict(capture.named("execute_tool stream").attributes or {})
    assert attrs["gen_ai.tool.call.result"] == ('["' + "x" * (4 << 20) + '","' + "x" * (4 << 20) + '"]')[:16384]
    assert attrs["toolwatch.truncated"] == ("gen_ai.tool.call.result",)


async def test_a_span_that_fails_to_start_leaves_the_tool_outside_any_exception_handling(recorded: Recorded) -> None:
    """When the span could not be started (a span processor whose `on_start` raises), the tool ran inside the
    wrapper's `except` block: `sys.exc_info()` in the tool gave the telemetry error, every exception the tool raised
    carried it as `__context__` ("During handling of the above exception ..."), and a bare `raise` re-raised it.
    The tool now runs as it does unwrapped."""
    import sys

    from opentelemetry.sdk.trace import SpanProcessor

    class Refusing(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            raise RuntimeError("processor bug")

    recorded.provider.add_span_processor(Refusing())

    def handling() -> object:
        return sys.exc_info()[1]

    def failing() -> None:
        raise ValueError("the tool's own")

    def reraising() -> None:
        raise  # outside any handler: RuntimeError, as unwrapped

    async def handling_async() -> object:
        return sys.exc_info()[1]

    async def failing_async() -> None:
        raise ValueError("the tool's own")

    class Handling:
        async def __call__(self) -> object:
            return sys.exc_info()[1]

    assert tw.tool(handling)() is None
    assert await tw.tool(handling_async)() is None
    assert await tw.tool(name="handling_object")(Handling())() is None
    with pytest.raises(ValueError) as raised:
        tw.tool(failing)()
    assert raised.value.__context__ is None
    with pytest.raises(ValueError) as raised:
        await tw.tool(failing_async)()
    assert raised.value.__context__ is None
    with pytest.raises(RuntimeError, match="No active exception to reraise"):
        tw.tool(reraising)()
    assert STATS.instrumentation_errors == 6
