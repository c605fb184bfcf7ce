"""Property tests: a wrapped tool behaves exactly like the unwrapped one, whatever it returns or raises,
and concurrent calls (threads, asyncio tasks) each get their own correct span."""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import AsyncGenerator, Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import instrumentation as tw
from tests.instrumentation.conftest import Recorded

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
odd_values = st.sampled_from([object(), b"bytes", {1, 2}, (1, "a"), frozenset(), 1 + 2j, Ellipsis])
values = json_values | odd_values


class ToolFailure(Exception):
    pass


exception_types = st.sampled_from([ValueError, KeyError, RuntimeError, ToolFailure, ZeroDivisionError])
exception_args = st.lists(st.integers() | st.text(max_size=10), max_size=3).map(tuple)


def _raise(kind: type[Exception], args: tuple[Any, ...]) -> None:
    raise kind(*args)


def identity(value: Any, fail: type[Exception] | None = None, args: tuple[Any, ...] = ()) -> Any:
    if fail is not None:
        _raise(fail, args)
    return value


wrapped_identity = tw.tool(identity)


def frames(exc: BaseException) -> list[tuple[str, int | None, str]]:
    return [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]


def outcome(func: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return "value", func(*args)
    except Exception as exc:  # noqa: BLE001 - captured for comparison
        return "error", exc


@SETTINGS
@given(value=values)
def test_same_object_returned(capture: Recorded, value: Any) -> None:
    capture.clear()
    assert wrapped_identity(value) is value
    [span] = capture.spans()
    assert (span.attributes or {})["gen_ai.tool.call.result"] is not None


@SETTINGS
@given(kind=exception_types, args=exception_args, value=values)
def test_same_exception_reraised(capture: Recorded, kind: type[Exception], args: tuple[Any, ...], value: Any) -> None:
    capture.clear()
    plain_kind, plain = outcome(identity, value, kind, args)
    wrapped_kind, wrapped = outcome(wrapped_identity, value, kind, args)
    assert plain_kind == wrapped_kind == "error"
    assert type(wrapped) is type(plain) and wrapped.args == plain.args
    # The original frames (the tool, down to the raise) are all there, in order; the wrapper adds one on top.
    plain_frames, wrapped_frames = frames(plain), frames(wrapped)
    assert wrapped_frames[-len(plain_frames) + 1:] == plain_frames[1:]
    assert wrapped_frames[-len(plain_frames)][0].endswith("_tool.py")
    [span] = capture.spans()
    assert (span.attributes or {})["error.type"] == kind.__qualname__


def test_the_very_exception_object_propagates(recorded: Recorded) -> None:
    error = ToolFailure("same object")

    @tw.tool
    def raiser() -> None:
        raise error

    try:
        raiser()
    except ToolFailure as caught:
        assert caught is error
        assert frames(caught)[-1][2] == "raiser"


def echo_generator(items: list[Any]) -> Generator[Any, Any, str]:
    """Yields the items; a value sent in is yielded back next; a thrown KeyError is yielded as a marker."""
    for item in items:
        try:
            sent = yield item
        except KeyError as exc:
            sent = ("caught", exc.args)
        if sent is not None:
            yield ("sent", sent)
    return "done"


operations = st.lists(st.sampled_from(["next", "send", "throw", "close"]), max_size=12)


def drive(gen: Generator[Any, Any, Any], ops: list[str]) -> list[Any]:
    log: list[Any] = []
    for op in ["next", *ops]:
        try:
            if op == "next":
                log.append(("item", next(gen)))
            elif op == "send":
                log.append(("item", gen.send(7)))
            elif op == "throw":
                log.append(("item", gen.throw(KeyError("k"))))
            else:
                gen.close()
                log.append(("closed",))
        except StopIteration as stop:
            log.append(("stop", stop.value))
            break
        except Exception as exc:  # noqa: BLE001
            log.append(("error", type(exc), exc.args))
            break
    return log


@SETTINGS
@given(items=st.lists(values, max_size=6), ops=operations)
def test_generators_behave_identically(capture: Recorded, items: list[Any], ops: list[str]) -> None:
    wrapped = tw.tool(echo_generator)
    assert drive(wrapped(items), ops) == drive(echo_generator(items), ops)


async def echo_async_generator(items: list[Any]) -> AsyncGenerator[Any, Any]:
    for item in items:
        try:
            sent = yield item
        except KeyError as exc:
            sent = ("caught", exc.args)
        if sent is not None:
            yield ("sent", sent)


async def adrive(gen: AsyncGenerator[Any, Any], ops: list[str]) -> list[Any]:
    log: list[Any] = []
    for op in ["next", *ops]:
        try:
            if op == "next":
                log.append(("item", await gen.__anext__()))
            elif op == "send":
                log.append(("item", await gen.asend(7)))
            elif op == "throw":
                log.append(("item", await gen.athrow(KeyError("k"))))
            else:
                await gen.aclose()
                log.append(("closed",))
        except StopAsyncIteration:
            log.append(("stop",))
            break
        except Exception as exc:  # noqa: BLE001
            log.append(("error", type(exc), exc.args))
            break
    return log


@SETTINGS
@given(items=st.lists(values, max_size=6), ops=operations)
def test_async_generators_behave_identically(capture: Recorded, items: list[Any], ops: list[str]) -> None:
    wrapped = tw.tool(echo_async_generator)

    async def both() -> tuple[list[Any], list[Any]]:
        return await adrive(wrapped(items), ops), await adrive(echo_async_generator(items), ops)

    mine, theirs = asyncio.run(both())
    assert mine == theirs


@SETTINGS
@given(value=values, fail=st.none() | exception_types)
def test_async_functions_behave_identically(capture: Recorded, value: Any, fail: type[Exception] | None) -> None:
    async def plain(v: Any) -> Any:
        await asyncio.sleep(0)
        return identity(v, fail, ("x",))

    wrapped = tw.tool(plain)

    async def run(func: Callable[..., Any]) -> tuple[str, Any]:
        try:
            return "value", await func(value)
        except Exception as exc:  # noqa: BLE001
            return "error", (type(exc), exc.args)

    async def both() -> tuple[tuple[str, Any], tuple[str, Any]]:
        return await run(wrapped), await run(plain)

    mine, theirs = asyncio.run(both())
    assert mine[0] == theirs[0]
    assert mine[1] is theirs[1] if mine[0] == "value" else mine[1] == theirs[1]


@tw.tool
def square(n: int) -> int:
    return n * n


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(numbers=st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=40, unique=True))
def test_concurrent_threads_get_their_own_spans(capture: Recorded, numbers: list[int]) -> None:
    capture.clear()

    def call(n: int) -> int:
        with tw.use_tool_call_id(f"call_{n}"):
            return square(n)

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(call, numbers)) == [n * n for n in numbers]
    spans = capture.spans()
    assert len(spans) == len(numbers)
    for span in spans:
        attrs = span.attributes or {}
        n = json.loads(str(attrs["gen_ai.tool.call.arguments"]))["n"]
        assert attrs["gen_ai.tool.call.id"] == f"call_{n}"
        assert attrs["gen_ai.tool.call.result"] == str(n * n)
        assert span.parent is None


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(numbers=st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=30, unique=True))
def test_concurrent_tasks_get_their_own_spans_and_parents(capture: Recorded, numbers: list[int]) -> None:
    capture.clear()

    @tw.tool
    async def slow_square(n: int) -> int:
        await asyncio.sleep(0.001 * (n % 3))
        return n * n

    async def turn(n: int) -> int:
        async with tw.agent_turn(f"square {n}", agent="calc"):
            with tw.use_tool_call_id(f"call_{n}"):
                return await slow_square(n)

    async def run_all() -> list[int]:
        return list(await asyncio.gather(*(turn(n) for n in numbers)))

    assert asyncio.run(run_all()) == [n * n for n in numbers]
    turns = {s.context.span_id: s for s in capture.spans() if s.name == "invoke_agent calc"}
    calls = [s for s in capture.spans() if s.name == "execute_tool slow_square"]
    assert len(turns) == len(calls) == len(numbers)
    for call in calls:
        attrs = call.attributes or {}
        n = json.loads(str(attrs["gen_ai.tool.call.arguments"]))["n"]
        assert attrs["gen_ai.tool.call.id"] == f"call_{n}"
        assert call.parent is not None
        parent = turns[call.parent.span_id]
        assert f"square {n}" in str((parent.attributes or {})["gen_ai.input.messages"])
