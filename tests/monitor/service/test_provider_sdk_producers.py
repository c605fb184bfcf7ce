"""Model providers' own SDKs (Anthropic, AWS Bedrock, Mistral, Groq, Ollama, Cohere), each traced by an OpenLLMetry
or OpenInference instrumentation, in a turn of toolwatch's own instrumentation: the calls the model requested, read
with their ids and arguments where the instrumentation records them, and reconciled with the calls that ran; the
tools offered.

Anthropic: the spans are captures of real runs, offline, as OTLP JSON, one export request a line (exception stack
traces dropped: no machine path): anthropic 2.14.0 against a fake Messages API on the loopback that answers the question
with a `tool_use` block (id `call_1`, `{"city": "Paris"}`), then, given the `tool_result`, with text; the loop inside
`agent_turn(question, agent="weather_agent", tools=[get_weather, get_forecast])`, each `tool_use` run as a `@tool`
under `use_tool_call_id(block.id)` (opentelemetry-sdk 1.45.2):
- anthropic_openinference_*: openinference-instrumentation-anthropic 3.1.0: a `messages.create` LLM span, the
  requested call in `llm.output_messages.0.message.tool_calls.0.tool_call.*` and listed again as
  `llm.output_messages.0.message.contents.1.tool_call.*` (one call, not two), the tools in
  `llm.tools.N.tool.json_schema` (Anthropic's `{name, description, input_schema}`);
- anthropic_openllmetry_*: opentelemetry-instrumentation-anthropic 0.62.4: an `anthropic.chat` span with GenAI
  `gen_ai.output.messages` (a `tool_call` part, its arguments an object) and `gen_ai.tool.definitions` in Anthropic's
  form.
`*_tool` runs `get_weather`; `*_raises` has the model ask for `get_forecast`, which raises (the model is given the
error as an `is_error` tool result). anthropic 2.14 also traces itself: an `anthropic.messages.create` CLIENT span
(`gen_ai.operation.name=chat`, no content) beside each of the instrumentation's.

Bedrock: the spans are captures of real runs, offline, as OTLP JSON, one export request a line (exception stack traces
dropped: no machine path): boto3 / botocore 1.44.8, a `bedrock-runtime` client with dummy credentials and an
`endpoint_url` on the loopback, a fake Converse endpoint that answers the question with a `toolUse` block
(`toolUseId` `call_1`, `{"city": "Paris"}`), then, given the `toolResult`, with text. The loop calls
`client.converse(modelId=..., messages=..., toolConfig={"tools": [{"toolSpec": {...}}]})` and runs each `toolUse` as
a `@tool` under `use_tool_call_id(block["toolUseId"])`, inside `agent_turn(question, agent="weather_agent",
tools=[get_weather, get_forecast])` (opentelemetry-sdk 1.45.2):
- bedrock_openinference_*: openinference-instrumentation-bedrock 0.1.61: a `bedrock.converse` LLM span per request,
  the requested call in `llm.output_messages.0.message.tool_calls.0.tool_call.*` (with its id), the tools in
  `llm.tools.N.tool.json_schema` in Bedrock's own form, `{"toolSpec": {"name", "description", "inputSchema":
  {"json": ...}}}`;
- bedrock_openllmetry_*: opentelemetry-instrumentation-bedrock 0.62.4: a `chat {model}` span per request with GenAI
  `gen_ai.output.messages` (a `tool_call` part, its arguments an object) and `gen_ai.tool.definitions`
  (`{name, description, parameters}`); the model named without its vendor prefix (`claude-test-v1:0`).
`*_tool` runs `get_weather`; `*_raises` has the model ask for `get_forecast`, which raises (the model is given the
error as a `toolResult` of status `error`). `*_alone`: the same loop without `agent_turn`: each span is the root of
its own trace.

Mistral, Groq, Ollama, Cohere: the spans are captures of real runs, offline, as OTLP JSON, one export request a line
(exception stack traces dropped: no machine path), opentelemetry-sdk 1.45.2: each SDK's client given a base URL on
the loopback, a fake endpoint that answers the question with a tool call (`get_weather`, `{"city": "Paris"}`, id
`call_1` where the protocol has ids), then, given the tool's result, with text. The loop, inside
`agent_turn(question, agent="weather_agent", tools=[get_weather, get_forecast])`, sends the question as a plain
`{"role": "user", "content": ...}` dict with the two tools in OpenAI's `{"type": "function", "function": {...}}`
form and runs each call the model asks for as a `@tool` under `use_tool_call_id(call.id)` (Ollama's calls have no
id: run without it, so the `@tool` records a fresh `tw_` id):
- mistral_openllmetry_*: `mistralai` 1.12.4 (`Mistral(server_url=...)`, `client.chat.complete`) through OpenLLMetry's
  `opentelemetry-instrumentation-mistralai` 0.62.4. (With mistralai 3.7.0, the latest, `instrument()` fails: the
  instrumentation imports `mistralai.models`, which 3.x no longer has.) A `mistralai.chat` span per request that
  records neither the calls the model asked for (only `gen_ai.completion.0.finish_reason` `tool_calls`) nor the tools
  offered, and, the messages being dicts (as Mistral's docs write them), no prompt text either (it reads
  `message.content` as an attribute; only `gen_ai.prompt.0.role`): no requested call, no tool offered that can be
  read; the turn's calls are those that ran.
- groq_openinference_*: `groq` 1.7.0 (`Groq(base_url=...)`, `client.chat.completions.create`) through
  `openinference-instrumentation-groq` 0.1.33: a `Completions` LLM span per request, the requested call in
  `llm.output_messages.0.message.tool_calls.0.tool_call.*` with its id, the tools in `llm.tools.N.tool.json_schema`
  (OpenAI's form); the second request's input messages repeat the call (not read as requested). (With
  `stream=True`, tried but not kept, its LLM spans keep the tools offered but no output messages, `output.value`
  the repr of the `groq.Stream` object: no requested call; the turn's calls are those that ran.)
- ollama_openllmetry_*: `ollama` 0.6.3 (`Client(host=...)`, `client.chat` against `/api/chat`) through OpenLLMetry's
  `opentelemetry-instrumentation-ollama` 0.62.4: an `ollama.chat` span per request with the tools offered
  (`llm.request.functions.N.*`) but not the calls the model asked for (only `gen_ai.completion.0.role`; the call shows
  up only in the next request's prompt history, `gen_ai.prompt.1.tool_calls.0.*`, the model's input, not read as a
  request): no requested call; the turn's calls are those that ran, with their `tw_` ids.
- cohere_openllmetry_*: `cohere` 5.21.1 (`ClientV2(base_url=...)`, `client.chat` against `/v2/chat`) through
  OpenLLMetry's `opentelemetry-instrumentation-cohere` 0.62.4 (it declares `cohere >=4.2.7, <6`: with cohere 7.3.1,
  the latest, it instruments nothing and says so). A `cohere.chat` span per request, the requested call in
  `gen_ai.completion.0.tool_calls.0.id` / `.name` / `.arguments` (the model's `tool_plan` as the completion's text),
  the tools in `llm.request.functions.N.*`.
`*_tool` runs `get_weather`; `*_raises` has the model ask for `get_forecast`, which raises (the model is given the
error as the tool's result).

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.records import RequestedCall
from tests.monitor.service.captures import call_rows, capture, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS, _impl, assemble, convert

QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris."
PARIS = {"city": "Paris"}
OFFERED = ["get_weather", "get_forecast"]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PRODUCERS = [
    "anthropic_openinference",
    "anthropic_openllmetry",
    "bedrock_openinference",
    "bedrock_openllmetry",
    "mistral_openllmetry",
    "groq_openinference",
    "ollama_openllmetry",
    "cohere_openllmetry",
]
# The producers that record the calls their model asked for (with ids) and the tools it was offered.
REQUESTS_READ = set(PRODUCERS) - {"mistral_openllmetry", "ollama_openllmetry"}
OFFERS_READ = set(PRODUCERS) - {"mistral_openllmetry"}
# The id each run's `@tool` recorded: the model's `call_1`, or (Ollama's calls have none) the `@tool`'s own.
CALL_IDS = {
    ("ollama_openllmetry", "tool"): "tw_9d35d7ee8489b3ab",
    ("ollama_openllmetry", "raises"): "tw_8c8622f22ab72e53",
}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize(
    ("run", "tool", "error"), [("tool", "get_weather", None), ("raises", "get_forecast", "RuntimeError")]
)
def test_a_provider_sdk_tool_call_is_the_call_that_ran_in_its_turn(
    impl: str, producer: str, run: str, tool: str, error: str | None
) -> None:
    """One turn with its input, answer and tools offered; the call the model asked for (where recorded) and the
    `@tool` run of the same id are one call, with its arguments (a raising one with its error)."""
    [turn] = captured_turns(f"{producer}_{run}", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", QUESTION, ANSWER)
    call_id = CALL_IDS.get((producer, run), "call_1")
    assert call_rows(turn) == [(tool, call_id, PARIS, False, error)]
    assert offered_names(turn) == OFFERED


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_a_provider_sdk_model_span_gives_the_requested_call_once_with_its_id_and_arguments(
    impl: str, producer: str
) -> None:
    """The first request's tool call is one requested call, read with its id and arguments (once: OpenInference lists
    Anthropic's `tool_use` twice on the message); the second request, whose input repeats it, requests none.
    Mistral's and Ollama's instrumentations record no call the model asked for: none is read, and nothing is counted
    as unreadable."""
    _impl(impl)
    records, problems = convert(capture(f"{producer}_tool"), impl)
    assert problems == []
    requested = [
        (r.name, r.call_id, json.loads(r.arguments or "null")) for r in records if isinstance(r, RequestedCall)
    ]
    assert requested == ([("get_weather", "call_1", PARIS)] if producer in REQUESTS_READ else [])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_a_provider_sdk_tool_call_whose_run_was_not_received_is_a_requested_call(impl: str, producer: str) -> None:
    """The `execute_tool` span left out (lost, or the tool never run): the turn keeps the call the model asked for, as
    a requested call that did not run, with its id and arguments; where the producer records none, the turn has no
    call."""
    _impl(impl)
    spans = [s for s in capture(f"{producer}_tool") if not s.name.startswith("execute_tool")]
    turns, _ = assemble(spans, impl, flush=True)
    calls = [("get_weather", "call_1", PARIS, True, None)] if producer in REQUESTS_READ else []
    assert [(t.agent, t.input_text, call_rows(t)) for t in turns] == [("weather_agent", QUESTION, calls)]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_a_provider_sdk_model_spans_tools_are_the_tools_offered(impl: str, producer: str) -> None:
    """A turn span offering no tools: the model requests' tools are the tools offered, with their arguments' schema
    (OpenInference's in OpenAI's nested form, OpenLLMetry's flat, Anthropic's and Bedrock's in their own; Bedrock's
    `{"toolSpec": ...}` through OpenInference too); Mistral's instrumentation records none."""
    _impl(impl)
    spans = capture(f"{producer}_tool")
    for s in spans:
        if s.name == "invoke_agent weather_agent":
            del s.attributes["gen_ai.tool.definitions"]
    turns, _ = assemble(spans, impl, flush=True)
    [turn] = turns
    offered = producer in OFFERS_READ
    assert offered_names(turn) == (OFFERED if offered else [])
    assert [_schema(d) for d in turn.tool_definitions or ()] == ([SCHEMA] * 2 if offered else [])


def _schema(definition: Any) -> Any:
    """An offered tool's arguments schema in the form its producer wrote it: OpenAI's nested one, the flat one,
    Anthropic's `input_schema`, Bedrock's `inputSchema.json` (`toolSpec` read already)."""
    if "function" in definition:
        return definition["function"]["parameters"]
    return definition.get("parameters") or definition.get("input_schema") or definition["inputSchema"]["json"]
