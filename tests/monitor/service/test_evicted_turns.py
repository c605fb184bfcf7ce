"""`toolwatch_turns_evicted_total` counts the turns judged early because the pending bound was reached: each turn
span an evicted trace held, plus one for its calls released alone as a turnless turn when there are any. It counted
one per evicted trace, however many turns that trace released early."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import Tracer

from monitor.assembly import TurnAssembler, _assembler
from monitor.otlp import Span
from monitor.records import Turn
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.spans import Call, TurnSpec, new_tracer, record_turn
from tests.monitor.service.test_assembly import S, call, turn

AGENT = "incident-triage"
TOOL = "pull_auth_telemetry"


def _trace(n: int, turns: int, turnless: int) -> list[Span]:
    """Trace `n`: `turns` turns with a call each, and `turnless` calls under a span never received."""
    tid = f"{n:032x}"
    spans: list[Span] = []
    for i in range(turns):
        spans += [turn(tid, f"t{i}", start=i * S), call(tid, f"c{i}", f"t{i}", "x", start=i * S + 1)]
    return spans + [call(tid, f"o{i}", "gone", "y", start=i * S + 2) for i in range(turnless)]


Released = list[tuple[str, str, bool, tuple[str, ...]]]


def _evict(a: TurnAssembler, python: bool) -> tuple[Released, int]:
    """Traces 1 (3 turns and 2 turnless calls), 2 (turnless calls only), 3 and 4 (1 turn each) under a bound of 2
    pending traces: 1 and 2 are evicted. The records go to the C assembler or to its Python reference."""
    add = a._add_records_py if python else a.add_records
    out: list[Turn] = []
    for n, shape in enumerate([(3, 2), (0, 1), (1, 0), (1, 0)], start=1):
        records, _ = a.normalizer.split(_trace(n, *shape))
        out += add(records, n)
    return [(t.trace_id, t.span_id, t.turnless, tuple(c.span_id for c in t.calls)) for t in out], a.stats.evicted


@pytest.mark.parametrize("python", [False, True], ids=["c", "python"])
def test_an_evicted_trace_counts_every_turn_it_released_early(python: bool) -> None:
    if not python and _assembler._ADD_C is None:
        pytest.skip("the C assembler is not loaded")
    a = TurnAssembler(grace_s=60, turnless_timeout_s=600, max_pending=2)
    released, evicted = _evict(a, python)
    assert [(tid[-1], turnless) for tid, _, turnless, _ in released] == [("1", False)] * 3 + [("1", True), ("2", True)]
    assert evicted == 5 == len(released)  # trace 1: 3 turns + its turnless calls; trace 2: its turnless calls
    assert a.pending_turns == 2 and a.pending_traces == 2


def test_c_and_python_count_evictions_alike() -> None:
    if _assembler._ADD_C is None:
        pytest.skip("the C assembler is not loaded")
    c, py = (TurnAssembler(grace_s=60, turnless_timeout_s=600, max_pending=2) for _ in range(2))
    assert _evict(c, False) == _evict(py, True)
    assert c.stats == py.stats


def _session(tracer: Tracer, turns: int, turnless: int) -> None:
    """One trace: a session span holding `turns` turns (a call each) and `turnless` calls outside any turn."""
    with tracer.start_as_current_span("session"):
        for i in range(turns):
            record_turn(tracer, TurnSpec(f"[AUTH] login failure {i}", [Call(TOOL, {"log_excerpt": "x"})], AGENT))
        for _ in range(turnless):
            with tracer.start_as_current_span(
                f"execute_tool {TOOL}", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL}
            ):
                pass


def test_the_metric_rises_by_the_turns_an_eviction_released(serve: ServeFactory) -> None:
    _, server = serve(max_pending=2, grace_s=60, turnless_timeout_s=600)
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)

    def export(turns: int, turnless: int) -> None:
        provider, tracer, memory = new_tracer()
        _session(tracer, turns, turnless)
        provider.shutdown()
        assert exporter.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS

    export(3, 2)  # 3 turns and calls outside them
    export(1, 0)
    p = server.pipeline
    wait_for(lambda: p.queued == 0 and p.assembler.pending_turns == 4)
    assert value(scrape(server), "toolwatch_turns_evicted_total") == 0
    export(1, 0)  # a third trace: the first is judged early
    wait_for(lambda: value(scrape(server), "toolwatch_turns_evicted_total") == 4)
    assert p.assembler.pending_turns == 2 and p.turns_judged == 4
    export(0, 1)  # turnless calls only: the second trace's one turn
    wait_for(lambda: value(scrape(server), "toolwatch_turns_evicted_total") == 5)
