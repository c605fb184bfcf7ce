"""OTLP protobuf and JSON decoding of real SDK spans, and bad input."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monitor.otlp import (
    Decoded,
    DecodeError,
    FileLineError,
    decode_json,
    decode_protobuf,
    parse_json,
    parse_protobuf,
    read_jsonl,
)
from monitor.otlp import request_to_json as to_json
from monitor.otlp._json import parse_json_py
from monitor.otlp._protobuf import parse_protobuf_py
from tests.monitor.service.spans import Call, TurnSpec, record_turns, to_request

TURNS = [
    TurnSpec("[AUTH] login failures", [Call("pull_auth_telemetry", {"window": "1h"})], output_text="Result: AUTH"),
    TurnSpec("[BILL] refund stuck", [Call("pull_billing_telemetry", {"x": 1}, error="TimeoutError")]),
]


def test_protobuf_and_json_decode_the_same_spans() -> None:
    sdk = record_turns(TURNS)
    req = to_request(sdk)
    from_pb = decode_protobuf(req.SerializeToString())
    from_json = decode_json(to_json(req))
    assert len(from_pb) == len(sdk) == 4
    assert from_pb == from_json
    by_id = {format(s.context.span_id, "016x"): s for s in sdk}
    for span in from_pb:
        orig = by_id[span.span_id]
        assert span.trace_id == format(orig.context.trace_id, "032x")
        assert span.parent_span_id == (format(orig.parent.span_id, "016x") if orig.parent else "")
        assert span.name == orig.name
        assert span.start_ns == orig.start_time and span.end_ns == orig.end_time
        assert span.attributes == dict(orig.attributes or {})
        assert span.resource["service.name"] == "test-agent"
        assert span.scope == "tests"
    err = next(s for s in from_pb if s.attributes.get("error.type"))
    assert err.status_code == 2 and err.status_message == "TimeoutError"


def test_json_accepts_numbers_names_and_ignores_unknown_fields() -> None:
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]},
                "schemaUrl": "x",
                "futureField": {"a": 1},
                "scopeSpans": [
                    {
                        "scope": {"name": "s"},
                        "spans": [
                            {
                                "traceId": "5B8EFFF798038103D269B633813FC60C",
                                "spanId": "EEE19B7EC3C1B174",
                                "name": "execute_tool t",
                                "kind": "SPAN_KIND_INTERNAL",
                                "startTimeUnixNano": 1544712660000000000,
                                "endTimeUnixNano": "1544712661000000000",
                                "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
                                "attributes": [
                                    {"key": "i", "value": {"intValue": "42"}},
                                    {"key": "j", "value": {"intValue": 7}},
                                    {"key": "d", "value": {"doubleValue": "NaN"}},
                                    {"key": "b", "value": {"boolValue": True}},
                                    {"key": "a", "value": {"arrayValue": {"values": [{"stringValue": "x"}]}}},
                                    {"key": "y", "value": {"bytesValue": "AQI="}},
                                    {"key": "n", "value": {}},
                                ],
                                "somethingNew": 1,
                            }
                        ],
                    }
                ],
            }
        ]
    }
    (span,) = decode_json(json.dumps(doc))
    assert span.trace_id == "5b8efff798038103d269b633813fc60c"
    assert span.parent_span_id == ""
    assert span.kind == 1 and span.status_code == 2 and span.status_message == "boom"
    assert span.start_ns == 1544712660000000000 and span.end_ns == 1544712661000000000
    assert span.attributes["i"] == 42 and span.attributes["j"] == 7 and span.attributes["b"] is True
    assert span.attributes["a"] == ("x",) and span.attributes["y"] == "0102"
    assert span.attributes["d"] != span.attributes["d"]  # NaN
    assert "n" not in span.attributes


def _proto_names(obj: Any) -> Any:
    """`obj` with every member name as the .proto field name (trace_id, not traceId)."""
    if isinstance(obj, dict):
        return {re.sub("([A-Z])", lambda m: "_" + m.group(1).lower(), k): _proto_names(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_proto_names(v) for v in obj]
    return obj


ALL_VALUES = [
    {"key": "s", "value": {"stringValue": "x"}},
    {"key": "i", "value": {"intValue": "42"}},
    {"key": "d", "value": {"doubleValue": 1.5}},
    {"key": "b", "value": {"boolValue": True}},
    {"key": "y", "value": {"bytesValue": "AQI="}},
    {"key": "a", "value": {"arrayValue": {"values": [{"stringValue": "x"}, {"intValue": 3}]}}},
    {"key": "k", "value": {"kvlistValue": {"values": [{"key": "z", "value": {"boolValue": False}}]}}},
]


@pytest.mark.parametrize("parse", [parse_json, parse_json_py])
def test_json_accepts_the_proto_field_names(parse: Callable[[str], Decoded]) -> None:
    # The protobuf JSON mapping has parsers accept the .proto field names as well as the lowerCamelCase ones, and the
    # Collector's OTLP JSON decoder does: a body from MessageToJson(preserving_proto_field_name=True) is not empty.
    req = to_request(record_turns(TURNS))
    camel = json.loads(to_json(req))
    camel["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] += ALL_VALUES
    camel["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["events"] = [{"name": "e", "timeUnixNano": "7"}]
    snake = _proto_names(camel)
    for name in (
        "resource_spans",
        "scope_spans",
        "trace_id",
        "span_id",
        "parent_span_id",
        "start_time_unix_nano",
        "end_time_unix_nano",
        "time_unix_nano",
        "string_value",
        "kvlist_value",
        "array_value",
    ):
        assert f'"{name}"' in json.dumps(snake), name
    want = parse(json.dumps(camel))
    got = parse(json.dumps(snake))
    assert len(got.spans) == 4 and got.rejected == {}
    assert got.spans == want.spans
    assert got.spans[0].attributes["k"] == (("z", False),) and got.spans[0].events[0].time_ns == 7  # type: ignore[index]


@pytest.mark.parametrize("parse", [parse_json, parse_json_py])
def test_json_null_members_take_their_default(parse: Callable[[str], Decoded]) -> None:
    # The protobuf JSON mapping: null is accepted for every field and means its default value.
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "parentSpanId": None,
        "name": None,
        "kind": None,
        "startTimeUnixNano": None,
        "endTimeUnixNano": None,
        "status": {"code": None, "message": None},
        "attributes": [{"key": "a", "value": {"stringValue": "x"}}, {"key": "n", "value": {"intValue": None}}],
        "events": [{"name": None, "timeUnixNano": None, "attributes": None}],
    }
    out = parse(json.dumps({"resourceSpans": [{"resource": None, "scopeSpans": [{"scope": None, "spans": [span]}]}]}))
    assert out.rejected == {}
    (got,) = out.spans
    assert (got.name, got.parent_span_id, got.kind, got.start_ns, got.end_ns) == ("", "", 0, 0, 0)
    assert (got.status_code, got.status_message, got.attributes) == (0, "", {"a": "x"})
    assert got.events is not None and [(e.name, e.time_ns, e.attributes) for e in got.events] == [("", 0, {})]


# Timestamps are fixed64 in the .proto: nanoseconds since the epoch, 0 to 2**64 - 1. A JSON one outside that range is no
# time a protobuf span could carry (a "-1" end read as is made the verdict lag ~57 years): its span is malformed.
OUT_OF_RANGE_TIMES = ["-1", -1, "-9223372036854775809", str(2**64), 2**64, 2**70, -1e18]


@pytest.mark.parametrize("parse", [parse_json, parse_json_py])
@pytest.mark.parametrize("member", ["startTimeUnixNano", "endTimeUnixNano", "start_time_unix_nano"])
@pytest.mark.parametrize("time", OUT_OF_RANGE_TIMES)
def test_json_time_outside_fixed64_rejects_its_span_not_the_request(
    parse: Callable[[str], Decoded], member: str, time: Any
) -> None:
    good = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b175", "name": "ok"}
    bad = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b176", "name": "bad", member: time}
    out = parse(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [good, bad, dict(good, spanId="1" * 16)]}]}]}))
    assert [s.name for s in out.spans] == ["ok", "ok"]
    assert out.rejected == {"malformed_span": 1}


@pytest.mark.parametrize("parse", [parse_json, parse_json_py])
def test_json_times_at_the_fixed64_bounds_are_kept(parse: Callable[[str], Decoded]) -> None:
    span = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b175"}
    times = [("0", 2**64 - 1), (0, str(2**64 - 1)), ("-0", 1.8e19), (0.0, "18446744073709551615")]
    spans = [
        dict(span, spanId=f"{i + 1:016x}", startTimeUnixNano=a, endTimeUnixNano=b) for i, (a, b) in enumerate(times)
    ]
    out = parse(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    assert out.rejected == {}
    top = 2**64 - 1
    assert [(s.start_ns, s.end_ns) for s in out.spans] == [(0, top), (0, top), (0, 18 * 10**18), (0, top)]


@pytest.mark.parametrize(
    ("trace_id", "span_id", "parent"),
    [
        ("abc", "eee19b7ec3c1b174", ""),
        ("5b8efff798038103d269b633813fc60c", "eee19b7e", ""),
        ("5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "12"),
        ("zz8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", ""),
        ("00000000000000000000000000000000", "eee19b7ec3c1b174", ""),
    ],
)
def test_json_span_with_bad_ids_is_rejected_not_the_request(trace_id: str, span_id: str, parent: str) -> None:
    good = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b175", "name": "ok"}
    bad = {"traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": "bad"}
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [good, bad]}]}]}
    out = parse_json(json.dumps(doc))
    assert [s.name for s in out.spans] == ["ok"]
    assert out.rejected == {"invalid_id": 1}


@pytest.mark.parametrize(
    ("parse", "encode"),
    [
        (parse_protobuf, lambda r: r.SerializeToString()),
        (parse_protobuf_py, lambda r: r.SerializeToString()),
        (parse_json, to_json),
        (parse_json_py, to_json),
    ],
)
def test_all_zero_ids_mean_the_same_in_protobuf_and_json(parse: Callable[[Any], Decoded], encode: Any) -> None:
    # An all-zero span id is invalid (the span is rejected); an all-zero parent span id is no parent (a root span).
    req = to_request(record_turns(TURNS))
    spans = req.resource_spans[0].scope_spans[0].spans
    spans[0].span_id = b"\0" * 8
    spans[1].parent_span_id = b"\0" * 8
    out = parse(encode(req))
    assert out.rejected == {"invalid_id": 1}
    assert [s.span_id for s in out.spans] == [s.span_id.hex() for s in spans[1:]]
    assert out.spans[0].parent_span_id == ""


def test_protobuf_span_with_bad_ids_is_rejected() -> None:
    req = to_request(record_turns(TURNS[:1]))
    req.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01\x02\x03"
    out = parse_protobuf(req.SerializeToString())
    assert len(out.spans) == 1 and out.rejected == {"invalid_id": 1}


@pytest.mark.parametrize("parse", [parse_protobuf, parse_protobuf_py])
def test_protobuf_strings_that_are_not_utf8_read_with_replacement(parse: Callable[[bytes], Decoded]) -> None:
    # upb refuses a string field that is not UTF-8, which failed the whole request; each is read as
    # errors="replace" reads it instead, and every span is kept.
    req = to_request(record_turns(TURNS))
    spans = req.resource_spans[0].scope_spans[0].spans
    spans[0].name = "@@1@@"
    spans[1].attributes.add(key="@@2@@").value.string_value = "@@3@@"
    spans[2].status.message = "@@4@@"
    req.resource_spans[0].resource.attributes.add(key="r").value.array_value.values.add(string_value="@@5@@")
    body = bytes(req.SerializeToString())
    bad_strings = [b"a\xffb\xfe!", b"\xc0\xafxyz", b"\xed\xa0\x80!!", b"\xf4\x90\x80\x80?", b"ok\xe2\x82."]
    for i, bad in enumerate(bad_strings, 1):
        marker = f"@@{i}@@".encode()
        assert len(bad) == len(marker) and body.count(marker) == 1
        body = body.replace(marker, bad)
    out = parse(body)
    assert out.rejected == {} and len(out.spans) == 4
    assert out.spans[0].name == "a\ufffdb\ufffd!"
    assert out.spans[1].attributes["\ufffd\ufffdxyz"] == "\ufffd\ufffd\ufffd!!"
    assert out.spans[2].status_message == "\ufffd" * 4 + "?"
    assert out.spans[3].resource["r"] == ("ok\ufffd.",)


@pytest.mark.parametrize("body", [b"{", b"[]", b'{"resourceSpans": 5}', b'{"resourceSpans": [1]}', b"\xff\xfe"])
def test_invalid_json_raises(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_json(body)


def test_truncated_protobuf_raises() -> None:
    body = to_request(record_turns(TURNS)).SerializeToString()
    with pytest.raises(DecodeError):
        decode_protobuf(body[: len(body) - 7])


def test_collector_file_exporter_lines(tmp_path: Path) -> None:
    lines = [to_json(to_request(record_turns([t]))) for t in TURNS]
    plain = tmp_path / "traces.jsonl"
    plain.write_text("\n".join(lines) + "\n\n")
    packed = tmp_path / "traces.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    for path in (plain, packed):
        assert [len(d.spans) for d in read_jsonl(path)] == [2, 2]
    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[0] + "\n{oops\n" + lines[1] + "\n")
    with pytest.raises(DecodeError, match=r"broken.jsonl:2"):
        list(read_jsonl(broken))
    errors: list[FileLineError] = []
    assert len(list(read_jsonl(broken, errors=errors))) == 2
    assert errors[0].line == 2


def _enum_request() -> Any:
    """Four spans of one turn: enums by unknown names, unknown numbers, numbers as strings, and known names."""
    req = to_request(record_turns(TURNS[:1]))
    doc = json.loads(to_json(req))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    extra = [dict(spans[0], spanId=f"{0xabc0 + i:016x}", parentSpanId=spans[0]["spanId"]) for i in range(4)]
    enums = [("SPAN_KIND_FUTURE", "STATUS_CODE_FUTURE"), (9, 7), ("9", "-3"), ("SPAN_KIND_CLIENT", "STATUS_CODE_OK")]
    for s, (kind, code) in zip(extra, enums, strict=True):
        s["kind"], s["status"] = kind, {"code": code, "message": "m"}
    spans += extra
    return doc


@pytest.mark.parametrize("parse", [parse_json, parse_json_py])
def test_json_unknown_enums_keep_the_span(parse: Callable[[str], Decoded]) -> None:
    # OTLP's enums are open (proto3): an unknown number is kept as it is. An unknown name (names are the protobuf
    # JSON mapping's, which OTLP/JSON senders must not use but some do) is read as the field's default, 0, as the
    # mapping's parsers do when told to ignore unknown fields, which the OTLP spec requires of OTLP/JSON receivers:
    # it made the span malformed, a tool call of a producer with a newer enum rejected.
    d = parse(json.dumps(_enum_request()))
    assert d.rejected == {}
    got = [(s.kind, s.status_code) for s in d.spans if s.span_id.startswith("000000000000abc")]
    assert got == [(0, 0), (9, 7), (9, -3), (3, 1)]


@pytest.mark.parametrize("parse", [parse_protobuf, parse_protobuf_py])
def test_protobuf_unknown_enums_are_kept(parse: Callable[[bytes], Decoded]) -> None:
    req = to_request(record_turns(TURNS[:1]))
    span = req.resource_spans[0].scope_spans[0].spans[0]
    span.kind, span.status.code = 9, 7  # type: ignore[assignment]  # open enums: unknown values are kept
    d = parse(req.SerializeToString())
    assert d.rejected == {} and (d.spans[0].kind, d.spans[0].status_code) == (9, 7)
