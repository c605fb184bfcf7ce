"""The AnyValue of an attribute in OTLP JSON, by value, in both decoders: the reference `parse_json_py` and the C one
(called directly, so that a body it leaves to the reference cannot hide a difference)."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from monitor.otlp import request_to_json
from monitor.otlp._accel import CJSON
from monitor.otlp._json import parse_json_py
from monitor.otlp._protobuf import parse_protobuf_py

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"
ABSENT = object()  # the attribute is left out


def body(value: str) -> str:
    """A request with one span whose one attribute "a" has `value` (JSON text) as its value."""
    return (
        '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + TRACE + '","spanId":"' + SPAN + '",'
        '"attributes":[{"key":"a","value":' + value + "}]}]}]}]}"
    )


def py_attributes(text: str) -> dict[str, Any]:
    out = parse_json_py(text)
    assert out.rejected == {}
    return out.spans[0].attributes


def c_attributes(text: str) -> dict[str, Any]:
    if CJSON is None:
        pytest.skip("the C JSON decoder is not built or is disabled")
    got = CJSON.parse(text)
    assert got is not None, "the C decoder left the body to the reference"
    assert got[1:] == (0, 0)
    attributes: dict[str, Any] = got[0][0].attributes
    return attributes


DECODERS = [pytest.param(py_attributes, id="py"), pytest.param(c_attributes, id="c")]


def same(got: Any, want: Any) -> bool:
    """Equal, with the types (True is not 1, 1.0 is not 1) and the sign of a zero."""
    if isinstance(want, float):
        return isinstance(got, float) and struct.pack("<d", got) == struct.pack("<d", want)
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == len(want) and all(map(same, got, want))
    return type(got) is type(want) and bool(got == want)


# An AnyValue's value member wherever it stands among its members; unknown members of any JSON type skipped;
# a null member unset (the protobuf JSON mapping: null is the default); two value members set: left out.
MEMBERS: list[tuple[str, Any]] = [
    ('{"future":{"a":[1,2]},"intValue":"5"}', 5),
    ('{"future":[1,{"b":null}],"boolValue":true}', True),
    ('{"future":"x","intValue":"5"}', 5),
    ('{"future":1.5,"doubleValue":2}', 2.0),
    ('{"future":false,"bytesValue":"AQI="}', "0102"),
    ('{"future":null,"stringValue":"s"}', "s"),
    ('{"future":-0,"stringValue":"s","later":{"x":[]}}', "s"),
    ('{"intValue":"5","future":{"a":1}}', 5),
    ('{"a":1,"b":[],"c":{},"d":"","e":null,"f":true,"int_value":7,"g":NaN}', 7),
    ('{"future":{},"arrayValue":{"values":[{"future":[],"intValue":1},{"x":{"y":{}},"stringValue":"z"}]}}', (1, "z")),
    (
        '{"kvlistValue":{"future":1,"values":[{"key":"k","future":{},"value":{"future":"x","stringValue":"v"}}]}}',
        (("k", "v"),),
    ),
    ('{"future":1}', ABSENT),
    ("{}", ABSENT),
    ('{"stringValue":null,"intValue":"3"}', 3),
    ('{"intValue":null,"stringValue":"a"}', "a"),
    ('{"arrayValue":null,"boolValue":false}', False),
    ('{"boolValue":false,"kvlistValue":null,"doubleValue":null}', False),
    ('{"intValue":null}', ABSENT),
    ('{"stringValue":"a","intValue":5}', ABSENT),
    ('{"intValue":5,"stringValue":"a"}', ABSENT),
    ('{"intValue":"x","stringValue":"a"}', ABSENT),  # a bad value is still a value set
    ('{"string_value":"a","int_value":5}', ABSENT),
    ('{"future":0,"boolValue":true,"arrayValue":{"values":[]},"stringValue":"a"}', ABSENT),
    ('{"arrayValue":{"values":[{"boolValue":true,"doubleValue":1},{"future":1,"boolValue":true}]}}', (None, True)),
    ('{"arrayValue":{"values":null}}', ()),
    ('{"kvlistValue":{"values":null,"future":1}}', ()),
    ('{"arrayValue":{"values":[{"kvlistValue":{"values":null}}]}}', ((),)),
    ('{"arrayValue":{}}', ()),
    ('{"arrayValue":{"values":{}}}', ABSENT),
]

# A double as a number or as a string: a JSON numeral (parsed exactly), "NaN", "Infinity" or "-Infinity".
DOUBLES: list[tuple[str, Any]] = [
    ('"1.5"', 1.5),
    ('"-2.5e-3"', -0.0025),
    ('"1E3"', 1000.0),
    ('"0"', 0.0),
    ('"-0"', -0.0),
    ('"0.1"', 0.1),
    ('"12345678901234567890123"', 12345678901234567890123.0),
    ('"2.2250738585072011e-308"', 2.2250738585072011e-308),
    ('"1e400"', math.inf),
    ('"-1e400"', -math.inf),
    ('"\\u0031.5"', 1.5),
    ('"Infinity"', math.inf),
    ('"-Infinity"', -math.inf),
    ("1.5", 1.5),
    ("-7", -7.0),
    ("-0", 0.0),  # float(int): an integer literal has no negative zero
    ("1e400", math.inf),
    # an integer literal beyond the double range is ±inf, as the same number as a string or in exponent form
    ("1" + "0" * 400, math.inf),
    ("-" + "9" * 320, -math.inf),
    ("1" + "0" * 308, 1e308),
    (str(2**1024), math.inf),
    (str(2**1024 - 2**970), math.inf),  # rounds up to 2**1024
    (str(2**1024 - 2**970 - 1), 1.7976931348623157e308),  # the largest double
    ("-" + str(2**1024 - 2**970), -math.inf),
] + [
    (json.dumps(text), ABSENT)
    for text in [" 1.5", "1.5 ", "+1", ".5", "5.", "1_0", "0x10", "01", "1e", "1e+", "-", "", "inf", "nan", "NAN"]
    + ["infinity", "-NaN", "1.5x", "\u0661", "\uff11", "1,5", "1.5\n"]
]

# Bytes as base64: the standard or the URL-safe alphabet (one of them), with or without its padding.
BYTES: list[tuple[str, Any]] = [
    ("AQI=", "0102"),
    ("AQI", "0102"),
    ("QQ==", "41"),
    ("QQ", "41"),
    ("QUJD", "414243"),
    ("", ""),
    ("+/8=", "fbff"),
    ("-_8=", "fbff"),
    ("-_8", "fbff"),
    ("+/+/", "fbffbf"),
    ("-_-_", "fbffbf"),
    ("QR==", "41"),  # unused low bits ignored, as by the reference's base64 module
    ("Q", ABSENT),
    ("QUJDR", ABSENT),
    ("QQ=", ABSENT),
    ("QUJD=", ABSENT),
    ("QQ===", ABSENT),
    ("=", ABSENT),
    ("====", ABSENT),
    ("Q=Q=", ABSENT),
    ("+_8=", ABSENT),
    ("-/8", ABSENT),
    ("QQ ", ABSENT),
    ("QQ\n", ABSENT),
    ("Q.==", ABSENT),
    ("é", ABSENT),
]


def check(attributes: Callable[[str], dict[str, Any]], value: str, want: Any) -> None:
    got = attributes(body(value)).get("a", ABSENT)
    assert got is ABSENT if want is ABSENT else same(got, want), (value, got, want)


@pytest.mark.parametrize("attributes", DECODERS)
@pytest.mark.parametrize(("value", "want"), MEMBERS)
def test_value_member_found_among_unknown_and_null_members(
    attributes: Callable[[str], dict[str, Any]], value: str, want: Any
) -> None:
    check(attributes, value, want)


@pytest.mark.parametrize("attributes", DECODERS)
@pytest.mark.parametrize(("raw", "want"), DOUBLES)
def test_double_value_as_number_or_numeric_string(
    attributes: Callable[[str], dict[str, Any]], raw: str, want: Any
) -> None:
    check(attributes, '{"doubleValue":' + raw + "}", want)


@pytest.mark.parametrize("attributes", DECODERS)
@pytest.mark.parametrize(("raw", "want"), BYTES)
def test_bytes_value_standard_or_url_safe_base64_padded_or_not(
    attributes: Callable[[str], dict[str, Any]], raw: str, want: Any
) -> None:
    check(attributes, '{"bytesValue":' + json.dumps(raw) + "}", want)


@pytest.mark.parametrize("attributes", DECODERS)
def test_double_nan_string(attributes: Callable[[str], dict[str, Any]]) -> None:
    got = attributes(body('{"future":"NaN","doubleValue":"NaN"}'))["a"]
    assert isinstance(got, float) and math.isnan(got)


def attributes_body(kvs: str) -> str:
    """A request with one span whose attributes are the KeyValue objects `kvs` (JSON text)."""
    return (
        '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + TRACE + '","spanId":"' + SPAN + '",'
        '"attributes":[' + kvs + "]}]}]}]}"
    )


# A KeyValue's key: null or left out is the field's default, "" (the protobuf JSON mapping; MessageToDict leaves an
# empty key out), in an attribute and in a kvlistValue entry alike. A key of another type is no key.
KEYS: list[tuple[str, dict[str, Any]]] = [
    ('{"key":null,"value":{"stringValue":"x"}}', {"": "x"}),
    ('{"value":{"stringValue":"x"}}', {"": "x"}),
    ('{"value":{"stringValue":"x"},"key":null}', {"": "x"}),
    ('{"future":1,"value":{"intValue":"3"}}', {"": 3}),
    ('{"key":null}', {}),  # no value: no attribute
    ('{"key":""}', {}),
    ('{"key":"","value":{"boolValue":true}}', {"": True}),
    ('{"key":5,"value":{"stringValue":"x"}}', {}),
    ('{"key":null,"value":{"stringValue":"x"}},{"key":"","value":{"stringValue":"y"}}', {"": "y"}),
    (
        '{"key":"k","value":{"kvlistValue":{"values":[{"key":null,"value":{"stringValue":"x"}},'
        '{"value":{"intValue":"1"}},{"key":null},{},{"key":"","value":{"boolValue":false}}]}}}',
        {"k": (("", "x"), ("", 1), ("", None), ("", None), ("", False))},
    ),
    (
        '{"key":"k","value":{"arrayValue":{"values":[{"kvlistValue":{"values":[{"key":null,"value":{}}]}}]}}}',
        {"k": ((("", None),),)},
    ),
]


@pytest.mark.parametrize("attributes", DECODERS)
@pytest.mark.parametrize(("kvs", "want"), KEYS)
def test_key_null_or_missing_is_the_empty_key(
    attributes: Callable[[str], dict[str, Any]], kvs: str, want: dict[str, Any]
) -> None:
    got = attributes(attributes_body(kvs))
    assert got.keys() == want.keys() and all(same(got[k], v) for k, v in want.items()), (kvs, got, want)


@pytest.mark.parametrize("attributes", DECODERS)
def test_empty_key_as_message_to_dict_writes_it_decodes_as_in_protobuf(
    attributes: Callable[[str], dict[str, Any]],
) -> None:
    req = ExportTraceServiceRequest()
    span = (
        req.resource_spans.add().scope_spans.add().spans.add(trace_id=bytes.fromhex(TRACE), span_id=bytes.fromhex(SPAN))
    )
    span.attributes.add(key="", value=AnyValue(string_value="x"))
    span.attributes.add(key="k").value.kvlist_value.values.add(key="", value=AnyValue(int_value=3))
    text = request_to_json(req)
    assert '"key":""' not in text  # the empty key is left out
    want = parse_protobuf_py(req.SerializeToString()).spans[0].attributes
    assert want == {"": "x", "k": (("", 3),)}
    assert attributes(text) == want
