"""toolwatch instrumentation: record an agent's tool calls as OpenTelemetry spans.

The agent side of toolwatch. Depends only on OpenTelemetry and the standard library::

    from instrumentation import ToolExecutor, agent_turn, configure, tool

    configure(service_name="my-agent")          # OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT

    @tool
    def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
        \"\"\"Current weather for a city.\"\"\"
        ...

    executor = ToolExecutor([get_weather])
    with agent_turn(question, agent="weather-bot", tools=executor) as turn:
        ...                                       # ask the model, offering executor.openai_tools()
        results = executor.execute_tool_calls(message.tool_calls)
        ...
        turn.set_output(answer)
"""

from instrumentation._calls import ToolArgumentsError, ToolCallError, ToolCallRequest, ToolResult, UnknownToolError
from instrumentation._config import ToolwatchTracerProvider, configure, configure_content, shutdown
from instrumentation._content import ContentSettings
from instrumentation._context import get_tracer, set_tracer_provider, use_tool_call_id
from instrumentation._executor import ToolExecutor
from instrumentation._export import DEFAULT_MAX_QUEUE_SIZE, CountingBatchSpanProcessor, CountingExporter
from instrumentation._schema import function_schema
from instrumentation._spec import ToolSpec, get_tool_spec
from instrumentation._stats import TelemetryStats, dropped_spans, telemetry_stats
from instrumentation._tool import tool
from instrumentation._turn import AgentTurn, agent_turn, tool_definitions

__all__ = [
    "DEFAULT_MAX_QUEUE_SIZE",
    "AgentTurn",
    "ContentSettings",
    "CountingBatchSpanProcessor",
    "CountingExporter",
    "TelemetryStats",
    "ToolArgumentsError",
    "ToolCallError",
    "ToolCallRequest",
    "ToolExecutor",
    "ToolResult",
    "ToolSpec",
    "ToolwatchTracerProvider",
    "UnknownToolError",
    "agent_turn",
    "configure",
    "configure_content",
    "dropped_spans",
    "function_schema",
    "get_tool_spec",
    "get_tracer",
    "set_tracer_provider",
    "shutdown",
    "telemetry_stats",
    "tool",
    "tool_definitions",
    "use_tool_call_id",
]
