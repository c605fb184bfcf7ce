"""OTLP protobuf (ExportTraceServiceRequest) to Span records: the C decoder when built, else the upb backend.

A string field whose bytes are not UTF-8 (a span name, an attribute value, ...) is read as errors="replace" reads it,
U+FFFD for each invalid sequence, rather than failing the whole request (upb refuses it): one bad string loses no
span, as OTLP JSON takes lone surrogates.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor
from google.protobuf.message import DecodeError as _PbDecodeError
from google.protobuf.message import Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from monitor.otlp._accel import CPB
from monitor.otlp._span import REASON_BAD_ID, Decoded, DecodeError, Span, SpanEvent

# All-zero ids are invalid (W3C Trace Context, OTLP): such a trace or span id rejects the span, such a parent is none.
_ZERO16 = b"\0" * 16
_ZERO8 = b"\0" * 8


def _bytes_for_strings(file: FileDescriptor, pool: descriptor_pool.DescriptorPool, done: set[str]) -> None:
    """Add `file` and its dependencies to `pool` with every string field made a bytes field (same wire format)."""
    if file.name in done:
        return
    done.add(file.name)
    for dep in file.dependencies:
        _bytes_for_strings(dep, pool, done)
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    todo = list(proto.message_type)
    while todo:
        msg = todo.pop()
        todo.extend(msg.nested_type)
        for field in msg.field:
            if field.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    pool.Add(proto)


def _string_fields(root: Descriptor) -> frozenset[str]:
    """The full name of every string field reachable from `root` (opentelemetry.proto.trace.v1.Span.name, ...)."""
    out: set[str] = set()
    seen: set[str] = set()
    todo = [root]
    while todo:
        d = todo.pop()
        if d.full_name in seen:
            continue
        seen.add(d.full_name)
        for f in d.fields:
            if f.type == FieldDescriptor.TYPE_STRING:
                out.add(f.full_name)
            elif f.message_type is not None:
                todo.append(f.message_type)
    return frozenset(out)


_STRINGS = _string_fields(ExportTraceServiceRequest.DESCRIPTOR)
_pool = descriptor_pool.DescriptorPool()
_bytes_for_strings(ExportTraceServiceRequest.DESCRIPTOR.file, _pool, set())
# The request with its strings as bytes: it parses what upb refuses for invalid UTF-8 only.
_LenientRequest = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName(ExportTraceServiceRequest.DESCRIPTOR.full_name)
)


def _replace_invalid_utf8(msg: Message) -> None:
    """Every (formerly) string field of `msg`, recursively, decoded with errors="replace" and encoded again."""
    for fd, value in msg.ListFields():
        repeated = fd.is_repeated
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            for m in value if repeated else (value,):
                _replace_invalid_utf8(m)
        elif fd.full_name in _STRINGS:
            if repeated:
                fixed = [b.decode("utf-8", "replace").encode() for b in value]
                del value[:]
                value.extend(fixed)
            else:
                setattr(msg, fd.name, value.decode("utf-8", "replace").encode())


def _request(body: bytes) -> ExportTraceServiceRequest:
    """The request in `body`; string fields that are not UTF-8 read with errors="replace" (upb refuses them)."""
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
        return req
    except (_PbDecodeError, ValueError, TypeError) as exc:
        error = exc
    lenient = _LenientRequest()
    try:
        lenient.ParseFromString(body)
    except (_PbDecodeError, ValueError, TypeError):
        raise DecodeError(f"invalid OTLP protobuf: {error}") from None
    _replace_invalid_utf8(lenient)
    req.ParseFromString(lenient.SerializeToString())  # now valid: the same wire format, strings as UTF-8
    return req


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
    req = _request(body)
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
