"""A request body whose framing breaks (a malformed chunk) reaches the request it belongs to as an error.

aiohttp's C parser, on a framing error inside a body, drops the body's stream without telling it: the handler reading
the body waits until its read timeout (504), and aiohttp answers a parse error of its own with a text/plain 400 and a
logged traceback. When a head and a bad chunk arrive in one read, the C parser loses the request altogether.

When a broken head follows complete requests in one read, the parser raises for the whole read and those requests
are lost too: neither answered nor counted, their spans never judged.

`guard_body_framing` wraps each connection's parser: a read is parsed in pieces cut after each request head (so a
request exists before the bytes after its head are parsed), a parse error while a body is open ends that body with
`BadFraming`, which the handler answers as any other malformed body (400 with a google.rpc.Status), closing the
connection, and a broken head after complete requests is queued after them, which are answered first.

`answer_broken_heads` answers a request whose head does not parse (request line, header bytes, sizes, Content-Length)
through the listener's own answer (the receiver's google.rpc.Status, the metrics listener's line of text) instead of
aiohttp's text/plain 400 and its logged traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web, web_protocol
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.streams import EMPTY_PAYLOAD
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

logger = logging.getLogger(__name__)

_HEAD_END = b"\r\n\r\n"
_PARSER_SLOTS = ("_parser", "_request_parser")  # the connection's parser (RequestHandler; older aiohttp: the latter)
# How aiohttp's connection queues a head that does not parse (see FramingParser.feed_data); on an aiohttp without it,
# the requests of a read before such a head are lost, as aiohttp loses them.
_ErrInfo: Any = getattr(web_protocol, "_ErrInfo", None)


class BadFraming(Exception):
    """The body's framing is broken: what follows cannot be read as this request's body, nor as a next request."""


class FramingParser:
    """Wraps a connection's request parser (`feed_data(data) -> (messages, upgraded, tail)`); the rest passes
    through.

    A read is fed in pieces, each ending just after a request head's end: the parser then completes at most one head
    per piece, so a request exists before the bytes after its head are parsed, and an error in those bytes (a broken
    chunk, a broken next head) cannot take the requests before it along (the parser raises for the whole of what it
    was fed, and the requests it parsed meanwhile are lost). The bytes of a Content-Length body are not searched for
    head ends; the rest is (a chunked body, bytes of no request yet). A cut where no head ends costs a piece more,
    nothing else: the parser is fed the same bytes, in order."""

    __slots__ = ("_chunked", "_inner", "_left", "_open")

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._open: Any = None  # the body stream of the last request parsed, until its end
        self._chunked = False
        self._left = 0  # bytes of the last request's Content-Length body not fed yet

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def feed_data(self, data: bytes, *args: Any, **kwargs: Any) -> Any:
        end = self._cut(data, 0)
        if end == len(data):  # one piece (most reads: a request's head and body, or a body's next bytes)
            fed = self._feed(data, args, kwargs)
            return ((), False, b"") if fed is None else fed
        messages: list[Any] = []
        start = 0
        while start < len(data):
            try:
                fed = self._feed(data[start:end], args, kwargs)
            except HttpProcessingError as exc:
                if not messages or _ErrInfo is None:
                    raise  # for answer_broken_heads
                # Queued as aiohttp's connection queues a head that does not parse: after the requests before it,
                # which it answers first.
                exc.__traceback__ = None
                return [*messages, (_ErrInfo(status=400, exc=exc, message=exc.message), EMPTY_PAYLOAD)], False, b""
            if fed is None:  # a body's framing broke: nothing after it is read
                return messages, False, b""
            got, upgraded, tail = fed
            messages.extend(got)
            if upgraded:  # the bytes after the head belong to the new protocol
                return messages, upgraded, tail + data[end:]
            start, end = end, self._cut(data, end)
        return messages, False, b""

    def _cut(self, data: bytes, start: int) -> int:
        """The end of the piece of `data` from `start`: just after the first head end past the body bytes still to
        come (or after a LF in the read's first 3 bytes: a head end begun in the last read, not in a body still
        coming) that more bytes follow; else the end of `data`."""
        if start == 0 and not self._left:  # mid-body (a protobuf body is full of LF bytes), no head can end there
            lead = data.find(b"\n", 0, 3) + 1
            if 0 < lead < len(data):
                return lead
        pos = data.find(_HEAD_END, start + self._left)
        if pos < 0 or pos + len(_HEAD_END) >= len(data):
            return len(data)
        return pos + len(_HEAD_END)

    def _feed(self, data: bytes, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The inner parser's result for `data`; None when an open body's framing broke (its reader then gets
        `BadFraming`); a broken head raises, as the inner parser does."""
        if self._open is not None and self._open.is_eof():
            self._open = None
        self._left -= min(self._left, len(data))
        try:
            messages, upgraded, tail = self._inner.feed_data(data, *args, **kwargs)
        except HttpProcessingError as exc:
            body = self._open
            if body is None or body.is_eof() or body.exception() is not None:
                raise
            self._open = None
            detail = (exc.message or type(exc).__name__).strip().splitlines()[0].rstrip(":")
            what = "chunked transfer encoding" if self._chunked else "body framing"
            body.set_exception(BadFraming(f"invalid {what}: {detail}"))
            return None
        if messages:
            message, payload = messages[-1]
            self._open, self._chunked = payload, bool(getattr(message, "chunked", False))
            # A piece ends where a head ends: its body comes after (a guess otherwise, which only moves a cut).
            self._left = 0 if self._chunked else _content_length(message)
        return messages, upgraded, tail


def _content_length(message: Any) -> int:
    """The Content-Length of a parsed request head, 0 when it has none (or one the parser would not have let by)."""
    headers = getattr(message, "headers", None)
    value = headers.get("Content-Length", "") if headers is not None else ""
    return int(value) if value.isdigit() else 0


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
        server, guard, "this aiohttp hides its request parser: a malformed chunk is answered 504 after the read "
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
