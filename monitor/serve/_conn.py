"""Bounds on connections: how many are open at once, and how many file descriptors the process may have for them."""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import Callable
from typing import Any

from aiohttp import web

logger = logging.getLogger(__name__)

METRICS_CONNECTIONS = 64  # open connections of /metrics, /healthz and /readyz (scrapers and probes)
FD_RESERVE = 128  # descriptors beside the connections: listeners, rule and log files, gRPC, the event loop


REFUSAL = "too many connections, retry later"
TEXT_REFUSAL = ("text/plain", f"{REFUSAL}\n".encode())


def refusal(retry_after_s: int, body: tuple[str, bytes] = TEXT_REFUSAL) -> bytes:
    """The whole 503 answer to a connection past the bound; `body`: its content type and bytes (the listener's
    language: a line of text, or the receiver's google.rpc.Status)."""
    ctype, data = body
    return (
        f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: {ctype}\r\nRetry-After: {retry_after_s}\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
        + data
    )


class ConnectionCap:
    """At most `limit` open connections on an aiohttp server; one past it is answered 503 + Retry-After (which OTLP
    exporters retry) and closed at once, so a pile of idle or slow clients cannot take every file descriptor.

    aiohttp has no such bound: this wraps the `connection_made` / `connection_lost` calls its request handlers make
    to their `web.Server`, which see every connection open and close."""

    def __init__(
        self,
        server: web.Server,
        limit: int,
        retry_after_s: int,
        on_refused: Callable[[], None],
        body: tuple[str, bytes] = TEXT_REFUSAL,
    ) -> None:
        self.limit = limit
        self.open = 0
        self._refusal = refusal(retry_after_s, body)
        self._on_refused = on_refused
        self._made = server.connection_made
        self._lost = server.connection_lost
        server.connection_made = self._connection_made  # type: ignore[method-assign]
        server.connection_lost = self._connection_lost  # type: ignore[method-assign]

    def _connection_made(self, handler: Any, transport: asyncio.Transport) -> None:
        self._made(handler, transport)
        self.open += 1
        if self.open > self.limit:
            self._on_refused()
            transport.write(self._refusal)
            transport.close()  # stops reading; connection_lost follows once the answer is written

    def _connection_lost(self, handler: Any, exc: BaseException | None = None) -> None:
        self.open -= 1
        self._lost(handler, exc)


def ensure_fd_limit(connections: int) -> None:
    """Raise the soft limit of open files up to the hard one when `connections` (plus a reserve) would not fit, as
    servers usually do; warn when even the hard limit is too low."""
    needed = connections + FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    except (ValueError, OSError):
        pass
    if soft < needed:
        logger.warning(
            "the process may open %d files, fewer than the %d connections allowed plus %d: lower --max-connections "
            "or raise the limit (ulimit -n)",
            soft,
            connections,
            FD_RESERVE,
        )
