"""CrewAI traced through OpenInference (openinference-instrumentation-crewai): the turns a user means.

The spans are captures of real runs, offline, as OTLP JSON, one export request a line (no machine path or address
in them): crewai 1.15.30 traced by openinference-instrumentation-crewai 1.1.21 (opentelemetry-sdk 1.45.2), a Crew
with one Agent (role `weather_agent`), one Task (`What is the weather in {city}?`, kicked off with
`{"city": "Paris"}`) and one BaseTool `get_weather(city)`; the model `openai/gpt-4o-mini` through CrewAI's own
OpenAI provider (openai 2.54.0; CrewAI 1.x calls LiteLLM only for providers it has no native client for) on a fake
OpenAI server on the loopback that asks for `get_weather({"city": "Paris"})` (call id `call_1`, native function
calling: CrewAI offers the tools when the model supports it), then answers.
- crewai_wrappers: the instrumentor's default (its wrappers): the crew's run is the root CHAIN span
  `Crew_{crew id}.kickoff` (`input.value` the kickoff inputs), the task's run by its agent an AGENT span
  `{role}._execute_core` (`graph.node.id` the role, `input.value` the JSON of the agent object and the task's
  context, `output.value` the TaskOutput: its `description` the task as the agent was given it), the tool's run a
  TOOL span (`input.value` the arguments, no call id). No model span.
- crewai_wrappers_openai: the same with openinference-instrumentation-openai 0.1.66 (LLM spans of the requests).
- crewai_wrappers_openai_two_tasks: the same crew given a second task for the same agent (`Is it warm in {city}?`,
  the first task's answer its context), the model again asking for `get_weather` first.
- crewai_events: the instrumentor's `use_event_listener=True`: root CHAIN `crew.kickoff`, AGENT span
  `{role}.{task description}.execute` (`task_description`, `input.value` the task's prompt), its own LLM spans.

What a user means by a crew's run of one task: one turn, the agent's run of the task, named after the agent (its
role, not the crew's id or the task's text, which make a new agent per crew or per task), its input the task as the
agent was given it (`What is the weather in Paris?`: the kickoff inputs are the task's template values, not what
the agent was asked; CrewAI's prompt around the task is its own). The crew's span is the run around it, as
openai-agents' workflow span: a crew of several tasks is one turn per task.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import pytest

from tests.monitor.service.captures import call_rows, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS

TASK = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris."
PARIS = {"city": "Paris"}
RUNS = ["wrappers", "wrappers_openai", "events"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("run", RUNS)
def test_a_crew_run_of_one_task_is_one_turn_of_its_agent_given_the_task(impl: str, run: str) -> None:
    """The agent's run of the task is the turn, named after the agent's role, its input the task (the kickoff
    inputs filled in), its answer the agent's; the crew's span is no turn of its own."""
    [turn] = captured_turns(f"crewai_{run}", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", TASK, ANSWER)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("run", RUNS)
def test_a_crewai_tool_run_is_the_turns_call_with_its_arguments(impl: str, run: str) -> None:
    """The TOOL span is the call, with its arguments (`input.value`) and no id; with the OpenAI instrumentor the
    call the model asked for (`call_1`) is that call, paired by name, not a call never run, and the tools offered
    are the LLM spans' (the event listener's LLM spans record them as one JSON list, `llm.tools`, and the calls
    asked for only in `output.value`: neither is read)."""
    turns = captured_turns(f"crewai_{run}", impl)
    assert [call_rows(t) for t in turns if t.calls] == [[("get_weather", "", PARIS, False, None)]]
    assert [offered_names(t) for t in turns if t.calls] == [["get_weather"] if run == "wrappers_openai" else []]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_crew_of_two_tasks_is_a_turn_per_task_each_with_its_own_call(impl: str) -> None:
    """Each task's run is a turn of its agent given that task, holding the call made for it: the crew's span does
    not gather them into one turn, nor does the second task take the first one's input or call."""
    turns = captured_turns("crewai_wrappers_openai_two_tasks", impl)
    assert [(t.agent, t.input_text, call_rows(t)) for t in turns] == [
        ("weather_agent", TASK, [("get_weather", "", PARIS, False, None)]),
        ("weather_agent", "Is it warm in Paris?", [("get_weather", "", PARIS, False, None)]),
    ]
