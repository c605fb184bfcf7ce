"""An async tool called with arguments it does not take raises its TypeError at the call, as the unwrapped
function does (it used to raise when awaited), while it stays a coroutine function to `inspect` and `asyncio`
(frameworks await a tool or not by them); the span still covers the await."""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import pickle
import warnings

import pytest
from opentelemetry.trace import StatusCode

import instrumentation as tw
from tests.instrumentation.conftest import Recorded


@tw.tool
async def fetch(url: str, retries: int = 1) -> str:
    """Fetch a page."""
    await asyncio.sleep(0)
    return f"page {url} x{retries}"


def test_a_bad_call_of_an_async_tool_raises_at_the_call_and_is_a_failed_call(capture: Recorded) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is left un-awaited
        with pytest.raises(TypeError, match="bogus"):
            fetch(bogus=1)  # type: ignore[call-arg, unused-coroutine]
    span = capture.named("execute_tool fetch")
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "TypeError"


async def test_an_async_tool_stays_a_coroutine_function_and_its_span_covers_the_await(capture: Recorded) -> None:
    assert inspect.iscoroutinefunction(fetch) and asyncio.iscoroutinefunction(fetch)
    assert not inspect.isgeneratorfunction(fetch) and not inspect.isasyncgenfunction(fetch)
    assert str(inspect.signature(fetch)) == "(url: 'str', retries: 'int' = 1) -> 'str'"
    assert fetch.__name__ == "fetch" and fetch.__doc__ == "Fetch a page." and fetch.__defaults__ == (1,)
    assert repr(fetch).startswith("<function fetch at 0x")
    with tw.use_tool_call_id("call_f"):
        coro = fetch("a")
        assert inspect.iscoroutine(coro) and coro.__qualname__ == fetch.__qualname__
        assert capture.spans() == []  # nothing runs before the await
        assert await coro == "page a x1"
    attrs = dict(capture.named("execute_tool fetch").attributes or {})
    assert (attrs["gen_ai.tool.call.id"], attrs["gen_ai.tool.call.result"]) == ("call_f", '"page a x1"')


async def test_async_methods_static_class_methods_and_partials_stay_coroutine_functions(capture: Recorded) -> None:
    class Tools:
        base = 10

        @tw.tool
        async def add(self, n: int) -> int:
            return self.base + n

        @staticmethod
        @tw.tool
        async def neg(n: int) -> int:
            return -n

        @classmethod
        @tw.tool
        async def mul(cls, n: int) -> int:
            return cls.base * n

    async def scale(factor: int, x: int) -> int:
        return factor * x

    scaled = tw.tool(name="scaled")(functools.partial(scale, 3))
    tools = Tools()
    for func in (tools.add, Tools.add, Tools.neg, Tools.mul, scaled):
        assert inspect.iscoroutinefunction(func) and asyncio.iscoroutinefunction(func), func
    assert inspect.ismethod(tools.add) and str(inspect.signature(tools.add)) == "(n: 'int') -> 'int'"
    assert (await tools.add(1), await Tools.neg(2), await Tools.mul(3), await scaled(x=2)) == (11, -2, 30, 6)
    with pytest.raises(TypeError):
        tools.add(1, 2)
    names = [s.name for s in capture.spans()]
    assert names == ["execute_tool add", "execute_tool neg", "execute_tool mul", "execute_tool scaled",
                     "execute_tool add"]


def test_an_async_tool_pickles_by_reference_as_a_function_does() -> None:
    assert pickle.loads(pickle.dumps(fetch)) is fetch


def test_a_task_cancelled_before_it_starts_leaves_no_coroutine_unawaited(capture: Recorded) -> None:
    """Unwrapped, a task cancelled before its first step ends its coroutine quietly; the original's coroutine the
    wrapper made at the call must not then be reported as never awaited."""

    async def cancel_before_start() -> None:
        task = asyncio.ensure_future(fetch("a"))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(cancel_before_start())
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
