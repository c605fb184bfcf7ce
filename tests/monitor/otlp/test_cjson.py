"""The C OTLP JSON decoder (_cjson) against the reference `parse_json_py`: equal results or None, never a crash."""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import random
import sys
from collections.abc import Iterator
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2

from monitor.otlp import Span, SpanEvent, accelerated, parse_json, request_to_json
from monitor.otlp._accel import CJSON, PURE_PYTHON_ENV
from monitor.otlp._json import parse_json_py
from monitor.otlp._span import DecodeError
from tests.monitor.otlp.compare import (
    blocks_growth,
    canon,
    check_result,
    foreign_event_class,
    mutated,
    sdk_spans,
    span_fields,
)

pytestmark = pytest.mark.skipif(CJSON is None, reason="the C JSON decoder is not built or is disabled")

Result = tuple[list[Span], int, int]
Body = bytes | str

# ---- comparison -------------------------------------------------------------------------------------------------


def reference(body: Body) -> Result | None:
    """parse_json_py's result, None when it raises (DecodeError, or what escapes it: see the edge cases)."""
    try:
        d = parse_json_py(body)
    except (DecodeError, RecursionError):
        return None
    return d.spans, d.rejected.get("invalid_id", 0), d.rejected.get("malformed_span", 0)


def c_parse(body: Any) -> Result | None:
    assert CJSON is not None
    got: Result | None = CJSON.parse(body)
    return got


def check(body: Body, *, fast: bool = False) -> Result | None:
    """C gives None or exactly the reference's result; with `fast`, it must not give None."""
    got = c_parse(body)
    ref = check_result(got, lambda: reference(body), fast=fast)
    if ref is None:
        return None
    assert got is not None
    by_block: dict[int, set[int]] = {}  # spans of one resourceSpans share one resource dict, as in the reference
    for g, r in zip(got[0], ref[0], strict=True):
        by_block.setdefault(id(r.resource), set()).add(id(g.resource))
    assert all(len(ids) == 1 for ids in by_block.values())
    return got


# ---- real bodies ------------------------------------------------------------------------------------------------


def _real_bodies(n_spans: int, batch: int) -> list[str]:
    spans = sdk_spans("cjson-test", 5, n_spans)
    return [request_to_json(encode_spans(spans[i : i + batch])) for i in range(0, len(spans), batch)]


@pytest.fixture(scope="module")
def real_bodies() -> list[str]:
    return _real_bodies(512, 512)


@pytest.fixture(scope="module")
def small_bodies() -> list[str]:
    return _real_bodies(24, 6)


# A Collector file-exporter line (pdata's JSON: enums as numbers, int64 as strings, empty fields left out, schema
# URLs and flags beside), written by hand in that shape with every kind of attribute value.
COLLECTOR_LINE = (
    '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"triage"}},'
    '{"key":"host.cores","value":{"intValue":"8"}}]},"scopeSpans":[{"scope":{"name":"toolwatch.instrumentation",'
    '"version":"0.1.0"},"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",'
    '"parentSpanId":"eee19b7ec3c1b173","flags":256,"name":"execute_tool get_weather","kind":1,'
    '"startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000","attributes":['
    '{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},'
    '{"key":"gen_ai.tool.call.arguments","value":{"stringValue":"{\\"city\\":\\"Zürich \\u2600\\"}"}},'
    '{"key":"n","value":{"intValue":"-42"}},{"key":"ok","value":{"boolValue":true}},'
    '{"key":"x","value":{"doubleValue":1.5}},{"key":"blob","value":{"bytesValue":"AAEC/w=="}},'
    '{"key":"tags","value":{"arrayValue":{"values":[{"stringValue":"a"},{"intValue":"1"},{}]}}},'
    '{"key":"kv","value":{"kvlistValue":{"values":[{"key":"k","value":{"doubleValue":"NaN"}},{"key":"e"}]}}},'
    '{"key":"empty","value":{}}],"droppedAttributesCount":1,"events":[{"timeUnixNano":"1544712660500000000",'
    '"name":"gen_ai.choice","attributes":[{"key":"index","value":{"intValue":"0"}}]}],"status":{"code":2,'
    '"message":"boom"}},{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b173","name":'
    '"invoke_agent triage","kind":2,"startTimeUnixNano":"1544712659000000000","endTimeUnixNano":'
    '"1544712662000000000","status":{}}]}],"schemaUrl":"https://opentelemetry.io/schemas/1.21.0"}]}\n'
)


def test_extension_is_built_and_loaded() -> None:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        pytest.skip("pure Python forced")
    assert accelerated()["json"] is True
    assert CJSON is not None and CJSON.__file__ is not None and not CJSON.__file__.endswith(".py")


def test_real_sdk_bodies_take_the_fast_path_and_equal_the_reference(real_bodies: list[str]) -> None:
    for text in real_bodies:
        for body in (text, text.encode(), bytearray(text.encode())):
            got = check(body, fast=True)  # type: ignore[arg-type]
            assert got is not None and len(got[0]) == 512 and got[1:] == (0, 0)
        assert got is not None
        spans = got[0]
        assert all(s.resource is spans[0].resource for s in spans)
        assert any(s.name.startswith("execute_tool") for s in spans)
        dispatched = parse_json(text)
        assert canon(dispatched.spans) == canon(spans) and dispatched.rejected == {}


def test_collector_file_line_takes_the_fast_path() -> None:
    got = check(COLLECTOR_LINE.encode(), fast=True)
    assert got is not None and len(got[0]) == 2
    tool = got[0][0]
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"city":"Zürich ☀"}'
    assert tool.attributes["blob"] == "000102ff" and tool.attributes["tags"] == ("a", 1, None)
    assert tool.events is not None and tool.events[0].attributes == {"index": 0}


def test_non_bytes_bodies() -> None:
    body = COLLECTOR_LINE.encode()
    assert c_parse(memoryview(body)) is None  # json.loads raises TypeError: left to the reference
    assert c_parse(12) is None
    assert canon(c_parse(COLLECTOR_LINE)) == canon(c_parse(body))


def test_records_built_through_the_constructor_when_not_plain() -> None:
    """Subclasses with a __post_init__ or a __dict__ are called, not slot-filled."""
    assert CJSON is not None
    seen: list[object] = []

    @dataclasses.dataclass
    class MySpan(Span):
        def __post_init__(self) -> None:
            seen.append(self)

    class MyEvent(SpanEvent):
        pass

    CJSON.init(MySpan, MyEvent)
    try:
        got = c_parse(COLLECTOR_LINE)
    finally:
        CJSON.init(Span, SpanEvent)
    ref = reference(COLLECTOR_LINE)
    assert got is not None and ref is not None
    assert all(type(s) is MySpan for s in got[0]) and seen == got[0]
    assert got[0][0].events is not None and type(got[0][0].events[0]) is MyEvent
    assert span_fields(got[0]) == span_fields(ref[0])


@dataclasses.dataclass(slots=True)
class UpperEvent:  # slotted, exactly SpanEvent's fields, but its constructor does more than assign
    name: str
    time_ns: int
    attributes: dict[str, Any]

    def __init__(self, name: str, time_ns: int, attributes: dict[str, Any]) -> None:
        self.name = name.upper()
        self.time_ns = time_ns
        self.attributes = attributes


def test_hand_written_constructor_is_called() -> None:
    """A slotted dataclass with its own __init__ (kept by @dataclass) is called, not slot-filled."""
    assert CJSON is not None
    CJSON.init(Span, UpperEvent)
    try:
        assert CJSON._fast_records() == (True, False)
        got = c_parse(CASES["events"][0])
    finally:
        CJSON.init(Span, SpanEvent)
    assert got is not None and got[0][0].events is not None
    assert [e.name for e in got[0][0].events] == ["E", ""]


def test_foreign_member_descriptor_is_not_slot_filled() -> None:
    """A field whose descriptor belongs to another class (its offset is past the end of these objects) must not
    be written at that offset: the class is called instead, and its constructor fails as it would in Python."""
    assert CJSON is not None
    CJSON.init(Span, foreign_event_class())
    try:
        assert CJSON._fast_records() == (True, False)
        with pytest.raises(TypeError):
            c_parse(CASES["events"][0])
    finally:
        CJSON.init(Span, SpanEvent)


# ---- hand-made cases --------------------------------------------------------------------------------------------

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"


def doc(span: str = "", *, resource: str = '{"attributes":[{"key":"r","value":{"stringValue":"v"}}]}') -> str:
    """A request with one span whose members are `span` (after the ids)."""
    sep = "," if span else ""
    return (
        f'{{"resourceSpans":[{{"resource":{resource},"scopeSpans":[{{"scope":{{"name":"s"}},"spans":['
        f'{{"traceId":"{TRACE}","spanId":"{SPAN}"{sep}{span}}}]}}]}}]}}'
    )


def attr(value: str) -> str:
    return doc(f'"attributes":[{{"key":"a","value":{value}}}]')


# name -> (body, must the C decoder take it: True, or may it leave it to the reference: False)
CASES: dict[str, tuple[Body, bool]] = {
    "empty request": ("{}", True),
    "null lists": ('{"resourceSpans":[null,{"resource":null,"scopeSpans":null}]}', True),
    "spans null": ('{"resourceSpans":[{"scopeSpans":[null,{"scope":null,"spans":null}]}]}', True),
    "whitespace": (" \t\r\n" + doc().replace(",", " ,\n ").replace(":", "\t:\r") + "\n ", True),
    "unknown keys": (doc('"links":[{"x":[1,{"y":null}]}],"zz":{"a":[true,false,-0.5e-3]}'), True),
    "key order": (
        '{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"n","spanId":"' + SPAN + '","attributes":[{"value":'
        '{"intValue":"3"},"key":"k"}],"traceId":"' + TRACE + '"}],"scope":{"name":"late"}}],'
        '"resource":{"attributes":[{"value":{"stringValue":"x"},"key":"r"}]}}]}',
        True,
    ),
    "proto field names": (
        '{"resource_spans":[{"resource":{"attributes":[{"key":"r","value":{"string_value":"v"}}]},"scope_spans":[{'
        '"scope":{"name":"s"},"spans":[{"trace_id":"'
        + TRACE
        + '","span_id":"'
        + SPAN
        + '","parent_span_id":"'
        + SPAN
        + '","start_time_unix_nano":"5","end_time_unix_nano":6,"events":[{"name":"e","time_unix_nano":"7"}],'
        '"attributes":[{"key":"i","value":{"int_value":"3"}},{"key":"d","value":{"double_value":1.5}},'
        '{"key":"b","value":{"bool_value":true}},{"key":"y","value":{"bytes_value":"QUI="}},'
        '{"key":"a","value":{"array_value":{"values":[{"int_value":1}]}}},'
        '{"key":"k","value":{"kvlist_value":{"values":[{"key":"x","value":{"string_value":"z"}}]}}},'
        '{"key":"t","value":{"int_value":"1","string_value":"s"}}]}]}]}]}',
        True,
    ),
    "proto and JSON name of one field": (doc('"trace_id":"' + TRACE + '"'), False),
    "proto and JSON name of one value": (attr('{"stringValue":"a","string_value":"b"}'), False),
    "ids upper case": (doc().replace(TRACE, TRACE.upper()), True),
    "id all zero": (doc().replace(TRACE, "0" * 32), True),
    "id short": (doc().replace(SPAN, SPAN[:-1]), True),
    "id not hex": (doc().replace(SPAN, "g" + SPAN[1:]), True),
    "id escaped": (doc().replace(SPAN, "\\u0065" + SPAN[1:]), True),
    "id non-ASCII": (doc().replace(SPAN, "é" + SPAN[1:]), True),
    "id number": (doc().replace(f'"{SPAN}"', "5"), True),
    "id null": (doc().replace(f'"{TRACE}"', "null"), True),
    "parent empty": (doc('"parentSpanId":""'), True),
    "parent null": (doc('"parentSpanId":null'), True),
    "parent bad": (doc('"parentSpanId":"00"'), True),
    "status falsy": (doc('"status":[]'), True),
    "status zero": (doc('"status":0.0'), True),
    "status empty string": (doc('"status":""'), True),
    "status false": (doc('"status":false'), True),
    "status truthy": (doc('"status":[0]'), True),
    "status true": (doc('"status":true'), True),
    "status NaN": (doc('"status":NaN'), True),
    "status code name": (doc('"status":{"message":"m","code":"STATUS_CODE_ERROR"}'), True),
    "status code bad": (doc('"status":{"code":"STATUS_CODE_NOPE"}'), True),
    "status message null": (doc('"status":{"message":null}'), True),
    "name number": (doc('"name":5'), True),
    "name number and bad id": (doc('"name":5').replace(SPAN, "x"), True),
    "bad id before bad kind": (doc('"kind":true').replace(SPAN, "x"), True),
    "kind name": (doc('"kind":"SPAN_KIND_CLIENT"'), True),
    "kind float": (doc('"kind":2.0'), True),
    "kind float fraction": (doc('"kind":2.5'), True),
    "kind huge": (doc('"kind":123456789012345678901234567890'), True),
    "kind string huge": (doc('"kind":"-123456789012345678901234567890"'), True),
    "kind bool": (doc('"kind":false'), True),
    "kind int() forms": (doc('"kind":" +1_0 "'), True),
    "kind Arabic digit": (doc('"kind":"\\u0663"'), True),
    "kind digits over the limit": (doc('"kind":"' + "1" * 5000 + '"'), True),
    "times": (doc('"startTimeUnixNano":18446744073709551615,"endTimeUnixNano":"-9223372036854775809"'), True),
    "time negative": (doc('"startTimeUnixNano":"-1","endTimeUnixNano":5'), True),
    "time negative zero": (doc('"startTimeUnixNano":"-0","endTimeUnixNano":-0'), True),
    "time past fixed64": (doc('"endTimeUnixNano":18446744073709551616'), True),
    "time string past fixed64": (doc('"end_time_unix_nano":"118446744073709551615"'), True),
    "time float past fixed64": (doc('"startTimeUnixNano":1.9e19'), True),
    "time negative float": (doc('"startTimeUnixNano":-1e3'), True),
    "time exponent": (doc('"startTimeUnixNano":1.5e18,"endTimeUnixNano":1E+3'), True),
    "time null": (doc('"startTimeUnixNano":null'), True),
    "null members": (
        doc(
            '"name":null,"kind":null,"startTimeUnixNano":null,"endTimeUnixNano":null,'
            '"status":{"code":null,"message":null},"events":[{"name":null,"timeUnixNano":null}]'
        ),
        True,
    ),
    "time infinity": (doc('"endTimeUnixNano":-Infinity'), True),
    "events": (doc('"events":[1,{"name":"e","timeUnixNano":"5","attributes":[{"key":"a","value":{}}]},{}]'), True),
    "events none dict": (doc('"events":[1,null]'), True),
    "events empty": (doc('"events":[]'), True),
    "event time bad": (doc('"events":[{"timeUnixNano":"x"}]'), True),
    "event name number": (doc('"events":[{"name":5}]'), False),
    "attributes not list": (doc('"attributes":{"key":"a"}'), True),
    "attribute shapes": (
        doc('"attributes":[1,{"key":2,"value":{"stringValue":"x"}},{"value":{"stringValue":"y"}},{"key":"k"}]'),
        True,
    ),
    "attribute repeated key": (
        doc(
            '"attributes":[{"key":"a","value":{"stringValue":"1"}},{"key":"b","value":{"boolValue":true}},'
            '{"key":"a","value":{"intValue":"2"}},{"key":"b","value":{}}]'
        ),
        True,
    ),
    "attribute stringValue not first": (attr('{"intValue":"7","stringValue":"s"}'), True),
    "attribute stringValue not str": (attr('{"intValue":"7","stringValue":7}'), True),
    "attribute unknown first key": (attr('{"fooValue":1,"boolValue":true}'), True),
    "attribute unknown members of every type": (
        attr('{"a":{"b":[1]},"c":[{}],"d":"x","e":1.5,"f":true,"g":null,"intValue":"5","h":{},"i":-1}'),
        True,
    ),
    "attribute null members then a value": (attr('{"stringValue":null,"arrayValue":null,"boolValue":false}'), True),
    "attribute two values": (attr('{"boolValue":true,"x":1,"doubleValue":1,"intValue":null}'), True),
    "attribute three values": (attr('{"boolValue":true,"doubleValue":1,"intValue":2}'), True),
    "attribute value given twice after another": (attr('{"boolValue":true,"intValue":1,"intValue":2}'), False),
    "nested unknown members": (
        attr(
            '{"x":[],"arrayValue":{"x":{},"values":[{"y":{"z":1},"intValue":1},{"kvlistValue":{"values":'
            '[{"x":[],"key":"k","value":{"y":null,"stringValue":"v"}}]},"x":"y"}]}}'
        ),
        True,
    ),
    "int value forms": (attr('{"intValue":1e2}'), True),
    "int value fraction": (attr('{"intValue":1.5}'), True),
    "int value bool": (attr('{"intValue":true}'), True),
    "int value string bad": (attr('{"intValue":"1x"}'), True),
    "double value int": (attr('{"doubleValue":12345678901234567890123}'), True),
    "double value overflow": (
        doc(
            '"attributes":[{"key":"a","value":{"doubleValue":1'
            + "0" * 400
            + '}},{"key":"b","value":{"doubleValue":-'
            + str(2**1024 - 2**970)
            + '}},{"key":"c","value":{"doubleValue":'
            + "9" * 640
            + "}}]"
        ),
        True,
    ),
    "double value integer beyond the C digit limit": (attr('{"doubleValue":' + "9" * 641 + "}"), False),
    "double value numeric strings": (
        doc(
            '"attributes":[{"key":"a","value":{"doubleValue":"1.5"}},{"key":"b","value":{"doubleValue":"-0"}},'
            '{"key":"c","value":{"doubleValue":"1e400"}},{"key":"d","value":{"doubleValue":"\\u0031E-2"}},'
            '{"key":"e","value":{"doubleValue":" 1"}},{"key":"f","value":{"doubleValue":"1."}},'
            '{"key":"g","value":{"doubleValue":"\\u0661"}},{"key":"h","value":{"doubleValue":"' + "9" * 700 + '"}}]'
        ),
        True,
    ),
    "double value specials": (
        doc(
            '"attributes":[{"key":"a","value":{"doubleValue":"NaN"}},{"key":"b","value":{"doubleValue":"-Infinity"}}'
            ',{"key":"c","value":{"doubleValue":NaN}},{"key":"d","value":{"doubleValue":-Infinity}},'
            '{"key":"e","value":{"doubleValue":"nan"}},{"key":"f","value":{"doubleValue":-0.0}},'
            '{"key":"g","value":{"doubleValue":true}},{"key":"h","value":{"doubleValue":1e999}}]'
        ),
        True,
    ),
    "bool value not bool": (attr('{"boolValue":1}'), True),
    "bytes value": (attr('{"bytesValue":"QUI="}'), True),
    "bytes value empty": (attr('{"bytesValue":""}'), True),
    "bytes value non-ASCII": (attr('{"bytesValue":"é"}'), True),
    "bytes value bad padding": (attr('{"bytesValue":"QUJD="}'), True),
    "bytes value URL-safe, unpadded": (
        doc(
            '"attributes":[{"key":"a","value":{"bytesValue":"-_8"}},{"key":"b","value":{"bytesValue":"QQ"}},'
            '{"key":"c","value":{"bytesValue":"+_8="}},{"key":"d","value":{"bytesValue":"Q"}},'
            '{"key":"e","value":{"bytesValue":"\\u002d_8="}},{"key":"f","value":{"bytesValue":"QUI=="}}]'
        ),
        True,
    ),
    "array value": (attr('{"arrayValue":{"values":[{"arrayValue":{}},{"kvlistValue":{"values":[]}},1,{}]}}'), True),
    "array value null values": (attr('{"arrayValue":{"values":null}}'), True),
    "array value not object": (attr('{"arrayValue":[1]}'), True),
    "kvlist value": (attr('{"kvlistValue":{"values":[1,{"value":{}},{"key":"k"},{"key":"j","value":3}]}}'), True),
    "kvlist key not str": (attr('{"kvlistValue":{"values":[{"key":1}]}}'), True),
    "attribute key null or missing": (
        doc('"attributes":[{"key":null,"value":{"stringValue":"x"}},{"value":{"intValue":"1"},"future":2}]'),
        True,
    ),
    "attribute key null then empty": (
        doc('"attributes":[{"value":{"stringValue":"x"},"key":null},{"key":"","value":{"boolValue":true}}]'),
        True,
    ),
    "kvlist key null or missing": (
        attr('{"kvlistValue":{"values":[{"key":null,"value":{"stringValue":"v"}},{"value":{}},{},{"key":null}]}}'),
        True,
    ),
    "string escapes": (attr('{"stringValue":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\\u20ac"}'), True),
    "lone surrogate escapes": (attr('{"stringValue":"\\ud800x\\udc00\\ud800\\u0041\\udbff"}'), True),
    "raw surrogate bytes": (attr('{"stringValue":"\xed\xa0\x80"}').encode("latin-1"), True),
    "raw UTF-8": (attr('{"stringValue":"Grüße 😀 \x7f"}'), True),
    "scope name not str": ('{"resourceSpans":[{"scopeSpans":[{"scope":{"name":1},"spans":[]}]}]}', True),
    "deep unknown value": (doc('"x":' + "[" * 40 + "]" * 40), True),
    "too deep": (doc('"x":' + "[" * 70 + "]" * 70), False),
    "deep array value": (attr('{"arrayValue":{"values":[' * 60 + "]}}" * 60), False),
    "duplicate span key": (doc('"name":"a","name":"b"'), False),
    "duplicate first key": (attr('{"intValue":"1","intValue":"2"}'), False),
    "escaped member name": (doc('"n\\u0061me":"x"'), False),
    "big int in unknown key": (doc('"x":' + "1" * 5000), False),
    "not an object": ("[]", False),
    "null": ("null", False),
    "lists of wrong type": ('{"resourceSpans":{}}', False),
    "trailing data": (doc() + " x", False),
    "raw control character": (attr('{"stringValue":"a\x01b"}'), False),
    "bad escape": (attr('{"stringValue":"\\x"}'), False),
    "bad unicode escape": (attr('{"stringValue":"\\u12g4"}'), False),
    "invalid UTF-8": (attr('{"stringValue":"\xc3("}').encode("latin-1"), False),
    "overlong UTF-8": (attr('{"stringValue":"\xc0\xaf"}').encode("latin-1"), False),
    "UTF-8 BOM bytes": (b"\xef\xbb\xbf" + doc().encode(), False),
    "BOM str": ("\ufeff" + doc(), False),
    "UTF-16": (doc().encode("utf-16"), False),
    "UTF-16-LE": (doc().encode("utf-16-le"), False),
    "leading zero": (doc('"kind":01'), False),
    "bare minus": (doc('"kind":-'), False),
    "truncated": (doc()[:-3], False),
    "empty": ("", False),
}


@pytest.mark.parametrize("name", CASES)
def test_cases(name: str) -> None:
    body, fast = CASES[name]
    check(body, fast=fast)
    if isinstance(body, str) and not fast:
        check(body.encode("utf-8", "surrogatepass"))


def test_case_results() -> None:
    """A few cases by value, besides their equality with the reference."""
    ok = c_parse(CASES["ids upper case"][0])
    assert ok is not None and ok[0][0].trace_id == TRACE
    assert c_parse(CASES["id all zero"][0]) == ([], 1, 0)
    assert c_parse(CASES["status falsy"][0]) is not None
    assert c_parse(CASES["status truthy"][0]) == ([], 0, 1)
    assert c_parse(CASES["bad id before bad kind"][0]) == ([], 1, 0)
    assert c_parse(CASES["name number and bad id"][0]) == ([], 0, 1)
    for name in (
        "times",
        "time negative",
        "time past fixed64",
        "time string past fixed64",
        "time float past fixed64",
        "time negative float",
    ):
        assert c_parse(CASES[name][0]) == ([], 0, 1), name  # a time outside 0 .. 2**64 - 1: malformed
    zero = c_parse(CASES["time negative zero"][0])
    assert zero is not None and (zero[0][0].start_ns, zero[0][0].end_ns) == (0, 0)
    nulls = c_parse(CASES["null members"][0])
    assert nulls is not None and nulls[1:] == (0, 0)
    assert (nulls[0][0].name, nulls[0][0].kind, nulls[0][0].start_ns, nulls[0][0].end_ns) == ("", 0, 0, 0)
    assert (nulls[0][0].status_code, nulls[0][0].status_message) == (0, "")
    assert nulls[0][0].events == [SpanEvent("", 0, {})]
    lone = c_parse(CASES["lone surrogate escapes"][0])
    assert lone is not None and lone[0][0].attributes["a"] == "\ud800x\udc00\ud800A\udbff"
    specials = c_parse(CASES["double value specials"][0])
    assert specials is not None and specials[0][0].attributes["a"] is math.nan  # the reference's own object
    events = c_parse(CASES["events none dict"][0])
    assert events is not None and events[0][0].events == []
    late = c_parse(CASES["key order"][0])
    assert late is not None and late[0][0].scope == "late" and late[0][0].resource == {"r": "x"}
    snake = c_parse(CASES["proto field names"][0])
    assert snake is not None and snake[1:] == (0, 0) and snake[0][0].resource == {"r": "v"}
    assert snake[0][0].start_ns == 5 and snake[0][0].end_ns == 6 and snake[0][0].parent_span_id == SPAN
    assert snake[0][0].attributes == {"i": 3, "d": 1.5, "b": True, "y": "4142", "a": (1,), "k": (("x", "z"),)}
    assert c_parse(CASES["attribute unknown members of every type"][0])[0][0].attributes == {"a": 5}  # type: ignore[index]
    assert c_parse(CASES["attribute null members then a value"][0])[0][0].attributes == {"a": False}  # type: ignore[index]
    assert c_parse(CASES["attribute two values"][0])[0][0].attributes == {}  # type: ignore[index]
    assert c_parse(CASES["nested unknown members"][0])[0][0].attributes == {"a": (1, (("k", "v"),))}  # type: ignore[index]
    numerals = c_parse(CASES["double value numeric strings"][0])
    assert numerals is not None
    assert numerals[0][0].attributes == {"a": 1.5, "b": -0.0, "c": math.inf, "d": 0.01, "h": math.inf}
    empty_key = c_parse(CASES["attribute key null or missing"][0])
    assert empty_key is not None and empty_key[0][0].attributes == {"": 1}
    empty_key = c_parse(CASES["attribute key null then empty"][0])
    assert empty_key is not None and empty_key[0][0].attributes == {"": True}
    empty_key = c_parse(CASES["kvlist key null or missing"][0])
    assert empty_key is not None and empty_key[0][0].attributes == {
        "a": (("", "v"), ("", None), ("", None), ("", None))
    }
    kvlist = c_parse(CASES["kvlist value"][0])
    assert kvlist is not None and kvlist[0][0].attributes == {"a": (("", None), ("k", None), ("j", None))}
    unpadded = c_parse(CASES["bytes value URL-safe, unpadded"][0])
    assert unpadded is not None and unpadded[0][0].attributes == {"a": "fbff", "b": "41", "e": "fbff"}
    overflow = c_parse(CASES["double value overflow"][0])
    assert overflow is not None and overflow[0][0].attributes == {"a": math.inf, "b": -math.inf, "c": math.inf}
    for name in (
        "double value integer beyond the C digit limit",
        "too deep",
        "duplicate span key",
        "UTF-8 BOM bytes",
        "UTF-16",
    ):
        assert c_parse(CASES[name][0]) is None, name


# A KeyValue's "key" of each JSON type (None: no "key" member).
KEY_TYPES = ["1", "-2.5e3", "true", "false", "{}", '{"k":"v"}', "[]", '["k"]', '"k"', '""', "null", None]


@pytest.mark.parametrize("key", KEY_TYPES)
def test_a_kvlist_entry_key_follows_the_attribute_key_rule(key: str | None) -> None:
    """An entry of a kvlistValue and a top-level attribute, each a KeyValue with the same key: both decoders keep
    both or leave both out, with the same key (null or missing: "", a str: itself, any other type: left out), and
    the C decoder takes the request instead of leaving it to the reference."""
    kv = "{" + ("" if key is None else f'"key":{key},') + '"value":{"stringValue":"v"}}'
    kvlist = f'{{"key":"a","value":{{"kvlistValue":{{"values":[{kv},{{"key":"b","value":{{"intValue":"2"}}}}]}}}}}}'
    got = check(doc(f'"attributes":[{kvlist},{kv}]'), fast=True)
    assert got is not None
    attrs = dict(got[0][0].attributes)
    entries = attrs.pop("a")
    top = [(k, v) for k, v in attrs.items()]  # the top-level attribute, when kept
    assert entries == (*top, ("b", 2))
    assert (top != []) == (key is None or key == "null" or key.startswith('"'))


def test_base64_agrees_with_the_reference() -> None:
    rng = random.Random(7)
    alphabet = "AQZaz09+/=é-_"
    samples = ["", "=", "QQ==", "QQ=", "QUI=", "QUI==", "QUJD", "QUJD=", "QUJD===", "QR==", "Q===", "QU=I", "-_8"]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(9))) for _ in range(300)]
    samples += [base64.b64encode(rng.randbytes(rng.randrange(7))).decode() for _ in range(50)]
    samples += [base64.urlsafe_b64encode(rng.randbytes(rng.randrange(7))).decode().rstrip("=") for _ in range(50)]
    for sample in samples:
        check(attr(json.dumps({"bytesValue": sample})), fast=True)


# ---- generated requests: protobuf classes through request_to_json ---------------------------------------------

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
KEYS = st.sampled_from(["a", "b", "gen_ai.tool.name", "k é", ""])


def _array(values: list[AnyValue]) -> AnyValue:
    v = AnyValue()
    v.array_value.values.extend(values)
    return v


def _kvlist(kvs: list[KeyValue]) -> AnyValue:
    v = AnyValue()
    v.kvlist_value.values.extend(kvs)
    return v


def key_values(values: st.SearchStrategy[AnyValue]) -> st.SearchStrategy[KeyValue]:
    return st.builds(
        lambda k, v, has: KeyValue(key=k, value=v) if has else KeyValue(key=k), KEYS, values, st.booleans()
    )


def any_values(depth: int = 2) -> st.SearchStrategy[AnyValue]:
    leaves: list[st.SearchStrategy[AnyValue]] = [
        st.builds(lambda v: AnyValue(string_value=v), TEXT),
        st.builds(lambda v: AnyValue(bool_value=v), st.booleans()),
        st.builds(lambda v: AnyValue(int_value=v), st.integers(-(2**63), 2**63 - 1)),
        st.builds(lambda v: AnyValue(double_value=v), st.floats()),
        st.builds(lambda v: AnyValue(bytes_value=v), st.binary(max_size=7)),
        st.just(AnyValue()),
    ]
    if depth:
        inner = any_values(depth - 1)
        leaves.append(st.builds(_array, st.lists(inner, max_size=3)))
        leaves.append(st.builds(_kvlist, st.lists(key_values(inner), max_size=3)))
    return st.one_of(leaves)


ATTRS = st.lists(key_values(any_values()), max_size=5)
I32 = st.integers(-(2**31), 2**31 - 1)
IDS16 = st.one_of(st.binary(min_size=16, max_size=16), st.sampled_from([b"", b"\0" * 16, b"\1" * 15]))
IDS8 = st.one_of(st.binary(min_size=8, max_size=8), st.sampled_from([b"", b"\0" * 8, b"\1" * 9]))
U64 = st.integers(0, 2**64 - 1)


@st.composite
def spans(draw: st.DrawFn) -> trace_pb2.Span:
    s = trace_pb2.Span(
        trace_id=draw(IDS16),
        span_id=draw(IDS8),
        parent_span_id=draw(IDS8),
        name=draw(TEXT),
        kind=cast("trace_pb2.Span.SpanKind.ValueType", draw(st.integers(0, 5) | I32)),
        start_time_unix_nano=draw(U64),
        end_time_unix_nano=draw(U64),
        flags=draw(st.integers(0, 2**32 - 1)),
    )
    s.attributes.extend(draw(ATTRS))
    if draw(st.booleans()):
        s.status.code = cast("trace_pb2.Status.StatusCode.ValueType", draw(st.integers(0, 2) | I32))
        s.status.message = draw(TEXT)
    for _ in range(draw(st.integers(0, 2))):
        e = s.events.add(name=draw(TEXT), time_unix_nano=draw(U64))
        e.attributes.extend(draw(ATTRS))
    if draw(st.booleans()):
        s.links.add(trace_id=draw(IDS16), span_id=draw(IDS8)).attributes.extend(draw(ATTRS))
    return s


@st.composite
def requests(draw: st.DrawFn) -> str:
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rs = req.resource_spans.add(schema_url=draw(TEXT))
        if draw(st.booleans()):
            rs.resource.attributes.extend(draw(ATTRS))
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add()
            if draw(st.booleans()):
                ss.scope.name = draw(TEXT)
                ss.scope.version = draw(TEXT)
            ss.spans.extend(draw(st.lists(spans(), max_size=3)))
    return request_to_json(req)


FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(requests())
def test_generated_requests_equal_the_reference(body: str) -> None:
    check(body, fast=True)
    check(body.encode("utf-8", "surrogatepass"), fast="\\ud" not in body)


# ---- generated AnyValue objects: any members, of any JSON type, in any order -------------------------------------

URL_SAFE = str.maketrans("+/", "-_")
NAMES = {  # the JSON names of each value field: lowerCamelCase, .proto
    "string": ("stringValue", "string_value"),
    "bool": ("boolValue", "bool_value"),
    "int": ("intValue", "int_value"),
    "double": ("doubleValue", "double_value"),
    "bytes": ("bytesValue", "bytes_value"),
    "array": ("arrayValue", "array_value"),
    "kvlist": ("kvlistValue", "kvlist_value"),
}
JSON_ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("abcV_", max_size=5), inner, max_size=3),
    max_leaves=6,
)
NUMERALS = st.from_regex(r"\A-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?\Z")
ODD_DOUBLES = [" 1", "1 ", "1.", ".5", "+1", "1_0", "0x1", "01", "1e", "inf", "nan", "-NaN", "\u0661", "NaN"]
# integer literals about the double range's end: finite, ±inf, and 2**1024 - 2**970 (the first to round to inf)
BIG_INTEGERS = st.builds(
    lambda n, neg: -n if neg else n,
    st.integers(10**305, 10**312) | st.sampled_from([2**1024 - 2**970 - 1, 2**1024 - 2**970, 10**639]),
    st.booleans(),
)
B64 = st.builds(
    lambda b, url, pad: base64.b64encode(b).decode().translate(URL_SAFE if url else {}).rstrip("" if pad else "="),
    st.binary(max_size=7),
    st.booleans(),
    st.booleans(),
)
RAW: dict[str, st.SearchStrategy[Any]] = {
    "string": TEXT,
    "bool": st.booleans(),
    "int": st.integers(-(2**64), 2**64) | st.integers(-(2**64), 2**64).map(str),
    "double": st.floats() | st.floats().map(repr) | NUMERALS | st.sampled_from(ODD_DOUBLES) | BIG_INTEGERS,
    "bytes": B64 | st.text("AQZaz09+/-_=é", max_size=9),
}


def any_value_objects(depth: int = 2) -> st.SearchStrategy[dict[str, Any]]:
    """AnyValue objects with 0 to 4 members: value fields under either name (of the right type, another or null),
    unknown members of any JSON type; the values of arrays and kvlists of the same kind one level down."""
    raw = dict(RAW)
    if depth:
        inner = any_value_objects(depth - 1)
        raw["array"] = st.fixed_dictionaries({"values": st.lists(inner, max_size=3) | st.none()})
        # the key left out or null: the empty key, as "" (the protobuf JSON mapping)
        pair = st.fixed_dictionaries({}, optional={"key": KEYS | st.none(), "value": inner, "x": JSON_ANY})
        pairs = st.lists(pair, max_size=3) | st.none()
        raw["kvlist"] = st.fixed_dictionaries({"values": pairs}, optional={"x": JSON_ANY})
    members = [
        st.tuples(st.sampled_from(NAMES[kind]), raw.get(kind, JSON_ANY) | JSON_ANY | st.none()) for kind in NAMES
    ]
    unknown = st.tuples(st.sampled_from(["future", "x", "Value", "stringvalue", "values", "key"]), JSON_ANY)
    return st.lists(st.one_of(*members, unknown, unknown), max_size=4).map(dict)


def both_names(x: Any) -> bool:
    """Whether an object in x has a value field under both its names (which the C decoder leaves to the reference)."""
    if isinstance(x, list):
        return any(both_names(v) for v in x)
    if isinstance(x, dict):
        return any(set(n) <= x.keys() for n in NAMES.values()) or any(both_names(v) for v in x.values())
    return False


ATTRIBUTE_KEYS = st.sampled_from(["named", "named", "named", "null", "missing"])


@FAST
@given(st.lists(st.tuples(any_value_objects(), ATTRIBUTE_KEYS), min_size=1, max_size=4))
def test_generated_any_values_equal_the_reference(values: list[tuple[dict[str, Any], str]]) -> None:
    """Attributes of generated AnyValue objects, under a key, a null key or none (the empty key)."""
    kvs = [
        {"value": v} | ({"key": f"k{i}"} if how == "named" else {"key": None} if how == "null" else {})
        for i, (v, how) in enumerate(values)
    ]
    attributes = ",".join(json.dumps(kv, ensure_ascii=False) for kv in kvs)
    check(doc(f'"attributes":[{attributes}]'), fast=not both_names([v for v, _ in values]))


# ---- JSON-level variants of the same requests ------------------------------------------------------------------

VALUE_NAMES = ["stringValue", "boolValue", "intValue", "doubleValue", "bytesValue", "arrayValue", "kvlistValue"]
KIND_NAMES = ["SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT"]
CODE_NAMES = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]
ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 2**70, 1.0, -0.0, 2.5, math.nan, math.inf, "", "7", " 8 ", "1_0", "x", "NaN",
    "Infinity", "SPAN_KIND_SERVER", "STATUS_CODE_OK", "QUI=", "00" * 8, "ab" * 16, [], [1], {}, {"stringValue": "s"},
    {"intValue": "3", "stringValue": "t"}, [{"key": "k", "value": {"boolValue": True}}],
]  # fmt: skip


class Writer:
    """json.dumps with the freedoms JSON gives: any key order, unknown keys, whitespace, escapes, number spellings,
    enum names; and, when `wild`, wrong types, odd ids and duplicate keys."""

    def __init__(self, rng: random.Random, *, wild: bool, dups: float = 0.03, names: float = 0.03) -> None:
        self.rng = rng
        self.wild = wild
        self.dups = dups  # chance of a duplicate key in an object
        self.names = names  # chance of escapes in a member name

    def ws(self) -> str:
        return "".join(self.rng.choice(" \t\r\n") for _ in range(self.rng.choice([0, 0, 0, 1, 2])))

    def string(self, s: str) -> str:
        out = []
        for ch in s:
            r = self.rng.random()
            if ch in '"\\' or ch < " ":
                out.append(json.dumps(ch)[1:-1])
            elif r < 0.1:
                out.append(json.dumps(ch, ensure_ascii=True)[1:-1] if ord(ch) > 127 else f"\\u{ord(ch):04x}")
            elif r < 0.12 and ch == "/":
                out.append("\\/")
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'

    def value(self, key: str, v: Any) -> str:
        rng = self.rng
        if self.wild and rng.random() < 0.03:
            v = rng.choice(ODD_VALUES)
        elif key == "doubleValue" and isinstance(v, float) and math.isfinite(v) and rng.random() < 0.3:
            v = repr(v)  # a JSON numeral in a string, as the protobuf JSON mapping accepts
        elif key == "bytesValue" and isinstance(v, str) and rng.random() < 0.5:
            v = rng.choice([v.translate(URL_SAFE), v.rstrip("="), v.translate(URL_SAFE).rstrip("=")])
        elif key == "kind" and isinstance(v, int) and 0 <= v < len(KIND_NAMES) and rng.random() < 0.5:
            v = KIND_NAMES[v]
        elif key == "code" and isinstance(v, int) and 0 <= v < len(CODE_NAMES) and rng.random() < 0.5:
            v = CODE_NAMES[v]
        elif key.endswith("UnixNano") or key == "intValue":
            if isinstance(v, str) and v.lstrip("-").isdecimal() and v.isascii() and rng.random() < 0.5:
                v = int(v) if rng.random() < 0.8 else float(int(v))
        elif key.endswith("Id") and isinstance(v, str) and rng.random() < 0.3:
            v = rng.choice([v.upper(), v[:-1], "0" * len(v), v + "0", "z" + v[1:]]) if self.wild else v.upper()
        return self.dump(v)

    def dump(self, v: Any) -> str:
        ws = self.ws
        if isinstance(v, dict):
            items = list(v.items())
            self.rng.shuffle(items)
            if self.rng.random() < 0.1:
                items.insert(self.rng.randrange(len(items) + 1), (f"x_{self.rng.randrange(9)}", self.odd()))
            if len(items) == 1 and items[0][0] in VALUE_NAMES:  # an AnyValue: unknown and null members around
                for _ in range(self.rng.choice([0, 1, 2])):
                    member = (f"x_{self.rng.randrange(9)}", self.odd())
                    if self.rng.random() < 0.3:
                        member = (self.rng.choice([n for n in VALUE_NAMES if n != items[0][0]]), None)
                    elif self.wild and self.rng.random() < 0.1:  # a second value set: left out
                        member = (self.rng.choice([n for n in VALUE_NAMES if n != items[0][0]]), self.odd())
                    if member[0] not in dict(items):
                        items.insert(self.rng.randrange(len(items) + 1), member)
            if self.wild and items and self.rng.random() < self.dups:
                items.append(self.rng.choice(items))
            parts = [ws() + self.name(k) + ws() + ":" + ws() + self.value(k, x) + ws() for k, x in items]
            return "{" + ",".join(parts) + ws() + "}"
        if isinstance(v, list):
            return "[" + ",".join(ws() + self.dump(x) + ws() for x in v) + ws() + "]"
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, float) and not math.isfinite(v):
            return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        return json.dumps(v)

    def name(self, k: str) -> str:
        return self.string(k) if self.wild and self.rng.random() < self.names else json.dumps(k)

    def odd(self) -> Any:
        v = self.rng.choice(ODD_VALUES)
        return v if self.wild or not isinstance(v, float) or math.isfinite(v) else 0


def variant(text: str, seed: int, *, wild: bool, dups: float = 0.03, names: float = 0.03) -> str:
    rng = random.Random(seed)
    return Writer(rng, wild=wild, dups=dups, names=names).dump(json.loads(text)) + Writer(rng, wild=False).ws()


@FAST
@given(requests(), st.integers(0, 2**32))
def test_json_variants_take_the_fast_path(body: str, seed: int) -> None:
    """Key order, unknown keys, whitespace, escapes in values, numbers and enums spelled otherwise: still C."""
    check(variant(body, seed, wild=False), fast=True)


@FAST
@given(requests(), st.integers(0, 2**32))
def test_wild_json_variants_are_rejected_or_equal(body: str, seed: int) -> None:
    """Wrong types anywhere, odd ids, duplicate keys: C equals the reference or leaves it to it."""
    check(variant(body, seed, wild=True))


def test_wild_variants_of_a_real_body(small_bodies: list[str]) -> None:
    fast = 0
    for seed in range(60):
        fast += check(variant(small_bodies[seed % len(small_bodies)], seed, wild=True, dups=0, names=0)) is not None
    assert fast >= 50  # wrong types and odd ids are decided in C


# ---- mutation fuzz ----------------------------------------------------------------------------------------------


# Control, structural, number and literal bytes of JSON, and UTF-8 lead and continuation bytes.
SET_TO = b'\x00\x1f "\\/:,[]{}0-9eE.+ntfuINaxA\x7f\x80\xc3\xed\xf0\xff'
INSERTS = st.sampled_from([b'"', b"\\", b"\\u", b",", b"1", b"{}", b"[", b'"x":1,', b"\xc3\xa9"])


@FAST
@given(st.data())
def test_mutated_real_bodies_are_rejected_or_equal(small_bodies: list[str], data: st.DataObject) -> None:
    base = data.draw(st.sampled_from([COLLECTOR_LINE, *small_bodies]))
    check(data.draw(mutated(base.encode(), SET_TO, INSERTS)))


@FAST
@given(st.data())
def test_mutated_generated_bodies_are_rejected_or_equal(data: st.DataObject) -> None:
    base = data.draw(requests())
    check(data.draw(mutated(base.encode("utf-8", "surrogatepass"), SET_TO, INSERTS)))


def test_every_truncation_and_byte_of_a_small_body() -> None:
    body = COLLECTOR_LINE.encode()
    for cut in range(len(body)):
        assert c_parse(body[:cut]) is None or body[cut:].strip() == b""
    for i in range(0, len(body), 3):
        for b in (0x00, 0x22, 0x5C, 0x7D, 0x31, 0xFF):
            check(body[:i] + bytes([b]) + body[i + 1 :])


# ---- memory -----------------------------------------------------------------------------------------------------


def test_no_leak_on_valid_bodies(small_bodies: list[str]) -> None:
    bodies: list[Any] = [*small_bodies, COLLECTOR_LINE, COLLECTOR_LINE.encode()]
    bodies += [body for body, fast in CASES.values() if fast]
    assert all(c_parse(b) is not None for b in bodies)
    assert blocks_growth(c_parse, bodies, 100) < 100  # one leaked object per parse would be thousands


def test_no_leak_on_rejected_bodies() -> None:
    body = COLLECTOR_LINE.encode()
    bodies: list[Any] = [body[:cut] for cut in range(0, len(body) - 2, 5)]
    bodies += [body for body, fast in CASES.values() if not fast]
    assert all(c_parse(b) is None for b in bodies)
    assert blocks_growth(c_parse, bodies, 30) < 100


def test_no_reference_leaks() -> None:
    body = COLLECTOR_LINE.encode()
    before = [sys.getrefcount(x) for x in (body, Span, SpanEvent, math.nan, json.decoder.NaN)]  # type: ignore[attr-defined]
    for _ in range(100):
        c_parse(body)
        c_parse(CASES["double value specials"][0])
        c_parse(body[:-9])
    after = [sys.getrefcount(x) for x in (body, Span, SpanEvent, math.nan, json.decoder.NaN)]  # type: ignore[attr-defined]
    assert after == before


@pytest.fixture(autouse=True)
def _records_registered() -> Iterator[None]:
    yield
    assert CJSON is not None
    CJSON.init(Span, SpanEvent)
