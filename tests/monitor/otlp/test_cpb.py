"""The C protobuf decoder (_cpb) against the reference `parse_protobuf_py`: equal results or None, never a crash."""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Iterator
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2

from monitor.otlp import Span, SpanEvent, accelerated, parse_protobuf
from monitor.otlp._accel import CPB, PURE_PYTHON_ENV
from monitor.otlp._protobuf import parse_protobuf_py
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

pytestmark = pytest.mark.skipif(CPB is None, reason="the C protobuf decoder is not built or is disabled")

Result = tuple[list[Span], int]

# ---- comparison -------------------------------------------------------------------------------------------------


def reference(body: bytes) -> Result | None:
    try:
        d = parse_protobuf_py(body)
    except DecodeError:
        return None
    return d.spans, d.rejected_count


def c_parse(body: bytes | bytearray | memoryview) -> Result | None:
    assert CPB is not None
    got: Result | None = CPB.parse(body)
    return got


def check(body: bytes, *, fast: bool = False) -> Result | None:
    """C gives None or exactly the reference's result; with `fast`, it must not give None."""
    got = c_parse(body)
    check_result(got, lambda: reference(body), fast=fast)
    return got


# ---- real bodies ------------------------------------------------------------------------------------------------


def _real_bodies(n_spans: int, batch: int) -> list[bytes]:
    spans = sdk_spans("cpb-test", 3, n_spans)
    return [bytes(encode_spans(spans[i : i + batch]).SerializeToString()) for i in range(0, len(spans), batch)]


@pytest.fixture(scope="module")
def real_bodies() -> list[bytes]:
    return _real_bodies(1024, 512)


@pytest.fixture(scope="module")
def small_bodies() -> list[bytes]:
    return _real_bodies(24, 6)


def test_extension_is_built_and_loaded() -> None:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        pytest.skip("pure Python forced")
    assert accelerated()["protobuf"] is True
    assert CPB is not None and CPB.__file__ is not None and not CPB.__file__.endswith(".py")


def test_real_sdk_bodies_take_the_fast_path_and_equal_the_reference(real_bodies: list[bytes]) -> None:
    for body in real_bodies:
        got = check(body, fast=True)
        assert got is not None and len(got[0]) == 512 and got[1] == 0
        spans = got[0]
        assert all(s.resource is spans[0].resource for s in spans)  # one dict per ResourceSpans
        assert any(s.name.startswith("execute_tool") for s in spans)
        dispatched = parse_protobuf(body)
        assert canon(dispatched.spans) == canon(spans) and dispatched.rejected == {}


def test_buffer_types(small_bodies: list[bytes]) -> None:
    body = small_bodies[0]
    ref = canon(c_parse(body))
    assert canon(c_parse(bytearray(body))) == ref
    assert canon(c_parse(memoryview(body))) == ref
    assert canon(c_parse(memoryview(b"xx" + body)[2:])) == ref
    assert CPB is not None
    assert CPB.parse("not bytes") is None  # left to the reference, which raises DecodeError
    with pytest.raises(DecodeError):
        parse_protobuf("not bytes")  # type: ignore[arg-type]


CONSTRUCTED: list[object] = []


@dataclasses.dataclass
class PostInitSpan(Span):  # has a __dict__ and a __post_init__
    def __post_init__(self) -> None:
        CONSTRUCTED.append(self)


@dataclasses.dataclass(slots=True)
class ConvertingSpan(Span):  # slotted, but its constructor does more than assign
    def __init__(self, *args: Any) -> None:
        CONSTRUCTED.append(self)
        for f, v in zip(dataclasses.fields(Span), args, strict=True):
            object.__setattr__(self, f.name, list(v) if f.name == "events" and v is not None else v)


class DictEvent(SpanEvent):  # has a __dict__
    pass


@pytest.mark.parametrize("span_type", [PostInitSpan, ConvertingSpan])
def test_records_built_through_the_constructor_when_not_plain(small_bodies: list[bytes], span_type: type) -> None:
    """Classes that are not plain slotted dataclasses are called, not slot-filled: same fields, their type."""
    assert CPB is not None
    body = small_bodies[0] + CASES["events"][0]  # concatenated requests are one request
    CPB.init(span_type, DictEvent)
    CONSTRUCTED.clear()  # init may try the constructor
    try:
        got = c_parse(body)
    finally:
        CPB.init(Span, SpanEvent)
    ref = reference(body)
    assert got is not None and ref is not None
    assert all(type(s) is span_type for s in got[0]) and CONSTRUCTED == got[0]
    assert got[0][-1].events and all(type(e) is DictEvent for e in got[0][-1].events)
    assert span_fields(got[0]) == span_fields(ref[0])


def test_foreign_member_descriptor_is_not_slot_filled() -> None:
    """A field whose descriptor belongs to another class (its offset is past the end of these objects) must not
    be written at that offset: the class is called instead, and its constructor fails as it would in Python."""
    assert CPB is not None
    CPB.init(Span, foreign_event_class())
    try:
        with pytest.raises(TypeError):
            c_parse(CASES["events"][0])
    finally:
        CPB.init(Span, SpanEvent)


# ---- the schema the decoder knows ----------------------------------------------------------------------------

# message -> {field number: protobuf field type (FieldDescriptor.TYPE_*)}, as _cpb.c reads or checks them. A new
# field in opentelemetry-proto fails this test: the C decoder must learn it (upb checks its contents, e.g. UTF-8).
KNOWN: dict[str, dict[int, int]] = {
    "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest": {1: 11},
    "opentelemetry.proto.trace.v1.ResourceSpans": {1: 11, 2: 11, 3: 9},
    "opentelemetry.proto.resource.v1.Resource": {1: 11, 2: 13, 3: 11},
    "opentelemetry.proto.common.v1.EntityRef": {1: 9, 2: 9, 3: 9, 4: 9},
    "opentelemetry.proto.trace.v1.ScopeSpans": {1: 11, 2: 11, 3: 9},
    "opentelemetry.proto.common.v1.InstrumentationScope": {1: 9, 2: 9, 3: 11, 4: 13},
    "opentelemetry.proto.trace.v1.Span": dict(
        enumerate([12, 12, 9, 12, 9, 14, 6, 6, 11, 13, 11, 13, 11, 13, 11, 7], 1)
    ),
    "opentelemetry.proto.trace.v1.Span.Event": {1: 6, 2: 9, 3: 11, 4: 13},
    "opentelemetry.proto.trace.v1.Span.Link": {1: 12, 2: 12, 3: 9, 4: 11, 5: 13, 6: 7},
    "opentelemetry.proto.trace.v1.Status": {2: 9, 3: 14},
    "opentelemetry.proto.common.v1.KeyValue": {1: 9, 2: 11, 3: 5},
    "opentelemetry.proto.common.v1.AnyValue": {1: 9, 2: 8, 3: 3, 4: 1, 5: 11, 6: 11, 7: 12, 8: 5},
    "opentelemetry.proto.common.v1.ArrayValue": {1: 11},
    "opentelemetry.proto.common.v1.KeyValueList": {1: 11},
}


def test_decoder_knows_every_field_of_the_installed_schema() -> None:
    seen: dict[str, dict[int, int]] = {}
    todo = [ExportTraceServiceRequest.DESCRIPTOR]
    while todo:
        d = todo.pop()
        if d.full_name in seen:
            continue
        seen[d.full_name] = {f.number: f.type for f in d.fields}
        todo.extend(f.message_type for f in d.fields if f.message_type is not None)
    assert seen == KNOWN


# ---- hand-made wire bytes ----------------------------------------------------------------------------------------


def varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(num: int, wt: int) -> bytes:
    return varint(num << 3 | wt)


def ld(num: int, payload: bytes) -> bytes:
    return tag(num, 2) + varint(len(payload)) + payload


def vi(num: int, v: int) -> bytes:
    return tag(num, 0) + varint(v)


def f64(num: int, v: int) -> bytes:
    return tag(num, 1) + struct.pack("<Q", v)


TID = ld(1, bytes(range(1, 17)))
SID = ld(2, bytes(range(1, 9)))


def request(span_fields: bytes, *, scope: bytes = b"", resource: bytes = b"") -> bytes:
    ss = ld(2, TID + SID + span_fields)
    if scope:
        ss = ld(1, scope) + ss
    rs = ld(2, ss)
    if resource:
        rs = ld(1, resource) + rs
    return ld(1, rs)


def attr(key: bytes, anyvalue: bytes) -> bytes:
    return ld(9, ld(1, key) + ld(2, anyvalue))


def nested_array(depth: int) -> bytes:
    v = vi(3, 7)
    for _ in range(depth):
        v = ld(5, ld(1, v))
    return v


def nested_kvlist(depth: int) -> bytes:
    v = vi(3, 7)
    for _ in range(depth):
        v = ld(6, ld(1, ld(1, b"k") + ld(2, v)))
    return v


GROUP = tag(99, 3) + tag(99, 4)
UNKNOWN = vi(99, 5) + f64(98, 1) + ld(97, b"\xff\xfe") + tag(96, 5) + b"\0\0\0\0"

# (body, C must decode it) - each compared with the reference by `check`.
CASES: dict[str, tuple[bytes, bool]] = {
    "bool encoded as 2": (request(attr(b"b", vi(2, 2))), True),
    "bool as a 64-bit varint": (request(attr(b"b", vi(2, 1 << 63))), True),
    "negative int64 and kind": (request(attr(b"i", vi(3, -5)) + vi(6, -3)), True),
    "kind beyond int32": (request(vi(6, (1 << 40) + 7)), True),
    "unknown enum values": (request(vi(6, 99) + ld(15, vi(3, -1) + ld(2, b"m"))), True),
    "nan double": (request(attr(b"d", f64(4, 0x7FF8000000000001))), True),
    "negative zero double": (request(attr(b"d", f64(4, 1 << 63))), True),
    "empty string value kept": (request(attr(b"s", ld(1, b""))), True),
    "value unset is skipped": (request(attr(b"k", vi(3, 1)) + attr(b"k", b"")), True),
    "key without value field": (request(ld(9, ld(1, b"k")) + attr(b"", ld(1, b"v"))), True),
    "duplicate keys: last wins, first position": (
        request(attr(b"a", vi(3, 1)) + attr(b"b", vi(3, 2)) + attr(b"a", ld(1, b"x"))),
        True,
    ),
    "bytes value as hex": (request(attr(b"y", ld(7, b"\x00\xab\xff"))), True),
    "array and kvlist with unset members": (
        request(attr(b"a", ld(5, ld(1, b"") + ld(1, vi(2, 1)))) + attr(b"l", ld(6, ld(1, ld(1, b"k"))))),
        True,
    ),
    "unknown fields everywhere": (
        ld(1, ld(2, ld(2, TID + SID + UNKNOWN + attr(b"k", ld(1, b"v") + UNKNOWN)) + UNKNOWN) + UNKNOWN) + UNKNOWN,
        True,
    ),
    "key_strindex ignored": (request(ld(9, ld(1, b"k") + vi(3, 4) + ld(2, ld(1, b"v")))), True),
    "scope after spans, two scopes": (
        ld(1, ld(2, ld(2, TID + SID) + ld(1, ld(1, b"first")) + ld(1, ld(1, b"second") + ld(2, b"v")))),
        True,
    ),
    "resource after spans, twice": (
        ld(1, ld(2, ld(2, TID + SID)) + ld(1, ld(1, ld(1, b"a") + ld(2, vi(3, 1)))) + ld(1, ld(1, ld(1, b"b")))),
        True,
    ),
    "status twice merges": (request(ld(15, vi(3, 2) + ld(2, b"first")) + ld(15, ld(2, b"second"))), True),
    "scalars twice: last wins": (request(ld(5, b"one") + ld(5, b"two") + TID + vi(6, 1) + vi(6, 2)), True),
    "non-canonical varints": (request(tag(6, 0) + b"\x83\x80\x80\x00"), True),
    "events": (request(ld(11, f64(1, 5) + ld(2, b"ev") + ld(3, ld(1, b"k") + ld(2, ld(1, b"v")))) + ld(11, b"")), True),
    "links and entity refs checked": (
        request(
            ld(13, TID + ld(3, b"ts") + ld(4, ld(1, b"k") + ld(2, vi(3, 1))) + tag(6, 5) + b"\1\0\0\0"),
            resource=ld(3, ld(1, b"u") + ld(3, b"id") + ld(4, b"d")) + vi(2, 3),
        ),
        True,
    ),
    "bad ids counted": (
        ld(1, ld(2, ld(2, ld(1, b"\0" * 16) + SID) + ld(2, SID) + ld(2, TID + SID + ld(4, b"abc")) + ld(2, TID + SID))),
        True,
    ),
    "empty body": (b"", True),
    "array nesting 20": (request(attr(b"n", nested_array(19))), True),
    "kvlist nesting 20": (request(attr(b"n", nested_kvlist(19))), True),
    "array nesting 21": (request(attr(b"n", nested_array(20))), False),
    "kvlist nesting past upb's limit": (request(attr(b"n", nested_kvlist(40))), False),
    "array nesting past upb's limit": (request(attr(b"n", nested_array(60))), False),
    "string_value_strindex": (request(attr(b"s", vi(8, 3))), False),
    "oneof set twice": (request(attr(b"s", ld(1, b"a") + vi(3, 1))), False),
    "kv value twice": (request(ld(9, ld(1, b"k") + ld(2, ld(1, b"a")) + ld(2, ld(1, b"b")))), False),
    "group": (request(GROUP), False),
    "group at top": (GROUP, False),
    "field number 0": (request(vi(0, 1)), False),
    "wire type 6": (request(tag(50, 6)), False),
    "wire type mismatch on name": (request(vi(5, 1)), False),
    "wire type mismatch on attributes": (request(vi(9, 1)), False),
    "wire type mismatch on start time": (request(vi(7, 1)), False),
    # Strings that are not UTF-8 are read with errors="replace" (upb refuses them): one loses no span.
    "invalid utf-8 in name": (request(ld(5, b"\xff")), True),
    "surrogate in key": (request(attr(b"\xed\xa0\x80", ld(1, b"v"))), True),
    "overlong in value": (request(attr(b"k", ld(1, b"\xc0\xaf"))), True),
    "past U+10FFFF in trace_state": (request(ld(3, b"\xf4\x90\x80\x80")), True),
    "invalid utf-8 in scope version": (request(b"", scope=ld(2, b"\x80")), True),
    "invalid utf-8 in link trace_state": (request(ld(13, ld(3, b"\xe0\x80\x80"))), True),
    "invalid utf-8 in entity ref": (request(b"", resource=ld(3, ld(3, b"\xc3"))), True),
    "invalid utf-8 in schema_url": (ld(1, ld(3, b"\xfe")), True),
    "invalid utf-8 in event attribute": (request(ld(11, ld(3, ld(1, b"k") + ld(2, ld(1, b"\xa0"))))), True),
    "invalid utf-8 in long strings": (
        request(ld(5, b"n" * 60 + b"\xff") + attr(b"k" * 50 + b"\xc3", ld(1, b"\xe2\x82" + b"v" * 50))), True
    ),
    "invalid utf-8 in status message and scope name": (
        request(ld(15, ld(2, b"m\xf0\x9f\x98")), scope=ld(1, b"s\x81")), True
    ),
    "truncated varint": (request(b"") + b"\x08", False),
    "varint of 11 bytes": (request(tag(6, 0) + b"\xff" * 10 + b"\x01"), False),
    "length past the end": (b"\x0a\x05\x12\x01", False),
    "tag of 6 bytes": (request(b"\x80\x80\x80\x80\x80\x01"), False),
}


# Cases the reference rejects too (the other slow-path cases are valid bodies left to it).
INVALID = {"kvlist nesting past upb's limit", "array nesting past upb's limit", "field number 0", "wire type 6"}
INVALID |= {"truncated varint", "varint of 11 bytes", "length past the end", "tag of 6 bytes"}


@pytest.mark.parametrize("name", list(CASES))
def test_wire_cases(name: str) -> None:
    body, fast = CASES[name]
    got = check(body, fast=fast)
    if not fast:
        assert got is None
    assert (reference(body) is None) == (name in INVALID)


def test_invalid_utf8_reads_as_errors_replace() -> None:
    """Each string field read is bytes.decode("utf-8", "replace"), in C as in the reference."""
    for name, field, want in [
        ("invalid utf-8 in name", "name", "\ufffd"),
        ("surrogate in key", "attributes", {"\ufffd" * 3: "v"}),
        ("overlong in value", "attributes", {"k": "\ufffd\ufffd"}),
        ("invalid utf-8 in event attribute", "events", [SpanEvent("", 0, {"k": "\ufffd"})]),
        ("invalid utf-8 in long strings", "name", "n" * 60 + "\ufffd"),
        ("invalid utf-8 in long strings", "attributes", {"k" * 50 + "\ufffd": "\ufffd" + "v" * 50}),
        ("invalid utf-8 in status message and scope name", "status_message", "m\ufffd"),
        ("invalid utf-8 in status message and scope name", "scope", "s\ufffd"),
    ]:
        for got in (c_parse(CASES[name][0]), reference(CASES[name][0])):
            assert got is not None and got[1] == 0, name
            assert getattr(got[0][0], field) == want, (name, field)
    for name in ("past U+10FFFF in trace_state", "invalid utf-8 in scope version", "invalid utf-8 in schema_url"):
        got = c_parse(CASES[name][0])  # fields not kept: any bytes will do
        assert got is not None and got[1] == 0 and (len(got[0]) == 1) == (name != "invalid utf-8 in schema_url")


def test_utf8_edges_agree_with_the_reference() -> None:
    """Every 1-4 byte sequence class at the UTF-8 boundaries: C reads each as the reference does (errors="replace"
    for what is not UTF-8), never leaving it to the reference."""
    samples = [b"\x7f", b"\xc2\x80", b"\xdf\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xee\x80\x80", b"\xef\xbf\xbf"]
    samples += [b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xed\xa0\x80"]
    samples += [b"\xf0\x8f\xbf"]
    samples += [b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xc2", b"\xe1\x80", b"\x80", b"a\xc3\xa9" * 20 + b"\xff"]
    for s in samples:
        body = request(attr(b"k", ld(1, s)) + ld(5, s))
        got = check(body, fast=True)
        assert got is not None and got[0][0].name == s.decode("utf-8", "replace"), s


# ---- generated requests ----------------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "gen_ai.tool.name", "", "é", "k" * 60])
TEXT = st.text(max_size=12) | st.sampled_from(["", "x" * 100, "ünïcødé ✓", "\x00"])


def any_values(depth: int) -> st.SearchStrategy[AnyValue]:
    def build(kind: str, value: Any) -> AnyValue:
        v = AnyValue()
        if kind == "array":
            v.array_value.values.extend(value)
        elif kind == "kvlist":
            v.kvlist_value.values.extend(value)
        elif kind != "unset":
            setattr(v, kind, value)
        return v

    leaves = st.one_of(
        st.tuples(st.just("string_value"), TEXT),
        st.tuples(st.just("bool_value"), st.booleans()),
        st.tuples(st.just("int_value"), st.integers(-(2**63), 2**63 - 1)),
        st.tuples(st.just("double_value"), st.floats(allow_nan=True, allow_infinity=True)),
        st.tuples(st.just("bytes_value"), st.binary(max_size=8)),
        st.tuples(st.just("unset"), st.none()),
    )
    if depth > 0:
        inner = any_values(depth - 1)
        leaves = leaves | st.tuples(st.just("array"), st.lists(inner, max_size=3))
        leaves = leaves | st.tuples(st.just("kvlist"), st.lists(key_values(inner), max_size=3))
    return leaves.map(lambda kv: build(*kv))


def key_values(values: st.SearchStrategy[AnyValue]) -> st.SearchStrategy[KeyValue]:
    def build(key: str, value: AnyValue, has_value: bool) -> KeyValue:
        return KeyValue(key=key, value=value) if has_value else KeyValue(key=key)

    return st.builds(build, KEYS, values, st.booleans())


ATTRS = st.lists(key_values(any_values(2)), max_size=5)
IDS16 = st.sampled_from([b"", b"\0" * 16, b"\1" * 15]) | st.binary(min_size=16, max_size=16)
IDS8 = st.sampled_from([b"", b"\1" * 7, b"\0" * 8]) | st.binary(min_size=8, max_size=8)
U64 = st.integers(0, 2**64 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)


@st.composite
def spans(draw: st.DrawFn) -> trace_pb2.Span:
    s = trace_pb2.Span(
        trace_id=draw(IDS16),
        span_id=draw(IDS8),
        parent_span_id=draw(st.sampled_from([b""]) | IDS8),
        name=draw(TEXT),
        kind=cast("trace_pb2.Span.SpanKind.ValueType", draw(I32)),
        start_time_unix_nano=draw(U64),
        end_time_unix_nano=draw(U64),
        trace_state=draw(TEXT),
        flags=draw(st.integers(0, 2**32 - 1)),
        dropped_attributes_count=draw(st.integers(0, 2**32 - 1)),
    )
    s.attributes.extend(draw(ATTRS))
    for _ in range(draw(st.integers(0, 2))):
        s.events.add(time_unix_nano=draw(U64), name=draw(TEXT)).attributes.extend(draw(ATTRS))
    for _ in range(draw(st.integers(0, 1))):
        s.links.add(trace_id=draw(IDS16), trace_state=draw(TEXT), flags=1).attributes.extend(draw(ATTRS))
    if draw(st.booleans()):
        s.status.code = cast("trace_pb2.Status.StatusCode.ValueType", draw(I32))
        s.status.message = draw(TEXT)
    return s


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rs = req.resource_spans.add(schema_url=draw(TEXT))
        if draw(st.booleans()):
            rs.resource.attributes.extend(draw(ATTRS))
            rs.resource.entity_refs.add(type=draw(TEXT), id_keys=[draw(TEXT)])
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add()
            if draw(st.booleans()):
                ss.scope.name = draw(TEXT)
                ss.scope.version = draw(TEXT)
                ss.scope.attributes.extend(draw(ATTRS))
            ss.spans.extend(draw(st.lists(spans(), max_size=3)))
    return bytes(req.SerializeToString())


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(requests())
def test_generated_requests_equal_the_reference(body: bytes) -> None:
    check(body, fast=True)


# ---- mutation fuzz ----------------------------------------------------------------------------------------------


# Varint edges; tags: field 1 varint and length-delimited, field 2 length-delimited, field 3 group start; UTF-8 leads.
SET_TO = [0x00, 0x7F, 0x80, 0xFF, 0x08, 0x0A, 0x12, 0x1B, 0xC3, 0xED]
INSERTS = st.binary(min_size=1, max_size=4)


@FAST
@given(st.data())
def test_mutated_real_bodies_are_rejected_or_equal(small_bodies: list[bytes], data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(small_bodies))
    check(data.draw(mutated(base, SET_TO, INSERTS)))


@FAST
@given(st.data())
def test_mutated_generated_bodies_are_rejected_or_equal(data: st.DataObject) -> None:
    base = data.draw(requests())
    check(data.draw(mutated(base, SET_TO, INSERTS)))


def test_every_truncation_of_a_real_body(small_bodies: list[bytes]) -> None:
    body = small_bodies[0]
    for cut in range(len(body)):
        check(body[:cut])


# ---- memory -----------------------------------------------------------------------------------------------------


def test_no_leak_on_valid_bodies(small_bodies: list[bytes]) -> None:
    bodies = [*small_bodies, *(body for body, fast in CASES.values() if fast)]
    assert blocks_growth(c_parse, bodies, 200) < 100  # one leaked object per parse would be thousands


def test_no_leak_on_rejected_bodies(small_bodies: list[bytes]) -> None:
    body = small_bodies[0]
    bodies = [body[:cut] for cut in range(0, len(body), 7)]
    bodies += [body for body, fast in CASES.values() if not fast]
    assert all(c_parse(b) is None for b in bodies[1:])
    assert blocks_growth(c_parse, bodies, 20) < 100


@pytest.fixture(autouse=True)
def _records_registered() -> Iterator[None]:
    yield
    assert CPB is not None
    CPB.init(Span, SpanEvent)
