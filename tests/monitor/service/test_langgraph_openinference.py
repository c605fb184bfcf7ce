"""LangGraph traced through OpenInference (openinference-instrumentation-langchain): the turns a user means.

OpenInference gives a span the AGENT kind whenever "agent" is in the LangChain run's name: LangGraph's prebuilt
`create_react_agent` names its model node `agent`, so each model step is an AGENT span beside the `tools` node's
CHAIN span, under the graph run; a tool whose name holds "agent" (langgraph-supervisor's `transfer_to_{agent}`
handoffs) is an AGENT span too, with `tool.name`.

The spans are captures of real runs (langgraph 1.2.24, langgraph-prebuilt 1.1.3, langgraph-supervisor 0.0.31,
langchain-core 1.8.3, openinference-instrumentation-langchain 0.1.80, opentelemetry-sdk 1.45.2; a fake chat model
answering with a tool call, then text), as OTLP JSON, one export request a line, with the attributes the normalizer
reads (the rest dropped to keep the files small):
- langgraph_react: one `create_react_agent` run (get_weather);
- langgraph_supervisor: a langgraph-supervisor graph over two `create_react_agent` sub-agents, `weather_agent`
  (get_weather) and `math_agent` (add), the supervisor handing off to each in turn;
- langgraph_subgraphs: a graph whose two nodes are those sub-agents (compiled graphs added as nodes);
- langgraph_raises: one `create_react_agent` run whose model asks for two calls of `get_weather` in one step (Paris,
  then Atlantis), its ToolNode made with `handle_tool_errors=True`: the Atlantis call raises `ValueError` (its TOOL
  span fails, with no output; the traceback after the status message's first line dropped: machine paths), the
  ToolNode hands the model the error, the model answers;
- langgraph_toolexception: the same run, the tool made with `handle_tool_error=True` raising `ToolException`: the tool
  itself returns the error as a ToolMessage of status `error` (its TOOL span ends OK, with that output).

Two more, with every attribute and event kept (langgraph 1.2.24, langgraph-prebuilt 1.1.3, langchain-core 1.8.3,
openinference-instrumentation-langchain 0.1.80, opentelemetry-sdk 1.45.2; their paths made neutral):
- langgraph_traceback: one `create_react_agent` run (ToolNode with `handle_tool_errors=True`) whose model asks for
  three calls of `get_weather` in one step: Paris runs, Atlantis raises `NoSuchCity` (a class of the application's
  `__main__`), Lemuria raises `ValueError`. A raising tool's TOOL span fails with LangChain's text of the error, its
  repr followed by its traceback (`NoSuchCity('no such city: Atlantis')Traceback (most recent call last):...`), and an
  `exception` event (`exception.type` `__main__.NoSuchCity`).
- langgraph_direct: a graph whose node runs a tool with `tool.invoke` (no ToolNode): the tool's output is the text it
  returns, recorded as it is; one returns a ToolMessage's `messages_to_dict` JSON text (a `tool_call_id` `call_zz`,
  status `error`), which openinference-instrumentation-langchain tags `application/json` as it tags a ToolMessage a
  ToolNode's tool returned (any output text opening with `{` and ending with `}` is); the tool run once more alone,
  at the root.

A TOOL span's call id is the `tool_call_id` of the ToolMessage its output holds (the tool's run records none of its
own): a call that raised has no output, its error the raised exception's type, and its id is the one its ToolNode
task's span holds (the CHAIN span `tools` around it, whose input is the call: a CallIdMark, test_langgraph_task_ids).
A ToolMessage of status `error` is a failed call, its error the message's text.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import pytest

from monitor.assembly import TurnAssembler
from monitor.otlp import Span
from monitor.records import RequestedCall, Turn
from tests.monitor.service.captures import call_rows, capture, captured_turns
from tests.monitor.service.test_requested_calls import IMPLS, S, _impl, assemble, convert


def _turns(name: str, impl: str) -> list[Turn]:
    return captured_turns(f"langgraph_{name}_openinference", impl)


def _calls(t: Turn) -> list[tuple[str, str, bool]]:
    """Each call of the turn: (name, call id, whether it is a requested call that did not run)."""
    return [(c.name, c.call_id, isinstance(c, RequestedCall)) for c in t.calls]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_create_react_agent_run_is_one_turn_with_its_executed_call(impl: str) -> None:
    """The graph run (its root CHAIN span) is the turn; the model steps (`agent`) are steps of it: the call the model
    requested is the call the `tools` node ran, once (paired by the id of the ToolMessage its TOOL span output)."""
    turns = _turns("react", impl)
    assert [(t.agent, t.input_text) for t in turns] == [("LangGraph", "weather in Paris?")]
    [call] = turns[0].calls
    assert (call.name, call.call_id, call.arguments) == ("get_weather", "call_w1", None)  # a single string input
    assert not isinstance(call, RequestedCall)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_supervisor_and_its_sub_agents_are_one_turn_each(impl: str) -> None:
    """The supervisor's run (the graph's root) is one turn, its handoffs no calls; each sub-agent it hands off to is
    an agent run of its own name, one turn holding the call its tools node ran, its model steps folded into it."""
    turns = _turns("supervisor", impl)
    assert [(t.agent, _calls(t)) for t in turns] == [
        ("LangGraph", []),
        ("weather_agent", [("get_weather", "call_w2", False)]),
        ("math_agent", [("add", "call_a1", False)]),
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_sub_agents_added_as_graph_nodes_are_one_turn_each(impl: str) -> None:
    turns = _turns("subgraphs", impl)
    assert [(t.agent, _calls(t)) for t in turns] == [
        ("LangGraph", []),
        ("weather_agent", [("get_weather", "call_w2", False)]),
        ("math_agent", [("add", "call_a1", False)]),
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_two_calls_of_one_tool_one_raising_are_paired_right(impl: str) -> None:
    """The call that returned is paired with the requested call of its ToolMessage's id; the one that raised (no
    output) with the requested call of the id its ToolNode task's span holds, so both requested calls are accounted
    for and none is left as never run; the failed call keeps its error."""
    [turn] = _turns("raises", impl)
    assert (turn.agent, turn.input_text) == ("LangGraph", "weather in Paris and Atlantis?")
    assert call_rows(turn) == [
        ("get_weather", "call_w1", None, False, None),
        ("get_weather", "call_w2", None, False, "ValueError"),
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_raising_tools_error_is_its_exceptions_type_not_its_traceback(impl: str) -> None:
    """LangChain records a raised exception as its repr followed by its traceback: the call's error is the exception's
    type (an application's class by its name, as toolwatch's own `@tool` records it), each call paired as before."""
    [turn] = _turns("traceback", impl)
    assert (turn.input_text, turn.output_text) == ("weather in Paris, Atlantis and Lemuria?", "Sunny in Paris only.")
    assert call_rows(turn) == [
        ("get_weather", "call_w2", None, False, "NoSuchCity"),
        ("get_weather", "call_w1", None, False, None),
        ("get_weather", "call_w3", None, False, "ValueError"),
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_tools_run_without_a_tool_node_are_calls_with_their_text(impl: str) -> None:
    """A tool run by `tool.invoke` returns its text, not a ToolMessage: the calls have no id, their results its
    texts."""
    turn, alone = _turns("direct", impl)
    assert (turn.agent, turn.input_text) == ("LangGraph", "look it up")
    assert [(c.name, c.call_id, c.result, c.error_type) for c in turn.calls[1:]] == [
        ("lookup", "", "sunny, no JSON", None),
        ("lookup", "", '{"found": "sunny"}', None),
    ]


@pytest.mark.xfail(
    strict=True,
    reason="a tool returning a ToolMessage's JSON text is recorded as a ToolMessage a ToolNode's tool returned is "
    "(the same text, `output.mime_type` application/json for both): it is read as one, its id and status taken",
)
@pytest.mark.parametrize("impl", IMPLS)
def test_a_tools_text_that_looks_like_a_tool_message_is_that_text(impl: str) -> None:
    turn, alone = _turns("direct", impl)
    assert [(c.name, c.call_id, c.error_type) for c in (turn.calls[0], *alone.calls)] == [("lookup", "", None)] * 2


@pytest.mark.parametrize("impl", IMPLS)
def test_a_tool_returning_its_error_is_paired_by_its_id_and_failed(impl: str) -> None:
    """A tool that hands its ToolException back as a ToolMessage (`handle_tool_error`) ran: both calls carry the
    ids the model gave them; the one whose ToolMessage is of status `error` failed (its span ended OK), its error the
    message's text."""
    [turn] = _turns("toolexception", impl)
    assert call_rows(turn) == [
        ("get_weather", "call_w1", None, False, None),
        ("get_weather", "call_w2", None, False, "no such city: Atlantis"),
    ]


# ---- a call that raised, paired by the id its ToolNode task's span holds ----------------------------------------

ATLANTIS = ("2e13aac184d942b8", "6aadb211c7a96732")  # langgraph_traceback: the Atlantis call's TOOL span, its task's
ROOT = "de62d827852bdfbe"  # langgraph_traceback: the graph run's span (the turn)


def _traceback(*left_out: str) -> list[Span]:
    return [s for s in capture("langgraph_traceback_openinference") if s.span_id not in left_out]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_raising_call_takes_its_tasks_id_not_that_of_a_call_of_its_tool_never_run(impl: str) -> None:
    """langgraph_traceback as if the Atlantis call had never run (its step ended before its task started, as when the
    ToolNode does not handle errors and Lemuria's raised first): its TOOL span and its task's span left out. Lemuria
    raised (no ToolMessage, no id of its own); by name it took the place of Atlantis, the first call of its name left:
    Atlantis was judged as run and failed, Lemuria as never run. The id its task's span holds pairs it with its own
    call: Atlantis is the call never run, with the arguments the model gave it."""
    _impl(impl)
    [turn], _ = assemble(_traceback(*ATLANTIS), impl, flush=True)
    assert sorted(call_rows(turn), key=str) == [
        ("get_weather", "call_w1", None, False, None),
        ("get_weather", "call_w2", {"city": "Atlantis"}, True, None),
        ("get_weather", "call_w3", None, False, "ValueError"),
    ]


def _one_at_a_time(spans: list[Span], impl: str) -> tuple[list[Turn], TurnAssembler]:
    """Each span exported alone as it ends (a task's span after the TOOL span under it, the graph run's last), polled
    after each (times relative to the first end), then a poll past every grace period and timeout."""
    _impl(impl)
    spans = sorted(spans, key=lambda s: s.end_ns)
    a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
    python = impl == "python"
    add, poll = (a._add_records_py, a._poll_py) if python else (a.add_records, a.poll)
    out: list[Turn] = []
    for s in spans:
        now = s.end_ns - spans[0].end_ns
        out += add(convert([s], impl)[0], now)
        out += poll(now)
    out += poll(spans[-1].end_ns - spans[0].end_ns + 60 * S)
    assert a.pending_traces == 0
    return out, a


@pytest.mark.parametrize("impl", IMPLS)
def test_a_raising_calls_id_holds_when_its_tasks_span_arrives_after_it(impl: str) -> None:
    """A task's span ends, and is exported, after the TOOL span under it: its id is given at the turn's release (the
    graph run's span ends last, and the turn waits a grace period), the same as when the spans arrive together."""
    [turn], a = _one_at_a_time(_traceback(), impl)
    assert call_rows(turn) == [
        ("get_weather", "call_w2", None, False, "NoSuchCity"),
        ("get_weather", "call_w1", None, False, None),
        ("get_weather", "call_w3", None, False, "ValueError"),
    ]
    [turn], a = _one_at_a_time(_traceback(*ATLANTIS), impl)
    assert sorted(call_rows(turn), key=str)[1:] == [
        ("get_weather", "call_w2", {"city": "Atlantis"}, True, None),
        ("get_weather", "call_w3", None, False, "ValueError"),
    ]
    assert (a.stats.late_calls, a.stats.duplicates, a.stats.oversized_calls) == (0, 0, 0)


@pytest.mark.parametrize("impl", IMPLS)
def test_calls_without_their_turn_take_their_tasks_ids(impl: str) -> None:
    """The graph run's span never received: the calls are released alone (turnless) after the timeout, reconciled
    as a turn's, each raising call with its task's id."""
    [turn], _ = _one_at_a_time(_traceback(ROOT, *ATLANTIS), impl)
    assert turn.turnless
    assert sorted(call_rows(turn), key=str) == [
        ("get_weather", "call_w1", None, False, None),
        ("get_weather", "call_w2", {"city": "Atlantis"}, True, None),
        ("get_weather", "call_w3", None, False, "ValueError"),
    ]
