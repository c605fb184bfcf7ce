"""A generator or async-generator tool is still one to `inspect` (frameworks pick how to drive a tool by
`inspect.isgeneratorfunction` / `isasyncgenfunction`), while the call stays as it was: a bad call raises at the
call, the tool call id is the one in force at the call, and the span records each item as it was yielded."""

from __future__ import annotations

import asyncio
import functools
import inspect
import pickle
from collections.abc import AsyncIterator, Iterator

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
