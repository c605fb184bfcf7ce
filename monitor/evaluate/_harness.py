"""Run a user's agent under the instrumentation and turn what it did into judged-ready Turn records.

A fresh TracerProvider with an in-memory exporter (bounded, drained atomically) receives the spans;
they are encoded to OTLP protobuf with the OpenTelemetry exporter's own encoder and decoded with the
monitor's decoder, normalizer and TurnAssembler: the same path spans take into `serve`.

The harness opens one `agent_turn` per run (with the case id, conversation id, and the agent's answer
as output when the agent returns a string); the agent's `@tool` / `ToolExecutor` calls nest under it.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from instrumentation import agent_turn, configure_content, set_tracer_provider
from instrumentation._content import SETTINGS  # saved and restored around a run; no public getter yet
from instrumentation._context import TRACING  # the provider in use before, restored on close
from monitor.assembly import TurnAssembler
from monitor.otlp import parse_protobuf
from monitor.records import Turn

AgentFn = Callable[..., Any]
MAX_BUFFERED_SPANS = 1_000_000


class DrainingExporter(SpanExporter):
    """Keeps finished spans in memory until drained; bounded (extra spans are dropped and counted)."""

    def __init__(self, max_spans: int = MAX_BUFFERED_SPANS) -> None:
        self._lock = threading.Lock()
        self._spans: list[ReadableSpan] = []
        self._max = max_spans
        self.dropped = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            room = self._max - len(self._spans)
            self._spans.extend(spans[: max(room, 0)])
            self.dropped += max(len(spans) - max(room, 0), 0)
        return SpanExportResult.SUCCESS

    def drain(self) -> list[ReadableSpan]:
        with self._lock:
            out, self._spans = self._spans, []
        return out

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@dataclass(slots=True)
class RunResult:
    """One run of the agent on one input."""

    input_text: str
    case_id: str | None
    trace_id: str = ""
    output: str | None = None
    error: str | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    turns: list[Turn] = field(default_factory=list)


def _call_agent(fn: AgentFn, text: str, extra: dict[str, Any]) -> Any:
    result = fn(text, **extra)
    if inspect.isawaitable(result):
        return asyncio.run(_await(result))
    return result


async def _await(aw: Any) -> Any:
    return await aw


class Harness:
    """Use as a context manager: installs its provider into the instrumentation and restores the old one."""

    def __init__(self, *, agent_name: str = "agent", capture_content: bool = True, service_name: str = "toolwatch-eval"
                 ) -> None:
        self.agent_name = agent_name
        self.exporter = DrainingExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.assembler = TurnAssembler(grace_s=0.0, turnless_timeout_s=3600.0)
        self._capture = capture_content
        self._saved: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Harness:
        self._saved = (TRACING.provider, SETTINGS.current)
        set_tracer_provider(self.provider)
        configure_content(capture_content=self._capture, capture_turn_messages=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.provider.shutdown()
        if self._saved is not None:
            provider, settings = self._saved
            set_tracer_provider(provider)
            SETTINGS.current = settings

    def run(
        self,
        fn: AgentFn,
        text: str,
        *,
        case_id: str | None = None,
        conversation_id: str | None = None,
        timeout_s: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> RunResult:
        """Run `fn(text, **extra)` inside `agent_turn`; a run past `timeout_s` is abandoned (its spans ignored)."""
        result = RunResult(text, case_id)
        kwargs = dict(extra or {})

        def body() -> None:
            started = time.perf_counter()
            try:
                with agent_turn(text, agent=self.agent_name, case_id=case_id, conversation_id=conversation_id) as turn:
                    ctx = trace.get_current_span().get_span_context()
                    result.trace_id = f"{ctx.trace_id:032x}"
                    out = _call_agent(fn, text, kwargs)
                    if isinstance(out, str):
                        result.output = out
                        turn.set_output(out)
            except Exception as exc:  # noqa: BLE001 - the agent's failure is a result, not a crash
                result.error = f"{type(exc).__name__}: {exc}"
            finally:
                result.duration_s = time.perf_counter() - started

        if timeout_s is None:
            body()
            return result
        worker = threading.Thread(target=body, name="toolwatch-agent", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            result.timed_out = True
            result.error = f"timed out after {timeout_s:g} s"
            result.duration_s = timeout_s
        return result

    def collect(self, *, final: bool = True) -> list[Turn]:
        """Turns complete since the last call (through OTLP protobuf and the assembler); `final` also releases
        calls still waiting for their turn (only when no run is in flight)."""
        spans = self.exporter.drain()
        with self._lock:
            turns: list[Turn] = []
            if spans:
                body = encode_spans(spans).SerializeToString()
                decoded = parse_protobuf(body)
                turns += self.assembler.add(decoded.spans, time.time_ns())
            if final:
                turns += self.assembler.flush()
        return turns

    def run_and_collect(self, fn: AgentFn, text: str, **kwargs: Any) -> RunResult:
        """`run` then `collect`, attaching the run's turns (sequential use: probe, scenarios)."""
        result = self.run(fn, text, **kwargs)
        turns = self.collect()
        result.turns = [t for t in turns if t.trace_id == result.trace_id] if not result.timed_out else []
        return result
