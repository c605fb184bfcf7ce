"""MLflow tracing exported through OTLP: the turns a user means.

MLflow records its spans with its own tracer provider (tracer scope `mlflow.tracing.provider`) and, when
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf: gRPC is its default),
exports them there instead of to a tracking server. By default a span carries MLflow's own attributes only, each
value JSON text: `mlflow.spanType` (`"AGENT"`, `"TOOL"`, `"CHAT_MODEL"`, ...), `mlflow.spanInputs` (a traced
function's bound arguments as a JSON object; a model request's request), `mlflow.spanOutputs` (the return value; a
chat completion's whole response), `mlflow.chat.tools` (the tools a chat request offered, OpenAI's form). With
MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true it translates them to the GenAI conventions before export (`invoke_agent
{agent}`, `execute_tool {tool}`, `chat {model}` spans), dropping its own.

The spans are captures of real runs, offline (mlflow-tracing 3.17.2, openai 3.57.0, opentelemetry-sdk 1.45.2), as
received by a small OTLP/HTTP receiver on the loopback interface, as OTLP JSON, one export request a line (exception
stack traces dropped): `@mlflow.trace(name="weather_agent", span_type=SpanType.AGENT)` around a loop over chat
completions of the OpenAI client, traced by `mlflow.openai.autolog()`, against a fake OpenAI server on the loopback
interface, which asks for `get_weather({"city": "Paris"})` (call id `call_1`), then answers; the tool is a function
traced `@mlflow.trace(span_type=SpanType.TOOL)`:
- mlflow_tool / mlflow_raises: MLflow's attributes; the tool returns the weather / raises ValueError (the agent gives
  the model the error, the model answers);
- mlflow_semconv_tool / mlflow_semconv_raises: the same runs with MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true.

What MLflow does not record: the call id on the tool's span (the call the model asked for is paired with it by
name), an error type (the status message is `{type}: {message}`); translated to the GenAI conventions, the agent
span's input and answer (its inputs are a function's arguments, not chat messages): the turn is given the user message
of its first model request, and has no answer.

Replayed through the real normalizer (C and Python) and turn assembler.
"""

from __future__ import annotations

import pytest

from monitor.normalize._markers import MLFLOW_SCOPE, MLFLOW_SPAN_TYPE
from monitor.otlp import Span
from tests.monitor.service.captures import call_rows, captured_turns, offered_names
from tests.monitor.service.test_requested_calls import IMPLS, _impl, convert

QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris."
PARIS = {"city": "Paris"}
ERROR = "ValueError: no weather station in Paris"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("run", "error"), [("tool", None), ("raises", ERROR)])
def test_an_mlflow_agent_run_is_one_turn_with_its_question_call_and_answer(impl: str, run: str,
                                                                            error: str | None) -> None:  # fmt: skip
    """MLflow's attributes: the AGENT span is the turn (named after it), its input the question in its bound
    arguments, its answer its output; the TOOL span the call with its arguments (the bound ones), the call the model
    asked for (`call_1` in the CHAT_MODEL span's response) that call, paired by name; the tools offered those of the
    chat requests (`mlflow.chat.tools`)."""
    [turn] = captured_turns(f"mlflow_{run}", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", QUESTION, ANSWER)
    assert call_rows(turn) == [("get_weather", "", PARIS, False, error)]
    assert offered_names(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("run", "error"), [("tool", None), ("raises", ERROR)])
def test_an_mlflow_run_translated_to_genai_is_one_turn_given_its_first_model_requests_question(
    impl: str, run: str, error: str | None
) -> None:
    """MLflow's GenAI translation records no input on the `invoke_agent` span: the turn's input is the user message of
    its first `chat` span (as google-adk's); no answer is recorded on it."""
    [turn] = captured_turns(f"mlflow_semconv_{run}", impl)
    assert (turn.agent, turn.input_text, turn.output_text) == ("weather_agent", QUESTION, None)
    assert call_rows(turn) == [("get_weather", "", PARIS, False, error)]
    assert offered_names(turn) == ["get_weather"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("value", [3, True, ("AGENT",)])
def test_a_wrong_typed_span_type_is_counted_once(impl: str, value: object) -> None:
    """`mlflow.spanType` of another type than JSON text: the span a parent link, the value counted once under its key,
    as every wrong-typed value is."""
    _impl(impl)
    span = Span(trace_id="ab" * 16, span_id="cd" * 8, parent_span_id="", name="weather_agent", scope=MLFLOW_SCOPE,
                attributes={MLFLOW_SPAN_TYPE: value})  # fmt: skip
    records, problems = convert([span], impl)
    assert (records, problems) == ([span], [MLFLOW_SPAN_TYPE])
