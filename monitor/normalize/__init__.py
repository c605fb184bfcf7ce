"""Span -> ToolCall / Turn records. The single pluggable place for telemetry conventions.

`Normalizer` applies a list of conventions in order (the first that recognises a span wins) and
counts what it had to reject or ignore. The default is the OpenTelemetry GenAI conventions, which hand the spans
of OpenInference and OpenLLMetry (Traceloop), those of pydantic-ai and Strands Agents whose values are not in
the GenAI attributes, and OpenLIT's runs, to _foreign.py (the same records).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from monitor.normalize._genai import ATTRIBUTE_KEYS as GENAI_ATTRIBUTE_KEYS
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
from monitor.normalize._markers import FOREIGN_ATTRIBUTE_KEYS
from monitor.normalize._requested import add_requested_of
from monitor.otlp import Span
from monitor.records import ToolCall, Turn

# Every attribute key the conventions read: the only keys reported as ignored (a bounded metric label set).
ATTRIBUTE_KEYS = GENAI_ATTRIBUTE_KEYS | FOREIGN_ATTRIBUTE_KEYS


class Normalizer:
    """Maps spans to records with the given conventions (default: GenAI) and keeps counts of problems."""

    def __init__(self, conventions: Sequence[Convention] | None = None) -> None:
        self.conventions: tuple[Convention, ...] = tuple(conventions) if conventions else (GenAIConvention(),)
        # With the GenAI conventions, a span no convention maps may be a model request holding requested calls.
        self._requested = any(isinstance(c, GenAIConvention) for c in self.conventions)
        self.rejected: dict[str, int] = {}
        self.ignored_attributes: dict[str, int] = {}

    def normalize(self, span: Span) -> Normalized:
        problems: list[str] = []
        result = self._apply(span, problems)
        self._count(result, problems)
        return result

    def _apply(self, span: Span, problems: list[str]) -> Normalized:
        for conv in self.conventions:
            result = conv.normalize(span, problems)
            if result is not None:
                return result
        return None

    def _count(self, result: Normalized, problems: list[str]) -> None:
        for key in problems:
            self.ignored_attributes[key] = self.ignored_attributes.get(key, 0) + 1
        if isinstance(result, Rejected):
            self.rejected[result.reason] = self.rejected.get(result.reason, 0) + 1

    def split(self, spans: Iterable[Span]) -> tuple[list[ToolCall | Turn | Span], dict[str, int]]:
        """Normalize a batch: records (tool calls, turns, other spans as parent links) and rejections by reason."""
        conv = self.conventions[0]
        if len(self.conventions) == 1 and type(conv).normalize is GenAIConvention.normalize:
            # The GenAI conventions alone (the usual case): one pass over the batch, problems counted once.
            out: list[ToolCall | Turn | Span] = []
            problems: list[str] = []
            rejected: dict[str, int] = {}
            cast(GenAIConvention, conv).convert(spans, out, problems, rejected)
            ignored = self.ignored_attributes
            for key in problems:
                ignored[key] = ignored.get(key, 0) + 1
            for reason, n in rejected.items():
                self.rejected[reason] = self.rejected.get(reason, 0) + n
            return out, rejected
        return self._split(spans)

    def _split(self, spans: Iterable[Span]) -> tuple[list[ToolCall | Turn | Span], dict[str, int]]:
        out: list[ToolCall | Turn | Span] = []
        append = out.append
        rejected: dict[str, int] = {}
        problems: list[str] = []
        # One convention: call it directly, and count problems only when there are some.
        apply = self.conventions[0].normalize if len(self.conventions) == 1 else self._apply
        for span in spans:
            r = apply(span, problems)
            if r is None:
                append(span)
                if self._requested:
                    add_requested_of(span, out, problems)
            elif isinstance(r, Rejected):
                self._count(r, problems)
                problems.clear()
                reason = r.reason
                rejected[reason] = rejected.get(reason, 0) + 1
                continue
            else:
                append(r)
            if problems:
                self._count(r, problems)
                problems.clear()
        return out, rejected


__all__ = [
    "ATTRIBUTE_KEYS",
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
