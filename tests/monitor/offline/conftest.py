"""Fixtures of the offline tests: rule files, turns judged by the real Judge, the triage example."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.judge import Judge
from monitor.records import ToolCall, Turn
from monitor.replay import Replayer, replay_files
from monitor.report import ReportBuilder
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict

REPO = Path(__file__).resolve().parents[3]
TRIAGE_RULES = REPO / "rules" / "incident-triage.yaml"

SUPPORT_RULES = """
version: 1
agent: support
catalog:
  tools:
    - name: get_order_status
      schema:
        type: object
        properties: {order_id: {type: string}}
        required: [order_id]
        additionalProperties: false
    - name: get_shipping_eta
      schema:
        type: object
        properties: {order_id: {type: string}}
        required: [order_id]
        additionalProperties: false
    - name: get_order_history
      schema:
        type: object
        properties: {user_id: {type: string}}
        required: [user_id]
expect:
  - id: status
    when: {regex: '(?i)where is order'}
    call:
      - tool: get_order_status
        exactly: 1
        args:
          order_id: {from_input: 'order (\\d+)'}
  - id: smalltalk
    when: {regex: '(?i)^(hi|hello|thanks)'}
    none: true
"""


@pytest.fixture(autouse=True)
def _no_agent_thread_outlives_its_test() -> Iterator[None]:
    """An eval case past its timeout leaves its agent running in its worker thread (Python cannot stop a thread);
    wait for such threads here, so they do not make spans (and draw from the global `random`, the SDK's id
    source) during a later test: hypothesis then fails that test for using `random` inside its strategies."""
    before = set(threading.enumerate())
    yield
    for t in set(threading.enumerate()) - before:
        if t is not threading.current_thread():
            t.join(timeout=10)


@pytest.fixture
def support_rules(tmp_path: Path) -> Path:
    p = tmp_path / "support.yaml"
    p.write_text(SUPPORT_RULES, encoding="utf-8")
    return p


def call(name: str, args: dict[str, object] | str | None, n: int = 0) -> ToolCall:
    raw = args if isinstance(args, str) or args is None else json.dumps(args)
    return ToolCall(name=name, call_id=f"c{n}", arguments=raw, span_id=f"{n + 1:016x}")


def turn(text: str, *calls: ToolCall, trace: int = 1, agent: str = "support", output: str | None = None) -> Turn:
    return Turn(input_text=text, calls=calls, agent=agent, trace_id=f"{trace:032x}", span_id=f"{trace:016x}",
                output_text=output)


def support_turns() -> list[Turn]:
    """Ten turns with a known mix of outcomes (see test_report for the counts they must give)."""
    return [
        turn("where is order 1", call("get_order_status", {"order_id": "1"}), trace=1),
        turn("where is order 2", call("get_order_status", {"order_id": "2"}), trace=2),
        turn("where is order 3", call("get_order_status", {"order_id": "9"}), trace=3),  # wrong argument
        turn("where is order 4", call("get_shipping_eta", {"order_id": "4"}), trace=4),  # wrong tool
        turn("where is order 5", call("get_order_status", {"order_id": "5"}, 0),
             call("get_order_status", {"order_id": "5"}, 1), trace=5),  # spurious repeat
        turn("where is order 6", call("lookup_order", {"order_id": "6"}), trace=6),  # hallucinated
        turn("where is order 7", trace=7),  # missed
        turn("where is order 8", call("get_order_status", "{bad json"), trace=8),  # malformed
        turn("hello there", trace=9),  # none expected, none made
        turn("thanks a lot", call("get_order_history", {"user_id": "u"}), trace=10),  # spurious on none
    ]


@pytest.fixture
def support_judge(support_rules: Path) -> Judge:
    return Judge(load_rules([support_rules]))


@pytest.fixture
def support_builder(support_judge: Judge) -> Iterator[ReportBuilder]:
    builder = ReportBuilder(worst=5)
    for i, t in enumerate(support_turns(), 1):
        builder.add(support_judge.judge(t))
        builder.track(i)
    yield builder


def capture_spans(agent_fn: object, inputs: list[str], agent: str = "support") -> list[object]:
    """Run the agent under the harness on each input; the finished SDK spans, one list per input."""
    from monitor.evaluate import Harness

    batches: list[object] = []
    with Harness(agent_name=agent) as h:
        for text in inputs:
            h.run(agent_fn, text)  # type: ignore[arg-type]
            batches.append(h.exporter.drain())
    return batches


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def write_span_files(batches: list[object], directory: Path) -> dict[str, Path]:
    """The same spans as OTLP JSON lines, length-delimited protobuf and one bare protobuf message."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from monitor.otlp import request_to_json

    directory.mkdir(parents=True, exist_ok=True)
    reqs = [encode_spans(b) for b in batches]  # type: ignore[arg-type]
    jsonl = directory / "spans.jsonl"
    jsonl.write_text("".join(request_to_json(r) + "\n" for r in reqs), encoding="utf-8")
    delimited = directory / "spans.pb"
    delimited.write_bytes(b"".join(varint(len(b)) + b for b in (r.SerializeToString() for r in reqs)))
    single = directory / "single.binpb"
    single.write_bytes(encode_spans([s for b in batches for s in b]).SerializeToString())  # type: ignore[attr-defined]
    return {"jsonl": jsonl, "pb": delimited, "single": single}


def verdict_key(v: TurnVerdict) -> tuple[str, str]:
    return (v.trace_id, v.span_id)


def replay_sorted(judge: Judge, paths: list[Path], fmt: str = "auto") -> tuple[list[TurnVerdict], Replayer]:
    """Replay `paths` into a list: the verdicts in (trace, span) order, and the Replayer (for its stats)."""
    out: list[TurnVerdict] = []
    r = Replayer(judge, out.append)
    replay_files(r, paths, fmt=fmt)
    return sorted(out, key=verdict_key), r


def one_span_request(name_len: int) -> bytes:
    """A serialized export request of one span whose name is `name_len` characters (sizes vary with it)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id = bytes(range(1, 17)), bytes(range(1, 9))
    span.name, span.start_time_unix_nano, span.end_time_unix_nano = "x" * name_len, 1, 2
    return bytes(req.SerializeToString())
