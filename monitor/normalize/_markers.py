"""Attribute keys of the conventions other than GenAI (read by _foreign.py), kept apart so that _genai.py can name the
markers without importing _foreign.py (which imports it).

A span the GenAI conventions do not recognise (no `execute_tool` / `invoke_agent` operation or span name) goes to
_foreign.py only when it carries one of FOREIGN_MARKERS: every other span costs a few dict lookups, no call.
"""

from __future__ import annotations

# OpenInference (Arize): openinference.semconv.trace.SpanAttributes / ToolCallAttributes.
OI_KIND = "openinference.span.kind"
OI_INPUT = "input.value"
OI_INPUT_MIME = "input.mime_type"
OI_OUTPUT = "output.value"
# `application/json` or `text/plain`: LangChain.js' instrumentation tags any text a run returned `text/plain`, JSON or
# not (its formatIO: one str value); Python's tags a text that looks like JSON `application/json` and leaves the mime
# type out for any other; both tag a ToolMessage a tool returned `application/json`.
OI_OUTPUT_MIME = "output.mime_type"
OI_TEXT_MIME = "text/plain"
OI_TOOL_NAME = "tool.name"
OI_TOOL_ID = "tool.id"
OI_TOOL_CALL_ID = "tool_call.id"
OI_TOOL_CALL_ARGS = "tool_call.function.arguments"
OI_AGENT_NAME = "agent.name"
OI_SESSION_ID = "session.id"
OI_METADATA = "metadata"  # JSON text of the run's metadata (LangChain: LangGraph's `langgraph_node`, ...)
OI_OUTPUT_MESSAGES = "llm.output_messages"  # `.{i}.message.tool_calls.{j}.tool_call.{id,function.name,...}`
OI_TOOLS = "llm.tools"  # `.{i}.tool.json_schema`: the tools an LLM span offers (JSON text of each)
# What OpenInference's TraceConfig (OPENINFERENCE_HIDE_INPUTS, _HIDE_INPUT_TEXT, ...) leaves of a hidden value.
OI_REDACTED = "__REDACTED__"
OI_INPUT_MESSAGES = "llm.input_messages"  # `.{i}.message.role`, `.message.content`: the messages a model was given
# The tracer scopes of openinference-instrumentation-langchain, Python's and LangChain.js': only their TOOL spans'
# output is read as the ToolMessage a tool returned (its call id and error, _lcmessages.tool_message; never an output
# tagged `text/plain`); another framework's tool records the text it returned, which may open as a ToolMessage does (a
# page or file the tool read). Only their failed TOOL spans' status message is read as LangChain's text of the
# exception a tool raised (_lcerrors), only their CHAIN spans' input as a LangGraph ToolNode task's call (its id, for a
# tool that raised under it: _foreign._tool_task), and only their LLM spans' output for the ids of the calls it asked
# for and the calls its output messages leave out (_flat: LangChain.js' output messages name no id, and hold no call of
# a model whose integration fills only the message's parsed `tool_calls`).
OI_LANGCHAIN_JS_SCOPE = "@arizeai/openinference-instrumentation-langchain"  # LangChain.js': JSON.stringify's JSON
OI_LANGCHAIN_SCOPES = frozenset({"openinference.instrumentation.langchain", OI_LANGCHAIN_JS_SCOPE})
# The tracer scope of openinference-instrumentation-openai-agents: its spans' turns are its agent spans (_foreign).
OI_OPENAI_AGENTS_SCOPE = "openinference.instrumentation.openai_agents"
# The tracer scope of openinference-instrumentation-llama-index: its root workflow span records the workflow's start
# state, not the question, and its TOOL spans the tool's bound arguments (`{"kwargs": {...}}`) (_foreign).
OI_LLAMA_INDEX_SCOPE = "openinference.instrumentation.llama_index"
# The tracer scopes of openinference-instrumentation-crewai (its wrappers; its event listener, `use_event_listener`):
# a crew's run is the root CHAIN span (`crew_key`), around one AGENT span per task, named after the agent's role
# (`graph.node.id`), that records the task (`task_description`, or the TaskOutput's `description`); a Flow's run is the
# root CHAIN span `flow_id`; a TOOL span's `tool.description` opens with the name the model was given (`Tool Name:
# delegate_work_to_coworker`; `tool.name` is CrewAI's display name, `Delegate work to coworker`) (_foreign).
OI_CREWAI_SCOPES = frozenset(
    {"openinference.instrumentation.crewai", "openinference.instrumentation.crewai._event_listener"}
)
OI_GRAPH_NODE_ID = "graph.node.id"  # CrewAI: the agent's role
# The tracer scope of openinference-instrumentation-smolagents: its run span is named `{agent}.run`, its TOOL spans
# record the bound arguments of `Tool.__call__` (`{"args", "sanitize_inputs_outputs", "kwargs"}`), the tool's inputs in
# `tool.parameters` (_foreign).
OI_SMOLAGENTS_SCOPE = "openinference.instrumentation.smolagents"
OI_TOOL_PARAMETERS = "tool.parameters"
CREWAI_CREW_KEY = "crew_key"
CREWAI_TASK_ID = "task_id"
CREWAI_TASK_DESCRIPTION = "task_description"  # the event listener's AGENT span: the task as the agent was given it
CREWAI_FLOW_ID = "flow_id"
OI_TOOL_DESCRIPTION = "tool.description"
CREWAI_TOOL_NAME_LINE = "Tool Name: "  # CrewAI's tool description: its first line names the tool as the model sees it
# DSPy through OpenInference: its TOOL spans (`{tool}.__call__` / `{tool}.acall`) record no `tool.name`, their
# `input.value` the bound arguments of `Tool.__call__(**kwargs)`; a module's span is `{class}.forward` (_foreign).
OI_DSPY_SCOPE = "openinference.instrumentation.dspy"
# Haystack through OpenInference: a run's `input.value` / `output.value` hold its messages as Python reprs
# (`ChatMessage(...)`), its LLM spans the messages themselves (_foreign).
OI_HAYSTACK_SCOPE = "openinference.instrumentation.haystack"
# AutoGen AgentChat through OpenInference: each agent run an AGENT span `{agent}.on_messages_stream` (`graph.node.id`
# the agent) whose `input.value` is JSON of its bound arguments, its `messages` AgentChat's messages' reprs
# (`id='...' source='user' ... content='...' type='TextMessage'`), under autogen-core's own `invoke_agent` span; a
# team's run a root CHAIN span `{team}.run_stream`, its agents' runs in other traces (_foreign._autogen).
OI_AUTOGEN_SCOPE = "openinference.instrumentation.autogen_agentchat"
# The scopes whose LLM spans give the turn around them its input (monitor.normalize._flat.add_openinference_input).
OI_INPUT_SCOPES = frozenset({OI_OPENAI_AGENTS_SCOPE, OI_LLAMA_INDEX_SCOPE, OI_HAYSTACK_SCOPE})
# The tracer scope of google-adk (GenAI spans): its `invoke_agent` spans record no input, its model request spans the
# messages (monitor.normalize._requested.add_model_input).
ADK_SCOPE = "gcp.vertex.agent"
# The tracer scope of both OpenTelemetry instrumentations of openai-agents as trace processors: contrib's
# opentelemetry-instrumentation-openai-agents-v2 (GenAI spans: the workflow an `invoke_agent` span without
# `gen_ai.agent.name`, a parent link) and OpenLLMetry's opentelemetry-instrumentation-openai-agents (Traceloop spans:
# the root `workflow` span a parent link, its `agent` spans the turns, with no input). Their model request spans give
# the input their model was given (monitor.normalize._requested.add_model_input), as google-adk's do.
OTEL_OPENAI_AGENTS_SCOPE = "opentelemetry.instrumentation.openai_agents"
# The tracer scope of OpenLLMetry's opentelemetry-instrumentation-crewai: a crew's run is an `invoke_agent` span
# `crewai.workflow` without `gen_ai.agent.name` or input messages, a parent link; each task's run a Traceloop `task`
# span (also `invoke_agent`), the turn: its agent `crewai.task.agent` (the role), its input `crewai.task.description`
# (the task, the kickoff inputs filled in), its answer `traceloop.entity.output`; the agent's `{role}.agent` span under
# it (`gen_ai.agent.name`, no input) a parent link. It records no tool run (_foreign).
OTEL_CREWAI_SCOPE = "opentelemetry.instrumentation.crewai.instrumentation"
CREWAI_TL_TASK_AGENT = "crewai.task.agent"
CREWAI_TL_TASK_DESCRIPTION = "crewai.task.description"
# OpenLIT's tracer scopes (`openlit.instrumentation.{library}`): a run is one turn, its root `invoke_workflow` or
# `invoke_agent` span; the `invoke_agent` (and `invoke_workflow`) spans under another span are steps, parent links (its
# LangGraph and LangChain instrumentations nest one per graph node, twice over); its model requests give the input
# their model was given (an InputMark, _requested.add_model_input); a tool's arguments written as a Python dict repr
# are read as OpenInference's LangChain ones are (_foreign).
OPENLIT_SCOPE_PREFIX = "openlit.instrumentation."
INVOKE_WORKFLOW = "invoke_workflow"  # OpenLIT's LangGraph instrumentation: the graph's run
# OpenLIT's LangChain callback: a chain's (a graph's, a node's) inputs as JSON, LangGraph's `messages` as dicts or as
# LangChain's reprs (`content='...' additional_kwargs={} ...`).
OPENLIT_WORKFLOW_INPUT = "gen_ai.workflow.input"


def is_openlit(scope: object) -> bool:
    """Whether a tracer scope is one of OpenLIT's."""
    return isinstance(scope, str) and scope.startswith(OPENLIT_SCOPE_PREFIX)


# Langfuse's Python SDK (3 and later, on OpenTelemetry): spans of its tracer scope with its own attributes only, the
# observation's type (`agent`, `tool`, `generation`, `span`, ...), input and output (JSON text; a decorated function's
# input its bound arguments, `{"args": [...], "kwargs": {...}}`); the session `session.id` (_foreign).
LANGFUSE_SCOPE = "langfuse-sdk"
LF_TYPE = "langfuse.observation.type"
LF_INPUT = "langfuse.observation.input"
LF_OUTPUT = "langfuse.observation.output"
# MLflow tracing: its own attributes, each value JSON text: the span's type (`"AGENT"`, `"TOOL"`, `"CHAT_MODEL"`,
# ...), its inputs (a traced function's bound arguments; a model request's request), its outputs (the return value; a
# chat completion's response), the tools a chat request offered (OpenAI's form) (_foreign). Translated to the GenAI
# conventions (MLFLOW_ENABLE_OTEL_GENAI_SEMCONV) its `invoke_agent` spans record no input: its model request spans
# give it (monitor.normalize._requested.add_model_input), as google-adk's do.
MLFLOW_SCOPE = "mlflow.tracing.provider"
MLFLOW_SPAN_TYPE = "mlflow.spanType"
MLFLOW_INPUTS = "mlflow.spanInputs"
MLFLOW_OUTPUTS = "mlflow.spanOutputs"
MLFLOW_CHAT_TOOLS = "mlflow.chat.tools"

# Pydantic Logfire's openai-agents integration (`logfire.instrument_openai_agents()`): the SDK's spans as Logfire's own,
# each named after its message template (`logfire.msg_template`), with `logfire.msg` (a FOREIGN_MARKERS key) and no
# GenAI operation but on the Responses model's requests (`chat`): an `Agent run: {name!r}` span per agent's run (the
# turn, `name` its agent), a `Function: {name}` span per tool (`input` the arguments' JSON text, `output` the result,
# `error` openai-agents' error), a `Handoff: {from_agent} → {to_agent}` span per handoff, a `Chat completion with ...`
# span per chat completions request (`input` / `output` the chat messages), a `Responses API ...` span per Responses
# request (`raw_input` the request's items, `response` the response: its output items, the tools offered) (_foreign).
LOGFIRE_OPENAI_AGENTS_SCOPE = "logfire.openai_agents"
LOGFIRE_TEMPLATE = "logfire.msg_template"

# The Vercel AI SDK's own telemetry (TypeScript, `experimental_telemetry`): spans of its tracer scope `ai` with
# `ai.operationId` (a FOREIGN_MARKERS key) and its own attributes, no GenAI operation (monitor.normalize._vercel).
VERCEL_AI_SCOPE = "ai"
AI_OPERATION_ID = "ai.operationId"
AI_FUNCTION_ID = "ai.telemetry.functionId"  # the agent's name
AI_PROMPT = "ai.prompt"  # a call's prompt, JSON `{"system", "prompt"}` or `{"system", "messages"}`
AI_RESPONSE_TEXT = "ai.response.text"
AI_RESPONSE_OBJECT = "ai.response.object"  # a generateObject / streamObject run's answer: the object as JSON text
AI_PROMPT_MESSAGES = "ai.prompt.messages"  # a model request's messages (not read: kept from its requested calls)
AI_PROMPT_TOOLS = "ai.prompt.tools"  # a model request's tools offered: an array of JSON texts
AI_RESPONSE_CALLS = "ai.response.toolCalls"  # the calls a model request asked for, JSON
AI_TOOL_NAME = "ai.toolCall.name"
AI_TOOL_ID = "ai.toolCall.id"
AI_TOOL_ARGS = "ai.toolCall.args"
AI_TOOL_RESULT = "ai.toolCall.result"

# Mastra's own observability exported by @mastra/otel-exporter (TypeScript): GenAI spans of its tracer scope with its
# own `mastra.*` attributes beside (monitor.normalize._mastra): an agent's run is an `invoke_agent` span whose input and
# answer are `mastra.agent_run.input` (the input as given: text, else JSON) and `.output` (JSON `{"text", ...}`), its
# tools offered `gen_ai.tool.definitions` holding their names only; each step of the run an `agent_step` span, the calls
# its model asked for in `mastra.model_step.output` (JSON `{"text", "toolCalls": [{"toolCallId", "toolName",
# "args"}]}`) beside its messages (`mastra.model_step.input`) and the model's raw response (`mastra.metadata.body`).
MASTRA_SCOPE = "@mastra/otel-exporter"
MASTRA_AGENT_INPUT = "mastra.agent_run.input"
MASTRA_AGENT_OUTPUT = "mastra.agent_run.output"
MASTRA_STEP = "agent_step"  # the step's GenAI operation
# A failed span's `error.type` when Mastra's error has no id of its own (a tool's thrown error): its message, in the
# span's status (and `error.message`, and an `exception` event whose `exception.type` is always `Error`), is the error.
MASTRA_NO_ERROR_ID = "unknown"
MASTRA_STEP_INPUT = "mastra.model_step.input"
MASTRA_STEP_OUTPUT = "mastra.model_step.output"
MASTRA_RESPONSE_BODY = "mastra.metadata.body"

# OpenLLMetry (Traceloop): opentelemetry.semconv_ai.SpanAttributes.
TL_KIND = "traceloop.span.kind"
TL_NAME = "traceloop.entity.name"
TL_INPUT = "traceloop.entity.input"
TL_OUTPUT = "traceloop.entity.output"
TL_WORKFLOW = "traceloop.workflow.name"
TL_REQUEST_TYPE = "llm.request.type"  # on the LLM spans of its instrumentations (`chat`, `completion`, ...)
TL_COMPLETION = "gen_ai.completion"  # `.{i}.tool_calls.{j}.{id,name,arguments}`: the calls the model asked for
TL_FUNCTIONS = "llm.request.functions"  # `.{i}.{name,description,parameters}`: the tools a chat span offers

# pydantic-ai's instrumentation version 2 (InstrumentationNames.for_version(2)): `running tool` spans with
# `tool_arguments` / `tool_response`, `agent run` spans with `agent_name`, `pydantic_ai.all_messages`, `final_result`.
# Versions 3 and later name their spans `execute_tool {tool}` / `invoke_agent {agent}` and are read as GenAI.
PA_TOOL_NAME = "gen_ai.tool.name"  # with no execute_tool operation or span name: the `running tool` span
PA_ARGS = "tool_arguments"
PA_RESULT = "tool_response"
PA_AGENT = "agent_name"
PA_MESSAGES = "pydantic_ai.all_messages"
PA_NEW_INDEX = "pydantic_ai.new_message_index"
PA_FINAL = "final_result"

PA_MSG = "logfire.msg"  # set on pydantic-ai's `agent run` and `running tool` spans by every version

# The keys that send a span with no GenAI operation to _foreign.py (a tuple: _cgenai.c reads it once, at load).
FOREIGN_MARKERS = (OI_KIND, TL_KIND, PA_MSG, TL_REQUEST_TYPE, LF_TYPE, MLFLOW_SPAN_TYPE, AI_OPERATION_ID)

# The keys that make a span a part of an agent's run, for turn assembly's settling of a RunRoot under it
# (monitor.assembly._runs): a GenAI operation's, OpenInference's and OpenLLMetry's spans. Not Logfire's `logfire.msg`
# (its web framework spans carry it too), nor Langfuse's or MLflow's span types (an application's traced function
# around a run is one of them).
RUN_MARKERS = ("gen_ai.operation.name", OI_KIND, TL_KIND, TL_REQUEST_TYPE)

# Every key _foreign.py reports as ignored (wrong-typed): label values of toolwatch_ignored_attributes_total.
FOREIGN_ATTRIBUTE_KEYS = frozenset(
    {
        OI_KIND,
        OI_INPUT,
        OI_OUTPUT,
        OI_TOOL_NAME,
        OI_TOOL_ID,
        OI_TOOL_CALL_ID,
        OI_TOOL_CALL_ARGS,
        OI_AGENT_NAME,
        OI_SESSION_ID,
        OI_GRAPH_NODE_ID,  # the agent's role on a CrewAI task's AGENT span
        CREWAI_TASK_DESCRIPTION,
        CREWAI_TL_TASK_AGENT,  # OpenLLMetry's CrewAI task span: its agent's role, its task
        CREWAI_TL_TASK_DESCRIPTION,
        OI_OUTPUT_MESSAGES,  # a requested call of an LLM span that cannot be read (monitor.normalize._flat)
        OI_TOOLS,  # an offered tool of an LLM span that cannot be read (monitor.normalize._offered)
        TL_KIND,
        TL_NAME,
        TL_INPUT,
        TL_OUTPUT,
        TL_COMPLETION,  # a requested call of a chat span that cannot be read (monitor.normalize._flat)
        TL_FUNCTIONS,  # an offered tool of a chat span that cannot be read (monitor.normalize._offered)
        LF_TYPE,  # Langfuse's observation type, input, output
        LF_INPUT,
        LF_OUTPUT,
        MLFLOW_SPAN_TYPE,  # MLflow's span type, inputs, outputs, chat tools
        MLFLOW_INPUTS,
        MLFLOW_OUTPUTS,
        MLFLOW_CHAT_TOOLS,
        OPENLIT_WORKFLOW_INPUT,  # an OpenLIT run's input, not a str
        AI_OPERATION_ID,  # the Vercel AI SDK's keys read (monitor.normalize._vercel)
        AI_FUNCTION_ID,
        AI_PROMPT,
        AI_RESPONSE_TEXT,
        AI_RESPONSE_OBJECT,
        AI_PROMPT_TOOLS,
        AI_RESPONSE_CALLS,
        AI_TOOL_NAME,
        AI_TOOL_ID,
        AI_TOOL_ARGS,
        AI_TOOL_RESULT,
        MASTRA_AGENT_INPUT,  # Mastra's keys read (monitor.normalize._mastra)
        MASTRA_AGENT_OUTPUT,
        MASTRA_STEP_OUTPUT,
        PA_MESSAGES,  # the others pydantic-ai keys are read as the GenAI keys they stand for, and counted as those
    }
)
