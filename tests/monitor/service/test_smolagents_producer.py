"""Hugging Face smolagents traced through OpenInference (openinference-instrumentation-smolagents): the turns a user
means.

The instrumentation makes `MultiStepAgent.run` an AGENT span named `{agent name}.run` (the class name when the agent
has none) whose `input.value` is the run's bound arguments (`{"task": ..., "stream": ..., "reset": ...}`), each step
a CHAIN span, each model request an LLM span (`OpenAIModel.generate`: the calls it asked for and, for a
ToolCallingAgent, the tools it offered) and each `Tool.__call__` a TOOL span whose `input.value` is that call's bound
arguments, `{"args": [...], "sanitize_inputs_outputs": ..., "kwargs": {...}}`, with no call id; a raising tool's span
fails (status message `ValueError: no such city`, an exception event). smolagents ends a run by calling its own
`final_answer` tool: a real call, offered to the model beside the agent's tools, and recorded as one.

The spans are captures of real runs, offline (smolagents 1.26.0, openinference-instrumentation-smolagents 0.1.43,
openinference-instrumentation 0.1.72, opentelemetry-sdk 1.45.2, openai 3.57.0): an agent `weather_agent` with one
`@tool` `get_weather(city)`, its model an OpenAIServerModel pointed at a fake OpenAI-compatible server on the loopback
interface, as OTLP JSON, one export request a line (the LLM and step spans' `input.value` / `output.value` reprs,
stack traces and all of the system prompt but its first line dropped: no machine path or memory address):
- smolagents_tool: a ToolCallingAgent; the model asks for `get_weather({"city": "Paris"})` (`call_1`), then
  `final_answer({"answer": "It is sunny in Paris."})` (`call_2`).
- smolagents_raises: the same asked about Atlantis: `get_weather` raises, the model then calls `final_answer`.
- smolagents_code: a CodeAgent; the model writes `get_weather(city="Paris")` then `final_answer("It is sunny in
  Paris.")` (positionally) as Python. A CodeAgent's model requests no call (its code is text) and is offered no tool
  (`llm.tools` not set): the calls are the TOOL spans the code's calls made, judged as any other.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from monitor.cli.replay_cmd import replay
from monitor.records import ToolCall
from tests.monitor.service.captures import DATA, call_rows, captured_turns, cpu_timed, offered_names
from tests.monitor.service.spans import new_tracer
from tests.monitor.service.test_requested_calls import IMPLS, _impl, convert, decoded

PARIS = {"city": "Paris"}
SUNNY = "It is sunny in Paris."


@pytest.mark.parametrize("impl", IMPLS)
def test_a_tool_calling_agent_run_is_one_turn_with_its_question_and_calls(impl: str) -> None:
    """The run's AGENT span is the turn, named after the agent, its input the task (not the run's bound arguments);
    each call the model asked for is the call that ran (paired by name: the TOOL span has no id), with its keyword
    arguments (not the bound arguments of `Tool.__call__`)."""
    [turn] = captured_turns("smolagents_tool", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", "What is the weather in Paris?", SUNNY)
    assert call_rows(turn) == [
        ("get_weather", "", PARIS, False, None),
        ("final_answer", "", {"answer": SUNNY}, False, None),
    ]
    assert offered_names(turn) == ["get_weather", "final_answer"]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_raising_tool_is_a_failed_call_of_its_turn(impl: str) -> None:
    [turn] = captured_turns("smolagents_raises", impl)
    assert (turn.agent, turn.input_text) == ("weather_agent", "What is the weather in Atlantis?")
    assert turn.output_text == "I could not find the weather in Atlantis."
    assert call_rows(turn) == [
        ("get_weather", "", {"city": "Atlantis"}, False, "ValueError: no such city"),
        ("final_answer", "", {"answer": "I could not find the weather in Atlantis."}, False, None),
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_code_agents_calls_are_the_tools_its_code_called_with_their_arguments(impl: str) -> None:
    """The calls the model's code made, by keyword or positionally (named after the tool's `tool.parameters`, its
    inputs in the order `Tool.__call__` hands them to `forward`)."""
    [turn] = captured_turns("smolagents_code", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", "What is the weather in Paris?", SUNNY)
    assert call_rows(turn) == [
        ("get_weather", "", PARIS, False, None),
        ("final_answer", "", {"answer": SUNNY}, False, None),
    ]
    assert offered_names(turn) == []


# ---- the bound arguments of `Tool.__call__`, on spans of the real OTel SDK ----------------------------------------

SCOPE = "openinference.instrumentation.smolagents"
OTHER = {"args": [], "sanitize_inputs_outputs": True, "kwargs": PARIS}
PARAMS = json.dumps({"city": {"type": "string"}, "unit": {"type": "string", "nullable": True}})


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("bound", "scope", "want"),
    [
        ({"args": [], "sanitize_inputs_outputs": True, "kwargs": PARIS}, SCOPE, PARIS),
        ({"args": ["Paris"], "sanitize_inputs_outputs": False, "kwargs": {"unit": "C"}}, SCOPE, {**PARIS, "unit": "C"}),
        ({"args": [PARIS], "sanitize_inputs_outputs": True, "kwargs": {}}, SCOPE, PARIS),  # one dict: the kwargs
        ({"args": ["Paris", "C", "x"], "sanitize_inputs_outputs": False, "kwargs": {}}, SCOPE, None),  # unnamed
        ({"args": ["Paris"], "sanitize_inputs_outputs": False, "kwargs": PARIS}, SCOPE, None),  # named twice
        (OTHER, "tests", OTHER),  # another producer's: a JSON object, the arguments as they are
    ],
)
def test_a_smolagents_tool_spans_bound_arguments_are_its_arguments(
    impl: str, bound: dict[str, object], scope: str, want: object
) -> None:
    """The keyword arguments, positional ones named after the tool's inputs in order; none when they cannot be
    named. Another producer's TOOL span with that input is read as OpenInference's are (a JSON object as it is)."""
    _impl(impl)
    provider, _, memory = new_tracer()
    attrs = {"openinference.span.kind": "TOOL", "tool.name": "get_weather", "tool.parameters": PARAMS,
             "input.value": json.dumps(bound)}  # fmt: skip
    with provider.get_tracer(scope).start_as_current_span("SimpleTool", attributes=attrs):
        pass
    provider.shutdown()
    records, problems = convert(decoded(memory.get_finished_spans()), impl)
    [call] = [r for r in records if isinstance(r, ToolCall)]
    assert (call.name, call.arguments and json.loads(call.arguments), problems) == ("get_weather", want, [])



@pytest.mark.parametrize("impl", IMPLS)
def test_a_positional_dict_of_many_inputs_is_named_in_linear_time(impl: str) -> None:
    """A positional dict whose keys are all the tool's inputs is the keyword arguments: with 60,000 inputs (about
    1.5 MB of JSON, well within a request) each key is looked up among the inputs once, not searched for among them
    (quadratic: about ten seconds)."""

    _impl(impl)
    n = 60_000
    keys = {f"k{i}": i for i in range(n)}
    provider, _, memory = new_tracer()
    attrs = {"openinference.span.kind": "TOOL", "tool.name": "wide",
             "tool.parameters": json.dumps(dict.fromkeys(keys, {})),
             "input.value": json.dumps({"args": [keys], "sanitize_inputs_outputs": True, "kwargs": {}})}  # fmt: skip
    with provider.get_tracer(SCOPE).start_as_current_span("SimpleTool", attributes=attrs):
        pass
    provider.shutdown()
    spans = decoded(memory.get_finished_spans())
    (records, problems), elapsed = cpu_timed(lambda: convert(spans, impl))
    [call] = [r for r in records if isinstance(r, ToolCall)]
    assert (json.loads(call.arguments or "") == keys, problems) == (True, [])
    assert elapsed < 2.0, elapsed


def _replay_json(capture: str, rules: str, tmp_path: Path) -> dict[str, Any]:
    """`toolwatch replay` of a capture under `rules`, the JSON report read back."""
    (tmp_path / "rules.yaml").write_text(rules)
    out = tmp_path / "report.json"
    res = CliRunner().invoke(
        replay,
        [str(DATA / f"{capture}.jsonl"), "--rules", str(tmp_path / "rules.yaml"), "--no-progress", "--json", str(out)],
    )
    assert res.exit_code == 0, res.output
    report: dict[str, Any] = json.loads(out.read_text())
    return report


WEATHER_RULES = """
version: 1
agent: weather_agent
catalog:
  tools:
    - name: get_weather
      schema: {type: object, properties: {city: {type: string}}, required: [city]}
    - name: final_answer
expect:
  - when: {prefix: "What is the weather in"}
    call:
      - tool: get_weather
        exactly: 1
        args: {city: {from_input: 'weather in (\\w+)'}}
"""


@pytest.mark.parametrize("capture", ["smolagents_tool", "smolagents_code"])
def test_final_answer_judged_as_the_readme_says_an_optional_slot_of_each_expectation(
    capture: str, tmp_path: Path
) -> None:
    """smolagents' own `final_answer` call is a call like any other: an expectation that leaves it out counts it
    spurious; a slot `{tool: final_answer, min: 0, max: 1}` beside the agent's calls, as the README advises, makes
    the run correct throughout (and a second final_answer would still be spurious)."""
    bare = _replay_json(capture, WEATHER_RULES, tmp_path)
    assert (bare["counts"]["judged_calls"], bare["counts"]["correct"], bare["counts"]["spurious"]) == (2, 1, 1)
    optional = WEATHER_RULES + "      - {tool: final_answer, min: 0, max: 1}\n"
    report = _replay_json(capture, optional, tmp_path)
    counts = report["counts"]
    assert (counts["judged_calls"], counts["correct"], counts["spurious"], counts["missed"]) == (2, 2, 0, 0)
    assert report["figures"]["end_to_end_accuracy"] == 1.0
