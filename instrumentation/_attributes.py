"""Attribute names of the span contract (OpenTelemetry GenAI semantic conventions) and toolwatch's own.

Only plain string constants live here, so every other module spells an attribute one way.
"""

from __future__ import annotations

from typing import Final

SCOPE_NAME: Final = "toolwatch.instrumentation"

# Operation and its values.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"

# Tool call (`execute_tool {name}`).
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
TOOL_TYPE_FUNCTION: Final = "function"

# Agent turn (`invoke_agent {agent}`).
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"

# General.
ERROR_TYPE: Final = "error.type"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_ESCAPED: Final = "exception.escaped"
EXCEPTION_MESSAGE: Final = "exception.message"  # of the `exception` event the SDK's record_exception adds
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"

# toolwatch's own, where the conventions have none.
TOOLWATCH_CASE_ID: Final = "toolwatch.case.id"
TOOLWATCH_TRUNCATED: Final = "toolwatch.truncated"
"""Names of the content attributes whose value was cut at the size limit (a list of strings).

A truncated value is no longer valid JSON: the monitor treats it as not captured."""
TOOLWATCH_CONTENT_ERROR: Final = "toolwatch.content.error"
"""Why content that should have been captured was left out or replaced (e.g. `redaction_failed`)."""
TOOLWATCH_YIELDED: Final = "toolwatch.tool.yielded"
"""Number of items a generator tool yielded."""

# Environment variables.
ENV_CAPTURE_CONTENT: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ENV_CAPTURE_TURN_MESSAGES: Final = "TOOLWATCH_CAPTURE_TURN_MESSAGES"
ENV_MAX_CONTENT_LENGTH: Final = "TOOLWATCH_MAX_CONTENT_LENGTH"

REDACTED: Final = "[REDACTED]"
