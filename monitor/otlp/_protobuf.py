"""OTLP protobuf (ExportTraceServiceRequest) to Span records: the C decoder when built, else the upb backend."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf.message import DecodeError as _PbDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from monitor.otlp._accel import CPB
from monitor.otlp._span import REASON_BAD_ID, Decoded, DecodeError, Span, SpanEvent

# All-zero ids are invalid (W3C Trace Context, OTLP): such a trace or span id rejects the span, such a parent is none.
_ZERO16 = b"\0" * 16
_ZERO8 = b"\0" * 8


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    if kind == "kvlist_value":
        return tuple((kv.key, _value(kv.value)) for kv in v.kvlist_value.values)
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind)


def _attributes(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        v = kv.value
        sv = v.string_value  # the common case first: one field read, no oneof lookup
        if sv:
            out[kv.key] = sv
        elif v.WhichOneof("value") is not None:
            out[kv.key] = _value(v)
    return out


def parse_protobuf(body: bytes) -> Decoded:
    """Decode one serialized ExportTraceServiceRequest; spans with ids of the wrong length are rejected."""
    got = CPB.parse(body) if CPB is not None else None
    if got is None:  # not built, or a body outside the C decoder's fast path (including every invalid one)
        return parse_protobuf_py(body)
    spans, bad_ids = got
    out = Decoded(spans)
    if bad_ids:
        out.reject(REASON_BAD_ID, bad_ids)
    return out


def parse_protobuf_py(body: bytes) -> Decoded:
    """`parse_protobuf` through the protobuf library (upb): the reference the C decoder is tested against."""
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
    except (_PbDecodeError, ValueError, TypeError) as exc:
        raise DecodeError(f"invalid OTLP protobuf: {exc}") from None
    out = Decoded([])
    spans = out.spans
    append = spans.append
    for rs in req.resource_spans:
        resource = _attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope = ss.scope.name
            for s in ss.spans:
                tid = s.trace_id
                sid = s.span_id
                pid = s.parent_span_id
                if len(tid) != 16 or len(sid) != 8 or (pid and len(pid) != 8) or tid == _ZERO16 or sid == _ZERO8:
                    out.reject(REASON_BAD_ID)
                    continue
                if pid == _ZERO8:  # an invalid parent span id: no parent, as in OTLP JSON
                    pid = b""
                st = s.status
                span = Span(
                    tid.hex(),
                    sid.hex(),
                    pid.hex(),
                    s.name,
                    s.kind,
                    s.start_time_unix_nano,
                    s.end_time_unix_nano,
                    st.code,
                    st.message,
                    _attributes(s.attributes),
                    resource,
                    scope,
                )
                if s.events:
                    span.events = [SpanEvent(e.name, e.time_unix_nano, _attributes(e.attributes)) for e in s.events]
                append(span)
    return out


def decode_protobuf(body: bytes) -> list[Span]:
    """Decode an OTLP protobuf request to spans (spans with invalid ids are left out; see `parse_protobuf`)."""
    return parse_protobuf(body).spans
