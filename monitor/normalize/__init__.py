"""Span -> ToolCall / Turn records. The single pluggable place for telemetry conventions.

`Normalizer` applies a list of conventions in order (the first that recognises a span wins) and
counts what it had to reject or ignore. The default is the OpenTelemetry GenAI conventions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from monitor.normalize._genai import (
    EXECUTE_TOOL,
    INVOKE_AGENT,
    REASON_NO_TOOL_NAME,
    Convention,
    GenAIConvention,
    Normalized,
    Rejected,
    message_text,
)
from monitor.otlp import Span
from monitor.records import ToolCall, Turn


class Normalizer:
    """Maps spans to records with the given conventions (default: GenAI) and keeps counts of problems."""

    def __init__(self, conventions: Sequence[Convention] | None = None) -> None:
        self.conventions: tuple[Convention, ...] = tuple(conventions) if conventions else (GenAIConvention(),)
        self.rejected: dict[str, int] = {}
        self.ignored_attributes: dict[str, int] = {}

    def normalize(self, span: Span) -> Normalized:
        problems: list[str] = []
        result: Normalized = None
        for conv in self.conventions:
            result = conv.normalize(span, problems)
            if result is not None:
                break
        for key in problems:
            self.ignored_attributes[key] = self.ignored_attributes.get(key, 0) + 1
        if isinstance(result, Rejected):
            self.rejected[result.reason] = self.rejected.get(result.reason, 0) + 1
        return result

    def split(self, spans: Iterable[Span]) -> tuple[list[ToolCall | Turn | Span], dict[str, int]]:
        """Normalize a batch: records (tool calls, turns, other spans as parent links) and rejections by reason."""
        out: list[ToolCall | Turn | Span] = []
        rejected: dict[str, int] = {}
        norm = self.normalize
        for span in spans:
            r = norm(span)
            if r is None:
                out.append(span)
            elif isinstance(r, Rejected):
                rejected[r.reason] = rejected.get(r.reason, 0) + 1
            else:
                out.append(r)
        return out, rejected


__all__ = [
    "EXECUTE_TOOL",
    "INVOKE_AGENT",
    "REASON_NO_TOOL_NAME",
    "Convention",
    "GenAIConvention",
    "Normalized",
    "Normalizer",
    "Rejected",
    "message_text",
]
