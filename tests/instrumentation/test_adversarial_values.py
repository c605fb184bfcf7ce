"""Arguments and results a tool may well take or give that telemetry cannot record as they are: the call returns
the very result, quickly, and its span is still recorded, bounded, with what could not be recorded marked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import instrumentation as tw
from instrumentation._content import SETTINGS, to_json, to_json_prefix
from instrumentation._stats import STATS
from tests.instrumentation.conftest import Recorded


@tw.tool
def echo(data: Any) -> Any:
    return data


@tw.tool
async def async_echo(data: Any) -> Any:
    return data


@tw.tool
def echo_items(data: Any) -> Iterator[Any]:
    yield data


def _self_referential() -> tuple[dict[str, Any], list[Any]]:
    mapping: dict[str, Any] = {"token": "t"}
    mapping["self"] = mapping
    items: list[Any] = [1]
    items.append(items)
    return mapping, items


def _deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"inner": value}
    return value


def test_key_redaction_of_a_self_referential_or_very_deep_argument_keeps_the_span(recorded: Recorded) -> None:
    """Key redaction walks the arguments: on a self-referential or very deep one it ran out of stack and the whole
    span was lost (the tool ran untraced); the arguments are left out, marked, as when a redaction hook fails."""
    tw.configure_content(capture_content=True, redact_keys=["token"])
    mapping, items = _self_referential()
    deep = _deep(100_000)
    for value in (mapping, items, deep):
        assert echo(value) is value
        assert asyncio.run(async_echo(value)) is value
        assert next(echo_items(value)) is value
    spans = recorded.spans()
    assert [s.name for s in spans] == ["execute_tool echo", "execute_tool async_echo", "execute_tool echo_items"] * 3
    for span in spans:
        attrs = dict(span.attributes or {})
        assert attrs["toolwatch.content.error"] == "redaction_failed" and "gen_ai.tool.call.arguments" not in attrs
    assert STATS.instrumentation_errors == 0 and STATS.redaction_failures == 9


def _seconds(call: Any) -> float:
    """The CPU time this thread spends in `call`. Not wall-clock time: on a loaded machine (another test worker on
    each core) a few-millisecond call is often descheduled for tens of ms, and its wall time says nothing of its cost
    (measured under load: a bounded prefix 1.5-25 ms wall for 1.7-2.4 ms of CPU). Everything timed here runs in the
    calling thread, so its CPU time is the whole cost."""
    start = time.thread_time()
    call()
    return time.thread_time() - start


@pytest.mark.parametrize("kind", ["list", "dict", "str", "bytes", "nested"])
def test_a_huge_argument_and_result_cost_far_less_than_serializing_them(capture: Recorded, kind: str) -> None:
    """Only the first 16 KiB of the JSON is kept, yet a huge argument and result were each serialized whole: a
    2-million-item list added about twice its whole JSON encoding to the call. The attributes are the same."""
    size = 2_000_000
    makers: dict[str, Callable[[], Any]] = {
        "list": lambda: list(range(size)),
        "dict": lambda: {str(i): i for i in range(size // 4)},
        "str": lambda: "é\\x" * (size * 4),
        "bytes": lambda: b"\x00ab" * (size * 4),
        "nested": lambda: {"rows": [[i, str(i)] for i in range(size // 4)], "more": list(range(size))},
    }
    value = makers[kind]()
    whole = min(_seconds(lambda: to_json(value)) for _ in range(2))
    took = min(_seconds(lambda: echo(value)) for _ in range(2))
    assert took < whole / 4, (took, whole)
    limit = SETTINGS.current.max_length
    expected = to_json(value)[:limit]
    attrs = dict(capture.spans()[-1].attributes or {})
    assert attrs["gen_ai.tool.call.result"] == expected
    assert attrs["gen_ai.tool.call.arguments"] == ('{"data":' + to_json(value))[:limit]
    assert attrs["toolwatch.truncated"] == ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")


prefix_leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30)
    | st.binary(max_size=30) | st.binary(max_size=30).map(lambda b: b + b"'")  # its repr quotes with "
    | st.sampled_from([b"it's", b'say "hi"', b"'\"", bytearray(b"x'y")])
)
prefix_values = prefix_leaves | st.recursive(
    prefix_leaves,
    lambda inner: st.lists(inner, max_size=12) | st.lists(inner, max_size=6).map(tuple)
    | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=8)
    | st.frozensets(st.integers(), max_size=9),
    max_leaves=60,
)


@settings(max_examples=400, deadline=None)
@given(value=prefix_values, data=st.data())
def test_a_prefix_is_the_beginning_of_the_whole_json(value: Any, data: st.DataObject) -> None:
    whole = to_json(value)
    limit = data.draw(st.integers(min_value=1, max_value=len(whole) + 1), label="limit")  # a cut anywhere in it
    prefix = to_json_prefix(value, limit)
    if len(whole) <= limit:
        assert prefix == whole
    else:
        assert len(prefix) > limit and prefix[:limit] == whole[:limit]


class RemoteClient:
    """A dynamic proxy, as RPC clients and service stubs are: any attribute is a remote method, called on the wire."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def remote(*args: Any, **kwargs: Any) -> Any:
            self.sent.append(name)
            return RemoteClient()  # the answer: another proxy

        return remote

    def __repr__(self) -> str:
        return "<RemoteClient>"


def test_a_proxy_argument_or_result_is_recorded_by_its_repr_and_no_method_of_it_is_called(capture: Recorded) -> None:
    """Any object answering every attribute (an RPC client, a service stub, a test double) was taken for a pydantic
    model: its `model_dump(mode="json")` was called, and that result's, and so on until the recursion limit, twice
    (about 1,500 remote calls, seconds to tens of seconds per tool call). Only a class that defines `model_dump` is
    dumped; the proxy is recorded by its repr and receives no call, as it would unwrapped."""
    from unittest.mock import MagicMock

    client = RemoteClient()
    assert echo(client) is client
    assert asyncio.run(async_echo(client)) is client
    assert next(echo_items(client)) is client
    assert client.sent == []
    double = MagicMock()
    took = _seconds(lambda: echo(double))
    assert double.mock_calls == [] and took < 0.5, took
    spans = capture.spans()
    arguments = [dict(s.attributes or {})["gen_ai.tool.call.arguments"] for s in spans]
    assert arguments[:3] == ['{"data":"<RemoteClient>"}'] * 3
    assert dict(spans[0].attributes or {})["gen_ai.tool.call.result"] == '"<RemoteClient>"'
    assert str(arguments[3]).startswith('{"data":"<MagicMock id=')
    assert to_json(client) == '"<RemoteClient>"' and client.sent == []  # the encoder's fallback too
