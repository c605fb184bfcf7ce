"""A request body whose framing breaks (a malformed chunk) reaches the request it belongs to as an error.

aiohttp's C parser, on a framing error inside a body, drops the body's stream without telling it: the handler reading
the body waits until its read timeout (408), and aiohttp answers a parse error of its own with a text/plain 400 and a
logged traceback. When a head and a bad chunk arrive in one read, the C parser loses the request altogether.

`guard_body_framing` wraps each connection's parser: a chunked request's head is parsed apart from the bytes after
it (so the request exists when its body breaks), and a parse error while a body is open ends that body with
`BadFraming`, which the handler answers as any other malformed body (400 with a google.rpc.Status), closing the
connection.

`answer_broken_heads` answers a request whose head does not parse (request line, header bytes, sizes, Content-Length)
through the listener's own answer (the receiver's google.rpc.Status, the metrics listener's line of text) instead of
aiohttp's text/plain 400 and its logged traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

logger = logging.getLogger(__name__)

_HEAD_END = b"\r\n\r\n"
_PARSER_SLOTS = ("_parser", "_request_parser")  # the connection's parser (RequestHandler; older aiohttp: the latter)


class BadFraming(Exception):
    """The body's framing is broken: what follows cannot be read as this request's body, nor as a next request."""


class FramingParser:
    """Wraps a connection's request parser (`feed_data(data) -> (messages, upgraded, tail)`); the rest passes
    through."""

    __slots__ = ("_chunked", "_inner", "_open")

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._open: Any = None  # the body stream of the last request parsed, until its end
        self._chunked = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def feed_data(self, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if self._open is not None and self._open.is_eof():
            self._open = None
        cut = data.find(_HEAD_END) + len(_HEAD_END) if self._open is None else 0
        # Only a chunked body can break mid-way (a Content-Length one is counted, not parsed): other heads are fed with
        # their bodies, uncopied.
        if not 0 < cut < len(data) or b"chunked" not in data[:cut].lower():
            return self._feed(data, (), args, kwargs)
        messages, upgraded, tail = self._feed(data[:cut], (), args, kwargs)
        if upgraded:  # the bytes after the head belong to the new protocol
            return messages, upgraded, tail + data[cut:]
        return self._feed(data[cut:], messages, args, kwargs)

    def _feed(self, data: bytes, before: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            messages, upgraded, tail = self._inner.feed_data(data, *args, **kwargs)
        except HttpProcessingError as exc:
            body = self._open
            if body is None or body.is_eof() or body.exception() is not None:
                raise  # a broken head, for answer_broken_heads (the requests of this read before it are lost, as ever)
            self._open = None
            detail = (exc.message or type(exc).__name__).strip().splitlines()[0].rstrip(":")
            what = "chunked transfer encoding" if self._chunked else "body framing"
            body.set_exception(BadFraming(f"invalid {what}: {detail}"))
            return before, False, b""
        if messages:
            message, payload = messages[-1]
            self._open, self._chunked = payload, bool(getattr(message, "chunked", False))
        if before:
            messages = [*before, *messages]
        return messages, upgraded, tail


def guard_body_framing(server: web.Server) -> None:
    """Give every connection of `server` a `FramingParser` (a no-op, with a warning, on an aiohttp without the
    parser slot)."""

    def guard(handler: Any) -> bool:
        for slot in _PARSER_SLOTS:
            inner = getattr(handler, slot, None)
            if inner is not None and hasattr(inner, "feed_data"):
                setattr(handler, slot, FramingParser(inner))
                return True
        return False

    _on_each_connection(
        server, guard, "this aiohttp hides its request parser: a malformed chunk is answered 408 after the read "
        "timeout, not 400"
    )


def _on_each_connection(server: web.Server, adjust: Callable[[Any], bool], warning: str) -> None:
    """Run `adjust(connection)` on each new connection of `server`, before aiohttp's own set-up of it; the first time
    it answers False (this aiohttp's connections are not what it expects), log `warning`, once."""
    made = server.connection_made
    warned = False

    def connection_made(handler: Any, transport: Any) -> None:
        nonlocal warned
        if not adjust(handler) and not warned:
            warned = True
            logger.warning(warning)
        made(handler, transport)

    server.connection_made = connection_made  # type: ignore[method-assign]


HeadAnswer = Callable[[HttpProcessingError, "str | None"], web.StreamResponse]


def answer_broken_heads(server: web.Server, answer: HeadAnswer) -> None:
    """Have `answer(error, client address)` answer every request of `server` whose head does not parse, in place of
    aiohttp's text/plain 400 and "Error handling request" traceback at ERROR level (a no-op, with a warning, on an
    aiohttp whose connections are not plain `RequestHandler`s).

    aiohttp queues such a head as an error message, answered by its connection's `handle_error` (after the answers
    of the requests before it; the connection is closed after). `RequestHandler` has slots and no instance
    dictionary: each connection's class is set to a subclass with no slots of its own, which overrides the method.
    """

    class HeadErrorHandler(RequestHandler):
        __slots__ = ()

        def handle_error(
            self,
            request: BaseRequest,
            status: int = 500,
            exc: BaseException | None = None,
            message: str | None = None,
        ) -> web.StreamResponse:
            # A head that did not parse: a 4xx status (400 in aiohttp 3.x) with the parser's error. Anything else (a
            # handler that raised: 500) is aiohttp's, as before.
            if status < 500 and isinstance(exc, HttpProcessingError) and request.writer.output_size == 0:
                exc.__traceback__ = None  # the parser's frames, of no use past this answer
                return answer(exc, request.remote)
            return super().handle_error(request, status, exc, message)

    def switch(handler: Any) -> bool:
        if type(handler) is not RequestHandler:
            return False
        handler.__class__ = HeadErrorHandler
        return True

    _on_each_connection(
        server, switch, "this aiohttp makes connections of another class: a broken request head gets aiohttp's own "
        "text/plain 400"
    )
