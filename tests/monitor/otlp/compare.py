"""What the C decoder tests (test_cjson, test_cpb) share: strict record equality, the reference comparison, real SDK
spans, mutation fuzz, leak counting and a record class whose member descriptor belongs to another class."""

from __future__ import annotations

import dataclasses
import math
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan

import instrumentation
from instrumentation import configure, shutdown
from instrumentation._content import SETTINGS
from monitor.demo import LogLineGenerator, SimulatedTriageModel, TriageAgent
from monitor.otlp import Span, SpanEvent

# A decoder's result: (spans, counts...); the C decoder gives None where it leaves a body to the reference.
Result = tuple[Any, ...]


def canon(x: Any) -> Any:
    """A form where equal means identical: types kept (True is not 1), dict order kept, NaN equal to itself."""
    if isinstance(x, float):
        return ("float", "nan" if math.isnan(x) else struct.pack("<d", x))
    if isinstance(x, dict):
        return ("dict", tuple((canon(k), canon(v)) for k, v in x.items()))
    if isinstance(x, list | tuple):
        return (type(x).__name__, tuple(canon(v) for v in x))
    if isinstance(x, Span | SpanEvent):
        return ("record", tuple(canon(getattr(x, f.name)) for f in dataclasses.fields(x)))
    return (type(x).__name__, x)


def span_fields(spans: Sequence[Any]) -> list[Any]:
    """Every Span field of every record, canonical: records of other classes compared by their values."""
    fields = dataclasses.fields(Span)
    return [canon(getattr(s, f.name)) for s in spans for f in fields]


def check_result(got: Result | None, reference: Callable[[], Result | None], *, fast: bool) -> Result | None:
    """C gives None or exactly the reference's result (`reference()`, called only when C decoded; None when it
    rejects the body); with `fast`, it must not give None. Returns the reference's result, None when C gave None."""
    if got is None:
        assert not fast, "the C decoder left a body on its fast path to the reference"
        return None
    ref = reference()
    assert ref is not None, "C decoded a body the reference rejects"
    assert canon(got[0]) == canon(ref[0])
    assert got[1:] == ref[1:]
    assert all(type(s) is Span for s in got[0])
    return ref


def sdk_spans(service_name: str, seed: int, n_spans: int) -> list[ReadableSpan]:
    """`n_spans` finished spans of the instrumented triage agent, captured in memory."""
    saved = SETTINGS.current
    provider = configure(service_name=service_name, exporter="memory", set_global=False, capture_content=True)
    try:
        agent = TriageAgent(SimulatedTriageModel(seed))
        lines = LogLineGenerator(seed)
        exporter: Any = provider.exporter
        while len(exporter.get_finished_spans()) < n_spans:
            for _ in range(32):
                agent.run(lines.line())
        spans: list[ReadableSpan] = list(exporter.get_finished_spans())[:n_spans]
    finally:
        shutdown(provider)
        SETTINGS.current = saved
        instrumentation.set_tracer_provider(None)
    return spans


@st.composite
def mutated(draw: st.DrawFn, base: bytes, set_to: Sequence[int], inserts: st.SearchStrategy[bytes]) -> bytes:
    """`base` with 1 to 4 edits: a bit flipped, a byte set to one of `set_to`, cut, `inserts` inserted, deleted."""
    b = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        i = draw(st.integers(0, max(len(b) - 1, 0)))
        if op == "flip" and b:
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and b:
            b[i] = draw(st.sampled_from(set_to))
        elif op == "cut":
            del b[i:]
        elif op == "insert":
            b[i:i] = draw(inserts)
        elif op == "delete":
            del b[i : i + draw(st.integers(1, 4))]
    return bytes(b)


def blocks_growth(parse: Callable[[Any], object], bodies: Sequence[Any], rounds: int) -> int:
    """Allocated blocks gained over `rounds` passes of `parse` over `bodies`, after one pass to warm up: the smaller
    of two such measures. The count is the whole process's: a thread another test left running (an abandoned agent
    of a timed-out eval run, an exporter's worker) allocates meanwhile, and once added 105 blocks to a measure whose
    bound is 100. A leak grows both measures alike (one leaked block per parse is `rounds * len(bodies)` each)."""
    for body in bodies:  # warm the string cache and the free lists
        parse(body)
    growth = []
    for _ in range(2):
        before = sys.getallocatedblocks()
        for _ in range(rounds):
            for body in bodies:
                parse(body)
        growth.append(sys.getallocatedblocks() - before)
    return min(growth)


def foreign_event_class() -> type:
    """A slotted SpanEvent look-alike whose `attributes` descriptor is another class's, with an offset past the end
    of these objects: a decoder must call the class (whose constructor then fails), never write at that offset."""
    big = type("Big", (), {"__slots__": tuple(f"s{i}" for i in range(40))})

    @dataclasses.dataclass(slots=True)
    class ForeignEvent:
        name: str
        time_ns: int
        attributes: dict[str, Any]

    setattr(ForeignEvent, "attributes", big.__dict__["s39"])  # replaces the member descriptor itself
    return ForeignEvent
