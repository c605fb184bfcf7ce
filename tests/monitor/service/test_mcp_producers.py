"""Model Context Protocol tool calls (the `mcp` Python SDK) inside an agent turn: the turns a user means.

The spans are captures of real runs, offline, as OTLP JSON, one export request a line (the client's, then the
server's): a FastMCP server (`MCPServer` in mcp 2) with a tool `get_weather(city)` and a tool `get_forecast(city)`
that raises; a client calling, each inside its own agent turn (an `invoke_agent weather_agent` span written with the
OTel SDK, its input the question as GenAI messages), `get_weather({"city": "Paris"})`, `get_forecast` with the same
arguments and `get_time`, which the server does not have (opentelemetry-sdk 1.45.2):
- mcp_native_stdio, mcp_native_memory: mcp 2.3.0, which traces itself: the client's `MCP send tools/call {tool}`
  (CLIENT, no GenAI attribute) and the server's `tools/call {tool}` (SERVER, `gen_ai.operation.name=execute_tool`,
  `gen_ai.tool.name`; a failed call `error.type=tool_error`, status ERROR), the trace context carried in the
  request's `_meta`; the server a subprocess over stdio (its spans exported by its own provider) or in-process
  (`Client(server)`, no client span). mcp records no arguments, no result and no call id (the JSON-RPC request id
  is not one): the calls are unjudged for arguments. A raising tool and an unknown one are both `tool_error`.
  openinference-instrumentation-mcp 2.0.13 makes no span (it carries the trace context across the transport): with
  it the spans are these same ones.
- mcp_openllmetry_stdio: mcp 1.30.0 (which traces nothing itself) with OpenLLMetry's
  opentelemetry-instrumentation-mcp 0.62.4 on both sides, over stdio: the client's `{tool}.tool` span
  (`traceloop.span.kind=tool`, its input `{"tool_name", "arguments"}`, its output `{"result": text}` and
  `"is_error": true` on a failed call, then `error.type=tool_error`, status ERROR), `{method}.mcp` spans for the
  other requests, the server's `ResponseStreamWriter` spans (no kind). OpenLLMetry's server-side tool span is for
  the standalone `fastmcp` package only. 0.62.4 cannot instrument mcp 2 (its import hook raises on
  `mcp.client.streamable_http`, which has no `streamablehttp_client` there).
Neither records the tools offered (the client's `tools/list` is not an offer to a model).

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json

import pytest

from tests.monitor.service.captures import call_rows, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS

QUESTION = "What is the weather in Paris?"
PARIS = {"city": "Paris"}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["mcp_native_stdio", "mcp_native_memory"])
def test_an_mcp_tools_call_is_the_call_of_the_agent_turn_around_it(impl: str, name: str) -> None:
    """Each agent turn is one turn with its input and its one call: the server's `tools/call` span (in the turn's
    trace, under the client's span or the turn's), not the client's; no arguments recorded; a raising tool and an
    unknown one a `tool_error`."""
    turns = captured_turns(name, impl)
    assert [(t.agent, t.input_text, call_rows(t), offered_names(t)) for t in turns] == [
        ("weather_agent", QUESTION, [("get_weather", "", None, False, None)], []),
        ("weather_agent", QUESTION, [("get_forecast", "", None, False, "tool_error")], []),
        ("weather_agent", QUESTION, [("get_time", "", None, False, "tool_error")], []),
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openllmetry_mcp_tool_span_gives_the_calls_arguments_and_result(impl: str) -> None:
    """The client's `{tool}.tool` span is the call: its arguments the input's `arguments` (not the whole input, which
    names the tool too), its result the output; a raising tool and an unknown one a `tool_error` with the server's
    text. The `{method}.mcp` and `ResponseStreamWriter` spans are no calls."""
    turns = captured_turns("mcp_openllmetry_stdio", impl)
    assert [(t.agent, t.input_text, call_rows(t), offered_names(t)) for t in turns] == [
        ("weather_agent", QUESTION, [("get_weather", "", PARIS, False, None)], []),
        ("weather_agent", QUESTION, [("get_forecast", "", PARIS, False, "tool_error")], []),
        ("weather_agent", QUESTION, [("get_time", "", PARIS, False, "tool_error")], []),
    ]
    assert [json.loads(c.result or "null") for t in turns for c in t.calls] == [
        {"result": "It is sunny in Paris."},
        {"result": "Error executing tool get_forecast: no forecast for Paris", "is_error": True},
        {"result": "Unknown tool: get_time", "is_error": True},
    ]
