"""Export with counting: a batch processor that counts the spans it drops, an exporter guard that counts
failed exports. Both log and count; neither raises into the agent."""

from __future__ import annotations

import collections
import inspect
import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from instrumentation import _attributes as A
from instrumentation._stats import STATS

logger = logging.getLogger(__name__)
BYTES_WARNING_INTERVAL_S = 20.0  # as the SDK's 'Queue full' warning

DEFAULT_MAX_QUEUE_SIZE = 16384
"""Spans the batch processor buffers before it drops (the SDK's default is 2048)."""
DEFAULT_MAX_QUEUE_BYTES = 64 << 20
"""What the spans in the batch processor's queue may hold (by `queued_size`) before the oldest are dropped."""
DEFAULT_SHUTDOWN_TIMEOUT_MILLIS = 3000
"""How long a shutdown (also the one at interpreter exit) goes on exporting before it drops what is left."""


_RENEWALS: dict[tuple[int, str], tuple[weakref.ref[Any], str, dict[str, int]]] = {}
"""What each live owner gets anew in a forked child, by the owner's id and attribute; an entry leaves with its owner."""


def _renew_all_after_fork() -> None:
    for ref, attribute, reset in list(_RENEWALS.values()):
        target = ref()
        if target is not None:
            setattr(target, attribute, threading.Lock())
            for name, value in reset.items():
                setattr(target, name, value)


if hasattr(os, "register_at_fork"):  # once: a callable registered there is kept for the life of the process
    os.register_at_fork(after_in_child=_renew_all_after_fork)


def _renew_lock_after_fork(owner: object, attribute: str, **reset: int) -> None:
    """Give `owner` a fresh lock in `attribute` in a forked child: only the forking thread lives on there, so a lock
    another thread held at the fork would stay held for ever (a tool call, a flush or the exit hook waiting on it).
    `reset`: attributes set anew there too (counts of what the parent's threads were doing). Nothing of it is kept
    once `owner` is gone."""
    key = (id(owner), attribute)
    ref = weakref.ref(owner, lambda _: _RENEWALS.pop(key, None))
    _RENEWALS[key] = (ref, attribute, reset)


MAX_EXPORT_BYTES = 8 << 20
"""Content of one export request at most (about: attribute text is counted, protobuf framing is not). A batch of 512
tool spans whose arguments and results are each at the content limit (16384 characters) made a 16.2 MiB request,
over the monitor's 16 MiB body limit: refused with 413, which exporters do not retry, the whole batch was lost. Such
a batch goes in several requests."""


def _text_size(value: object) -> int:
    """Bytes `value` takes at most in UTF-8 (a str), with the framing of each item of a sequence (an AnyValue each);
    8 for any other attribute value."""
    if isinstance(value, str):
        return len(value) if value.isascii() else 4 * len(value)
    if isinstance(value, (tuple, list)):
        return sum(8 + _text_size(v) for v in value)
    return 8


def span_size(span: ReadableSpan) -> int:
    """About the bytes `span` adds to an export request, at least what the OTLP protobuf encoding takes: its name,
    attributes (with the framing of each key and value), events (and their attributes) and status text, plus a fixed
    part for ids, times and framing."""
    n = 128 + _text_size(span.name) + _text_size(span.status.description or "")
    for attributes in (span.attributes, *(event.attributes for event in span.events)):
        for key, value in (attributes or {}).items():
            n += 16 + len(key) + _text_size(value)
    return n + 64 * len(span.events) + 64 * len(span.links)


def split_by_size(spans: Sequence[ReadableSpan], limit: int) -> list[Sequence[ReadableSpan]]:
    """`spans` in consecutive parts of at most `limit` bytes each by `span_size` (a span larger alone is a part of
    its own); one part, the sequence itself, when it fits."""
    sizes = [span_size(s) for s in spans]
    if sum(sizes) <= limit:
        return [spans]
    parts: list[Sequence[ReadableSpan]] = []
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if total + size > limit and i > start:
            parts.append(spans[start:i])
            start, total = i, 0
        total += size
    parts.append(spans[start:])
    return parts


class CountingExporter(SpanExporter):
    """Wraps an exporter: counts exported spans, failed exports and the spans in them; swallows raises.

    A shutdown that stops waiting for an export still under way counts its spans as dropped at once (`abandon`):
    at interpreter exit that export never ends. If it does end, its spans are counted by its outcome instead."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        # The parent's exports under way are not the child's: their thread does not live on there.
        _renew_lock_after_fork(self, "_lock", _in_flight=0, _abandoned=0)
        self._in_flight = 0  # spans in the export calls under way
        self._abandoned = 0  # of those, spans already counted as dropped at shutdown

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Exports the batch in requests of at most about MAX_EXPORT_BYTES of content each, in order. After a request
        that fails, the rest of the batch is counted as failed without being sent (the receiver is most likely down,
        and each further try would wait the exporter's whole timeout). The whole batch is in flight until each part
        is accounted for, so a shutdown that abandons it counts every span not yet exported."""
        with self._lock:
            self._in_flight += len(spans)
        parts = split_by_size(spans, MAX_EXPORT_BYTES)
        for i, part in enumerate(parts):
            try:
                result = self.inner.export(part)
            except Exception:  # noqa: BLE001 - an exporter bug must not kill the export thread
                logger.exception("toolwatch: span exporter %s raised", type(self.inner).__name__)
                result = SpanExportResult.FAILURE
            if result is not SpanExportResult.SUCCESS:
                self._account(sum(len(p) for p in parts[i:]), result)
                return result
            self._account(len(part), result)
        return SpanExportResult.SUCCESS

    def _account(self, n: int, result: SpanExportResult) -> None:
        """`n` spans of an export are done with `result`: no longer in flight, counted exported or failed (those the
        shutdown already counted as dropped: only taken back when exported after all)."""
        with self._lock:
            self._in_flight -= n
            counted = min(n, self._abandoned)
            self._abandoned -= counted
        if result is SpanExportResult.SUCCESS:
            STATS.spans_exported += n
            STATS.spans_dropped_at_shutdown -= counted  # exported after all
        else:
            STATS.export_failures += 1
            STATS.spans_export_failed += n - counted
            logger.warning("toolwatch: exporting %d spans failed", n)

    def abandon(self) -> int:
        """Count the spans of the exports under way as dropped at shutdown; returns how many were newly counted."""
        with self._lock:
            n = self._in_flight - self._abandoned
            self._abandoned = self._in_flight
        STATS.spans_dropped_at_shutdown += n
        return n

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


class UnusableExporter(SpanExporter):
    """Stands in for an exporter that could not be built (a malformed endpoint): every export fails, so its spans
    are counted as failed and logged, and the agent runs on."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


SPAN_OVERHEAD_BYTES = 3072
"""What a recorded span takes in memory besides its content (3.0 KiB measured for a tool span without content)."""
_CONTENT_KEYS = (A.GEN_AI_TOOL_CALL_ARGUMENTS, A.GEN_AI_TOOL_CALL_RESULT, A.GEN_AI_INPUT_MESSAGES,
                 A.GEN_AI_OUTPUT_MESSAGES, A.GEN_AI_TOOL_DEFINITIONS)


def queued_size(span: Any) -> int:
    """About the bytes `span` holds while queued, for the queue's byte bound: a fixed part, plus its content: the
    content attributes (tool arguments and result, turn messages and tool definitions; non-ASCII text at 4 bytes a
    character), the status description and the events' attributes (a failed call's message and stack trace). Reads
    only those, not every attribute as `span_size` does: it runs in the application's thread as each span ends."""
    try:
        get = span._attributes._dict.get
        events = span._events
        description = span._status._description
    except AttributeError:  # another span class or SDK layout: its public view
        get = (span.attributes or {}).get
        events = span.events
        description = span.status.description
    n = SPAN_OVERHEAD_BYTES
    for key in _CONTENT_KEYS:
        value = get(key)
        if value.__class__ is str:
            n += len(value) if value.isascii() else 4 * len(value)
    if description:
        n += _text_size(description)
    if events:
        for event in events:
            n += 64 + sum(16 + len(key) + _text_size(value) for key, value in (event.attributes or {}).items())
    return n


class CountingDeque(collections.deque[Any]):
    """The batch processor's bounded queue, counting what it drops: bounded in items (`appendleft` on a full deque
    drops the oldest item) and in bytes by `queued_size` (past `max_bytes` the oldest items are dropped; an empty
    queue takes an item of any size). Each item's size is kept beside it, so what is taken off when an item leaves
    (popped, dropped, cleared) is exactly what was added. A lock makes each change one step against the export
    thread's `pop`, so the counts are exact. The batch processor uses only `appendleft`, `pop` and `clear`."""

    def __init__(self, maxlen: int, max_bytes: int = DEFAULT_MAX_QUEUE_BYTES) -> None:
        super().__init__((), maxlen)
        self.max_bytes = max_bytes
        self.bytes = 0
        """The sizes of the items queued, summed."""
        self._sizes: collections.deque[int] = collections.deque()  # each item's size, in the same order
        self._quiet_until = 0.0  # no warning of drops by bytes before this time.monotonic()
        self._warn_due = False
        self.lock = threading.Lock()
        _renew_lock_after_fork(self, "lock")

    def appendleft(self, item: Any, /) -> None:
        self.appendleft_sized(item, queued_size(item))  # measured before the lock: the export thread waits less

    def appendleft_sized(self, item: Any, size: int) -> None:
        """`appendleft` of an item counted as `size` bytes."""
        with self.lock:
            total = self.bytes + size
            if total > self.max_bytes and self._sizes:
                total = self._drop_oldest(total)
            if len(self) == self.maxlen:
                STATS.spans_dropped_queue_full += 1
                total -= self._sizes.pop()
            super().appendleft(item)
            self._sizes.appendleft(size)
            self.bytes = total
        if self._warn_due:
            self._warn_dropped()

    def _drop_oldest(self, total: int) -> int:
        """Drop the oldest items until `total` less theirs is within the bound (or none is left); the lock held."""
        dropped = 0
        while total > self.max_bytes and self._sizes:
            collections.deque.pop(self)
            total -= self._sizes.pop()
            dropped += 1
        STATS.spans_dropped_queue_bytes += dropped
        if dropped and time.monotonic() >= self._quiet_until:  # said after the lock (appendleft), as the SDK says
            self._quiet_until = time.monotonic() + BYTES_WARNING_INTERVAL_S  # its drops by count: at most every 20 s
            self._warn_due = True
        return total

    def _warn_dropped(self) -> None:
        self._warn_due = False
        logger.warning("toolwatch: the span export queue is over its byte bound (%d bytes): dropped the oldest spans "
                       "(%d so far); is the monitor reachable? (max_queue_bytes, TOOLWATCH_MAX_QUEUE_BYTES)",
                       self.max_bytes, STATS.spans_dropped_queue_bytes)

    def pop(self) -> Any:  # type: ignore[override]  # deque.pop takes no index
        with self.lock:
            item = super().pop()
            self.bytes -= self._sizes.pop()
            return item

    def clear(self) -> None:
        self.discard()

    def discard(self) -> int:
        """Empty the queue; returns how many items were in it."""
        with self.lock:
            n = len(self)
            super().clear()
            self._sizes.clear()
            self.bytes = 0
            return n


def _export_at_half_the_bytes(inner: Any, queue: CountingDeque) -> None:
    """Make the SDK's worker export, once woken, while `queue` holds half its bytes or more, not only while it holds
    a full batch: spans large enough that fewer than a batch fill the bytes (non-ASCII content, a low
    `max_queue_bytes`) were otherwise left until the schedule delay, the oldest dropped meanwhile with the exporter
    idle."""
    should = getattr(inner, "_should_export_batch", None)
    if should is None:  # pragma: no cover - another SDK layout
        return

    def _should_export_batch(strategy: Any, num_iterations: int) -> bool:
        if should(strategy, num_iterations):
            return True
        return (bool(queue) and not getattr(inner, "_shutdown_timeout_exceeded", False)
                and 2 * queue.bytes >= queue.max_bytes)

    inner._should_export_batch = _should_export_batch


class CountingBatchSpanProcessor(BatchSpanProcessor):
    """A `BatchSpanProcessor` with a larger default queue (16384 spans, and at most `max_queue_bytes` of them by
    `queued_size`, default 64 MiB) that counts the spans it drops when full, and whose shutdown, also the one the SDK
    runs at interpreter exit, keeps to `shutdown_timeout_millis`."""

    def __init__(
        self,
        exporter: SpanExporter,
        max_queue_size: int | None = None,
        shutdown_timeout_millis: int = DEFAULT_SHUTDOWN_TIMEOUT_MILLIS,
        max_queue_bytes: int | None = None,
        **kwargs: Any,
    ) -> None:
        size = max_queue_size or DEFAULT_MAX_QUEUE_SIZE
        super().__init__(exporter, max_queue_size=size, **kwargs)
        self.shutdown_timeout_millis = shutdown_timeout_millis
        self._guard = exporter if isinstance(exporter, CountingExporter) else None
        self._flush_lock = threading.Lock()
        _renew_lock_after_fork(self, "_flush_lock")
        self._flusher: threading.Thread | None = None
        self._flush_outcome: list[bool] = []
        inner = getattr(self, "_batch_processor", None)
        self._queue: CountingDeque | None = None
        if isinstance(getattr(inner, "_queue", None), collections.deque):
            self._queue = CountingDeque(size, max_queue_bytes or DEFAULT_MAX_QUEUE_BYTES)
            inner._queue = self._queue  # type: ignore[union-attr]  # still empty: nothing was queued yet
            _export_at_half_the_bytes(inner, self._queue)
        else:  # pragma: no cover - another SDK layout
            logger.warning("toolwatch: this OpenTelemetry SDK hides its span queue; dropped spans are not counted")

    def on_end(self, span: ReadableSpan) -> None:
        try:
            inner = getattr(self, "_batch_processor", None)
            if span.context is not None and span.context.trace_flags.sampled and getattr(inner, "_shutdown", False):
                STATS.spans_dropped_at_shutdown += 1  # the SDK drops a span ended after shutdown, said at INFO only
                return
            super().on_end(span)
            queue = self._queue
            if queue is not None and 2 * queue.bytes >= queue.max_bytes:
                awaken = getattr(inner, "_worker_awaken", None)
                if awaken is not None and not awaken.is_set():
                    awaken.set()  # the SDK wakes its worker only at a full batch, which may not fit in the bytes
        except Exception:  # noqa: BLE001
            STATS.instrumentation_errors += 1
            logger.exception("toolwatch: queueing a span for export failed")

    def force_flush(self, timeout_millis: int | None = 30000) -> bool:
        """Export what is queued; False when that did not finish within `timeout_millis`, or (as in the SDK) after
        shutdown. The SDK's flush ignores its timeout (every batch, each retried for the exporter's whole timeout, in
        the caller's thread): it runs in a thread of its own here, one at a time, which goes on after the caller has
        stopped waiting."""
        with self._flush_lock:
            flusher, outcome = self._flusher, self._flush_outcome
            if flusher is None or not flusher.is_alive():
                outcome = []  # this flush's result, for every caller that waits on it
                flusher = threading.Thread(target=self._flush, args=(outcome,), name="toolwatch-flush", daemon=True)
                self._flusher, self._flush_outcome = flusher, outcome
                flusher.start()
        flusher.join(None if timeout_millis is None else max(0.0, timeout_millis / 1000))
        return not flusher.is_alive() and outcome == [True]

    def _flush(self, outcome: list[bool]) -> None:
        try:
            outcome.append(bool(super().force_flush()))  # False after shutdown, as the SDK says
        except Exception:  # noqa: BLE001
            outcome.append(False)
            logger.exception("toolwatch: flushing spans failed")

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """Export what is queued within `timeout_millis` (default `shutdown_timeout_millis`: the TracerProvider's exit
        hook calls this without one), then stop; what is left, and an export still under way, count as dropped."""
        timeout = self.shutdown_timeout_millis if timeout_millis is None else timeout_millis
        inner_shutdown: Any = getattr(getattr(self, "_batch_processor", None), "shutdown", None)
        try:
            if inner_shutdown is not None and "timeout_millis" in inspect.signature(inner_shutdown).parameters:
                inner_shutdown(timeout_millis=timeout)
            else:  # pragma: no cover - another SDK layout
                super().shutdown()  # type: ignore[no-untyped-call]
        except Exception:  # noqa: BLE001
            logger.exception("toolwatch: shutting down the span processor failed")
        left = 0
        if self._queue is not None:
            left = self._queue.discard()
            STATS.spans_dropped_at_shutdown += left
        left += self._guard.abandon() if self._guard is not None else 0
        if left:
            logger.warning("toolwatch: %d spans not exported within the shutdown timeout (%d ms) were dropped", left,
                           timeout)

    @property
    def queue_length(self) -> int:
        """Spans waiting for export now."""
        return len(self._queue) if self._queue is not None else 0

    @property
    def queue_capacity(self) -> int:
        """Spans the queue holds before it drops (0 when this SDK hides its queue)."""
        return (self._queue.maxlen or 0) if self._queue is not None else 0
