"""HTTP endpoints: OTLP/HTTP `POST /v1/traces`, and `/metrics`, `/healthz`, `/readyz`."""

from __future__ import annotations

import asyncio
import gzip
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from aiohttp import HttpVersion11, web
from aiohttp.http_exceptions import HttpProcessingError, InvalidURLError, LineTooLong
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder
from prometheus_client.registry import CollectorRegistry

from monitor._faults import power_of_ten, traceback_text
from monitor._text import elide
from monitor.metrics import ToolwatchMetrics
from monitor.otlp import Decoded, DecodeError, parse_json, parse_protobuf
from monitor.serve import _sighup
from monitor.serve._body import (
    IDENTITY,
    BadEncoding,
    BodyTooLarge,
    Busy,
    InFlight,
    Take,
    content_coding,
    inflate_limited,
    read_limited,
)
from monitor.serve._framing import BadFraming
from monitor.serve._pipeline import DROP_QUEUE_FULL, Pipeline
from monitor.serve._settings import Settings

logger = logging.getLogger(__name__)
A = TypeVar("A")  # the answer `ingest` builds
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_PROTOBUF_TYPES = frozenset({PROTOBUF, "application/protobuf"})
TRANSPORT_PROTOBUF = "http_protobuf"
TRANSPORT_JSON = "http_json"
TRANSPORT_OTHER = "http_other"  # neither: another content type, or a head that does not parse
_CHUNK = 1 << 16
IN_FLIGHT_BODIES = 4  # the bodies being read at once hold at most this many times max_decompressed_bytes
# /metrics of 20 agents x 50 tools (1.1 MB of text): level 1 took 2.2 ms for 53 KB, level 6 6.1 ms for 48 KB, level 9
# (gzip.compress's default) 46 ms for 45 KB. A scrape is local or nearly: the CPU counts, not the last 10% of bytes.
METRICS_GZIP_LEVEL = 1
BAD_HEAD_LOG_INTERVAL_S = 60.0  # at most one warning line per interval about broken request heads; the rest counted
_PATH_MAX = 100  # characters of a wrong path or Host header quoted in a log line (the client's bytes)
INTERNAL_ERROR = "internal error of the receiver (logged): retry later"  # the message of a fault's 503 (handle)
_DETAIL_MAX = 200  # characters of a parser's error kept in an answer or a log line (it quotes the client's bytes)


def _cut(text: str) -> str:
    """`text` (the client's: a path, a method) cut to _PATH_MAX characters for a log line or an answer."""
    return elide(text, _PATH_MAX)


def bad_head_status(exc: HttpProcessingError) -> int:
    """431 for a head too large (a header name or value past 8190 bytes, or the request target, which aiohttp tells
    apart by neither class nor message; or more than 128 header fields), else 400."""
    if isinstance(exc, LineTooLong) or "too many headers" in (exc.message or "").lower():
        return 431
    return 400


def bad_head_detail(exc: HttpProcessingError) -> str:
    """The parser's error on one line, its quote of the client's bytes cut short: `Invalid header token: b'X-\\x01'`."""
    lines = [line.strip() for line in str(exc.message or type(exc).__name__).splitlines()]
    text = " ".join(line for line in lines if line.strip("^ "))  # without the caret lines pointing into the quote
    return elide(text, _DETAIL_MAX)


def http2_preface(exc: HttpProcessingError) -> bool:
    """Whether the head that did not parse is HTTP/2's connection preface (`PRI * HTTP/2.0`): a gRPC exporter, or
    another HTTP/2 client, on a port that speaks HTTP/1.1. llhttp pauses on it; aiohttp's Python parser refuses its
    target `*`."""
    message = str(exc.message or "")
    return "PRI/Upgrade" in message or (isinstance(exc, InvalidURLError) and message.strip() == "*")


HTTP2_HINT = (
    " (HTTP/2's preface: a gRPC exporter, OTEL_EXPORTER_OTLP_PROTOCOL=grpc, on the OTLP/HTTP port; have serve take "
    "OTLP/gRPC with --grpc-port 4317 and export there, or export over OTLP/HTTP, http/protobuf, to this port)"
)


def _sent_type(request: web.Request) -> str:
    """What a refused request's Content-Type was, as sent: aiohttp reads a missing or unparseable one as
    application/octet-stream, which the client never sent."""
    sent = request.headers.get("Content-Type")
    return "no Content-Type" if sent is None else f"unsupported content type {elide(sent, _DETAIL_MAX)!r}"


class Hushed:
    """A warning logged at most once per `interval_s`; the lines held back meanwhile are counted into the next."""

    __slots__ = ("_held", "_interval_s", "_next")

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._next = float("-inf")
        self._held = 0

    def warn(self, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now < self._next:
            self._held += 1
            return
        if self._held:
            msg += " (%d more like it since the last such line, not logged)"
            args = (*args, self._held)
        self._next, self._held = now + self._interval_s, 0
        logger.warning(msg, *args)


def _status_body(reply: str, code: int, message: str) -> bytes:
    if reply == JSON:
        return json.dumps({"code": code, "message": message}).encode()
    return bytes(status_pb2.Status(code=code, message=message).SerializeToString())


def refusal_status(message: str) -> bytes:
    """The body of the receiver's 503 to a connection past --max-connections: a google.rpc.Status (UNAVAILABLE) in
    protobuf, OTLP/HTTP's default encoding, as it is answered before any byte of a request is read."""
    return _status_body(PROTOBUF, code_pb2.UNAVAILABLE, message)


def expected_token(token: str | None) -> bytes | None:
    """The bearer token requests must carry (None: none needed): `--token` without its surrounding whitespace, which
    a header value never holds (RFC 9110 5.5): a token read from a file keeps the file's last newline, and no client
    could send it."""
    return token.strip().encode() if token else None


def bearer_ok(authorization: str, token: bytes) -> bool:
    """`Authorization: Bearer TOKEN`, the scheme in any case (RFC 7235), the token compared in constant time."""
    scheme, _, credentials = authorization.partition(" ")
    given = credentials.strip(" ").encode("utf-8", "surrogatepass")
    return scheme.lower() == "bearer" and hmac.compare_digest(given, token)


def text_head_answer(listener: str) -> Callable[[HttpProcessingError, str | None], web.Response]:
    """The answer of a listener that speaks text (/metrics, /healthz, /readyz) to a request whose head does not parse
    (see `answer_broken_heads`): 400, or 431 for a head too large, with one line of text/plain naming the problem, the
    connection closed; logged as one warning line at most per BAD_HEAD_LOG_INTERVAL_S for this listener, without a
    traceback. Not counted: toolwatch_requests_total counts the receiver's requests, and this listener has no
    counter of its own."""
    hushed = Hushed(BAD_HEAD_LOG_INTERVAL_S)

    def answer(exc: HttpProcessingError, remote: str | None) -> web.Response:
        http = bad_head_status(exc)
        detail = bad_head_detail(exc)
        hushed.warn(
            "bad request head on the %s listener from %s, answered %d: %s",
            listener,
            remote or "an unknown client",
            http,
            detail,
        )
        problem = "request head too large" if http == 431 else "bad request head"
        resp = web.Response(status=http, text=f"{http} {problem}: {detail}\n", headers={"Connection": "close"})
        resp.force_close()
        return resp

    return answer


class TracesHandler:
    """`POST /v1/traces`: decode, normalize, queue; every outcome has its documented status code."""

    def __init__(self, settings: Settings, pipeline: Pipeline, metrics: ToolwatchMetrics) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.ops = metrics.ops
        self._token = expected_token(settings.token)
        self.in_flight = InFlight(IN_FLIGHT_BODIES * max(settings.max_decompressed_bytes, settings.max_body_bytes))
        self._bad_heads = Hushed(BAD_HEAD_LOG_INTERVAL_S)
        self._wrong_paths = Hushed(BAD_HEAD_LOG_INTERVAL_S)
        self._other_signals = Hushed(BAD_HEAD_LOG_INTERVAL_S)
        for transport in (TRANSPORT_PROTOBUF, TRANSPORT_JSON):
            self.ops.start_transport(transport, (200, 503))

    @staticmethod
    def transport_of(ctype: str) -> str:
        if ctype in _PROTOBUF_TYPES:
            return TRANSPORT_PROTOBUF
        return TRANSPORT_JSON if ctype == JSON else TRANSPORT_OTHER

    @web.middleware
    async def count_unrouted(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Answer what the router would answer itself, 404 for another path and 405 for another method, as OTLP/HTTP
        answers errors: a google.rpc.Status (NOT_FOUND, UNIMPLEMENTED) in the request's content type, protobuf for
        another, saying what to fix (aiohttp's own was "404: Not Found" in text/plain). Counted by that content type
        and the status code: bounded labels, never the path or the method."""
        unrouted = getattr(request.match_info, "http_exception", None)
        if unrouted is None or unrouted.status not in (404, 405):
            if unrouted is not None:
                self.ops.request(self.transport_of(request.content_type), unrouted.status)
            return await handler(request)
        ctype = request.content_type
        transport = self.transport_of(ctype)
        reply = PROTOBUF if transport == TRANSPORT_OTHER else ctype
        if unrouted.status == 405:
            method = _cut(request.method)
            return self._error(
                transport,
                reply,
                405,
                code_pb2.UNIMPLEMENTED,
                f"method {method!r} not allowed on {_cut(request.path)!r}: traces go to POST /v1/traces",
                Allow=unrouted.headers.get("Allow", "POST"),
            )
        return self._error(transport, reply, 404, code_pb2.NOT_FOUND, self._wrong_path(request))

    def _wrong_path(self, request: web.Request) -> str:
        """What to fix for a request to another path, as the 404's message; for an export (POST), an exporter's
        endpoint set wrong, which the exporter may report only as "404 Not Found", also a warning (one a minute at
        most, of each kind)."""
        path = _cut(request.path)
        url = f"http://{request.host[:_PATH_MAX]}/v1/traces"
        remote = request.remote or "an unknown client"
        post = request.method == "POST"
        if path.rstrip("/").endswith(("/v1/metrics", "/v1/logs")):
            hint = (
                f"toolwatch takes traces only, not {path!r}: traces go to POST /v1/traces; send it traces alone "
                f"(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={url}), not the SDK's metrics or logs "
                "(OTEL_EXPORTER_OTLP_ENDPOINT sends every signal)"
            )
            if post:
                self._other_signals.warn("POST from %s answered 404: %s", remote, hint)
            return hint
        hint = (
            f"no such path {path!r}: traces go to POST /v1/traces; set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={url} (the "
            "whole URL), or OTEL_EXPORTER_OTLP_ENDPOINT to the base URL without /v1/traces"
        )
        if post:
            self._wrong_paths.warn("POST from %s answered 404: %s", remote, hint)
        return hint

    def bad_head(self, exc: HttpProcessingError, remote: str | None) -> web.Response:
        """The answer to a request whose head does not parse (see `answer_broken_heads`): a google.rpc.Status in
        protobuf, OTLP/HTTP's default encoding (the head's Content-Type cannot be trusted, if it was read at all),
        the connection closed; counted in toolwatch_requests_total{transport="http_other"} and logged as one warning
        line at most per BAD_HEAD_LOG_INTERVAL_S, without a traceback: the client's error, not the server's."""
        http = bad_head_status(exc)
        code = code_pb2.RESOURCE_EXHAUSTED if http == 431 else code_pb2.INVALID_ARGUMENT
        detail = bad_head_detail(exc)
        hint = HTTP2_HINT if http2_preface(exc) else ""
        self._bad_heads.warn(
            "bad request head from %s, answered %d: %s%s", remote or "an unknown client", http, detail, hint
        )
        # Said even to what aiohttp takes for HTTP/1.0 (a head without a version it could read), where it is implied.
        resp = self._error(TRANSPORT_OTHER, PROTOBUF, http, code, f"bad request head: {detail}", Connection="close")
        return self._closing(resp)

    def _error(
        self, transport: str, reply: str, http: int, code: int, message: str, **headers: str
    ) -> web.Response:
        """A google.rpc.Status answer, counted; `reply` is its content type: the request's own (OTLP/HTTP: "the same
        Content-Type in the response as it received in the request"), `application/protobuf` included, else JSON
        or protobuf as the caller says."""
        self.ops.request(transport, http)
        resp = web.Response(
            status=http,
            body=_status_body(reply, code, message),
            content_type=reply,
            headers=headers or None,
        )
        return resp

    @staticmethod
    def _closing(resp: web.Response) -> web.Response:
        """`resp`, with the connection closed after it: the body was not read to its end, so it cannot be reused."""
        resp.force_close()
        return resp

    async def expect(self, request: web.Request) -> web.Response | None:
        """The `Expect` handler: a request that would be refused gets its answer now, before its body is sent (no
        `100 Continue`, which would have the client send a body only to be refused, up to --max-body-bytes of it).
        A fault of ours checking the head is answered as in `handle` (503 + Retry-After, not aiohttp's 500)."""
        try:
            refusal = self._refusal(request)
        except Exception as exc:  # noqa: BLE001 - see handle
            return self._fault(request, exc)
        if refusal is not None:
            return refusal
        if request.version != HttpVersion11:  # HTTP/1.0 has no interim responses: its client sends the body anyway
            return None
        expectation = request.headers.get("Expect", "")
        if expectation.lower() != "100-continue":
            return self._closing(
                self._error(
                    self.transport_of(request.content_type),
                    request.content_type,  # a protobuf or JSON type: _refusal answered any other
                    417,
                    code_pb2.INVALID_ARGUMENT,
                    f"unknown expectation {expectation!r}: only 100-continue is",
                )
            )
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # as aiohttp's own handler: the response proper has not started
        return None

    def _refusal(self, request: web.Request) -> web.Response | None:
        """The answer to a request refused on its head alone (type, token, coding, length, queue), closing the
        connection; None: read its body."""
        ctype = request.content_type
        transport = self.transport_of(ctype)
        if transport == TRANSPORT_OTHER:
            # Answered in OTLP/HTTP's default encoding, which OTLP clients read whatever they sent.
            return self._closing(
                self._error(
                    TRANSPORT_OTHER,
                    PROTOBUF,
                    415,
                    code_pb2.INVALID_ARGUMENT,
                    f"{_sent_type(request)}: use {PROTOBUF} or {JSON}",
                )
            )
        err = self._precheck(request, transport, ctype, content_coding(request.headers.get("Content-Encoding", "")))
        return None if err is None else self._closing(err)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """`POST /v1/traces`. A fault of ours while handling it (an exception no input is meant to cause: a bug,
        memory running out) is answered 503 + Retry-After, which OTLP exporters retry (aiohttp's own answer, a
        text/plain 500, they do not: the batch was lost, counted nowhere), counted in toolwatch_requests_total and
        logged with its traceback at the 1st, 10th, 100th... fault. A fault that comes back on every attempt costs
        the exporter its retry budget (then the batch is dropped, as a 500 dropped it at once)."""
        try:
            return await self._handle(request)
        except Exception as exc:  # noqa: BLE001 - see above; CancelledError (the client went away) is no Exception
            return self._fault(request, exc)

    def _fault(self, request: web.Request, exc: Exception) -> web.Response:
        reply = request.content_type  # a protobuf or JSON type: _refusal answers any other before anything can fail
        transport = self.transport_of(reply)
        if transport == TRANSPORT_OTHER:
            reply = PROTOBUF
        faults = self.ops.receiver_fault(transport)
        if power_of_ten(faults):
            logger.error(
                "toolwatch failed on a request from %s (fault %d of this process; a bug: please report it), answered "
                "503: the exporter sends it again\n%s",
                request.remote or "an unknown client",
                faults,
                traceback_text(exc),
            )
        resp = self._error(
            transport,
            reply,
            503,
            code_pb2.UNAVAILABLE,
            INTERNAL_ERROR,
            **{"Retry-After": str(self.settings.retry_after_s)},
        )
        return self._closing(resp)  # its body may not have been read to its end

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        reply = request.content_type  # a protobuf or JSON type, else _refusal answered 415
        transport = self.transport_of(reply)
        coding = content_coding(request.headers.get("Content-Encoding", ""))
        assert coding is not None  # else _refusal answered 415
        held = 0

        def take(n: int) -> None:
            nonlocal held
            self.in_flight.take(n)
            held += n

        try:
            async with asyncio.timeout(self.settings.read_timeout_s):
                decoded = await self._read_and_decode(request, reply, coding, take)
        except TimeoutError:
            # A client that stalls mid-body would hold its share of the bodies in flight (and its connection) for as
            # long as it likes, and every other exporter would get 503 meanwhile. 504, the HTTP mapping of
            # DEADLINE_EXCEEDED, not 408: OTLP exporters retry 429, 502, 503 and 504 only, and a body held up on
            # the way is worth sending again (not 503: that says the server cannot keep up, see ToolwatchBackPressure).
            return self._closing(
                self._error(
                    transport,
                    reply,
                    504,
                    code_pb2.DEADLINE_EXCEEDED,
                    f"request body not received within {self.settings.read_timeout_s:g} s: send it again",
                )
            )
        except (ConnectionError, web.RequestPayloadError, BadFraming) as exc:
            # The client went away, or its body's framing broke, mid-body. The body reader keeps this exception: its
            # traceback, through these frames, would make a cycle holding what was read of the body until a full
            # collection (rare in `toolwatch serve`). Not an error of the server: no traceback in the log either.
            exc.__traceback__ = None
            message = str(exc) if isinstance(exc, BadFraming) else f"request body not received whole: {exc}"
            return self._closing(self._error(transport, reply, 400, code_pb2.INVALID_ARGUMENT, message))
        except BodyTooLarge as exc:
            return self._closing(self._error(transport, reply, 413, code_pb2.RESOURCE_EXHAUSTED, str(exc)))
        except Busy:
            return self._closing(self._unavailable(transport, reply, 0))
        except (BadEncoding, DecodeError) as exc:
            return self._error(transport, reply, 400, code_pb2.INVALID_ARGUMENT, str(exc))
        finally:
            self.in_flight.give(held)
        return self._accept(decoded, transport, reply)

    def _precheck(
        self, request: web.Request, transport: str, reply: str, coding: str | None
    ) -> web.Response | None:
        """The answer to a request refused before its body is read (None: read it); `coding` is its content coding
        (`content_coding`; None: one not supported, 415)."""
        s = self.settings
        if self._token is not None:
            if not bearer_ok(request.headers.get("Authorization", ""), self._token):
                return self._error(
                    transport,
                    reply,
                    401,
                    code_pb2.UNAUTHENTICATED,
                    "missing or wrong bearer token",
                    **{"WWW-Authenticate": "Bearer"},
                )
        if coding is None:
            encoding = request.headers.get("Content-Encoding", "").strip()
            return self._error(
                transport,
                reply,
                415,
                code_pb2.INVALID_ARGUMENT,
                f"unsupported content encoding {encoding!r}: use gzip, deflate, zstd or none",
            )
        length = request.content_length
        if length is not None and length > s.max_body_bytes:
            return self._error(
                transport,
                reply,
                413,
                code_pb2.RESOURCE_EXHAUSTED,
                f"request body of {length} bytes exceeds the limit of {s.max_body_bytes} bytes",
            )
        if self.pipeline.full():
            return self._unavailable(transport, reply, 0)
        return None

    def _unavailable(self, transport: str, reply: str, spans: int) -> web.Response:
        self.ops.dropped(DROP_QUEUE_FULL, spans)
        return self._error(
            transport,
            reply,
            503,
            code_pb2.UNAVAILABLE,
            "queue full, retry later",
            **{"Retry-After": str(self.settings.retry_after_s)},
        )

    async def _read_and_decode(self, request: web.Request, reply: str, coding: str, take: Take) -> Decoded:
        """The body read within its limits (`coding`: its content coding, see `content_coding`), decoded."""
        s = self.settings
        chunks = request.content.iter_chunked(_CHUNK)
        if coding != IDENTITY:
            body = await inflate_limited(chunks, coding, s.max_decompressed_bytes, s.max_body_bytes, take)
        else:
            body = await read_limited(chunks, s.max_body_bytes, take)
        return parse_json(body) if reply == JSON else parse_protobuf(body)

    def _accept(self, decoded: Decoded, transport: str, reply: str) -> web.Response:
        def answer(n_rejected: int, message: str) -> web.Response:
            if reply == JSON:
                doc: dict[str, object] = {}
                if n_rejected:
                    doc["partialSuccess"] = {"rejectedSpans": str(n_rejected), "errorMessage": message}
                return web.Response(body=json.dumps(doc).encode(), content_type=JSON)
            return web.Response(body=export_response(n_rejected, message), content_type=reply)

        resp = ingest(self.pipeline, decoded, transport, answer)
        if resp is None:
            return self._unavailable(transport, reply, len(decoded.spans) + decoded.rejected_count)
        self.ops.request(transport, 200)
        return resp


def export_response(n_rejected: int, message: str) -> bytes:
    """A serialized ExportTraceServiceResponse, with partial_success when spans were rejected."""
    resp = ExportTraceServiceResponse()
    if n_rejected:
        resp.partial_success.rejected_spans = n_rejected
        resp.partial_success.error_message = message
    return bytes(resp.SerializeToString())


def ingest(pipeline: Pipeline, decoded: Decoded, transport: str, answer: Callable[[int, str], A]) -> A | None:
    """Normalize and queue decoded spans, counting them; returns `answer` of the number of rejected spans and the
    partial-success message naming the reasons, or None (nothing queued, nothing counted) when the queue is full.

    The answer is built before the records are queued: a fault of ours building it (answered 503, see
    TracesHandler.handle) leaves the batch neither queued nor counted, so the exporter's retry of it is not counted
    twice (received, rejected, answered both 200 and 503). After the queueing only counters are added to. The
    normalizer counts the attributes it ignored (and the spans it rejected) as it reads the batch: when the batch is
    not queued (the queue full, or a fault) those counts are put back as they were: the exporter sends it again."""
    normalizer = pipeline.normalizer
    saved = normalizer.counts()
    try:
        records, rejected = normalizer.split(decoded.spans)
        for reason, n in decoded.rejected.items():
            rejected[reason] = rejected.get(reason, 0) + n
        n_rejected = sum(rejected.values())
        message = ""
        if n_rejected:
            message = f"{n_rejected} spans rejected: " + ", ".join(f"{r}={n}" for r, n in sorted(rejected.items()))
        reply = answer(n_rejected, message)
        queued = pipeline.offer(records)
    except BaseException:
        normalizer.restore(saved)
        raise
    if not queued:
        normalizer.restore(saved)
        return None
    ops = pipeline.metrics.ops
    ops.received(transport, len(decoded.spans) + decoded.rejected_count)
    for reason, n in rejected.items():
        ops.rejected(reason, n)
    return reply


def receiver_app(handler: TracesHandler, max_body: int) -> web.Application:
    # client_max_size only guards aiohttp's own readers; the handler enforces the real limits while streaming.
    app = web.Application(client_max_size=max_body, middlewares=[handler.count_unrouted])
    app.router.add_post("/v1/traces", handler.handle, expect_handler=handler.expect)
    return app


def gzip_wanted(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding value accepts gzip (RFC 9110 12.5.3): named (or `*`, when gzip is not named) with a
    q-value above 0. `gzip;q=0` means "not gzip"; a q-value that is not a number is taken as 0."""
    named: float | None = None
    star: float | None = None
    for item in accept_encoding.split(","):
        coding, *params = item.split(";")
        coding = coding.strip().lower()
        q = 1.0
        for param in params:
            key, _, val = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(val.strip())
                except ValueError:
                    q = 0.0
        if coding in ("gzip", "x-gzip"):
            named = q if named is None else max(named, q)
        elif coding == "*":
            star = q
    wanted = named if named is not None else star
    return wanted is not None and wanted > 0


def render_metrics(
    registry: CollectorRegistry, compress: bool, encode: Callable[[CollectorRegistry], bytes] = generate_latest
) -> bytes:
    """The exposition of `registry` by `encode` (the text format by default), gzipped when `compress`."""
    body = encode(registry)
    return gzip.compress(body, compresslevel=METRICS_GZIP_LEVEL) if compress else body


def negotiate(accept: str) -> tuple[Callable[[CollectorRegistry], bytes], str]:
    """The encoder and content type of the /metrics page for a scraper's `Accept`, as prometheus_client's handlers
    choose them; the text format (0.0.4) when that cannot be read (the library raises on a version it cannot
    compare, such as `version=x`: the scrape was a 500)."""
    try:
        return choose_encoder(accept)
    except (TypeError, ValueError):
        return generate_latest, CONTENT_TYPE_PLAIN_0_0_4


def metrics_app(registry: CollectorRegistry, ready: Callable[[], bool]) -> web.Application:
    # Rendering a large registry takes ~100 ms (20 agents x 50 tools): it runs in a thread of its own, so the event
    # loop goes on answering OTLP requests meanwhile (ToolwatchMetrics.collect takes its lock; the values the
    # worker owns are read as they are). One thread: concurrent scrapes wait their turn instead of competing.
    executor = ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="toolwatch-metrics", initializer=_sighup.block_here  # see _sighup
    )

    async def metrics(request: web.Request) -> web.Response:
        # The format the scraper asks for (OpenMetrics, which Prometheus prefers, or the text format: 0.0.4 unless
        # it asks for 1.0.0), compressed when it asks for it, as prometheus_client's own handlers do.
        encode, content_type = negotiate(request.headers.get("Accept", ""))
        compress = gzip_wanted(request.headers.get("Accept-Encoding", ""))
        body = await asyncio.get_running_loop().run_in_executor(executor, render_metrics, registry, compress, encode)
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = content_type
        resp.headers["Vary"] = "Accept, Accept-Encoding"  # caches keep the pages of each format and coding apart
        if compress:
            resp.headers["Content-Encoding"] = "gzip"
        return resp

    async def close_executor(_: web.Application) -> None:
        executor.shutdown(wait=False, cancel_futures=True)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ready\n")
        return web.Response(status=503, text="not ready\n")

    app = web.Application()
    app.on_cleanup.append(close_executor)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
