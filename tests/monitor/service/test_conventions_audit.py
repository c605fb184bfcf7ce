"""Spans in the shapes their producers really write, checked against what the conventions mean (the real OTel SDK,
through OTLP protobuf, by the Python and the C normalizer alike).

LangChain through OpenInference: langchain_core's BaseTool.run hands the callbacks `str(tool_input)` (a Python repr
of the arguments dict, `{'city': 'Paris'}`), which its tracers record as the run's `{"input": input_str}`;
openinference-instrumentation-langchain writes that single string as the TOOL span's `input.value` (with no mime type:
it is no JSON). Those are the call's arguments, not a tool's single string input.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.normalize import Normalizer
from monitor.records import ToolCall
from tests.monitor.service.test_normalize_foreign import PATHS, Convert, _only, _run, _spans

ARGS = {"log_excerpt": "token expired at 12:00", "window_minutes": 5, "strict": True, "team": None,
        "tags": ["auth", "l'oncall"]}  # fmt: skip


def _langchain_tool(input_value: str) -> Any:
    def build(tracer: Any) -> None:
        root = {"openinference.span.kind": "CHAIN", "input.value": json.dumps({"input": "[AUTH] token expired"}),
                "input.mime_type": "application/json"}  # fmt: skip
        with tracer.start_as_current_span("AgentExecutor", attributes=root):
            tool = {"openinference.span.kind": "TOOL", "tool.name": "pull_auth_telemetry", "input.value": input_value,
                    "output.value": "ok"}  # fmt: skip
            with tracer.start_as_current_span("pull_auth_telemetry", attributes=tool):
                pass

    return build


@pytest.mark.parametrize("convert", PATHS)
def test_langchain_tool_arguments_through_openinference(convert: Convert) -> None:
    out, problems, rejected = _run(convert, _spans(_langchain_tool(str(ARGS))))
    (call,) = _only(out, ToolCall)
    assert (problems, rejected) == ([], {})
    assert call.arguments is not None and json.loads(call.arguments) == ARGS
    (same,) = _only(Normalizer().split(_spans(_langchain_tool(str(ARGS))))[0], ToolCall)
    assert same.arguments == call.arguments


@pytest.mark.parametrize("convert", PATHS)
@pytest.mark.parametrize(
    "text",
    [
        "token expired",  # a tool's single string input: names no argument
        "{'when': datetime.date(2024, 1, 1)}",  # not a literal: not read
        "{'a': {1, 2}}",  # a set: no JSON
        "{(1, 2): 'x'}",  # a key that is no str: no JSON object
        "{'a': 1} or {'b': 2}",
        "[{'a': 1}]",  # a list: no arguments object
        "{'a': " * 400 + "1" + "}" * 400,  # nested past the parser's limits
        "{'a': float('nan')}",
    ],
)
def test_langchain_tool_inputs_that_name_no_arguments(convert: Convert, text: str) -> None:
    out, problems, rejected = _run(convert, _spans(_langchain_tool(text)))
    (call,) = _only(out, ToolCall)
    assert (problems, rejected, call.arguments) == ([], {}, None)


@pytest.mark.parametrize("convert", PATHS)
def test_a_long_python_repr_of_arguments_is_not_read(convert: Convert) -> None:
    """Reading a repr costs 25-55 ms of CPU per 64 KiB (ast.literal_eval, on the request path of `serve`): past
    8 KiB the arguments are not captured (unjudged, never wrong); up to it they are read."""
    long = {"log_excerpt": "x" * 9000}
    out, problems, _ = _run(convert, _spans(_langchain_tool(str(long))))
    (call,) = _only(out, ToolCall)
    assert (problems, call.arguments) == ([], None)
    fits = {"log_excerpt": "x" * 8000}
    out, _, _ = _run(convert, _spans(_langchain_tool(str(fits))))
    (call,) = _only(out, ToolCall)
    assert call.arguments is not None and json.loads(call.arguments) == fits
