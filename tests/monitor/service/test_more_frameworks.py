"""LlamaIndex's agents through OpenInference and Semantic Kernel's own GenAI spans: the turns a user means.

The spans are captures of real runs, offline, as OTLP JSON, one export request a line (no machine path or address
in them; LlamaIndex's reprs name objects' memory addresses):
- llamaindex_*: llama-index-core 0.14.25 (llama-index-workflows 2.26.1) traced by
  openinference-instrumentation-llama-index 4.6.1 (opentelemetry-sdk 1.45.2): a FunctionAgent `weather_agent` with
  one FunctionTool `get_weather(city)`, its model a MockFunctionCallingLLM whose response generator asks for
  `get_weather({"city": "Paris"})` (call id `call_1`), then answers; run alone (`function_agent`: the root span
  `FunctionAgent.run`) or as the root agent of an AgentWorkflow (`agent_workflow`: `AgentWorkflow.run`). The root
  span is a CHAIN span whose `input.value` is the workflow's start state (no question: the start event's repr is
  `AgentWorkflowStartEvent()`); the question is in the LLM spans' `llm.input_messages`; the TOOL span
  (`FunctionTool.acall`) records the tool's bound arguments, `{"kwargs": {"city": "Paris"}}`, and no call id;
  `llm.tools.0.tool.json_schema` is the JSON text of the tool object's repr (no tool offered that can be read).
- semantic_kernel_*: semantic-kernel 1.45.0 (opentelemetry-sdk 1.45.2) with
  SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS(_SENSITIVE)=true: a ChatCompletionAgent `weather_agent`
  with a plugin `Weather` (function `get_weather(city)`, the tool `Weather-get_weather`) and auto function calling,
  its service a ChatCompletionClientBase subclass (its `_inner_get_chat_message_contents` traced as the OpenAI
  connector's is) returning a FunctionCallContent `call_1`, then text. `agent`: `agent.get_response(question)`;
  `keyword`: `agent.get_response(messages=question)`, which SK's decorator does not see (it reads the messages
  from the positional arguments only): the `invoke_agent` span records `gen_ai.input.messages` `[]`. SK writes the
  model requests' messages as log records, not on the `chat` spans: no requested call is on a span.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import pytest

from tests.monitor.service.captures import call_rows, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS

QUESTION = "What is the weather in Paris?"
PARIS = {"city": "Paris"}

# ---- LlamaIndex through OpenInference ----------------------------------------------------------------------------

LLAMAINDEX = ["function_agent", "agent_workflow"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("run", LLAMAINDEX)
def test_a_llamaindex_agent_run_is_one_turn_with_the_question_its_model_was_given(impl: str, run: str) -> None:
    """The root workflow span is the turn; its `input.value` is the workflow's start state, not a question: the
    turn's input is the user message its first model request was given."""
    [turn] = captured_turns(f"llamaindex_{run}", impl)
    assert turn.agent == ("FunctionAgent.run" if run == "function_agent" else "AgentWorkflow.run")
    assert turn.input_text == QUESTION


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("run", LLAMAINDEX)
def test_a_llamaindex_tool_call_is_the_requested_call_with_its_arguments(impl: str, run: str) -> None:
    """The TOOL span's bound arguments (`{"kwargs": {...}}`) are the call's arguments; the call the model asked for
    (`call_1` on the LLM span) is that call, paired by name (the TOOL span has no id), not a call never run. The
    tool object's repr offers no tool."""
    [turn] = captured_turns(f"llamaindex_{run}", impl)
    assert call_rows(turn) == [("get_weather", "", PARIS, False, None)]
    assert offered_names(turn) == []


# ---- Semantic Kernel ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
def test_a_semantic_kernel_agent_run_is_one_turn_with_its_call_and_offered_tools(impl: str) -> None:
    """The `invoke_agent` span is the turn, its input and answer its messages; the `execute_tool` span the call,
    with its id and arguments; the tools offered are the agent span's (OpenAI's nested form)."""
    [turn] = captured_turns("semantic_kernel_agent", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", QUESTION, "It is sunny in Paris.")
    assert call_rows(turn) == [("Weather-get_weather", "call_1", PARIS, False, None)]
    assert offered_names(turn) == ["Weather-get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_semantic_kernel_run_given_its_messages_by_keyword_has_no_input_recorded(impl: str) -> None:
    """`get_response(messages=...)`: SK records `[]` as the input and nothing of it elsewhere on a span; the turn
    has no input (no rule can route it), its call and answer as with the question given positionally."""
    [turn] = captured_turns("semantic_kernel_keyword", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", "", "It is sunny in Paris.")
    assert call_rows(turn) == [("Weather-get_weather", "call_1", PARIS, False, None)]
