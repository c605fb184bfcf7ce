"""Optional OTLP/gRPC receiver (`TraceService/Export`), sharing decoding, limits and queue with OTLP/HTTP."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped]
from grpc import aio

from monitor._faults import power_of_ten, traceback_text
from monitor.otlp import DecodeError, parse_protobuf
from monitor.serve._http import (
    IN_FLIGHT_BODIES,
    INTERNAL_ERROR,
    bearer_ok,
    expected_token,
    export_response,
    ingest,
)
from monitor.serve._pipeline import DROP_QUEUE_FULL, Pipeline
from monitor.serve._settings import Settings

logger = logging.getLogger(__name__)

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
TRANSPORT_GRPC = "grpc"
# Requests of one connection in the server at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): a connection holds at
# most this many request messages here. A stream past it is refused (RST_STREAM REFUSED_STREAM, which the client
# reports as UNAVAILABLE: OTLP exporters retry it), as OTLP/HTTP answers 503 when bodies in flight pass their bound.
STREAMS_PER_CONNECTION = IN_FLIGHT_BODIES
QUEUE_FULL = "queue full, retry later"
GRPC_INT_MAX = 2**31 - 1  # gRPC core reads its channel options as C ints
# The rich error model's trailer (a google.rpc.Status, with its details), where the OTLP specification puts the
# RetryInfo of a throttled request; OpenTelemetry's Python exporter reads the RetryInfo alone, from the second one.
STATUS_DETAILS_TRAILER = "grpc-status-details-bin"
RETRY_INFO_TRAILER = "google.rpc.retryinfo-bin"


def retry_trailers(code: int, message: str, delay_s: float) -> tuple[tuple[str, bytes], ...]:
    """The trailers of a status `code` + `message` that asks the client to retry after `delay_s`."""
    info = error_details_pb2.RetryInfo()
    info.retry_delay.FromTimedelta(timedelta(seconds=delay_s))
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code, message=message, details=[detail])
    return (
        (STATUS_DETAILS_TRAILER, bytes(status.SerializeToString())),
        (RETRY_INFO_TRAILER, bytes(info.SerializeToString())),
    )


class GrpcReceiver:
    """Export requests arrive as raw bytes (no deserializer), so the same upb decoder as HTTP applies."""

    def __init__(self, settings: Settings, pipeline: Pipeline) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.ops = pipeline.metrics.ops
        self._token = expected_token(settings.token)
        self._queue_full = retry_trailers(code_pb2.UNAVAILABLE, QUEUE_FULL, settings.retry_after_s)
        self._internal_error = retry_trailers(code_pb2.UNAVAILABLE, INTERNAL_ERROR, settings.retry_after_s)
        self.ops.start_transport(TRANSPORT_GRPC, (grpc.StatusCode.OK.value[0], grpc.StatusCode.UNAVAILABLE.value[0]))
        self.server: Any = None
        self.port = 0

    async def export(self, requests: AsyncIterator[bytes], context: Any) -> bytes:
        """One Export call (see _export); a fault of ours while handling it is answered UNAVAILABLE with a RetryInfo,
        which exporters retry, as OTLP/HTTP answers it 503 (see TracesHandler.handle): gRPC's own answer, UNKNOWN,
        they do not retry."""
        try:
            return await self._export(requests, context)
        except aio.AbortError:  # an answer given with context.abort
            raise
        except Exception as exc:  # noqa: BLE001 - see above; CancelledError (the client went away) is no Exception
            faults = self.ops.receiver_fault(TRANSPORT_GRPC)
            if power_of_ten(faults):
                logger.error(
                    "toolwatch failed on a gRPC export from %s (fault %d of this process; a bug: please report it), "
                    "answered UNAVAILABLE: the exporter sends it again\n%s",
                    context.peer(),
                    faults,
                    traceback_text(exc),
                )
            self.ops.request(TRANSPORT_GRPC, grpc.StatusCode.UNAVAILABLE.value[0])
            await context.abort(grpc.StatusCode.UNAVAILABLE, INTERNAL_ERROR, trailing_metadata=self._internal_error)
            return b""  # not reached: abort raises

    async def _export(self, requests: AsyncIterator[bytes], context: Any) -> bytes:
        """One Export call. Its request message is read here, not before the handler runs (a stream-unary handler
        for a unary method: the client sends one message), so what OTLP/HTTP refuses on a request's head alone is
        refused before the message is read: a missing or wrong token, a full queue."""
        code = grpc.StatusCode
        if self._token is not None:
            given = dict(context.invocation_metadata() or ()).get("authorization", "")
            if not bearer_ok(str(given), self._token):
                self.ops.request(TRANSPORT_GRPC, code.UNAUTHENTICATED.value[0])
                await context.abort(code.UNAUTHENTICATED, "missing or wrong bearer token")
        if self.pipeline.full():
            await self._unavailable(context, 0)
        request = None
        async for message in requests:
            request = message
            break
        if request is None:
            return await self._no_message(context)
        try:
            decoded = parse_protobuf(request)
        except DecodeError as exc:
            self.ops.request(TRANSPORT_GRPC, code.INVALID_ARGUMENT.value[0])
            await context.abort(code.INVALID_ARGUMENT, str(exc))
        answer = ingest(self.pipeline, decoded, TRANSPORT_GRPC, export_response)
        if answer is None:
            await self._unavailable(context, len(decoded.spans) + decoded.rejected_count)
        self.ops.request(TRANSPORT_GRPC, code.OK.value[0])
        return answer  # type: ignore[return-value]

    async def _no_message(self, context: Any) -> bytes:
        """A call that ended without its message: gRPC core refused it (past grpc.max_receive_message_length,
        compressed or decompressed) and answered RESOURCE_EXHAUSTED itself, or the client went away before sending
        it (seen as cancelled only when gRPC has told the handler so by then: else counted with the first case). A
        client that half-closes without any message (none of gRPC's) is answered the same. Counted as OTLP/HTTP
        counts its 413 (and its body not received whole)."""
        code = grpc.StatusCode
        if context.cancelled():
            self.ops.request(TRANSPORT_GRPC, code.CANCELLED.value[0])
            return b""
        self.ops.request(TRANSPORT_GRPC, code.RESOURCE_EXHAUSTED.value[0])
        limit = self.settings.max_decompressed_bytes
        await context.abort(code.RESOURCE_EXHAUSTED, f"request message not received: over {limit} bytes, or none sent")
        return b""  # not reached: abort raises

    async def _unavailable(self, context: Any, spans: int) -> None:
        """UNAVAILABLE is retryable for OTLP exporters: nothing is lost silently. The RetryInfo says when, as
        Retry-After does over HTTP (without it exporters retry after their own backoff, 1 s at first)."""
        self.ops.dropped(DROP_QUEUE_FULL, spans)
        self.ops.request(TRANSPORT_GRPC, grpc.StatusCode.UNAVAILABLE.value[0])
        await context.abort(grpc.StatusCode.UNAVAILABLE, QUEUE_FULL, trailing_metadata=self._queue_full)

    def options(self) -> list[tuple[str, int]]:
        """gRPC core's bounds, as OTLP/HTTP has them: at most --max-connections open (one more is closed at once,
        which exporters see as UNAVAILABLE and retry); a connection that has not finished its HTTP/2 handshake
        within --read-timeout, or has had no request in flight for that long, is closed; and every connection is
        told to go (GOAWAY) after --read-timeout and closed one more --read-timeout later, so a stream that never
        finishes sending holds its connection no longer than that. Exporters reconnect at their next export. gRPC
        core takes these as C ints: a larger message bound (--max-decompressed-bytes past 2 GiB - 1) or timeout in
        ms is given as GRPC_INT_MAX, a larger number of connections as one less."""
        s = self.settings
        timeout_ms = min(GRPC_INT_MAX, max(1, round(s.read_timeout_s * 1000)))
        return [
            ("grpc.max_receive_message_length", min(s.max_decompressed_bytes, GRPC_INT_MAX)),
            ("grpc.max_concurrent_streams", STREAMS_PER_CONNECTION),
            # gRPC core checks this one is under GRPC_INT_MAX (and aborts the process if not)
            ("grpc.max_allowed_incoming_connections", min(s.max_connections, GRPC_INT_MAX - 1)),
            ("grpc.server_handshake_timeout_ms", timeout_ms),
            ("grpc.max_connection_idle_ms", timeout_ms),
            ("grpc.max_connection_age_ms", timeout_ms),
            ("grpc.max_connection_age_grace_ms", timeout_ms),
        ]

    async def start(self, host: str, port: int) -> int:
        server = aio.server(
            options=[
                *self.options(),
                # gRPC sets SO_REUSEPORT by default: a second server on a busy port would start and take part of
                # the first one's connections. Without it the port is refused, as the HTTP ports are.
                ("grpc.so_reuseport", 0),
            ]
        )
        handler = grpc.method_handlers_generic_handler(
            SERVICE, {"Export": grpc.stream_unary_rpc_method_handler(self.export)}
        )
        server.add_generic_rpc_handlers((handler, _Unimplemented(self)))
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = server.add_insecure_port(address)
        except RuntimeError:  # "Failed to bind to address ..." (older gRPC versions return 0)
            bound = 0
        if bound == 0:
            raise OSError(f"cannot listen on {address} for OTLP/gRPC (check --host and --grpc-port)")
        await server.start()
        self.server, self.port = server, int(bound)
        return self.port

    async def stop(self, grace_s: float = 5.0) -> None:
        if self.server is not None:
            await self.server.stop(grace_s)


class _Unimplemented(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Every other method: UNIMPLEMENTED, as gRPC answers it, but counted (as OTLP/HTTP counts its 404 for another
    path: a metrics or logs exporter sent here) and without reading the message."""

    def __init__(self, receiver: GrpcReceiver) -> None:
        self._receiver = receiver
        self._handler = grpc.stream_unary_rpc_method_handler(self._refuse)

    def service(self, handler_call_details: Any) -> Any:
        return self._handler

    async def _refuse(self, requests: AsyncIterator[bytes], context: Any) -> bytes:
        self._receiver.ops.request(TRANSPORT_GRPC, grpc.StatusCode.UNIMPLEMENTED.value[0])
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        return b""  # not reached: abort raises
