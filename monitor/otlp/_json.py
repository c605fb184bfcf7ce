"""OTLP JSON (one ExportTraceServiceRequest) to Span records, parsed directly for speed.

Follows the OTLP/JSON rules: lowerCamelCase keys (and, as the protobuf JSON mapping and the Collector accept them,
the .proto field names: `trace_id` for `traceId`; a member given under both names takes the lowerCamelCase one),
trace and span ids as hex strings, 64-bit integers as decimal strings or numbers, enums as integers or names (an
integer not known kept, a name not known read as 0, the field's default), doubles as numbers or strings, bytes values
as base64 (standard or URL-safe, padded or not), unknown fields ignored wherever they stand, `null` as the field's
default value.
A span that cannot be used (ids of the wrong length, wrong shapes, a start or end time outside the .proto's fixed64
range, 0 to 2**64 - 1) is rejected and counted; a body that is not such a request at all raises DecodeError.
"""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

from monitor.otlp._accel import CJSON
from monitor.otlp._span import REASON_BAD_ID, Decoded, DecodeError, Span, SpanEvent

REASON_MALFORMED = "malformed_span"

_SPAN_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
# A double as a string (the protobuf JSON mapping): one of those, or a JSON number
_NUMERAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# Bytes as base64 (the protobuf JSON mapping): the standard or the URL-safe alphabet, one of them, padded or not
_BASE64 = re.compile(r"[A-Za-z0-9+/]*|[A-Za-z0-9_-]*")
_URL_SAFE = str.maketrans("-_", "+/")
_HEX = frozenset("0123456789abcdef")
_MISSING = object()
_MAX_FIXED64 = 2**64 - 1
# An AnyValue's value fields by each of their names, lowerCamelCase and .proto
_VALUE_FIELDS = {
    name: camel
    for camel, proto in [
        ("stringValue", "string_value"),
        ("boolValue", "bool_value"),
        ("intValue", "int_value"),
        ("doubleValue", "double_value"),
        ("bytesValue", "bytes_value"),
        ("arrayValue", "array_value"),
        ("kvlistValue", "kvlist_value"),
    ]
    for name in (camel, proto)
}


def _get(obj: dict[str, Any], name: str, proto_name: str | None = None, default: Any = None) -> Any:
    """obj[name] (lowerCamelCase), else obj[proto_name] (the .proto field name), else `default`, which a `null`
    also means (the protobuf JSON mapping: null is the field's default value)."""
    value = obj.get(name, _MISSING)
    if value is _MISSING and proto_name is not None:
        value = obj.get(proto_name, _MISSING)
    return default if value is _MISSING or value is None else value


class _BadSpan(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise _BadSpan(REASON_MALFORMED)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            raise _BadSpan(REASON_MALFORMED) from None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise _BadSpan(REASON_MALFORMED)


def _time(v: Any) -> int:
    """A start or end time: a fixed64 in the .proto, so 0 to 2**64 - 1; out of that range the span is malformed (a
    "-1" end taken as is made the verdict lag 57 years)."""
    t = _int(v)
    if t < 0 or t > _MAX_FIXED64:
        raise _BadSpan(REASON_MALFORMED)
    return t


def _enum(v: Any, names: dict[str, int]) -> int:
    """An enum: a number (kept when unknown: OTLP's enums are open), or a name, one not known read as 0, the field's
    default (the protobuf JSON mapping's parsers ignoring unknown fields, which OTLP/JSON receivers must)."""
    if isinstance(v, str):
        if v in names:
            return names[v]
        try:
            return int(v)
        except ValueError:
            return 0
    return _int(v)


def _id(v: Any, nbytes: int, *, optional: bool = False) -> str:
    if v is None or v == "":
        if optional:
            return ""
        raise _BadSpan(REASON_BAD_ID)
    if not isinstance(v, str) or len(v) != 2 * nbytes:
        raise _BadSpan(REASON_BAD_ID)
    h: str = v.lower()
    if not _HEX.issuperset(h):
        raise _BadSpan(REASON_BAD_ID)
    if h.count("0") == len(h):  # all-zero ids are invalid: no parent for a parent span id, else a rejected span
        if optional:
            return ""
        raise _BadSpan(REASON_BAD_ID)
    return h


def _scalar(key: str, raw: Any) -> Any:
    if key == "stringValue":
        return raw if isinstance(raw, str) else None
    if key == "boolValue":
        return raw if isinstance(raw, bool) else None
    if key == "intValue":
        try:
            return _int(raw)
        except _BadSpan:
            return None
    if key == "doubleValue":
        if isinstance(raw, float):
            return raw
        if isinstance(raw, int) and not isinstance(raw, bool):
            try:
                return float(raw)
            except OverflowError:  # beyond the double range: ±inf, as the same number as a string or as 1e400
                return math.inf if raw > 0 else -math.inf
        if not isinstance(raw, str):
            return None
        special = _SPECIAL_FLOATS.get(raw)
        return special if special is not None else float(raw) if _NUMERAL.fullmatch(raw) else None
    if key == "bytesValue":
        return _bytes(raw)
    return None


def _bytes(raw: Any) -> str | None:
    """The hex of the bytes in base64 `raw`, None when it is not base64: the padding, if there, must be right."""
    if not isinstance(raw, str):
        return None
    data = raw.rstrip("=")
    pads = len(raw) - len(data)
    if pads > 2 or (pads and len(raw) % 4) or len(data) % 4 == 1 or not _BASE64.fullmatch(data):
        return None
    return base64.b64decode(data.translate(_URL_SAFE) + "=" * (-len(data) % 4)).hex()


def _value(v: Any) -> Any:
    """An AnyValue's value, None when it has none. Its value field is found among its members in any order; unknown
    members are skipped, whatever their type, and a null one is unset (the protobuf JSON mapping). Two value fields
    set (a oneof set twice, which proto3 JSON parsers refuse) leave the value out; a field under both its names
    counts once, by its lowerCamelCase one."""
    if not isinstance(v, dict):
        return None
    field = raw = None
    for name, member in v.items():
        key = _VALUE_FIELDS.get(name)
        if key is None or member is None:
            continue
        if field is not None and key != field:
            return None
        if field is None or name == key:
            field, raw = key, member
    if field == "arrayValue":
        values = _get(raw, "values", default=[]) if isinstance(raw, dict) else None
        return tuple(_value(x) for x in values) if isinstance(values, list) else None
    if field == "kvlistValue":
        values = _get(raw, "values", default=[]) if isinstance(raw, dict) else None
        if not isinstance(values, list):
            return None
        return tuple(e for e in (_entry(kv) for kv in values if isinstance(kv, dict)) if e is not None)
    return None if field is None else _scalar(field, raw)


def _entry(kv: dict[str, Any]) -> tuple[str, Any] | None:
    """A kvlistValue entry (a KeyValue): (key, value). The key as in an attribute: a null or missing key is the
    empty key (the protobuf JSON mapping's default); a key of another type (a number, a bool, an object, an array)
    leaves the entry out (None)."""
    key = kv.get("key")
    if not isinstance(key, str):
        if key is not None:
            return None
        key = ""
    return key, _value(kv.get("value"))


def _attributes(kvs: Any) -> dict[str, Any]:
    """A KeyValue list as a dict. A null or missing key is the empty key, "" (the protobuf JSON mapping's default,
    and MessageToDict leaves an empty key out); a key of another type leaves the attribute out."""
    out: dict[str, Any] = {}
    if not isinstance(kvs, list):
        return out
    for kv in kvs:
        if not isinstance(kv, dict):
            continue
        key = kv.get("key")
        if not isinstance(key, str):
            if key is not None:
                continue
            key = ""
        val = kv.get("value")
        if isinstance(val, dict) and len(val) == 1:  # the common case first
            sv = val.get("stringValue")
            if isinstance(sv, str):
                out[key] = sv
                continue
        value = _value(val)
        if value is not None:
            out[key] = value
    return out


def _span(s: Any, resource: dict[str, Any], scope: str) -> Span:
    if not isinstance(s, dict):
        raise _BadSpan(REASON_MALFORMED)
    status = s.get("status") or {}
    if not isinstance(status, dict):
        raise _BadSpan(REASON_MALFORMED)
    name = _get(s, "name", default="")
    message = _get(status, "message", default="")
    if not isinstance(name, str) or not isinstance(message, str):
        raise _BadSpan(REASON_MALFORMED)
    span = Span(
        _id(_get(s, "traceId", "trace_id"), 16),
        _id(_get(s, "spanId", "span_id"), 8),
        _id(_get(s, "parentSpanId", "parent_span_id"), 8, optional=True),
        name,
        _enum(_get(s, "kind", default=0), _SPAN_KINDS),
        _time(_get(s, "startTimeUnixNano", "start_time_unix_nano", 0)),
        _time(_get(s, "endTimeUnixNano", "end_time_unix_nano", 0)),
        _enum(_get(status, "code", default=0), _STATUS_CODES),
        message,
        _attributes(s.get("attributes")),
        resource,
        scope,
    )
    events = s.get("events")
    if isinstance(events, list) and events:
        span.events = [
            SpanEvent(
                str(_get(e, "name", default="")),
                _int(_get(e, "timeUnixNano", "time_unix_nano", 0)),
                _attributes(e.get("attributes")),
            )
            for e in events
            if isinstance(e, dict)
        ]
    return span


def _list(obj: dict[str, Any], key: str, proto_name: str) -> list[Any]:
    value = _get(obj, key, proto_name, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(f"invalid OTLP JSON: {key!r} must be a list")
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DecodeError(f"invalid OTLP JSON: {what} must be an object")
    return value


def parse_json(body: bytes | str) -> Decoded:
    """Decode one ExportTraceServiceRequest in OTLP JSON (the C decoder when built)."""
    got = CJSON.parse(body) if CJSON is not None else None
    if got is None:  # not built, or a body outside the C decoder's fast path (including every invalid one)
        return parse_json_py(body)
    spans, bad_ids, malformed = got
    out = Decoded(spans)
    if bad_ids:
        out.reject(REASON_BAD_ID, bad_ids)
    if malformed:
        out.reject(REASON_MALFORMED, malformed)
    return out


def parse_json_py(body: bytes | str) -> Decoded:
    """`parse_json` in pure Python (json.loads): the reference the C decoder is tested against."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise DecodeError("invalid JSON: nested too deeply") from None
    req = _object(doc, "the request")
    out = Decoded([])
    append = out.spans.append
    for rs in _list(req, "resourceSpans", "resource_spans"):
        rs = _object(rs, "a resourceSpans entry")
        resource = _attributes(_object(rs.get("resource"), "resource").get("attributes"))
        for ss in _list(rs, "scopeSpans", "scope_spans"):
            ss = _object(ss, "a scopeSpans entry")
            scope_name = _object(ss.get("scope"), "scope").get("name", "")
            scope = scope_name if isinstance(scope_name, str) else ""
            for s in _list(ss, "spans", "spans"):
                try:
                    append(_span(s, resource, scope))
                except _BadSpan as bad:
                    out.reject(bad.reason)
    return out


def decode_json(body: bytes | str) -> list[Span]:
    """Decode an OTLP JSON request to spans (unusable spans are left out; see `parse_json`)."""
    return parse_json(body).spans
