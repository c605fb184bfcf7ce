"""Export with counting: a batch processor that counts the spans it drops, an exporter guard that counts
failed exports. Both log and count; neither raises into the agent."""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from instrumentation._stats import STATS

logger = logging.getLogger(__name__)

DEFAULT_MAX_QUEUE_SIZE = 16384
"""Spans the batch processor buffers before it drops (the SDK's default is 2048)."""


class CountingExporter(SpanExporter):
    """Wraps an exporter: counts exported spans, failed exports and the spans in them; swallows raises."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # noqa: BLE001 - an exporter bug must not kill the export thread
            logger.exception("toolwatch: span exporter %s raised", type(self.inner).__name__)
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            STATS.spans_exported += len(spans)
        else:
            STATS.export_failures += 1
            STATS.spans_export_failed += len(spans)
            logger.warning("toolwatch: exporting %d spans failed", len(spans))
        return result

    def shutdown(self) -> None:
        try:
            self.inner.shutdown()
        except Exception:  # noqa: BLE001
            logger.exception("toolwatch: span exporter shutdown failed")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        try:
            return bool(self.inner.force_flush(timeout_millis))
        except Exception:  # noqa: BLE001
            logger.exception("toolwatch: span exporter flush failed")
            return False


class CountingDeque(collections.deque[Any]):
    """The batch processor's bounded queue, counting what it drops: `appendleft` on a full deque drops
    the oldest item. A lock makes the check and the append one step against the export thread's `pop`,
    so the count is exact."""

    def __init__(self, maxlen: int) -> None:
        super().__init__((), maxlen)
        self._lock = threading.Lock()

    def appendleft(self, item: Any, /) -> None:
        with self._lock:
            if len(self) == self.maxlen:
                STATS.spans_dropped_queue_full += 1
            super().appendleft(item)

    def pop(self) -> Any:  # type: ignore[override]  # deque.pop takes no index
        with self._lock:
            return super().pop()


class CountingBatchSpanProcessor(BatchSpanProcessor):
    """A `BatchSpanProcessor` with a larger default queue (16384) that counts the spans it drops when full."""

    def __init__(self, exporter: SpanExporter, max_queue_size: int | None = None, **kwargs: Any) -> None:
        size = max_queue_size or DEFAULT_MAX_QUEUE_SIZE
        super().__init__(exporter, max_queue_size=size, **kwargs)
        inner = getattr(self, "_batch_processor", None)
        self._queue: CountingDeque | None = None
        if isinstance(getattr(inner, "_queue", None), collections.deque):
            self._queue = CountingDeque(size)
            inner._queue = self._queue  # type: ignore[union-attr]  # still empty: nothing was queued yet
        else:  # pragma: no cover - another SDK layout
            logger.warning("toolwatch: this OpenTelemetry SDK hides its span queue; dropped spans are not counted")

    def on_end(self, span: ReadableSpan) -> None:
        try:
            super().on_end(span)
        except Exception:  # noqa: BLE001
            STATS.instrumentation_errors += 1
            logger.exception("toolwatch: queueing a span for export failed")

    @property
    def queue_length(self) -> int:
        """Spans waiting for export now."""
        return len(self._queue) if self._queue is not None else 0

    @property
    def queue_capacity(self) -> int:
        """Spans the queue holds before it drops (0 when this SDK hides its queue)."""
        return (self._queue.maxlen or 0) if self._queue is not None else 0
