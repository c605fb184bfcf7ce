"""Arguments and results a tool may well take or give that telemetry cannot record as they are: the call returns
the very result, quickly, and its span is still recorded, bounded, with what could not be recorded marked."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import instrumentation as tw
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
