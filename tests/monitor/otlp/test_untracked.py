"""Records built by the C extensions are left out of the cyclic garbage collector (monitor/_cext/records.h).

A server holds every record of its pending turns for the grace period; tracked, each young collection walked them
all. They never refer back to themselves, so reference counting frees them: these tests check both halves, on real
requests of the instrumented triage agent decoded, normalized and judged by the C paths.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from monitor.assembly import TurnAssembler
from monitor.judge import Judge
from monitor.normalize import Normalizer
from monitor.otlp import accelerated, parse_json, parse_protobuf, request_to_json
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.verdict import CallVerdict, TurnVerdict
from tests.monitor.otlp.compare import sdk_spans

RULES = Path(__file__).resolve().parents[3] / "rules" / "incident-triage.yaml"
C = accelerated()
pytestmark = pytest.mark.skipif(not all(C.values()), reason=f"not every C extension is loaded: {C}")


@pytest.fixture(scope="module")
def body() -> bytes:
    return bytes(encode_spans(sdk_spans("untracked", 7, 200)).SerializeToString())


@pytest.fixture(scope="module")
def judge() -> Judge:
    return Judge(load_rules([RULES]))


def _pipeline(spans: list[Any], judge: Judge) -> tuple[list[Any], list[Turn], list[TurnVerdict]]:
    records, _ = Normalizer().split(spans)
    asm = TurnAssembler(grace_s=0)
    turns = asm.add_records(records, 2**61) + asm.flush()
    return records, turns, [judge.judge(t) for t in turns]


def test_decoded_normalized_and_judged_records_are_not_tracked(body: bytes, judge: Judge) -> None:
    as_json = request_to_json(ExportTraceServiceRequest.FromString(body))
    for spans in (parse_protobuf(body).spans, parse_json(as_json).spans):
        assert spans and not any(gc.is_tracked(s) for s in spans)
        records, turns, verdicts = _pipeline(spans, judge)
        assert {type(r) for r in records} >= {ToolCall, Turn}
        assert not any(gc.is_tracked(r) for r in records)
        calls = [c for v in verdicts for c in v.calls]
        assert len(verdicts) == len(turns) > 0 and calls and all(type(c) is CallVerdict for c in calls)
        # The plans build most verdicts (in C); the general path (two calls, malformed arguments) builds the rest.
        assert sum(not gc.is_tracked(v) for v in verdicts) >= 0.8 * len(verdicts)
        assert sum(not gc.is_tracked(c) for c in calls) >= 0.8 * len(calls)


def test_untracked_records_are_freed_by_reference_counting(body: bytes, judge: Judge) -> None:
    gc.collect()
    gc.disable()  # no collection runs: what is freed here is freed by reference counting alone
    tracemalloc.start()
    try:
        _pipeline(parse_protobuf(body).spans, judge)  # the judge's plans, kept
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(3):
            spans = parse_protobuf(body).spans
            records, turns, verdicts = _pipeline(spans, judge)
            held = tracemalloc.get_traced_memory()[0] - before
            del spans, records, turns, verdicts
        left = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        gc.enable()
    assert held > 100_000  # the request's spans, records and verdicts
    assert left < 0.05 * held, (held, left)
