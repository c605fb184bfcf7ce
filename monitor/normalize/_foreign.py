"""Spans of other conventions mapped to the GenAI records: OpenInference, OpenLLMetry (Traceloop); and the spans of
GenAI producers that put arguments or messages elsewhere (pydantic-ai, Strands Agents).

GenAIConvention.convert (Python and C) hands a span here when it has no GenAI operation (no `gen_ai.operation.name`
and no `execute_tool` / `invoke_agent` span name) and carries one of _markers.FOREIGN_MARKERS, or when it is a tool
span without `gen_ai.tool.call.arguments` or a turn span without `gen_ai.input.messages` that has span events or
pydantic-ai's attribute. `convert` appends a ToolCall, a Turn or the span itself (a parent link) to `out`, or counts
a rejection, as the GenAI path does. Wrong-typed values are ignored and their key appended to `problems` (the keys
of _markers.FOREIGN_ATTRIBUTE_KEYS, or the GenAI key a value stands for).

What makes a turn:
- A run's root under another span: the spans that are a run's turn at the root of their trace (a CHAIN span of
  OpenInference's, a Traceloop `workflow` span, an OpenLIT run's span) are, under another span, RunRoots
  (monitor.records): the span's parent link holding the turn it is at the root (_run_root), which turn assembly makes
  the turn when nothing of a run is above it (a web framework's server span, the application's own spans, a parent
  never received) and a step of the run or turn above it otherwise (monitor.assembly._runs).
- OpenInference: an AGENT span; a CHAIN span with no parent (LangChain / LangGraph through OpenInference have no AGENT
  span: their root chain is the run). A CHAIN span under another span is a RunRoot (a parent link only when it is a
  step of a LangGraph graph, its `metadata` naming a `langgraph_node`, or openai-agents'), and an AGENT span under
  another span without `input.value` a parent link (a producer recording the run's input on the root AGENT span only:
  the agent spans under it are steps of that turn). openai-agents through OpenInference (its tracer scope,
  _markers.OI_OPENAI_AGENTS_SCOPE) records the run's workflow as the root AGENT span (named after the workflow, `Agent
  workflow` by default; some versions record the run's input on it) and each agent's run as an AGENT span under it that
  names its agent (`agent.name`) and records no input: the agent spans are the turns (one agent's run on one input, as a
  handoff passes the run to another agent), given the user message that started them, the latest of their first LLM
  span's messages (earlier ones are a conversation's history; each LLM span of that scope
  yields an InputMark, monitor.normalize._flat, joined at release by turn assembly); the workflow span is a parent link,
  at the root (whether or not it holds the input: the agent spans hold the run) or under the application's own span (an
  AGENT span of that scope without `agent.name`). OpenInference makes a LangChain run an AGENT span whenever "agent" is
  in its name; of LangGraph's (its `metadata` naming a `langgraph_node`), these under another span are steps, parent
  links: the model node `agent` of `create_react_agent` (beside its `tools` node, under the graph run),
  langgraph-supervisor's `call_agent` in a sub-agent's node, and the run of a sub-agent's graph inside its node's span
  (same name and node, `checkpoint_ns` in its metadata equal to its `langgraph_checkpoint_ns`, which the node's span
  lacks): a sub-agent is one turn, its node's span. LlamaIndex's agents (FunctionAgent, AgentWorkflow: its tracer
  scope, _markers.OI_LLAMA_INDEX_SCOPE) are workflows whose run is the root CHAIN span; its `input.value` is the
  workflow's start state (`start_event`, no question): the turn is given the latest user message of its first LLM
  span with one (an InputMark, as openai-agents' turns). CrewAI (its tracer scopes, _markers.OI_CREWAI_SCOPES)
  records a crew's run as the root CHAIN span (`crew_key`; named after the crew's id): a parent link; each task's
  run by its agent is an AGENT span, the turn (whether or not its input was captured), named after the agent's role
  (`graph.node.id`; the span's name holds a method's name or the task's text), given the task (the event listener's
  `task_description`, or the `description` of the TaskOutput the wrappers record as its output: their `input.value`
  is the agent object, no question) (_crewai); a Flow's run (the root CHAIN span `flow_id`) is a parent link too. A
  CrewAI TOOL span is named as the model was offered the tool (the first line of its `tool.description`, `Tool Name:
  {name}`: CrewAI's delegation tool `Delegate work to coworker` is offered as `delegate_work_to_coworker`).
  AutoGen AgentChat (its tracer scope, _markers.OI_AUTOGEN_SCOPE) records each agent's run as an AGENT span under
  autogen-core's own `invoke_agent` span, the turn: a step of it giving it the user's message the agent was handed (an
  InputMark; at the root, with no autogen-core span, it is the turn); a team's run, a root CHAIN span in a trace
  without its agents' runs, is a parent link (_autogen).
- Traceloop: an `agent` span (under another span: with `traceloop.entity.input`); a `workflow` span with no parent
  (under another span a RunRoot, and an InputMark of its input and answer, below).
  `task` spans are parent links. openai-agents through OpenLLMetry (its tracer scope, _markers.OTEL_OPENAI_AGENTS_SCOPE)
  records the run as a root `workflow` span, a parent link, and each agent's run as an `agent` span under it that
  names its agent (`gen_ai.agent.name`) and records no input: the turn, given the latest user message of its first
  model request (an InputMark, _requested.add_model_input); contrib's instrumentation of the same scope records the
  workflow as an `invoke_agent` span without `gen_ai.agent.name` or input messages: a parent link too.
  OpenLLMetry's CrewAI instrumentation (_markers.OTEL_CREWAI_SCOPE) records a crew's run as such a span
  (`crewai.workflow`), a parent link, and each task's run as a `task` span, the turn: named after its agent
  (`crewai.task.agent`), given the task (`crewai.task.description`), its answer `traceloop.entity.output`; the
  agent's `agent` span under it, without input, is a parent link.
  OpenLLMetry's LangChain instrumentation (0.62) writes GenAI attributes beside these:
  its tool spans, and its turn spans without `gen_ai.input.messages`, come here by their Traceloop kind (their
  `gen_ai.tool.call.arguments` is the callback's whole input); LangGraph's graph run is its `invoke_agent {graph}`
  span (GenAI, no input nor answer), the `workflow` span under it a step that holds the run's input and answer: a
  `workflow` span under another span (a RunRoot) yields an InputMark of its input and answer, read as a turn's
  (`_tl_input`, `_tl_output`), which gives the turn around it its input, and its answer, at release when it has none
  (monitor.assembly._offered).
- A LangChain or LangGraph run's input and answer, in OpenInference's `input.value` / `output.value` and
  OpenLLMetry's chain `inputs` / `outputs`, are its state's chat `messages` in LangChain's serialized forms: read by
  _lcmessages (`_text_of`), the answer the last AI message asking for no tool call after the last human one.
- Langfuse's Python SDK (its tracer scope, _markers.LANGFUSE_SCOPE; `langfuse.observation.type`) and MLflow
  (`mlflow.spanType`, JSON text) record their own attributes only: an `agent` observation / AGENT span is a turn named
  after the span, its input the question in the traced function's bound arguments (`_input_of`), its answer its
  output; a `tool` observation / TOOL span a call named after the span, its arguments the bound ones by name; a
  `generation` / CHAT_MODEL or LLM span a parent link with the calls its output asks for and the tools it offered, in
  OpenAI's forms (`_openai_requested`, `_openai_offered`).
- OpenLIT (its tracer scopes, `openlit.instrumentation.*`: _markers.is_openlit; GenAI spans, which the GenAI path
  sends here when they are `invoke_workflow` spans, or `invoke_agent` spans under another span or without
  `gen_ai.input.messages`): a run is one turn. Its LangGraph instrumentation records the graph's run as a root
  `invoke_workflow {graph}` span and each run of a node as an `invoke_agent {node}` span under it; its LangChain
  callback, beside them, an `invoke_agent {graph}` span with the run's inputs (`gen_ai.workflow.input`, JSON, its
  `messages` dicts or LangChain's reprs `content='...' ...`) and an `invoke_agent {node}` span per node run. The root
  `invoke_workflow` or `invoke_agent` span is the turn (_openlit), read by the GenAI path as an `invoke_agent` span:
  its agent `gen_ai.agent.name`, else the name after the operation in the span's name; its input the latest user
  message of `gen_ai.input.messages`, else of `gen_ai.workflow.input` (_openlit_input), else its first model
  request's (an InputMark, _requested.add_model_input); under another span such a span is a RunRoot: a step of the
  run (its nodes) or of the application's own turn span around it, or the run's turn under another of the
  application's spans (a web request's). Its tool spans' arguments, when written as a
  Python dict repr, are read as OpenInference's LangChain tool input (_genai._openlit_arguments, _repr_arguments).
- Pydantic Logfire's openai-agents integration (its tracer scope, _markers.LOGFIRE_OPENAI_AGENTS_SCOPE; its spans
  carry `logfire.msg`, and its Responses requests, `chat` spans, are sent here by the GenAI path): an `Agent run` span
  is the turn (`name` its agent), given the latest user message of its first model request (an InputMark); a
  `Function` span a call without id; a `Handoff` span a HandoffMark; a model request a parent link with the calls it
  asked for and, for a Responses request, the tools it offered; any other a parent link (_logfire_agents).
- pydantic-ai: its agent span (`invoke_agent {agent}`, or `agent run` in instrumentation version 2), the input from
  `pydantic_ai.all_messages`, the answer from `final_result`; so also when openinference-instrumentation-pydantic-ai
  made it an AGENT span too (_pydantic_ai_run).
- Strands Agents: its `invoke_agent {agent}` span, the input and answer from its span events.
A tool call: an OpenInference TOOL span with `tool.name` (openai-agents makes its handoffs TOOL spans without one,
LangGraph's handoff tools return a Command to the parent graph, `{"graph": "__parent__", "goto": ...}`: parent links,
and a HandoffMark each), or an AGENT span with one (a LangChain tool with "agent" in its name), a Traceloop `tool`
span, pydantic-ai's tool span (`running tool` in version 2, arguments in `tool_arguments`), Strands'
`execute_tool {tool}` span (arguments in its events). An OpenInference TOOL span's call id is its `tool_call.id` (or
`tool.id`); LangChain's tool run records none, and its output holds the ToolMessage the tool returned, in Python's or
LangChain.js's serialized form (of openinference-instrumentation-langchain's scopes only: another framework's tool
records the text it returned, which may open as a ToolMessage does; so does a LangChain tool run without a ToolNode,
`tool.invoke`, an AgentExecutor: an output tagged `text/plain` is such a text, never read as a ToolMessage, as
LangChain.js' is, JSON or not; but Python's instrumentation tags a text that is JSON `application/json` as it tags a
ToolMessage, and such a text is read as one when it opens as one): the call
id is the message's `tool_call_id` (LangGraph's ToolNode: a tool that raised has no output, and so no id; its span
fails with LangChain's text of the exception, its repr or message and then its traceback or stack, and the call's
error is the exception's type, _lcerrors; LangGraph 1.x's ToolNode runs each call as a task of its own, a CHAIN span
around the TOOL span whose input opens with the call, `{"__type": "tool_call_with_context", "tool_call": {...}`: when
its output holds a ToolMessage of status `error`, or it failed, or no output was captured, it yields a CallIdMark of
the call's id, which turn assembly gives the call without an id of its name right under it, _tool_task), and a
message of status `error` (a tool that returned its error) fails the call when its span has no error of its own, its
error the message's text (_lcmessages.tool_message). LlamaIndex's
TOOL span records the tool's bound arguments, `{"kwargs": {...}}`: the keyword arguments are the call's
(_oi_arguments); smolagents' (its tracer scope, _markers.OI_SMOLAGENTS_SCOPE) the
bound arguments of `Tool.__call__`, `{"args", "sanitize_inputs_outputs", "kwargs"}`: the keyword arguments, the
positional ones named after the tool's inputs (`tool.parameters`) (_smolagents_arguments). smolagents names its run's
AGENT span `{agent}.run` and records no `agent.name`: the turn is the agent's (_agent_of_name); its input is the run's
`task`, a key read as `input` is (for its scope only: _SMOLAGENTS_INPUT_KEYS). DSPy (its tracer scope,
_markers.OI_DSPY_SCOPE) records no `tool.name` on its TOOL spans: the tool is the span's name, `{tool}.__call__`
(`_dspy_tool_name`; without it the span would be taken for a handoff), its arguments the keyword ones of the bound
`{"kwargs": {...}}`; its root module span `{class}.forward` is the turn of the program's class, its input the question
in ReAct's bound `{"input_args": {...}}`. Haystack (its tracer scope, _markers.OI_HAYSTACK_SCOPE) records a run's
messages as Python reprs (`ChatMessage(...)`): not read (`_haystack_reprs`); the turn is given its first LLM span's user
message (an InputMark, as LlamaIndex's).
The calls a model requested: those of an OpenInference LLM span and of an OpenLLMetry model request span (marked by
`llm.request.type`), both parent links (monitor.normalize._flat); and the tools these spans offered
(monitor.normalize._offered).
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from monitor._json import loads_bounded, refuse_if_costly
from monitor.normalize import _lcmessages as lc
from monitor.normalize import _markers as m
from monitor.normalize._flat import (
    add_handoff,
    add_handoff_to,
    add_openinference,
    add_openinference_input,
    add_traceloop,
)
from monitor.normalize._genai import (
    _ASSISTANT,
    _USER,
    AGENT_NAME,
    CASE_ID,
    ERROR_TYPE,
    EXECUTE_TOOL,
    INPUT_MESSAGES,
    INVOKE_AGENT,
    OP,
    OUTPUT_MESSAGES,
    REASON_NO_TOOL_NAME,
    TOOL_ARGS,
    TOOL_CALL_ID,
    TOOL_RESULT,
    _convert_py,
    _json_text,
    _last_run,
    _texts,
    operation,
    structured,
)
from monitor.normalize._lcerrors import exception_type
from monitor.normalize._offered import add_openinference_tools, add_traceloop_tools, new_offered
from monitor.normalize._requested import (
    MAX_REQUESTED_PER_SPAN,
    add_input_mark,
    derived,
    name_and_id,
    new_requested,
)
from monitor.otlp import STATUS_ERROR, Span
from monitor.records import CallIdMark, HandoffMark, RunRoot, ToolCall, Turn, definition_name

Out = list[ToolCall | Turn | Span]

_JSON_MIME = "application/json"
_MAX_REPR_CHARS = 8 * 1024  # a Python repr of arguments longer than this is not read (_repr_arguments: ast.literal_eval
# costs 25-55 ms of CPU per 64 KiB, on the request path of `serve`)
_LANGGRAPH_NODE = "langgraph_node"  # the node a LangChain run of a LangGraph graph runs in (its metadata)
_REACT_MODEL_NODE = "agent"  # langgraph.prebuilt's create_react_agent: its model node
_SUPERVISOR_CALL_AGENT = "call_agent"  # langgraph-supervisor: the function in a sub-agent's node that runs its graph
_MAX_METADATA_CHARS = 64 * 1024  # a longer `metadata` value is not read (no LangGraph step)
_REDACTED = m.OI_REDACTED  # what OpenInference's TraceConfig leaves of a hidden value
# LangGraph's ToolNode (1.x) runs each call the model asked for as a task of its own, given `ToolCallWithContext`: its
# span's `input.value` (OpenInference's json.dumps of the task's input) opens so, the task's `state` after the call.
_TOOL_TASK = '{"__type": "tool_call_with_context", "tool_call": {'
_ERROR_STATUS = '"status": "error"'  # in a task's output: the ToolMessage of an error the ToolNode handled
_DECODER = json.JSONDecoder()
# Keys whose str value is the question / the answer in a JSON input or output object (LangChain's AgentExecutor
# `{"input": ...}` / `{"output": ...}`, Traceloop's kwargs of a function called by keyword).
_INPUT_KEYS = ("input", "query", "question", "prompt", "message")
# smolagents' run records its bound arguments, `{"task": ...}`: its task is the input (its scope only: another
# producer's `task` may be a label beside the messages that hold the question).
_SMOLAGENTS_INPUT_KEYS = (*_INPUT_KEYS, "task")
# The scopes whose `invoke_agent` spans without `gen_ai.agent.name` or input messages are a run around the turns (the
# GenAI path sends them here): openai-agents' workflow (contrib's), a crew's run (OpenLLMetry's `crewai.workflow`).
_WORKFLOW_SCOPES = (m.OTEL_OPENAI_AGENTS_SCOPE, m.OTEL_CREWAI_SCOPE)
_OUTPUT_KEYS = ("output", "answer", "response", "result")
_OPENLIT_RUNS = (m.INVOKE_WORKFLOW, INVOKE_AGENT)  # OpenLIT's operations of a run: the turn at the root, else steps


def convert(span: Span, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """Map one span that carries a marker of another convention (see the module docstring)."""
    attrs = span.attributes
    kind = attrs.get(m.OI_KIND)
    if kind is not None and not _pydantic_ai_run(span):
        if span.scope == m.OI_AUTOGEN_SCOPE and kind in ("AGENT", "CHAIN"):
            _autogen(span, kind, out, problems)
        elif span.scope == m.VERCEL_AI_SCOPE and m.AI_OPERATION_ID in attrs:
            from monitor.normalize import _vercel  # imports this module: imported on first use

            _vercel.openinference(span, kind, out, problems, rejected)
        else:
            _openinference(span, kind, out, problems, rejected)
        return
    kind = attrs.get(m.TL_KIND)
    if kind is not None:
        _traceloop(span, kind, out, problems, rejected)
        return
    kind = attrs.get(m.LF_TYPE)
    if kind is not None and span.scope == m.LANGFUSE_SCOPE:
        _langfuse(span, kind, out, problems, rejected)
        return
    kind = attrs.get(m.MLFLOW_SPAN_TYPE)
    if kind is not None:
        _mlflow(span, kind, out, problems, rejected)
        return
    if span.scope == m.LOGFIRE_OPENAI_AGENTS_SCOPE:
        _logfire_agents(span, out, problems, rejected)
        return
    if m.is_openlit(span.scope) and operation(span) in _OPENLIT_RUNS:
        _openlit(span, out, problems, rejected)
        return
    if span.scope in _WORKFLOW_SCOPES and AGENT_NAME not in attrs and operation(span) == INVOKE_AGENT:
        out.append(span)  # openai-agents' workflow (contrib's), a crew's run (OpenLLMetry's): a parent link, its agent
        # or task spans the turns
        return
    if m.TL_REQUEST_TYPE in attrs:  # an OpenLLMetry model request span: a parent link, the calls it asked for and
        out.append(span)  # the tools it offered
        add_traceloop(span, out, problems)
        add_traceloop_tools(span, out, problems)
        return
    if span.scope == m.VERCEL_AI_SCOPE and m.AI_OPERATION_ID in attrs:
        from monitor.normalize import _vercel  # imports this module: imported on first use

        _vercel.convert(span, out, problems, rejected)
        return
    _relabelled(span, out, problems, rejected)


def _pydantic_ai_run(span: Span) -> bool:
    """pydantic-ai's own agent span (its messages in `pydantic_ai.all_messages`; `invoke_agent`, or `agent run` in
    instrumentation version 2), whatever else was added to it: openinference-instrumentation-pydantic-ai's span
    processor makes it an AGENT span too, without `agent.name` and with the history's *last* user text as its
    `input.value` (pydantic-ai's retry feedback, after an output validator refused an answer). Read as pydantic-ai's
    (_relabelled): its agent `gen_ai.agent.name`, its input its run's first user message."""
    return m.PA_MESSAGES in span.attributes and (
        operation(span) == INVOKE_AGENT or (span.name == "agent run" and OP not in span.attributes)
    )


# ---- OpenInference -------------------------------------------------------------------------------------------


def _openinference(span: Span, kind: Any, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    attrs = span.attributes
    if not isinstance(kind, str):
        problems.append(m.OI_KIND)
        out.append(span)
        return
    kind = kind.upper()
    graph = _langgraph(span) if span.parent_span_id and m.OI_METADATA in attrs else None
    if kind == "AGENT" and m.OI_TOOL_NAME in attrs:  # a LangChain tool with "agent" in its name (see _langgraph)
        kind = "TOOL"
    dspy_tool = _dspy_tool_name(span) if kind == "TOOL" and m.OI_TOOL_NAME not in attrs else None
    if kind == "TOOL" and m.OI_TOOL_NAME not in attrs and dspy_tool is None:  # openai-agents' handoffs
        out.append(span)
        add_handoff(span, out)
    elif kind == "TOOL" and graph is not None and _is_langgraph_handoff(attrs):
        out.append(span)
        out.append(derived(HandoffMark, span, "handoff", attrs[m.OI_TOOL_NAME], span.start_ns))
    elif kind == "TOOL":
        _oi_call(span, dspy_tool, out, problems, rejected)
    elif span.scope in m.OI_CREWAI_SCOPES and (kind == "AGENT" or (kind == "CHAIN" and not span.parent_span_id)):
        _crewai(span, kind, out, problems)
    elif (
        kind == "AGENT"
        and (
            (m.OI_AGENT_NAME in attrs and bool(span.parent_span_id))
            if span.scope == m.OI_OPENAI_AGENTS_SCOPE
            else (m.OI_INPUT in attrs or not span.parent_span_id)
        )
        and not _langgraph_step(span, graph)
    ) or (kind == "CHAIN" and not span.parent_span_id):
        agent = _str(attrs, m.OI_AGENT_NAME, problems) or _agent_of_name(span)
        start = span.scope == m.OI_LLAMA_INDEX_SCOPE and _is_workflow_start(attrs)
        reprs = span.scope == m.OI_HAYSTACK_SCOPE  # a Haystack run's messages are reprs: not read (_haystack_reprs)
        _turn(span, out, problems, agent=agent,
              input_text=None if start or (reprs and _haystack_reprs(attrs, m.OI_INPUT)) else _value_text(
                  attrs, m.OI_INPUT, _USER, _SMOLAGENTS_INPUT_KEYS if span.scope == m.OI_SMOLAGENTS_SCOPE else
                  _INPUT_KEYS, problems, dspy=span.scope == m.OI_DSPY_SCOPE),
              output_text=None if reprs and _haystack_reprs(attrs, m.OI_OUTPUT) else _value_text(
                  attrs, m.OI_OUTPUT, _ASSISTANT, _OUTPUT_KEYS, problems),
              conversation_id=_str(attrs, m.OI_SESSION_ID, problems) or None)  # fmt: skip
    else:
        _oi_step(span, kind, graph, out, problems, rejected)


def _oi_step(span: Span, kind: str, graph: dict[str, Any] | None, out: Out, problems: list[str],
             rejected: dict[str, int]) -> None:  # fmt: skip
    """An OpenInference span that is neither a call nor a turn: a CHAIN span under another span (at the root a turn,
    _openinference) a RunRoot, unless a LangGraph step or openai-agents' (its runs' turns are its agent spans); any
    other a parent link, an LLM span with the calls it asked for, the tools it offered and the input it was given."""
    if kind == "CHAIN" and graph is None and span.scope != m.OI_OPENAI_AGENTS_SCOPE:
        _run_root(span, out, lambda root, got: _openinference(root, kind, got, problems, rejected))
        return
    out.append(span)
    if kind == "LLM":
        add_openinference(span, out, problems)
        add_openinference_tools(span, out, problems)
        add_openinference_input(span, out)
    elif kind == "CHAIN" and span.scope in m.OI_LANGCHAIN_SCOPES:
        _tool_task(span, out)


def _tool_task(span: Span, out: Out) -> None:
    """A LangGraph ToolNode task's span (its `input.value` opening as _TOOL_TASK: the call it runs, then the graph's
    state): a CallIdMark of the call's `id` and `name` (non-empty str), for a tool that raised under it (its TOOL span
    names no id: it returned no ToolMessage). Only when the task may hold such a tool: it failed (the exception went up
    through it), its output holds a ToolMessage of status `error` (the ToolNode handled it), or no output was captured;
    a task whose tool returned gives none (its TOOL span names the id). Only the call is parsed (from its `{`, where
    the prefix ends; the state after it is not read), and only when the whole text is within the parse budget
    (monitor._json). Nothing when it does not parse or names no id."""
    attrs = span.attributes
    raw = attrs.get(m.OI_INPUT)
    if not isinstance(raw, str) or not raw.startswith(_TOOL_TASK):
        return
    result = attrs.get(m.OI_OUTPUT)
    if (span.status_code != STATUS_ERROR and isinstance(result, str) and result != _REDACTED
            and _ERROR_STATUS not in result):  # fmt: skip
        return
    try:
        refuse_if_costly(raw)
        call, _ = _DECODER.raw_decode(raw, len(_TOOL_TASK) - 1)
    except (ValueError, RecursionError):
        return
    name, call_id = call.get("name"), call.get("id")
    if isinstance(name, str) and name and isinstance(call_id, str) and call_id:
        mark = derived(CallIdMark, span, "call", name, span.start_ns)
        mark.call_id = call_id
        out.append(mark)


def _crewai(span: Span, kind: str, out: Out, problems: list[str]) -> None:
    """A CrewAI AGENT span, or root CHAIN span (see the module docstring). A crew's run (`crew_key`) is a parent
    link: its tasks' AGENT spans are the turns, whether or not their input was captured, named after the agent's
    role (the span's name holds the task's text or a method's name), given the task (`_crewai_task`). A Flow's run
    (`flow_id`, named after the flow's id) is a parent link too: the runs of the crews and agents its methods kick off
    are the turns (its methods' spans are CHAIN spans under it: parent links). Another root CHAIN span and an agent's
    own `kickoff` are turns as other producers' are."""
    attrs = span.attributes
    if kind == "CHAIN" and (m.CREWAI_CREW_KEY in attrs or m.CREWAI_FLOW_ID in attrs):
        out.append(span)
        return
    agent = _str(attrs, m.OI_AGENT_NAME, problems) or _str(attrs, m.OI_GRAPH_NODE_ID, problems) or span.name
    if m.CREWAI_TASK_ID in attrs:
        input_text = _crewai_task(attrs, problems)
    else:
        input_text = _value_text(attrs, m.OI_INPUT, _USER, _INPUT_KEYS, problems)
    _turn(span, out, problems, agent=agent, input_text=input_text,
          output_text=_value_text(attrs, m.OI_OUTPUT, _ASSISTANT, _OUTPUT_KEYS, problems),
          conversation_id=_str(attrs, m.OI_SESSION_ID, problems) or None)  # fmt: skip


def _autogen(span: Span, kind: str, out: Out, problems: list[str]) -> None:
    """AutoGen AgentChat through OpenInference (_markers.OI_AUTOGEN_SCOPE). A team's run (CHAIN) is a parent link:
    its trace holds none of its agents' runs (its runtime starts a trace per message). An agent's run (AGENT) under
    another span (autogen-core's `invoke_agent`, the turn) is a step of it that gives it the user's message the agent
    was handed (an InputMark: autogen-core records no input, nor a team's task); at the root (autogen-core's spans not
    made) it is the turn, named after its agent, given that message."""
    attrs = span.attributes
    text = _autogen_input(attrs.get(m.OI_INPUT)) if kind == "AGENT" else None
    if kind == "CHAIN" or span.parent_span_id:
        out.append(span)
        if text:
            add_input_mark(span, text, out)
        return
    agent = _str(attrs, m.OI_GRAPH_NODE_ID, problems) or _agent_of_name(span)
    _turn(span, out, problems, agent=agent, input_text=text, output_text=None, conversation_id=None)


_AUTOGEN_USER = " source='user' "
_AUTOGEN_CONTENT = " content="


def _autogen_input(raw: Any) -> str | None:
    """The latest user text message among the reprs of AgentChat's messages in an agent span's bound arguments
    (`{"messages": ["id='...' source='user' ... content='...' type='TextMessage'", ...], ...}`): its content's string
    literal alone (_lc_repr_user_message: never evaluated). None when there is none."""
    if not isinstance(raw, str) or len(raw) > _MAX_METADATA_CHARS:
        return None
    try:
        value = loads_bounded(raw)
    except (ValueError, RecursionError):
        return None
    messages = value.get("messages") if isinstance(value, dict) else None
    if not isinstance(messages, list):
        return None
    for msg in reversed(messages):
        if not isinstance(msg, str) or _AUTOGEN_USER not in msg or not msg.endswith(" type='TextMessage'"):
            continue
        i = msg.find(_AUTOGEN_CONTENT, msg.index(_AUTOGEN_USER))
        content = _lc_repr_user_message(msg[i + 1 :]) if i >= 0 else None
        if content:
            return content
    return None


def _oi_call(span: Span, dspy_tool: str | None, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """An OpenInference TOOL span's call (see the module docstring)."""
    attrs = span.attributes
    call_id = attrs.get(m.OI_TOOL_CALL_ID)
    key = m.OI_TOOL_CALL_ID
    if call_id is None:
        call_id, key = attrs.get(m.OI_TOOL_ID), m.OI_TOOL_ID
    if call_id is not None and not isinstance(call_id, str):
        problems.append(key)
        call_id = str(call_id)
    arguments = _args(attrs, m.OI_TOOL_CALL_ARGS, problems)
    if span.scope == m.OI_SMOLAGENTS_SCOPE and (arguments is None or arguments == _REDACTED):
        arguments = _smolagents_arguments(attrs)
    elif arguments is None or arguments == _REDACTED:
        arguments = _oi_arguments(attrs, problems, bound=span.scope in (m.OI_LLAMA_INDEX_SCOPE, m.OI_DSPY_SCOPE))
    result = _result(attrs, m.OI_OUTPUT, problems)
    error = raised = None
    if span.scope in m.OI_LANGCHAIN_SCOPES:
        if result is not None and attrs.get(m.OI_OUTPUT_MIME) != m.OI_TEXT_MIME:  # its ToolMessage's id (if it
            message_id, error = lc.tool_message(result)  # returned one) and error; a text/plain output is none
            if call_id is None:
                call_id = message_id
        if span.status_code == STATUS_ERROR and span.status_message:  # LangChain's text of what it raised: its type
            raised = exception_type(span.status_message, span.events)
    name = dspy_tool if dspy_tool is not None else _oi_tool_name(span, problems)
    _call(span, name, out, problems, rejected, call_id=call_id, arguments=arguments,
          result=None if result == _REDACTED else result, error=error, raised=raised)  # fmt: skip


def _oi_tool_name(span: Span, problems: list[str]) -> str:
    """A TOOL span's tool: `tool.name`; a CrewAI tool's the name its model was offered (`_crewai_tool_name`)."""
    name = _str(span.attributes, m.OI_TOOL_NAME, problems)
    return (_crewai_tool_name(span.attributes) or name) if span.scope in m.OI_CREWAI_SCOPES else name


def _crewai_tool_name(attrs: Any) -> str | None:
    """The name the model was given for a CrewAI tool (the first line of its `tool.description`, `Tool Name: {name}`:
    CrewAI offers a tool under a name of its own, `delegate_work_to_coworker` for `Delegate work to coworker`), or
    None when the description does not open so."""
    text = attrs.get(m.OI_TOOL_DESCRIPTION)
    if not isinstance(text, str) or not text.startswith(m.CREWAI_TOOL_NAME_LINE):
        return None
    return text[len(m.CREWAI_TOOL_NAME_LINE) :].split("\n", 1)[0].strip() or None


def _crewai_task(attrs: Any, problems: list[str]) -> str | None:
    """The task a CrewAI agent was given (its description, the kickoff inputs filled in): the event listener's
    `task_description`, else the `description` of the TaskOutput the wrappers record as the span's output (their
    `input.value` is the agent object and the task's context, no question). None when not captured."""
    text: object = _str(attrs, m.CREWAI_TASK_DESCRIPTION, problems)
    if not text:
        value = _json_object_with(attrs.get(m.OI_OUTPUT), '"description"')
        text = value.get("description") if value is not None else None
    return text if isinstance(text, str) and text and text != _REDACTED else None


def _langgraph(span: Span) -> dict[str, Any] | None:
    """The LangGraph metadata of an OpenInference span of LangChain (its `metadata` JSON object holding a
    `langgraph_node` name), or None."""
    raw = span.attributes.get(m.OI_METADATA)
    if isinstance(raw, str) and len(raw) > _MAX_METADATA_CHARS:
        return None
    value = _json_object_with(raw, _LANGGRAPH_NODE)
    return value if value is not None and isinstance(value.get(_LANGGRAPH_NODE), str) else None


def _langgraph_step(span: Span, graph: dict[str, Any] | None) -> bool:
    """Whether an AGENT span of LangGraph (`graph` its metadata) is a step of the agent run around it rather than an
    agent run (see the module docstring): the model node `agent` of `create_react_agent` (OpenInference makes it an
    AGENT span for its name); langgraph-supervisor's `call_agent` wrapper inside a sub-agent's node; the run of a
    sub-agent's own graph inside its node's span (the same name and node, the metadata naming the graph's checkpoint
    namespace as LangChain gives a graph run's `checkpoint_ns`, which the node's own span lacks)."""
    if graph is None:
        return False
    node = graph[_LANGGRAPH_NODE]
    if span.name != node:
        return span.name == _SUPERVISOR_CALL_AGENT
    if node == _REACT_MODEL_NODE:
        return True
    namespace = graph.get("langgraph_checkpoint_ns")
    return isinstance(namespace, str) and graph.get("checkpoint_ns") == namespace


def _json_object_with(raw: object, text: str) -> dict[str, Any] | None:
    """`raw` parsed, when it is the JSON text of an object and holds `text` (looked for first: most values do not)."""
    if not isinstance(raw, str) or text not in raw:
        return None
    try:
        value = loads_bounded(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _is_langgraph_handoff(attrs: Any) -> bool:
    """Whether a LangGraph tool's output is a Command sent to the parent graph going to a node (`{"graph":
    "__parent__", "goto": ...}`): a handoff (langgraph-supervisor's `transfer_to_{agent}` tools), no call."""
    value = _json_object_with(attrs.get(m.OI_OUTPUT), '"__parent__"')
    return value is not None and value.get("graph") == "__parent__" and bool(value.get("goto"))


def _oi_arguments(attrs: Any, problems: list[str], *, bound: bool = False) -> str | None:
    """A TOOL span's `input.value` as arguments: JSON text when its mime type says so or it is a JSON object; the
    Python repr of an arguments dict (LangChain's, see `_repr_arguments`) as JSON text; any other text (a LangChain
    tool's single string input) names no argument: not captured (None). With `bound` (LlamaIndex's TOOL spans), the
    value is the bound arguments of the tool's `call(*args, **kwargs)`: `{"kwargs": {...}}` is its keyword
    arguments, as JSON text; positional ones (`"args"` not empty) have no names: not captured."""
    raw = attrs.get(m.OI_INPUT)
    if raw is None or raw == _REDACTED:
        return None
    if not isinstance(raw, str):
        return _args(attrs, m.OI_INPUT, problems)
    if attrs.get(m.OI_INPUT_MIME) == _JSON_MIME and not bound:
        return raw
    try:
        value = loads_bounded(raw)
    except (ValueError, RecursionError):
        return None if bound else _repr_arguments(raw)
    if bound and isinstance(value, dict) and value and set(value) <= {"args", "kwargs"}:
        kwargs = value.get("kwargs", {})
        if value.get("args", []) != [] or not isinstance(kwargs, dict):
            return None
        return json.dumps(kwargs)
    return raw if isinstance(value, dict) else None


def _smolagents_arguments(attrs: Any) -> str | None:
    """A smolagents TOOL span's `input.value`: the bound arguments of `Tool.__call__(*args, sanitize_inputs_outputs,
    **kwargs)`, as JSON text of the keyword arguments. Positional ones are named after the tool's inputs
    (`tool.parameters`, a JSON object in the order `__call__` hands them to the tool's `forward`), and a single dict
    whose keys are all inputs is the keyword arguments, as `__call__` reads it; None when they cannot be named (not
    captured)."""
    value = _json_object_with(attrs.get(m.OI_INPUT), '"kwargs"')
    if value is None or not set(value) <= {"args", "kwargs", "sanitize_inputs_outputs"}:
        return None
    args, kwargs = value.get("args", []), value.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return None
    if args:
        params = _json_object_with(attrs.get(m.OI_TOOL_PARAMETERS), "{") or {}
        names = list(params)
        if len(args) == 1 and not kwargs and isinstance(args[0], dict) and all(k in params for k in args[0]):
            kwargs = args[0]
        elif len(args) <= len(names) and not any(n in kwargs for n in names[: len(args)]):
            kwargs = {**dict(zip(names, args, strict=False)), **kwargs}
        else:
            return None
    return json.dumps(kwargs)


def _agent_of_name(span: Span) -> str:
    """An agent run's name when its span names no agent: the span's name; smolagents' `{agent}.run` the agent's,
    DSPy's `{class}.forward` / `{class}.aforward` the program's class."""
    suffixes = (".run",) if span.scope == m.OI_SMOLAGENTS_SCOPE else (".forward", ".aforward") if (
        span.scope == m.OI_DSPY_SCOPE) else ()  # fmt: skip
    return _before_suffix(span.name, suffixes) or span.name


def _dspy_tool_name(span: Span) -> str | None:
    """A DSPy TOOL span's tool (it records no `tool.name`): its span's name, `{tool}.__call__` / `{tool}.acall`; None
    for another producer's span or another name."""
    return _before_suffix(span.name, (".__call__", ".acall")) if span.scope == m.OI_DSPY_SCOPE else None


def _before_suffix(name: str, suffixes: tuple[str, ...]) -> str | None:
    """`name` without the first of `suffixes` it ends with, when something is left; else None."""
    for suffix in suffixes:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


_HAYSTACK_MESSAGE_REPR = '"ChatMessage('


def _haystack_reprs(attrs: Any, key: str) -> bool:
    """Whether a Haystack run's input or output value holds its messages as Python reprs (`"ChatMessage(_role=...)"`
    strings): no text to read there (the turn is given its first LLM span's user message, an InputMark)."""
    raw = attrs.get(key)
    return isinstance(raw, str) and _HAYSTACK_MESSAGE_REPR in raw


def _is_workflow_start(attrs: Any) -> bool:
    """Whether a LlamaIndex root span's `input.value` is a workflow run's start (a JSON object holding its
    `start_event`, the workflow's state beside it): the agents' workflows record no question there (the start
    event's repr shows none of its fields), their LLM spans the messages (an InputMark each, _flat)."""
    value = _json_object_with(attrs.get(m.OI_INPUT), '"start_event"')
    return value is not None and "start_event" in value


def _repr_arguments(text: str) -> str | None:
    """LangChain's tool input through OpenInference: langchain_core's BaseTool.run hands its callbacks
    `str(tool_input)`, the Python repr of the arguments dict (`{'city': 'Paris'}`), which
    openinference-instrumentation-langchain writes as `input.value`. Read as a Python literal (never evaluated) and
    given as JSON text; None for anything else (not a dict of literals, no JSON object, longer than
    _MAX_REPR_CHARS)."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")) or len(text) > _MAX_REPR_CHARS:
        return None
    try:
        value = ast.literal_eval(text)
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            return None
        return json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # not literals, not JSON, too deep
        return None


# ---- OpenLIT -------------------------------------------------------------------------------------------------


def _openlit(span: Span, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """An OpenLIT `invoke_workflow` or `invoke_agent` span (see the module docstring): under another span a step of the
    run (or of the application's turn) around it, a parent link; at the root the run's turn, read by the GenAI path as
    an `invoke_agent` span named after its agent (`gen_ai.agent.name`, else the name after the operation in the span's
    name), given, when it records no `gen_ai.input.messages`, the latest user message of its `gen_ai.workflow.input`
    (_openlit_input); without either its first model request's user message gives it (an InputMark)."""
    if span.parent_span_id:
        _run_root(span, out, lambda root, got: _openlit(root, got, problems, rejected))
        return
    attrs = span.attributes
    op = operation(span)
    extra: dict[str, Any] = {OP: INVOKE_AGENT}
    agent = attrs.get(AGENT_NAME)
    if not isinstance(agent, str):
        if agent is not None:
            problems.append(AGENT_NAME)
        prefix = f"{op} "
        extra[AGENT_NAME] = span.name[len(prefix) :].strip() if span.name.startswith(prefix) else ""
    if attrs.get(INPUT_MESSAGES) is None:
        text = _openlit_input(attrs.get(m.OPENLIT_WORKFLOW_INPUT), problems)
        if text:
            extra[INPUT_MESSAGES] = _one_message("user", text)
    # The GenAI path reads the copy as any turn span (its scope left out: it does not come back here).
    _read_as_genai(span, _copy(span, attributes={**attrs, **extra}, scope=""), out, problems, rejected)


def _openlit_input(raw: Any, problems: list[str]) -> str | None:
    """The latest user message with text of an OpenLIT `gen_ai.workflow.input` (the JSON of a chain's inputs): of its
    `messages`, each a message dict (`{"role", "content"}`, LangChain's dumps and pairs: _lcmessages) or LangChain's
    repr of a message (_lc_repr_user_message). None when there is none (not captured)."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        problems.append(m.OPENLIT_WORKFLOW_INPUT)
        return None
    value = _json_object_with(raw, '"messages"')
    messages = value.get("messages") if value is not None else None
    if not isinstance(messages, list):
        return None
    for msg in reversed(messages):
        if isinstance(msg, str):
            content = _lc_repr_user_message(msg)
            if content:
                return content
            continue
        [msg] = lc.chat_messages([msg])[0]
        if isinstance(msg, dict) and msg.get("role") == "user":
            text = _texts(msg, None)
            if text:
                return text
    return None


_LC_CONTENT = "content="  # how LangChain's repr of a message opens (pydantic's `field=value` pairs, space separated)
# A Python string literal in each quote (a backslash escapes the next character), found in C, not a step of Python per
# character: a 16 MiB input holds 2,000 literals of _MAX_REPR_CHARS.
_LC_LITERAL = {q: re.compile(rf"{q}[^{q}\\]*(?:\\.[^{q}\\]*)*{q}", re.DOTALL) for q in "'\""}


def _lc_repr_user_message(text: str) -> str | None:
    """The content of LangChain's repr of a user's message (`str(message)`: `content='...' additional_kwargs={} ...`),
    None when it is another's or its content is not a string literal of at most _MAX_REPR_CHARS followed by another
    field or nothing (a list of content blocks is not read). The repr names no type: a tool's message is the one with
    a `tool_call_id=` field, the model's one with `tool_calls=` (an AIMessage always shows it), any other the user's
    (a SystemMessage's repr is a HumanMessage's: the latest message is taken, a system prompt comes first). The
    literal alone is read (ast.literal_eval: never evaluated), and only a user's (another's is passed over for the
    cost of finding it: 700,000 short ones of the model, each read, took 2.5 s; now 0.45 s)."""
    if not text.startswith(_LC_CONTENT) or len(text) <= len(_LC_CONTENT):
        return None
    start = len(_LC_CONTENT)
    literal = _LC_LITERAL.get(text[start])
    if literal is None:
        return None
    found = literal.match(text, start, min(len(text), start + _MAX_REPR_CHARS))
    if found is None:
        return None
    end = found.end()
    if end < len(text) and text[end] != " ":
        return None
    if text.find(" tool_call_id=", end) >= 0 or text.find(" tool_calls=", end) >= 0:
        return None  # a tool's message or the model's
    try:
        content = ast.literal_eval(found.group())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return content if isinstance(content, str) else None


# ---- a run's root under another span -------------------------------------------------------------------------


def _run_root(span: Span, out: Out, read: Callable[[Span, Out], None]) -> None:
    """A span that is its run's turn at the root of its trace (`read` maps a copy of it there), under another span: a
    RunRoot holding that turn, which turn assembly makes the turn or a step (monitor.assembly._runs); the span itself
    (a parent link) when at the root it is no turn either (a crew's run)."""
    got: Out = []
    read(_copy(span, parent_span_id=""), got)
    turn = got[0] if len(got) == 1 else None
    if not isinstance(turn, Turn):
        out.append(span)
        return
    run = RunRoot("", trace_id=span.trace_id, span_id=span.span_id, parent_span_id=span.parent_span_id,
                  start_ns=span.start_ns, end_ns=span.end_ns, turn=turn)  # fmt: skip
    out.append(run)


def _copy(span: Span, *, parent_span_id: str | None = None, attributes: dict[str, Any] | None = None,
          scope: str | None = None) -> Span:
    """A copy of `span`, with the parent, attributes or scope given (dataclasses.replace took 2 µs, this 0.3: it is
    made for each OpenLIT run span and each RunRoot)."""
    return Span(trace_id=span.trace_id, span_id=span.span_id,
                parent_span_id=span.parent_span_id if parent_span_id is None else parent_span_id, name=span.name,
                kind=span.kind, start_ns=span.start_ns, end_ns=span.end_ns, status_code=span.status_code,
                status_message=span.status_message, attributes=span.attributes if attributes is None else attributes,
                resource=span.resource, scope=span.scope if scope is None else scope, events=span.events)  # fmt: skip


# ---- Traceloop -----------------------------------------------------------------------------------------------


def _traceloop(span: Span, kind: Any, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    attrs = span.attributes
    if not isinstance(kind, str):
        problems.append(m.TL_KIND)
        out.append(span)
        return
    name = _str(attrs, m.TL_NAME, problems)
    oa = span.scope == m.OTEL_OPENAI_AGENTS_SCOPE  # openai-agents through OpenLLMetry: its agent spans are the turns
    if kind == "tool":
        if not name and span.name.endswith(".tool"):  # the SDK names the span `{entity}.tool`
            name = span.name[: -len(".tool")]
        arguments, call_id = _tl_arguments(attrs, problems)
        _call(span, name, out, problems, rejected, call_id=call_id, arguments=arguments,
              result=_result(attrs, m.TL_OUTPUT, problems))  # fmt: skip
    elif kind == "task" and span.scope == m.OTEL_CREWAI_SCOPE:  # a task's run by its agent (OpenLLMetry's CrewAI)
        _turn(span, out, problems, agent=_str(attrs, m.CREWAI_TL_TASK_AGENT, problems),
              input_text=_str(attrs, m.CREWAI_TL_TASK_DESCRIPTION, problems) or None,
              output_text=_tl_output(attrs, problems), conversation_id=None)  # fmt: skip
    elif (kind == "agent" and (oa or m.TL_INPUT in attrs or not span.parent_span_id)) or (
        kind == "workflow" and not span.parent_span_id and not oa
    ):
        workflow = attrs.get(m.TL_WORKFLOW)
        agent = name or (_str(attrs, AGENT_NAME, problems) if kind == "agent" else "")
        agent = agent or (workflow if isinstance(workflow, str) else "") or span.name
        _turn(span, out, problems, agent=agent, input_text=_tl_input(attrs, problems),
              output_text=_tl_output(attrs, problems), conversation_id=None)
    elif kind == "workflow" and not oa:  # under another span: its run's turn, or a step giving the turn around it
        # its input and answer (see the module docstring)
        _run_root(span, out, lambda root, got: _traceloop(root, kind, got, problems, rejected))
        run = out[-1]
        if isinstance(run, RunRoot) and (run.turn.input_text or run.turn.output_text is not None):
            add_input_mark(span, run.turn.input_text, out, run.turn.output_text)
    else:
        out.append(span)
        if kind == "workflow":  # openai-agents': the input of the turn around it (see the module docstring)
            text = _tl_input(attrs, problems)
            if text:
                add_input_mark(span, text, out)


def _tl_json(attrs: Any, key: str, problems: list[str]) -> Any:
    """A Traceloop JSON attribute parsed (None when absent or not JSON; another type counted)."""
    return _json_value(attrs, key, problems, text=False)


def _tl_decorated(value: Any) -> tuple[list[Any], dict[str, Any]] | None:
    """`{"args": [...], "kwargs": {...}}` as the SDK's decorators write a function's input: (args, kwargs)."""
    if not isinstance(value, dict) or not value or not set(value) <= {"args", "kwargs"}:
        return None
    args, kwargs = value.get("args", []), value.get("kwargs", {})
    return (args, kwargs) if isinstance(args, list) and isinstance(kwargs, dict) else None


_MCP_INPUT = frozenset({"tool_name", "arguments"})  # an MCP tool call through OpenLLMetry, client or FastMCP server


def _tl_arguments(attrs: Any, problems: list[str]) -> tuple[str | None, Any]:
    """A tool's arguments and call id: a decorated function's keyword arguments (positional ones have no names: None);
    the `inputs` of a LangChain tool through OpenLLMetry (`{"input_str", "inputs", "tags", "metadata", "kwargs"}`),
    its call id `kwargs.tool_call_id`; the `arguments` of an MCP tool call through OpenLLMetry (`{"tool_name",
    "arguments"}`); else GenAI's `gen_ai.tool.call.arguments` unless it is that same input. `gen_ai.tool.call.id`
    first when set."""
    value = _tl_json(attrs, m.TL_INPUT, problems)
    call_id = attrs.get(TOOL_CALL_ID)
    decorated = _tl_decorated(value)
    if decorated is not None:
        return (None if decorated[0] else json.dumps(decorated[1])), call_id
    if isinstance(value, dict) and isinstance(value.get("inputs"), dict):
        kwargs = value.get("kwargs")
        if call_id is None and isinstance(kwargs, dict):
            call_id = kwargs.get("tool_call_id")
        return json.dumps(value["inputs"]), call_id
    if isinstance(value, dict) and set(value) == _MCP_INPUT and isinstance(value["arguments"], dict):
        return json.dumps(value["arguments"]), call_id
    genai = attrs.get(TOOL_ARGS)
    return (genai if isinstance(genai, str) and genai != attrs.get(m.TL_INPUT) else None), call_id


def _tl_input(attrs: Any, problems: list[str]) -> str | None:
    """A turn's input: a decorated function's first positional argument when a str, else its str keyword argument
    named like an input (or its only str one); a LangChain chain's `inputs` (through OpenLLMetry) as an OpenInference
    input value is read; else the captured text itself. None when not captured."""
    value = _tl_json(attrs, m.TL_INPUT, problems)
    raw = attrs.get(m.TL_INPUT)
    decorated = _tl_decorated(value)
    if decorated is not None:
        args, kwargs = decorated
        if args and isinstance(args[0], str):
            return args[0]
        text = _pick(kwargs, _INPUT_KEYS)
        if text is None:
            strs = [v for v in kwargs.values() if isinstance(v, str)]
            text = strs[0] if len(strs) == 1 else None
        return text if text is not None else raw
    if isinstance(value, dict) and "inputs" in value:
        return _text_of(value["inputs"], _USER, _INPUT_KEYS, problems, m.TL_INPUT, raw=raw)
    return raw if isinstance(raw, str) else None


def _tl_output(attrs: Any, problems: list[str]) -> str | None:
    """A turn's answer: the function's result (JSON); a LangChain chain's `outputs` (`{"outputs", "kwargs"}`)."""
    value = _tl_json(attrs, m.TL_OUTPUT, problems)
    raw = attrs.get(m.TL_OUTPUT)
    if not isinstance(raw, str):
        return None
    if isinstance(value, dict) and "outputs" in value and set(value) <= {"outputs", "kwargs"}:
        return _text_of(value["outputs"], _ASSISTANT, _OUTPUT_KEYS, problems, m.TL_OUTPUT, raw=raw)
    return _text_of(value, _ASSISTANT, _OUTPUT_KEYS, problems, m.TL_OUTPUT, raw=raw) if value is not None else raw


# ---- Langfuse, MLflow: their own attributes -------------------------------------------------------------------

_LF_MODEL_REQUESTS = frozenset({"generation"})
_MLFLOW_MODEL_REQUESTS = frozenset({"CHAT_MODEL", "LLM"})
# The contents a requested call does not keep of its model request span's attributes (as _requested.CONTENT_KEYS).
_LF_MLFLOW_CONTENT = frozenset({m.LF_INPUT, m.LF_OUTPUT, m.MLFLOW_INPUTS, m.MLFLOW_OUTPUTS, m.MLFLOW_CHAT_TOOLS})


def _langfuse(span: Span, kind: Any, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """A span of Langfuse's tracer scope (see the module docstring): an `agent` observation is a turn, named after it,
    its input the question it was given (`_input_of` its bound arguments), its answer its output; a `tool` observation
    a call named after it, its arguments the keyword ones it was called with; a `generation` a parent link with the
    calls its output asks for and the tools its request offered (OpenAI's forms, as the Langfuse OpenAI integration
    records them); any other a parent link."""
    attrs = span.attributes
    if not isinstance(kind, str):
        problems.append(m.LF_TYPE)
        out.append(span)
    elif kind == "agent":
        _turn(span, out, problems, agent=span.name, input_text=_input_of(_json_value(attrs, m.LF_INPUT, problems)),
              output_text=_value_text(attrs, m.LF_OUTPUT, _ASSISTANT, _OUTPUT_KEYS, problems),
              conversation_id=_str(attrs, m.OI_SESSION_ID, problems) or None)  # fmt: skip
    elif kind == "tool":
        _call(span, span.name, out, problems, rejected, call_id=None,
              arguments=_arguments_of(_json_value(attrs, m.LF_INPUT, problems)),
              result=_result(attrs, m.LF_OUTPUT, problems))  # fmt: skip
    else:
        out.append(span)
        if kind in _LF_MODEL_REQUESTS:
            _openai_requested(span, m.LF_OUTPUT, _LF_MLFLOW_CONTENT, out, problems)
            request = _json_value(attrs, m.LF_INPUT, problems) if '"tools"' in str(attrs.get(m.LF_INPUT)) else None
            _openai_offered(span, request.get("tools") if isinstance(request, dict) else None, out)


def _mlflow(span: Span, kind: Any, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """A span of MLflow's (`mlflow.spanType`, see the module docstring): an AGENT span is a turn, named after it, its
    input the question in its bound arguments (`_input_of`), its answer its output; a TOOL span a call named after it,
    its arguments its bound ones; a CHAT_MODEL or LLM span a parent link with the calls its response asks for and the
    tools it offered (OpenAI's forms); any other a parent link."""
    attrs = span.attributes
    value = _json_value(attrs, m.MLFLOW_SPAN_TYPE, problems)
    kind = value if isinstance(value, str) else kind if isinstance(kind, str) else None
    if kind is None:  # not text: counted by _json_value
        out.append(span)
    elif kind == "AGENT":
        _turn(span, out, problems, agent=span.name, input_text=_input_of(_json_value(attrs, m.MLFLOW_INPUTS, problems)),
              output_text=_value_text(attrs, m.MLFLOW_OUTPUTS, _ASSISTANT, _OUTPUT_KEYS, problems),
              conversation_id=None)  # fmt: skip
    elif kind == "TOOL":
        _call(span, span.name, out, problems, rejected, call_id=None,
              arguments=_arguments_of(_json_value(attrs, m.MLFLOW_INPUTS, problems)),
              result=_result(attrs, m.MLFLOW_OUTPUTS, problems))  # fmt: skip
    else:
        out.append(span)
        if kind in _MLFLOW_MODEL_REQUESTS:
            _openai_requested(span, m.MLFLOW_OUTPUTS, _LF_MLFLOW_CONTENT, out, problems)
            _openai_offered(span, _json_value(attrs, m.MLFLOW_CHAT_TOOLS, problems), out)


def _json_value(attrs: Any, key: str, problems: list[str], *, text: bool = True) -> Any:
    """A JSON text attribute parsed; text that is no JSON is itself (None without `text`); None when absent (another
    type counted)."""
    raw = attrs.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        problems.append(key)
        return None
    try:
        return loads_bounded(raw)
    except (ValueError, RecursionError):
        return raw if text else None


def _bound(value: Any) -> tuple[list[Any], dict[str, Any]] | None:
    """A function's arguments: (positional, by name); a JSON object is its bound arguments, all by name (MLflow's),
    Langfuse's decorated form `{"args": [...], "kwargs": {...}}` the positional ones (they have no names) and the
    keyword ones."""
    if not isinstance(value, dict):
        return None
    decorated = _tl_decorated(value)
    return decorated if decorated is not None else ([], value)


def _input_of(value: Any) -> str | None:
    """The question a traced agent function was given: a str input itself; of its bound arguments (`_bound`) the one
    named as an input is (`input`, `question`, ...), its `messages`' latest user text, else its only str argument;
    None when there is none (or several). Positional arguments are looked at for the last only, as far as a second
    str among them (a decorated function's input may hold millions)."""
    if isinstance(value, str):
        return value or None
    bound = _bound(value)
    if bound is None:
        return None
    args, named = bound
    text = _text_of(named, _USER, _INPUT_KEYS)  # only keys named so are read: the positional ones never are
    if text:
        return text
    only: str | None = None
    for v in itertools.chain(args, named.values()):
        if isinstance(v, str):
            if only is not None:
                return None  # several
            only = v
    return only or None


def _arguments_of(value: Any) -> str | None:
    """A traced tool function's arguments as JSON text: its bound arguments by name; None when some are positional
    without a name (Langfuse's decorated `args`) or none were captured."""
    bound = _bound(value)
    if bound is None or bound[0] or any(k.startswith("#") for k in bound[1] if isinstance(k, str)):
        return None
    try:
        return json.dumps(bound[1])
    except (ValueError, TypeError, RecursionError):
        return None


def _openai_requested(span: Span, key: str, content: frozenset[str], out: Out, problems: list[str]) -> None:
    """The calls a model request asked for in OpenAI's form, in the JSON text of `key`: a chat completion
    (`choices[i].message.tool_calls`), an assistant message, or a list of messages; each `{"id", "function": {"name",
    "arguments"}}`. A call without a name, or past MAX_REQUESTED_PER_SPAN, is counted under `key`. Its records keep
    the span's attributes without `content` (_add_requested)."""
    raw = span.attributes.get(key)
    if not isinstance(raw, str) or '"tool_calls"' not in raw:
        return
    value = _json_value(span.attributes, key, problems)
    if isinstance(value, dict) and isinstance(value.get("choices"), list):
        messages = [c.get("message") for c in value["choices"] if isinstance(c, dict)]
    else:
        messages = value if isinstance(value, list) else [value]

    def calls() -> Iterator[tuple[str, str, str | None]]:
        for msg in messages:
            tool_calls = msg.get("tool_calls") if isinstance(msg, dict) else None
            for tc in tool_calls if isinstance(tool_calls, list) else ():
                fn = tc.get("function") if isinstance(tc, dict) else None
                named = name_and_id({"name": fn.get("name"), "id": tc.get("id")}, key, problems) if isinstance(
                    fn, dict) else None  # fmt: skip
                if named is None:
                    problems.append(key)
                    continue
                arguments = fn.get("arguments") if isinstance(fn, dict) else None
                if isinstance(arguments, dict):
                    arguments = json.dumps(arguments)
                yield named[0], named[1], arguments if isinstance(arguments, str) else None

    problems.extend([key] * _add_requested(span, calls(), content, out))


def _add_requested(span: Span, calls: Iterable[tuple[str, str, str | None]], content: frozenset[str], out: Out) -> int:
    """A RequestedCall of `span` for each (name, call id, arguments) of `calls`, at most MAX_REQUESTED_PER_SPAN, all
    sharing one copy of the span's attributes without `content` (the request's messages, not kept per call, as
    _requested keeps a GenAI chat span's); the number of calls past the bound (left out)."""
    shared: dict[str, Any] | None = None
    n = over = 0
    for name, call_id, arguments in calls:
        if n >= MAX_REQUESTED_PER_SPAN:
            over += 1
            continue
        call = new_requested(span, name, call_id, arguments, n)
        if shared is None:
            shared = {k: v for k, v in span.attributes.items() if k not in content}
        call.attributes = shared
        out.append(call)
        n += 1
    return over


def _openai_offered(span: Span, tools: Any, out: Out) -> None:
    """The tools a model request offered: a list of tool definitions (OpenAI's form or the flat one); those that name
    no tool left out."""
    if not isinstance(tools, list):
        return
    definitions = tuple(d for d in tools if isinstance(d, dict) and definition_name(d))
    if definitions:
        out.append(new_offered(span, definitions))


# ---- Pydantic Logfire's openai-agents integration ---------------------------------------------------------------

# Its spans by message template (_markers.LOGFIRE_TEMPLATE, also the span's name).
_LF_AGENT = "Agent run: {name!r}"
_LF_FUNCTION = "Function: {name}"
_LF_HANDOFF = "Handoff: {from_agent} \u2192 {to_agent}"
_LF_CHAT = "Chat completion with {gen_ai.request.model!r}"
_LF_RESPONSES = "Responses API"  # ` with {gen_ai.request.model!r}` follows when the model is known


def _logfire_agents(span: Span, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """A span of Logfire's openai-agents integration (_markers.LOGFIRE_OPENAI_AGENTS_SCOPE): an `Agent run` span is
    a turn named after its agent (`name`), with no input of its own: its first model request's InputMark gives it; a
    `Function` span a call (`name`, `input` its arguments, `output` its result; no call id: paired with the call
    its model asked for by name), its error, when its status is ERROR without a message, the message of openai-agents'
    `error`; a `Handoff` span a parent link and a HandoffMark of the handoff to `to_agent`; a model request (`Chat
    completion ...`, `Responses API ...`) a parent link, an InputMark of the latest user message its model was given,
    the calls its model asked for and, for a Responses request, the tools it offered; any other a parent link.
    Logfire's own keys (`name`, `input`, ...) are not the conventions': a value of another type is not read, not
    counted."""
    attrs = span.attributes
    template = attrs.get(m.LOGFIRE_TEMPLATE)
    if not isinstance(template, str):
        template = span.name
    if template == _LF_AGENT:
        agent = attrs.get("name")
        _turn(span, out, problems, agent=agent if isinstance(agent, str) else "", input_text=None, output_text=None,
              conversation_id=None)  # fmt: skip
    elif template == _LF_FUNCTION:
        name = attrs.get("name")
        if not isinstance(name, str) or not name:
            rejected[REASON_NO_TOOL_NAME] = rejected.get(REASON_NO_TOOL_NAME, 0) + 1
            return
        _call(span, name, out, problems, rejected, call_id=None, arguments=_lf_text(attrs.get("input")),
              result=_lf_text(attrs.get("output")))  # fmt: skip
        call = out[-1]
        if isinstance(call, ToolCall) and call.error_type == "error" and not span.status_message and (
                ERROR_TYPE not in attrs):  # fmt: skip
            error = _parsed(attrs.get("error"))
            message = error.get("message") if isinstance(error, dict) else None
            if isinstance(message, str) and message:
                call.error_type = message
    else:
        out.append(span)
        if template == _LF_HANDOFF:
            agent = attrs.get("to_agent")
            if isinstance(agent, str) and agent:
                add_handoff_to(span, agent, out)
        elif template == _LF_CHAT:
            _lf_input_mark(span, _parsed(attrs.get("input")), out)
            _openai_requested(span, "output", _LF_CONTENT, out, problems)
        elif template.startswith(_LF_RESPONSES):
            _lf_input_mark(span, _parsed(attrs.get("raw_input")), out)
            response = _parsed(attrs.get("response"))
            if isinstance(response, dict):
                _responses_requested(span, response.get("output"), out)
                _openai_offered(span, response.get("tools"), out)


def _lf_text(v: Any) -> str | None:
    """A Logfire attribute as text: a str itself, a structured value its JSON; None for anything else."""
    if isinstance(v, str):
        return v
    if isinstance(v, tuple):
        try:
            return json.dumps(structured(v))
        except (TypeError, ValueError, RecursionError):
            return None
    return None


def _parsed(v: Any) -> Any:
    """JSON text parsed (Logfire, the Vercel AI SDK and Mastra write a structured value as JSON text); None when it is
    not, or not a str."""
    if not isinstance(v, str):
        return None
    try:
        return loads_bounded(v)
    except (ValueError, RecursionError):
        return None


def _lf_input_mark(span: Span, messages: Any, out: Out) -> None:
    text = _text_of(messages, _USER, ()) if isinstance(messages, list) else None
    if text:
        add_input_mark(span, text, out)


def _responses_requested(span: Span, items: Any, out: Out) -> None:
    """The calls a Responses API response asked for: its `function_call` output items (`name`, `call_id`,
    `arguments`)."""

    def calls() -> Iterator[tuple[str, str, str | None]]:
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, dict) or item.get("type") != "function_call":
                continue
            name, call_id, arguments = item.get("name"), item.get("call_id"), item.get("arguments")
            if isinstance(name, str) and name.strip():
                yield (name, call_id if isinstance(call_id, str) else "",
                       arguments if isinstance(arguments, str) else None)  # fmt: skip

    _add_requested(span, calls(), _LF_CONTENT, out)


_LF_CONTENT = frozenset({"response", "raw_input", "events", "input", "output"})  # a request's content: not copied


# ---- GenAI producers that put values elsewhere: pydantic-ai, Strands Agents -------------------------------------

_DETAILS = "gen_ai.client.inference.operation.details"  # Strands with gen_ai_latest_experimental: the messages


def _relabelled(span: Span, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """A GenAI tool or turn span whose arguments or messages are not where the conventions put them, or a pydantic-ai
    2 span with no operation: the values found elsewhere are given their GenAI keys on a copy of the attributes, and
    the GenAI path maps the span (its events left out, so that it does not come back here)."""
    attrs = span.attributes
    op = operation(span)
    extra: dict[str, Any] = {}
    if op is None:  # pydantic-ai 2 before the operation was set on its spans
        if span.name == "running tool" and m.PA_TOOL_NAME in attrs:
            op = extra[OP] = EXECUTE_TOOL
        elif span.name == "agent run" and m.PA_MESSAGES in attrs:
            op = extra[OP] = INVOKE_AGENT
            if AGENT_NAME not in attrs and isinstance(attrs.get(m.PA_AGENT), str):
                extra[AGENT_NAME] = attrs[m.PA_AGENT]
        else:
            out.append(span)
            return
    if op == EXECUTE_TOOL and attrs.get(TOOL_ARGS) is None:
        if attrs.get(m.PA_ARGS) is not None:
            extra[TOOL_ARGS] = attrs[m.PA_ARGS]
            if attrs.get(TOOL_RESULT) is None and attrs.get(m.PA_RESULT) is not None:
                extra[TOOL_RESULT] = attrs[m.PA_RESULT]
        else:
            _tool_events(span, attrs, extra)
    elif op == INVOKE_AGENT and attrs.get(INPUT_MESSAGES) is None:
        if m.PA_MESSAGES in attrs:
            _pydantic_messages(span, attrs, extra, problems)
        else:
            _turn_events(span, attrs, extra)
    new = _final({**attrs, **extra} if extra else attrs)
    _read_as_genai(span, replace(span, attributes=new, events=None), out, problems, rejected)


def _read_as_genai(span: Span, copy: Span, out: Out, problems: list[str], rejected: dict[str, int]) -> None:
    """The GenAI path's reading of `copy`, a copy of `span` with its values where the conventions put them, standing
    for `span`: a parent link is the span itself, not the copy, and each record keeps the span's attributes as
    received (the copy may be read as a model request too, an OpenInference LLM span named `agent run`: its requested
    calls and offered tools after it)."""
    n = len(out)
    _convert_py((copy,), out, problems, rejected)
    for i in range(n, len(out)):
        r = out[i]
        if r is copy:
            out[i] = span
        elif r.attributes is copy.attributes:
            r.attributes = span.attributes
        elif isinstance(r, RunRoot) and r.turn.attributes is copy.attributes:  # the turn a RunRoot holds too
            r.turn.attributes = span.attributes


def _final(attrs: dict[str, Any]) -> dict[str, Any]:
    """The relabelled attributes, never sent back here: the GenAI path sends a tool span without arguments that has
    pydantic-ai's, and a turn span without input messages that has pydantic-ai's; each key is left out when its GenAI
    key is still not set (each alone: a turn span with a tool span's key set went back and forth until a RecursionError
    lost the batch)."""
    drop: tuple[str, ...] = (m.PA_ARGS,) if attrs.get(TOOL_ARGS) is None and m.PA_ARGS in attrs else ()
    if attrs.get(INPUT_MESSAGES) is None and m.PA_MESSAGES in attrs:
        drop += (m.PA_MESSAGES,)
    return {k: v for k, v in attrs.items() if k not in drop} if drop else attrs


def _one_message(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}], separators=(",", ":"))


def _pydantic_messages(span: Span, attrs: Any, extra: dict[str, Any], problems: list[str]) -> None:
    """pydantic-ai's `pydantic_ai.all_messages` (the whole history, GenAI messages JSON) and `final_result`: this run's
    input is its first user message with text from `pydantic_ai.new_message_index` on."""
    raw = attrs.get(m.PA_MESSAGES)
    messages: Any = None
    if isinstance(raw, str):
        try:
            messages = loads_bounded(raw)
        except (ValueError, RecursionError):
            messages = None
    elif isinstance(raw, tuple):
        try:
            messages = structured(raw)
        except RecursionError:
            messages = None
    else:
        problems.append(m.PA_MESSAGES)
    start = attrs.get(m.PA_NEW_INDEX, 0)
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        start = 0
    if isinstance(messages, list):  # without text (include_content=False leaves the parts' content out): not captured
        for msg in messages[start:]:
            text = _texts([msg], _USER) if isinstance(msg, dict) else None
            if text:
                extra[INPUT_MESSAGES] = _one_message("user", text)
                break
    final = attrs.get(m.PA_FINAL)
    if attrs.get(OUTPUT_MESSAGES) is None and final is not None:
        if not isinstance(final, str):
            final = json.dumps(structured(final) if isinstance(final, tuple) else final)
        extra[OUTPUT_MESSAGES] = _one_message("assistant", final)


def _events_named(span: Span, name: str) -> list[Any]:
    return [e.attributes for e in span.events or () if e.name == name]


def _block_text(raw: Any) -> str | None:
    """The text of a Strands message `content` (JSON of its content blocks, `[{"text": ...}]`), or of a plain text."""
    if not isinstance(raw, str):
        return None
    try:
        blocks = loads_bounded(raw)
    except (ValueError, RecursionError):
        return raw
    if isinstance(blocks, str):
        return blocks
    if isinstance(blocks, list):
        texts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(texts) if texts else None
    return None


def _tool_events(span: Span, attrs: Any, extra: dict[str, Any]) -> None:
    """Strands Agents' tool span events: `gen_ai.tool.message` (`content`: the arguments' JSON) and `gen_ai.choice`
    (`message`: the result's JSON), or with gen_ai_latest_experimental the details event's `tool_call` and
    `tool_call_response` parts."""
    for ev in _events_named(span, "gen_ai.tool.message"):
        if isinstance(ev.get("content"), str):
            extra[TOOL_ARGS] = ev["content"]
    for ev in _events_named(span, "gen_ai.choice"):
        if isinstance(ev.get("message"), str) and attrs.get(TOOL_RESULT) is None:
            extra[TOOL_RESULT] = ev["message"]
    for ev in _events_named(span, _DETAILS):
        args = _part(ev.get(INPUT_MESSAGES), "tool_call", "arguments")
        if args is not None:
            extra[TOOL_ARGS] = args
        result = _part(ev.get(OUTPUT_MESSAGES), "tool_call_response", "response")
        if result is not None and attrs.get(TOOL_RESULT) is None:
            extra[TOOL_RESULT] = result


def _part(raw: Any, kind: str, field: str) -> str | None:
    """The `field` of the first part of type `kind` in a GenAI messages JSON value, as JSON text (a str as is)."""
    if not isinstance(raw, str):
        return None
    try:
        messages = loads_bounded(raw)
    except (ValueError, RecursionError):
        return None
    for msg in messages if isinstance(messages, list) else ():
        parts = msg.get("parts") if isinstance(msg, dict) else None
        for p in parts if isinstance(parts, list) else ():
            if isinstance(p, dict) and p.get("type") == kind and field in p:
                v = p[field]
                return v if isinstance(v, str) else json.dumps(v)
    return None


def _turn_events(span: Span, attrs: Any, extra: dict[str, Any]) -> None:
    """Strands Agents' agent span events: `gen_ai.user.message` (`content`: the message's content blocks) and
    `gen_ai.choice` (`message`: the answer's text), or the details event's `gen_ai.input.messages` /
    `gen_ai.output.messages` (GenAI messages JSON, read as the attributes are)."""
    for ev in _events_named(span, "gen_ai.user.message"):  # the last one is this turn's prompt
        text = _block_text(ev.get("content"))
        if text is not None:
            extra[INPUT_MESSAGES] = _one_message("user", text)
    for ev in _events_named(span, "gen_ai.choice"):
        if isinstance(ev.get("message"), str) and attrs.get(OUTPUT_MESSAGES) is None:
            extra[OUTPUT_MESSAGES] = _one_message("assistant", ev["message"])
    for ev in _events_named(span, _DETAILS):
        if isinstance(ev.get(INPUT_MESSAGES), str):
            extra[INPUT_MESSAGES] = ev[INPUT_MESSAGES]
        if isinstance(ev.get(OUTPUT_MESSAGES), str) and attrs.get(OUTPUT_MESSAGES) is None:
            extra[OUTPUT_MESSAGES] = ev[OUTPUT_MESSAGES]


# ---- shared --------------------------------------------------------------------------------------------------


def _str(attrs: Any, key: str, problems: list[str] | None) -> str:
    """A str attribute ("" when absent); another type is ignored, counted when `problems` is given."""
    v = attrs.get(key)
    if isinstance(v, str):
        return v
    if v is not None and problems is not None:
        problems.append(key)
    return ""


def _args(attrs: Any, key: str, problems: list[str]) -> str | None:
    """JSON text arguments as the GenAI path reads them (a structured value is encoded; another type counted)."""
    v = attrs.get(key)
    if v is None or isinstance(v, str):
        return v
    return _json_text(v, key, problems)


def _result(attrs: Any, key: str, problems: list[str]) -> str | None:
    v = attrs.get(key)
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, tuple):
        return _json_text(v, key, problems)
    problems.append(key)
    return None


def _pick(obj: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, str):
            return v
    return None


def _value_text(attrs: Any, key: str, roles: tuple[str, ...], keys: tuple[str, ...], problems: list[str], *,
                dspy: bool = False) -> str | None:  # fmt: skip
    """The text of an input or output value (see `_text_of`); text that is no JSON is itself. None when not
    captured. With `dspy` (a DSPy module's input, the bound arguments of its `forward`), an object whose only key
    `input_args` holds an object (ReAct's `forward(**input_args)`) is read as that object."""
    raw = attrs.get(key)
    if raw is None or raw == _REDACTED:  # hidden: not captured
        return None
    if not isinstance(raw, str):
        problems.append(key)
        return None
    try:
        value = loads_bounded(raw)
    except (ValueError, RecursionError):
        return raw
    if dspy and isinstance(value, dict) and len(value) == 1 and isinstance(value.get("input_args"), dict):
        value = value["input_args"]
    return _text_of(value, roles, keys, problems, key, raw=raw)


def _text_of(value: Any, roles: tuple[str, ...], keys: tuple[str, ...], problems: list[str] | None = None,
             key: str = "", *, raw: str | None = None) -> str | None:
    """The text of a JSON input or output: a str is itself, an object's str value under one of `keys`, else its chat
    `messages` (a list; or the object itself, one message), read in the forms LangChain, LangGraph and OpenAI write
    them (_lcmessages): of an input (`roles` _USER) the text of its last run of user messages, of an output
    (_ASSISTANT) its answer (_lcmessages.answer: None when it has none, never `raw`). `raw` when no text is read (or it
    is empty). Malformed messages are passed over, and counted under `key` in `problems` when given."""
    if isinstance(value, str):
        return value or raw
    listed = False
    if isinstance(value, dict):
        text = _pick(value, keys)
        if text is not None:
            return text or raw
        if "messages" in value:
            value, listed = value["messages"], True
        if isinstance(value, dict):
            value = [value]
    if not isinstance(value, list):
        return raw
    messages, bad = lc.chat_messages(value)
    if not listed and not any(map(lc.is_message, messages)):  # no chat message: an object's `content` text, if any
        return _texts(messages, None) or raw
    if bad and problems is not None:
        problems.append(key)
    if roles == _ASSISTANT:
        return lc.answer(messages)
    run = _last_run(messages, roles)
    return (_texts(run, None) if run is not None else None) or _texts(messages, None) or raw


def _call(span: Span, name: str, out: Out, problems: list[str], rejected: dict[str, int], *, call_id: Any,
          arguments: str | None, result: str | None, error: str | None = None,
          raised: str | None = None) -> None:  # fmt: skip
    """A ToolCall of the span (a rejection when it has no name); its error the span's own (`error.type`, else, when
    it failed, `raised`, the type of the exception its status message is the text of, else that message), else `error`
    (what its output says, the span ending OK)."""
    name = name or span.name
    if not name:
        rejected[REASON_NO_TOOL_NAME] = rejected.get(REASON_NO_TOOL_NAME, 0) + 1
        return
    attrs = span.attributes
    error_type = attrs.get(ERROR_TYPE)
    if error_type is not None and not isinstance(error_type, str):
        problems.append(ERROR_TYPE)
        error_type = None
    if error_type is None and span.status_code == STATUS_ERROR:
        error_type = raised or span.status_message or "error"
    if error_type is None:
        error_type = error
    out.append(
        ToolCall(
            name=name,
            call_id=call_id if isinstance(call_id, str) else "",
            arguments=arguments,
            result=result,
            error_type=error_type,
            trace_id=span.trace_id,
            span_id=span.span_id,
            parent_span_id=span.parent_span_id,
            start_ns=span.start_ns,
            end_ns=span.end_ns,
            attributes=attrs,
        )
    )


def _turn(span: Span, out: Out, problems: list[str], *, agent: str, input_text: str | None, output_text: str | None,
          conversation_id: str | None) -> None:  # fmt: skip
    attrs = span.attributes
    case_id = attrs.get(CASE_ID)
    if case_id is not None and not isinstance(case_id, str):
        case_id = str(case_id)
    if output_text is None and input_text is not None and span.status_code == STATUS_ERROR:
        output_text = ""  # as the GenAI path: captured content and a failed turn without an answer
    out.append(
        Turn(
            input_text=input_text or "",
            agent=agent,
            trace_id=span.trace_id,
            span_id=span.span_id,
            conversation_id=conversation_id,
            case_id=case_id,
            output_text=output_text,
            tool_definitions=None,
            start_ns=span.start_ns,
            end_ns=span.end_ns,
            attributes=attrs,
            resource=span.resource,
        )
    )
