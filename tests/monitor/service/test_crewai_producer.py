"""CrewAI traced through OpenInference (openinference-instrumentation-crewai) and OpenLLMetry
(opentelemetry-instrumentation-crewai): the turns a user means.

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
- crewai_wrappers_openai_raises: as crewai_wrappers_openai, kicked off with `{"city": "Atlantis"}`: `get_weather`
  raises `ValueError("unknown city: Atlantis")`, CrewAI hands the error to the model, which answers.
- crewai_wrappers_openai_flow: a `crewai.flow` Flow whose `@start` method kicks the crew off: root CHAIN
  `Flow_{flow id}.kickoff` (`flow_id`, no input), the method's CHAIN span `Flow_{flow id}.ask` under it, the crew's
  spans under that.
- crewai_wrappers_openai_hierarchical: the crew with `Process.hierarchical` (`manager_llm` the same model), the task
  given no agent: CrewAI's manager agent (`Crew Manager`) runs it, its model asking for `delegate_work_to_coworker`
  (`call_d1`, `{"task", "context", "coworker": "weather_agent"}`); the TOOL span is `Delegate work to coworker.run`
  (`tool.name` CrewAI's display name; `tool.description` opens `Tool Name: delegate_work_to_coworker`), and under it
  the coworker's LLM spans and `get_weather` TOOL span: no AGENT span for the coworker's run (CrewAI runs it by
  `Agent.execute_task`, which the wrappers do not trace).
- openllmetry_crewai*: the same crew traced by OpenLLMetry's opentelemetry-instrumentation-crewai 0.62.4
  (opentelemetry-semantic-conventions-ai 0.5.1): the crew's run an `invoke_agent` span `crewai.workflow` (no agent
  name, no input), each task's run a Traceloop `task` span `{task}.task` (also `invoke_agent`; `crewai.task.agent`
  the role, `crewai.task.description` the task filled in, `traceloop.entity.output` the answer), the agent's run under
  it an `agent` span `{role}.agent` (`gen_ai.agent.name`, no input). It wraps `LLM.call`, which CrewAI's native OpenAI
  provider does not go through, and no tool: no model span, no tool span. openllmetry_crewai: that alone;
  openllmetry_crewai_openai: with OpenLLMetry's opentelemetry-instrumentation-openai 0.62.4 (its `openai.chat` spans:
  GenAI messages, the tools offered, the calls asked for); _two_tasks, _raises: as above. The tool's run, its
  result and its error are recorded nowhere (the error only as the text of the next request's tool message).

What a user means by a crew's run of one task: one turn, the agent's run of the task, named after the agent (its
role, not the crew's id or the task's text, which make a new agent per crew or per task), its input the task as the
agent was given it (`What is the weather in Paris?`: the kickoff inputs are the task's template values, not what
the agent was asked; CrewAI's prompt around the task is its own). The crew's span is the run around it, as
openai-agents' workflow span: a crew of several tasks is one turn per task. So is a Flow's run around the crews its
methods kick off. A hierarchical crew's manager runs the task: its turn, its delegation a call of it, named as its
model was offered it; the coworker's delegated run is, as a transfer in google-adk or a sub-agent in
langgraph-supervisor, a turn of its own (a strict xfail: the producer records it only as the manager's TOOL span).

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


@pytest.mark.parametrize("impl", IMPLS)
def test_a_raising_crewai_tool_is_the_turns_failed_call(impl: str) -> None:
    """The TOOL span of a tool that raised is the call, failed with the exception's message; CrewAI hands the error
    to the model, whose answer ends the turn."""
    [turn] = captured_turns("crewai_wrappers_openai_raises", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == (
        "weather_agent", "What is the weather in Atlantis?", "I could not find the weather in Atlantis.",
    )
    assert call_rows(turn) == [("get_weather", "", {"city": "Atlantis"}, False, "unknown city: Atlantis")]


# ---- a Flow, a hierarchical crew (OpenInference) -----------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
def test_a_flow_kicking_off_a_crew_is_the_crews_turns_and_no_turn_of_its_own(impl: str) -> None:
    """The Flow's run (root CHAIN `Flow_{flow id}.kickoff`, `flow_id`) and its `@start` method's span are the run
    around the crew, as the crew's span is: no turn (named after the flow's id, it would be a new agent per run, with
    no input and no call); the task's run by its agent is the one turn."""
    turns = captured_turns("crewai_wrappers_openai_flow", impl)
    assert [(t.agent, t.input_text, t.output_text, call_rows(t)) for t in turns] == [
        ("weather_agent", TASK, ANSWER, [("get_weather", "", PARIS, False, None)]),
    ]


DELEGATE = "delegate_work_to_coworker"
DELEGATED = {"task": TASK, "context": "The user asks about the weather.", "coworker": "weather_agent"}


@pytest.mark.parametrize("impl", IMPLS)
def test_a_managers_delegation_is_its_call_named_as_its_model_was_offered_it(impl: str) -> None:
    """The manager's run of the task is a turn (`Crew Manager`, given the task); its delegation is a call of that
    turn with its arguments, named as the model was offered it and asked for it (`delegate_work_to_coworker`; the TOOL
    span's `tool.name` is CrewAI's display name, `Delegate work to coworker`, and its `tool.description` opens with
    the name the model was given): the call asked for (`call_d1`) is the call that ran, not a call never run."""
    turns = captured_turns("crewai_wrappers_openai_hierarchical", impl)
    manager = turns[0]
    assert (manager.agent, manager.input_text, manager.output_text) == ("Crew Manager", TASK, ANSWER)
    assert [row for t in turns for row in call_rows(t) if row[0] != "get_weather"] == [
        (DELEGATE, "", DELEGATED, False, None)
    ]
    assert offered_names(manager)[:2] == [DELEGATE, "ask_question_to_coworker"]


@pytest.mark.xfail(
    strict=True,
    reason="a delegated run is recorded only as the manager's TOOL span (no AGENT span for the coworker's run): making"
    " it a turn of the coworker named in the model's arguments needs a design decision (CrewAI answers an unknown"
    " coworker with an error text, the span OK: such a turn would be empty and count its expected calls missed)",
)
@pytest.mark.parametrize("impl", IMPLS)
def test_a_coworkers_delegated_run_is_its_own_turn(impl: str) -> None:
    """As a transfer in ADK or a sub-agent in langgraph-supervisor: the coworker's run of the delegated task is a turn
    of its own, given the task the manager wrote, holding the call it made; the manager's turn holds the delegation."""
    turns = captured_turns("crewai_wrappers_openai_hierarchical", impl)
    assert [(t.agent, t.input_text, call_rows(t)) for t in turns] == [
        ("Crew Manager", TASK, [(DELEGATE, "", DELEGATED, False, None)]),
        ("weather_agent", TASK, [("get_weather", "", PARIS, False, None)]),
    ]


# ---- OpenLLMetry (opentelemetry-instrumentation-crewai) ----------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", ["openllmetry_crewai", "openllmetry_crewai_openai"])
def test_an_openllmetry_crew_run_of_one_task_is_one_turn_of_its_agent_given_the_task(impl: str, name: str) -> None:
    """OpenLLMetry's task span (`{task}.task`, Traceloop kind `task`) is the agent's run of the task: the turn, named
    after its agent (`crewai.task.agent`, the role), given the task (`crewai.task.description`, the kickoff inputs
    filled in), its answer `traceloop.entity.output`; the crew's `crewai.workflow` span (`invoke_agent`, no agent, no
    input) and the agent's span under the task's (`{role}.agent`, no input) are no turns of their own."""
    turns = captured_turns(name, impl)
    assert [(t.agent, t.input_text, t.output_text) for t in turns] == [("weather_agent", TASK, ANSWER)]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("name", "city"), [("openllmetry_crewai_openai", "Paris"),
                                            ("openllmetry_crewai_openai_raises", "Atlantis")])  # fmt: skip
def test_an_openllmetry_crew_turn_holds_the_call_its_model_asked_for(impl: str, name: str, city: str) -> None:
    """OpenLLMetry's CrewAI instrumentation records no tool run (nor its error): the turn's call is the one its model
    asked for (the OpenAI instrumentation's chat span: `call_1` with its arguments), held as requested, not seen run;
    the tools offered are the chat spans'."""
    [turn] = captured_turns(name, impl)
    assert call_rows(turn) == [("get_weather", "call_1", {"city": city}, True, None)]
    assert offered_names(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
def test_an_openllmetry_crew_of_two_tasks_is_a_turn_per_task(impl: str) -> None:
    turns = captured_turns("openllmetry_crewai_openai_two_tasks", impl)
    assert [(t.agent, t.input_text, call_rows(t)) for t in turns] == [
        ("weather_agent", TASK, [("get_weather", "call_1", PARIS, True, None)]),
        ("weather_agent", "Is it warm in Paris?", [("get_weather", "call_1", PARIS, True, None)]),
    ]
