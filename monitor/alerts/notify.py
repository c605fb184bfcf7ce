"""Send in-process alerts to an Alertmanager (`POST /api/v2/alerts`) or to a plain webhook.

`AlertNotifier.send()` never blocks and never raises: alerts go into a bounded queue that a daemon thread
drains; when the queue is full the batch is dropped and counted. Each POST has a timeout, so a dead
receiver slows nothing but the sender thread: the timeout bounds each POST as a whole, not only each read, so a
receiver that answers a byte at a time cannot hold the thread either. The URL decides the format: a path ending in
`/api/v2/alerts` gets Alertmanager's API v2 body (a JSON list of alerts); anything else gets the body Alertmanager
itself posts to webhook receivers (`{"version": "4", "status": ..., "commonLabels": ..., "alerts": [...]}`, every
field of it).
"""

from __future__ import annotations

import http.client
import json
import logging
import queue
import socket
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

logger = logging.getLogger(__name__)

ALERTMANAGER_PATH = "/api/v2/alerts"
MAX_BODY = 1 << 20  # bytes; larger batches are split
_FNV_OFFSET, _FNV_PRIME, _SEP = 14695981039346656037, 1099511628211, b"\xff"


@dataclass(slots=True, frozen=True)
class AlertMessage:
    """One alert as receivers see it. `ends_at` None = still firing; set = resolved at that time."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_at: float  # unix seconds
    ends_at: float | None = None
    generator_url: str = ""

    def to_alertmanager(self, now: float, hold_s: float) -> dict[str, Any]:
        """API v2 form. A firing alert says it ends `hold_s` from now unless sent again (as Prometheus does)."""
        ends = self.ends_at if self.ends_at is not None else now + hold_s
        body: dict[str, Any] = {
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "startsAt": _iso(self.starts_at),
            "endsAt": _iso(ends),
        }
        if self.generator_url:
            body["generatorURL"] = self.generator_url
        return body

    def to_webhook(self) -> dict[str, Any]:
        return {
            "status": "resolved" if self.ends_at is not None else "firing",
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "startsAt": _iso(self.starts_at),
            "endsAt": _iso(self.ends_at) if self.ends_at is not None else "0001-01-01T00:00:00Z",
            "generatorURL": self.generator_url,
            "fingerprint": fingerprint(self.labels),
        }


def check_receiver_url(url: str) -> None:
    """ValueError unless `url` is an http:// or https:// URL (an alert receiver's)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"alert receiver URL must start with http:// or https://, got {url!r}")


def fingerprint(labels: Mapping[str, str]) -> str:
    """Alertmanager's fingerprint of a label set: FNV-1a 64 over the sorted pairs, each part closed by 0xff."""
    h = _FNV_OFFSET
    for name in sorted(labels):
        for part in (name.encode(), _SEP, labels[name].encode(), _SEP):
            for byte in part:
                h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return format(h, "016x")


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The pairs every map has (Alertmanager's commonLabels / commonAnnotations)."""
    first, *rest = maps
    return {k: v for k, v in first.items() if all(m.get(k) == v for m in rest)}


class _Tracked:
    """urllib handlers that keep each connection they open, so a deadline can cut it: urllib's own timeout bounds
    each socket operation, and a receiver that sends a byte at a time would make one POST endless."""

    def __init__(self) -> None:
        self.connections: list[http.client.HTTPConnection] = []
        self.expired = False
        tracked = self

        def make(cls: type[http.client.HTTPConnection]) -> Any:
            def connection(host: str, **kwargs: Any) -> http.client.HTTPConnection:
                conn = cls(host, **kwargs)
                tracked.connections.append(conn)
                return conn

            return connection

        class Http(urllib.request.HTTPHandler):
            def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
                return self.do_open(make(http.client.HTTPConnection), req)

        class Https(urllib.request.HTTPSHandler):
            def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
                return self.do_open(make(http.client.HTTPSConnection), req, context=self._context)  # type: ignore[attr-defined]

        self.opener = urllib.request.build_opener(Http(), Https())

    def cut(self) -> None:
        """The deadline passed: end the POST (its blocked read returns at once and fails)."""
        self.expired = True
        for conn in self.connections:
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class NotifierStats:
    sent: int = 0  # alerts delivered (2xx)
    failed: int = 0  # alerts whose POST failed (network error, timeout, non-2xx)
    dropped: int = 0  # alerts dropped because the queue was full or the notifier closed
    last_error: str = ""


class AlertNotifier:
    """Deliver alert batches to one URL from a daemon thread; bounded, time-limited, never blocking."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        max_queue: int = 256,
        hold_s: float = 300.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        check_receiver_url(url)
        if timeout_s <= 0 or max_queue < 1:
            raise ValueError("timeout_s must be > 0 and max_queue >= 1")
        self.url = url
        self.alertmanager = url.rstrip("/").endswith(ALERTMANAGER_PATH)
        self.timeout_s = timeout_s
        self.hold_s = hold_s
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.stats = NotifierStats()
        self._queue: queue.Queue[tuple[float, tuple[AlertMessage, ...]] | None] = queue.Queue(max_queue)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="toolwatch-alert-notifier", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        s = self.stats
        kind = "alertmanager" if self.alertmanager else "webhook"
        return f"AlertNotifier({kind} {self.url} sent={s.sent} failed={s.failed} dropped={s.dropped})"

    def send(self, alerts: Sequence[AlertMessage], now: float) -> bool:
        """Queue a batch for delivery; False (and counted as dropped) when full or closed. Never blocks."""
        if not alerts:
            return True
        if self._closed:
            self.stats.dropped += len(alerts)
            return False
        try:
            self._queue.put_nowait((now, tuple(alerts)))
        except queue.Full:
            self.stats.dropped += len(alerts)
            logger.warning("alert queue full, dropping %d alerts for %s", len(alerts), self.url)
            return False
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop taking alerts, deliver what is queued within `timeout_s` in all, then stop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            pass
        self._thread.join(max(0.0, deadline - time.monotonic()))

    def body(self, alerts: Sequence[AlertMessage], now: float) -> bytes:
        if self.alertmanager:
            payload: Any = [a.to_alertmanager(now, self.hold_s) for a in alerts]
        else:
            firing = any(a.ends_at is None for a in alerts)
            payload = {  # one group of every alert sent (Alertmanager's webhook body, grouped by nothing)
                "receiver": "toolwatch",
                "status": "firing" if firing else "resolved",
                "alerts": [a.to_webhook() for a in alerts],
                "groupLabels": {},
                "commonLabels": _common([a.labels for a in alerts]),
                "commonAnnotations": _common([a.annotations for a in alerts]),
                "externalURL": "",
                "version": "4",
                "groupKey": "{}:{}",
                "truncatedAlerts": 0,
            }
        return json.dumps(payload, separators=(",", ":")).encode()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            now, alerts = item
            self._post(alerts, now)

    def _post(self, alerts: Sequence[AlertMessage], now: float) -> None:
        data = self.body(alerts, now)
        if len(data) > MAX_BODY and len(alerts) > 1:
            half = len(alerts) // 2
            self._post(alerts[:half], now)
            self._post(alerts[half:], now)
            return
        request = urllib.request.Request(self.url, data=data, headers=self.headers, method="POST")
        tracked = _Tracked()
        deadline = threading.Timer(self.timeout_s, tracked.cut)
        deadline.daemon = True
        deadline.start()
        try:
            with tracked.opener.open(request, timeout=self.timeout_s) as response:
                response.read(65536)
            self.stats.sent += len(alerts)
        # OSError covers URLError, refused connections and timeouts; HTTPException a reply that is not HTTP
        # (BadStatusLine, IncompleteRead): neither may end the sender thread, or no alert is delivered again.
        except (OSError, ValueError, http.client.HTTPException) as exc:
            self.stats.failed += len(alerts)
            if tracked.expired:
                self.stats.last_error = f"TimeoutError: no whole answer within {self.timeout_s:g} s (timed out)"
            else:
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
            logger.warning("alert delivery to %s failed: %s", self.url, self.stats.last_error)
        finally:
            deadline.cancel()
