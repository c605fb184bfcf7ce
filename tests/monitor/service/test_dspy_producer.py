"""DSPy traced through OpenInference (openinference-instrumentation-dspy): the turns a user means.

The instrumentation makes each `Module.__call__` a CHAIN span named `{class}.forward` whose `input.value` is the
bound arguments of the module's `forward` (`dspy.ReAct.forward(**input_args)`: `{"input_args": {"question": ...}}`),
each Predict, adapter and LM call a CHAIN or LLM span, and each `Tool.__call__` a TOOL span named `{tool}.__call__`
that records no `tool.name` and no call id, its `input.value` the bound arguments of `Tool.__call__(**kwargs)`,
`{"kwargs": {...}}`; a raising tool's span fails (status message `ValueError: no such city`, an exception event) and
ReAct hands the error to the model as the observation. ReAct's model is asked for its next tool as text (the
ChatAdapter's `[[ ## next_tool_name ## ]]` fields): its LLM spans request no call and offer no tool (the tools are
described in the system prompt's text). ReAct ends a run by calling its own `finish` tool, offered to the model beside
the program's tools and run as one (a TOOL span `finish.__call__`): a call like smolagents' `final_answer`.

The spans are captures of real runs, offline (dspy 3.4.1, openinference-instrumentation-dspy 0.1.48,
openinference-instrumentation 0.1.72, opentelemetry-sdk 1.45.2, litellm 1.110.2): a `dspy.ReAct("question -> answer",
tools=[get_weather])`, its LM a `dspy.LM("openai/gpt-4o-mini")` pointed at a fake OpenAI-compatible server on the
loopback interface, answering in the ChatAdapter's format, as OTLP JSON, one export request a line (the adapter, LM
and Predict spans' `input.value` / `output.value`, the LM spans' invocation parameters and all of the system prompt
but its first line dropped; the traceback ReAct puts in the trajectory kept with its paths cut to `site-packages/`):
- dspy_react: the model asks for `get_weather` with `{"city": "Paris"}`, then `finish`, then answers.
- dspy_raises: the same asked about Atlantis: `get_weather` raises, the model then asks for `finish` and answers.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

from typing import Any

import pytest

from monitor.assembly import TurnAssembler
from monitor.records import Turn
from tests.monitor.service.captures import call_rows, capture, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS, _impl, convert

S = 10**9


@pytest.mark.parametrize("impl", IMPLS)
def test_a_react_run_is_one_turn_with_its_question_and_calls(impl: str) -> None:
    """The root `ReAct.forward` span is the turn, named after the program's class, its input the question inside
    the bound `input_args`, its answer the prediction's; each TOOL span a call named after its span (no `tool.name`),
    its arguments the keyword ones, ReAct's `finish` one of them. The model requests no call and is offered no tool
    that can be read."""
    [turn] = captured_turns("dspy_react", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == (
        "ReAct",
        "What is the weather in Paris?",
        "It is sunny in Paris.",
    )
    assert call_rows(turn) == [("get_weather", "", {"city": "Paris"}, False, None), ("finish", "", {}, False, None)]
    assert offered_names(turn) == []


@pytest.mark.parametrize("impl", IMPLS)
def test_a_raising_dspy_tool_is_a_failed_call_of_its_turn(impl: str) -> None:
    [turn] = captured_turns("dspy_raises", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == (
        "ReAct",
        "What is the weather in Atlantis?",
        "I could not find the weather in Atlantis.",
    )
    assert call_rows(turn) == [
        ("get_weather", "", {"city": "Atlantis"}, False, "ValueError: no such city"),
        ("finish", "", {}, False, None),
    ]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["dspy_react", "dspy_raises"])
def test_a_request_sent_again_after_its_turn_was_judged_makes_no_turn(impl: str, name: str) -> None:
    """The run's spans in two export requests as the SDK exports them (by end time), cut anywhere; the first request
    sent again (an exporter's retry) after the turn was judged and its trace released. The nested CHAIN spans (Predict,
    the adapter) under another span are steps of the run: sent again without the spans above them, none is a turn
    of its own at the turnless timeout (a turn with no input and no call: judged, every call it expects missed)."""
    _impl(impl)
    spans = sorted(capture(name), key=lambda s: s.end_ns)
    for cut in range(1, len(spans)):
        a = TurnAssembler(grace_s=1.0, turnless_timeout_s=5.0)
        add = a.add_records if impl == "c" else a._add_records_py
        poll = a.poll if impl == "c" else a._poll_py

        def send(part: list[Any], now: int) -> list[Turn]:
            out = add(convert(part, impl)[0], now)
            if impl == "python":
                a._remember_judged(out)  # as add_records does (_weigh)
            return out

        def wait(now: int) -> list[Turn]:
            out = poll(now)
            if impl == "python":
                a._remember_judged(out)  # as poll does (_take_off)
            return out

        first = send(spans[:cut], 0) + send(spans[cut:], 0) + wait(2 * S)
        assert [t.agent for t in first] == ["ReAct"]
        again = send(spans[:cut], 3 * S) + wait(10 * S) + a.flush()
        assert (cut, again, a.pending_traces) == (cut, [], 0)
