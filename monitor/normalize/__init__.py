"""Span -> ToolCall / Turn records. The single pluggable place for telemetry conventions.

`Normalizer` applies a list of conventions in order (the first that recognises a span wins) and
counts what it had to reject or ignore. The default is the OpenTelemetry GenAI conventions, which hand the spans
of OpenInference and OpenLLMetry (Traceloop), those of pydantic-ai and Strands Agents whose values are not in
the GenAI attributes, and OpenLIT's runs, to _foreign.py (the same records), and Mastra's runs and steps to
_mastra.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import cast

from monitor._faults import power_of_ten, traceback_text
from monitor._text import elide
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

logger = logging.getLogger(__name__)

REASON_NORMALIZE_ERROR = "normalize_error"  # a span the normalizer failed on (a fault of ours): rejected, logged

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
        self.faults = 0  # spans rejected as REASON_NORMALIZE_ERROR
        conv = self.conventions[0]
        self._fast = len(self.conventions) == 1 and type(conv).normalize is GenAIConvention.normalize

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """A copy of the counts of rejected spans and ignored attributes (small: a label set each), for `restore`."""
        return dict(self.rejected), dict(self.ignored_attributes)

    def restore(self, saved: tuple[dict[str, int], dict[str, int]]) -> None:
        """Put the counts back as `counts` saved them: a batch read but not taken (a full queue, a fault of the
        receiver; the exporter sends it again) is counted when it is taken."""
        self.rejected, self.ignored_attributes = dict(saved[0]), dict(saved[1])

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
        """Normalize a batch: records (tool calls, turns, other spans as parent links) and rejections by reason.

        A fault of the normalizer (an exception: a bug of ours, never the input's) costs the span it happened on
        only: the batch is read again span by span, and each span that fails is rejected as `normalize_error` and
        logged with its traceback (_split_each). Before, the whole batch was lost: `serve` answered 500, which
        exporters do not retry."""
        batch = spans if isinstance(spans, list | tuple) else list(spans)  # read again after a fault
        saved = None if self._fast else (dict(self.rejected), dict(self.ignored_attributes))
        try:
            return self._split_batch(batch)
        except Exception:  # noqa: BLE001 - a fault of ours: the spans it did not happen on are still used
            if saved is not None:  # the general path counts span by span: the spans before the fault, not twice
                self.rejected, self.ignored_attributes = saved
            return self._split_each(batch)

    def _split_batch(self, spans: Sequence[Span]) -> tuple[list[ToolCall | Turn | Span], dict[str, int]]:
        if self._fast:
            # The GenAI conventions alone (the usual case): one pass over the batch, problems counted once (after
            # it: nothing is counted when it fails midway).
            out: list[ToolCall | Turn | Span] = []
            problems: list[str] = []
            rejected: dict[str, int] = {}
            cast(GenAIConvention, self.conventions[0]).convert(spans, out, problems, rejected)
            ignored = self.ignored_attributes
            for key in problems:
                ignored[key] = ignored.get(key, 0) + 1
            for reason, n in rejected.items():
                self.rejected[reason] = self.rejected.get(reason, 0) + n
            return out, rejected
        return self._split(spans)

    def _split_each(self, spans: Sequence[Span]) -> tuple[list[ToolCall | Turn | Span], dict[str, int]]:
        """split, one span at a time: a span whose normalizing raises is rejected (REASON_NORMALIZE_ERROR) and
        logged with its traceback (the 1st, 10th, 100th... fault of this normalizer: bounded), the others used."""
        out: list[ToolCall | Turn | Span] = []
        rejected: dict[str, int] = {}
        for span in spans:
            try:
                records, got = self._split_batch((span,))
            except Exception as exc:  # noqa: BLE001 - see split
                self.faults += 1
                self.rejected[REASON_NORMALIZE_ERROR] = self.rejected.get(REASON_NORMALIZE_ERROR, 0) + 1
                rejected[REASON_NORMALIZE_ERROR] = rejected.get(REASON_NORMALIZE_ERROR, 0) + 1
                if power_of_ten(self.faults):
                    # The traceback as bounded text (traceback_text): an exception may quote the span.
                    logger.error(
                        "toolwatch could not normalize a span (fault %d of this process; a bug: please report it with "
                        "the span's producer) and rejected it as %s: span %r of scope %r\n%s",
                        self.faults,
                        REASON_NORMALIZE_ERROR,
                        elide(str(getattr(span, "name", "")), 200),
                        elide(str(getattr(span, "scope", "")), 200),
                        traceback_text(exc),
                    )
                continue
            out.extend(records)
            for reason, n in got.items():
                rejected[reason] = rejected.get(reason, 0) + n
        return out, rejected

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
