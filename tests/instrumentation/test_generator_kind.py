"""A generator or async-generator tool is still one to `inspect` (frameworks pick how to drive a tool by
`inspect.isgeneratorfunction` / `isasyncgenfunction`), while the call stays as it was: a bad call raises at the
call, the tool call id is the one in force at the call, and the span records each item as it was yielded."""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import pickle
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import instrumentation as tw
from tests.instrumentation.conftest import Recorded


@tw.tool
def countdown(n: int, step: int = 1) -> Iterator[int]:
    """Count down from n."""
    while n > 0:
        yield n
        n -= step


@tw.tool
async def ticks(n: int) -> AsyncIterator[dict[str, int]]:
    for i in range(n):
        await asyncio.sleep(0)
        yield {"tick": i}


def test_a_generator_tool_is_a_generator_function_to_inspect_and_records_its_items(capture: Recorded) -> None:
    assert inspect.isgeneratorfunction(countdown)
    assert not inspect.isasyncgenfunction(countdown) and not inspect.iscoroutinefunction(countdown)
    assert str(inspect.signature(countdown)) == "(n: 'int', step: 'int' = 1) -> 'Iterator[int]'"
    assert countdown.__name__ == "countdown" and countdown.__doc__ == "Count down from n."
    with tw.use_tool_call_id("call_c"):
        gen = countdown(3)  # the id in force at the call, not at the first item
    assert inspect.isgenerator(gen) and list(gen) == [3, 2, 1]
    attrs = dict(capture.named("execute_tool countdown").attributes or {})
    assert (attrs["gen_ai.tool.call.id"], attrs["gen_ai.tool.call.result"]) == ("call_c", "[3,2,1]")
    assert attrs["toolwatch.tool.yielded"] == 3


async def test_an_async_generator_tool_is_an_async_generator_function_to_inspect(capture: Recorded) -> None:
    assert inspect.isasyncgenfunction(ticks)
    assert not inspect.isgeneratorfunction(ticks) and not inspect.iscoroutinefunction(ticks)
    items = []
    async for item in ticks(2):
        items.append(item)
        item["tick"] = -1  # recorded as yielded, not as changed afterwards
    assert items == [{"tick": -1}, {"tick": -1}]
    attrs = dict(capture.named("execute_tool ticks").attributes or {})
    assert attrs["gen_ai.tool.call.result"] == '[{"tick":0},{"tick":1}]'


def test_a_bad_call_of_a_generator_tool_still_raises_at_the_call(capture: Recorded) -> None:
    with pytest.raises(TypeError):
        countdown(bogus=1)  # type: ignore[call-arg]
    span = capture.named("execute_tool countdown")
    assert span.status.status_code is StatusCode.ERROR


def test_generator_methods_static_and_class_methods_stay_generator_functions(capture: Recorded) -> None:
    class Tools:
        base = 10

        @tw.tool
        def items(self, n: int) -> Iterator[int]:
            yield from range(self.base, self.base + n)

        @staticmethod
        @tw.tool
        def plain(n: int) -> Iterator[int]:
            yield from range(n)

        @classmethod
        @tw.tool
        async def agen(cls, n: int) -> AsyncIterator[int]:
            for i in range(n):
                yield cls.base + i

    tools = Tools()
    assert inspect.isgeneratorfunction(tools.items) and inspect.isgeneratorfunction(Tools.items)
    assert inspect.isgeneratorfunction(Tools.plain) and inspect.isasyncgenfunction(Tools.agen)
    assert inspect.ismethod(tools.items) and str(inspect.signature(tools.items)) == "(n: 'int') -> 'Iterator[int]'"
    assert list(tools.items(2)) == [10, 11] and list(Tools.plain(2)) == [0, 1]

    async def drain() -> list[int]:
        return [i async for i in Tools.agen(2)]

    assert asyncio.run(drain()) == [10, 11]
    assert {s.name for s in capture.spans()} == {"execute_tool items", "execute_tool plain", "execute_tool agen"}


def test_a_generator_tool_pickles_by_reference_as_a_function_does() -> None:
    assert pickle.loads(pickle.dumps(countdown)) is countdown
    assert pickle.loads(pickle.dumps(ticks)) is ticks


def test_a_partial_of_a_generator_function_stays_a_generator_function(capture: Recorded) -> None:
    def numbers(start: int, n: int) -> Iterator[int]:
        yield from range(start, start + n)

    from_ten = tw.tool(name="from_ten")(functools.partial(numbers, 10))
    assert inspect.isgeneratorfunction(from_ten)
    assert list(from_ten(n=2)) == [10, 11]
    assert capture.named("execute_tool from_ten").attributes is not None


@tw.tool
def lookup(key: str) -> str:
    return key.upper()


@tw.tool
def walk(depth: int) -> Iterator[int]:
    yield depth
    if depth:
        yield from walk(depth - 1)


@tw.tool
def looked_up(n: int) -> Iterator[str]:
    for i in range(n):
        yield lookup(f"k{i}")


@tw.tool
async def looked_up_async(n: int) -> AsyncIterator[str]:
    for i in range(n):
        await asyncio.sleep(0)
        yield lookup(f"k{i}")


def _ids_and_arguments(recorded: Recorded) -> list[tuple[str, str, str]]:
    """(span name, call id, arguments) of each span, sorted."""
    rows = []
    for span in recorded.spans():
        attributes = dict(span.attributes or {})
        rows.append((span.name, str(attributes["gen_ai.tool.call.id"]), str(attributes["gen_ai.tool.call.arguments"])))
    return sorted(rows)


def test_tools_called_inside_a_generator_tool_get_their_own_ids(capture: Recorded) -> None:
    """The model's call id (and the arguments it sent) was still pending while a generator tool ran, as the id is
    taken at the call and the generator runs later, in its consumer's statements: a tool it called took the id too, a
    recursive generator tool called through `ToolExecutor` recorded every level under the model's one id with the
    model's arguments, and one read in a `use_tool_call_id` block gave the id to every tool it called. Tools called
    from inside a generator tool now get their own ids, as they do from inside any other tool."""
    executor = tw.ToolExecutor([walk, looked_up])
    calls = [{"id": "call_w", "type": "function", "function": {"name": "walk", "arguments": '{"depth": 2}'}}]
    assert [r.output for r in executor.execute_tool_calls(calls)] == [[2, 1, 0]]
    with tw.use_tool_call_id("call_l"):
        assert list(looked_up(2)) == ["K0", "K1"]
    spans = _ids_and_arguments(capture)
    assert [s for s in spans if s[1] in ("call_w", "call_l")] == [
        ("execute_tool looked_up", "call_l", '{"n":2}'),
        ("execute_tool walk", "call_w", '{"depth": 2}'),
    ]
    own = sorted((name, arguments) for name, call_id, arguments in spans if call_id not in ("call_w", "call_l"))
    assert own == [("execute_tool lookup", '{"key":"k0"}'), ("execute_tool lookup", '{"key":"k1"}'),
                   ("execute_tool walk", '{"depth":0}'), ("execute_tool walk", '{"depth":1}')]
    assert len({s[1] for s in spans}) == len(spans)


async def test_tools_called_inside_an_async_generator_tool_get_their_own_ids(capture: Recorded) -> None:
    executor = tw.ToolExecutor([looked_up_async])
    calls = [{"id": "call_a", "type": "function", "function": {"name": "looked_up_async", "arguments": '{"n": 2}'}}]
    assert [r.output for r in await executor.aexecute_tool_calls(calls)] == [["K0", "K1"]]
    with tw.use_tool_call_id("call_b"):
        assert [item async for item in looked_up_async(1)] == ["K0"]
    spans = _ids_and_arguments(capture)
    assert [s[1] for s in spans if s[0] == "execute_tool looked_up_async"] == ["call_a", "call_b"]
    assert [s[1].startswith("tw_") for s in spans if s[0] == "execute_tool lookup"] == [True] * 3


def test_an_async_generator_tool_left_open_is_closed_once_when_its_loop_ends(capture: Recorded) -> None:
    """An async generator still open when `asyncio.run` ends is closed by the loop (`shutdown_asyncgens`), which
    closes every one it saw start at once. It saw the original too, as the tool's wrapper started it, and closed it
    while the wrapper was closing it: the loop reported "aclose(): asynchronous generator is already running". The
    loop now sees only the wrapper, as it saw only the original unwrapped; the original is closed through it."""
    log: list[object] = []

    async def stream(n: int) -> AsyncIterator[int]:
        try:
            for i in range(n):
                await asyncio.sleep(0)
                yield i
        finally:
            log.append("closing")
            await asyncio.sleep(0)
            log.append("closed")

    async def read_one(make: Any, held: list[object]) -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: log.append(context["message"]))
        items = make(5)
        held.append(items)  # still open when the loop ends, as one referenced from a traceback is
        async for _ in items:
            break

    async def read_one_in_a_cycle(make: Any) -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: log.append(context["message"]))
        items = make(5)
        cycle = [items]
        cycle.append(cycle)
        async for _ in items:
            break
        del items, cycle
        gc.collect()  # the wrapper and the original, unreachable together: each was finalized by the loop
        for _ in range(3):
            await asyncio.sleep(0)
        log.append("after")

    for make in (stream, tw.tool(stream)):
        log.clear()
        held: list[object] = []
        asyncio.run(read_one(make, held))
        assert log == ["closing", "closed"], make
        log.clear()
        asyncio.run(read_one_in_a_cycle(make))
        assert log == ["closing", "closed", "after"], make
    spans = capture.spans()
    assert [s.name for s in spans] == ["execute_tool stream"] * 2
    assert all(dict(s.attributes or {})["toolwatch.tool.yielded"] == 1 for s in spans)


def test_an_async_generator_tool_whose_span_fails_to_start_still_closes_the_original(recorded: Recorded) -> None:
    from opentelemetry.sdk.trace import SpanProcessor

    class Refusing(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            raise RuntimeError("processor bug")

    recorded.provider.add_span_processor(Refusing())
    log: list[str] = []

    @tw.tool
    async def stream() -> AsyncGenerator[int, None]:
        try:
            yield 1
            yield 2
        finally:
            log.append("closed")

    async def read_one() -> None:
        items = stream()
        async for _ in items:
            break
        await items.aclose()

    asyncio.run(read_one())
    assert log == ["closed"]
