"""Run a user's agent under the instrumentation and turn what it did into judged-ready Turn records.

A fresh TracerProvider with an in-memory exporter (bounded, drained atomically) receives the spans;
they are encoded to OTLP protobuf with the OpenTelemetry exporter's own encoder and decoded with the
monitor's decoder, normalizer and TurnAssembler: the same path spans take into `serve`.

The harness opens one `agent_turn` per run (with the case id, conversation id, and the agent's answer
as output when the agent returns a string; anything else, None or a dict, is no answer text: an empty output, so
response checks fail rather than being skipped); the agent's `@tool` / `ToolExecutor` calls nest under it.

Calls that belong to no run (a tool called in a thread started without the OpenTelemetry context has no turn and a
trace of its own) are released as turnless turns, as `serve` releases them: `stray_turns` picks them out so that
eval and scenarios judge them alone, as serve and replay do, rather than losing them.

A call the agent left running when it returned (a tool in a thread under `copy_context().run` it did not wait
for) still counts: the run's turn stays open until every tool-call span of its trace has ended, up to LATE_CALLS_S
(serve's default grace period) and never past the run's timeout (`RunProcessor.wait_ended`); one still running then
is not counted, and a warning says so.

The run's turn offers the tools offered in every turn it takes calls from (`offered_union`), so that with
`from_definitions: true` a call of a tool offered only in one of them is judged as serve judges it, not as unknown.

A run past its timeout is abandoned (Python cannot stop a thread; an async agent's task is cancelled) but not
forgotten: its turn is the calls
of its trace that had ended by the timeout, with no output (`cut_turn`), judged like any other. The calls it makes
later count for no run, but are not lost silently: `late_calls` counts those collected, and `still_running` the
timed-out runs whose agent has not returned yet (whatever they call next is not seen). A run
that raised (any exception, CancelledError and SystemExit too) keeps the formatted traceback (a timed-out one:
the agent's stack at the timeout), bounded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from instrumentation import agent_turn, configure_content, set_tracer_provider
from instrumentation._content import SETTINGS  # saved and restored around a run; no public getter yet
from instrumentation._context import TRACING  # the provider in use before, restored on close
from monitor.assembly import TurnAssembler
from monitor.assembly._offered import Definitions, joined
from monitor.assembly._reconcile import reconcile_across
from monitor.normalize import EXECUTE_TOOL
from monitor.normalize._genai import OP
from monitor.normalize._markers import OI_KIND, TL_KIND
from monitor.otlp import parse_protobuf
from monitor.records import ToolCall, Turn

AgentFn = Callable[..., Any]
logger = logging.getLogger(__name__)
MAX_BUFFERED_SPANS = 1_000_000
DEFAULT_TIMEOUT_S = 60.0  # per run, for eval and probe
TRACEBACK_FRAMES = 20  # the innermost frames kept of an agent's traceback
MAX_OPEN_TRACES = 100_000  # traces whose open spans the harness keeps
LATE_CALLS_S = 2.0  # how long a run's turn waits for calls its agent left running (serve's default grace period)
CANCEL_GRACE_S = 1.0  # how long an async agent cancelled at its timeout is waited for (for its traceback)
TRACEBACK_CHARS = 8192  # and at most this much of its text (the end: the exception and the innermost frames)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt (by the handler `toolwatch eval` and `probe` install), so
    that it stops a run of many as Ctrl-C does; a KeyboardInterrupt still."""


def stop_signal(exc: BaseException) -> str:
    """The name of the signal a KeyboardInterrupt stands for: SIGTERM for a Terminated (or an Interrupted by one),
    else SIGINT (Ctrl-C)."""
    if isinstance(exc, Interrupted):
        return exc.signal
    return "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a run of many (eval's cases, scenario steps, probe's runs): a KeyboardInterrupt still,
    that carries `partial`, the result of the runs done before it (judged; the run going on is left out, not waited
    for), for a report of them, and `signal`, the name of the signal (`by`: the KeyboardInterrupt it stands for)."""

    def __init__(self, partial: Any, by: BaseException | None = None) -> None:
        super().__init__()
        self.partial = partial
        self.signal = "SIGINT" if by is None else stop_signal(by)


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


def _is_tool_call(span: Span) -> bool:
    """Whether a span says at its start that it is a tool call: GenAI `execute_tool` (its operation or its name), an
    OpenInference TOOL span or an OpenLLMetry tool span. Other spans an agent leaves open (a chat span) are not
    waited for."""
    attrs = span.attributes or {}
    return (attrs.get(OP) == EXECUTE_TOOL or span.name.startswith(EXECUTE_TOOL)
            or attrs.get(OI_KIND) == "TOOL" or attrs.get(TL_KIND) == "tool")


class RunProcessor(SimpleSpanProcessor):
    """The harness's span processor: exports each span as it ends, and knows which tool-call spans of each trace have
    started and not ended yet (`wait_ended`), so that a run's turn ends after the calls the agent left running."""

    def __init__(self, exporter: SpanExporter) -> None:
        super().__init__(exporter)
        self._open: dict[int, set[int]] = {}  # trace id -> span ids started and not ended
        self._ended = threading.Condition()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        ctx = span.get_span_context()
        if ctx is not None and _is_tool_call(span):
            with self._ended:
                spans = self._open.get(ctx.trace_id)
                if spans is None:
                    if len(self._open) >= MAX_OPEN_TRACES:  # spans that never end (a leaked one): the oldest go
                        del self._open[next(iter(self._open))]
                    spans = self._open[ctx.trace_id] = set()
                spans.add(ctx.span_id)
        super().on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        super().on_end(span)
        ctx = span.get_span_context()
        if ctx is None:
            return
        with self._ended:
            spans = self._open.get(ctx.trace_id)
            if spans is not None and ctx.span_id in spans:  # a tool call someone may wait for
                spans.discard(ctx.span_id)
                if not spans:
                    del self._open[ctx.trace_id]
                self._ended.notify_all()

    def wait_ended(self, trace_id: int, deadline: float) -> int:
        """Wait until every tool-call span of trace `trace_id` started so far has ended, or until `deadline`
        (time.monotonic()); how many were still open then."""
        with self._ended:
            self._ended.wait_for(lambda: not self._open.get(trace_id), max(0.0, deadline - time.monotonic()))
            return len(self._open.pop(trace_id, ()))  # no one waits for it again


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
    span_id: str = ""  # the run's turn span
    conversation_id: str | None = None
    traceback: str | None = None  # the agent's traceback when it raised; its stack at the timeout when it hung
    deadline_ns: int = 0  # a timed-out run: the time of the timeout (its calls are those ended by then)
    answer_type: str | None = None  # the type of what the agent returned when it is neither a str nor None
    strays: list[Turn] = field(default_factory=list)  # run_and_collect: turnless turns of no run's trace collected


def _bounded(text: str) -> str:
    if len(text) <= TRACEBACK_CHARS:
        return text
    return f"... ({len(text) - TRACEBACK_CHARS} characters cut)\n" + text[-TRACEBACK_CHARS:]


def format_traceback(exc: BaseException) -> str:
    """The exception's traceback from the agent's frame on (the harness's own frames left out): its innermost
    TRACEBACK_FRAMES frames, at most TRACEBACK_CHARS characters."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return _bounded("".join(traceback.format_exception(type(exc), exc, tb, limit=-TRACEBACK_FRAMES)))


def thread_stack(thread: threading.Thread, after: str = __file__, what: str = "Agent") -> str | None:
    """Where `thread` is now, from the first frame after the last one of file `after` on (the user's code; its innermost
    TRACEBACK_FRAMES frames), headed `{what} stack at the timeout`, or None when the thread has ended."""
    frame = sys._current_frames().get(thread.ident) if thread.ident is not None else None
    if frame is None:
        return None
    stack = traceback.extract_stack(frame)
    ours = [i for i, f in enumerate(stack) if f.filename == after]
    agent = traceback.StackSummary.from_list(stack[ours[-1] + 1 :] if ours and ours[-1] + 1 < len(stack) else stack)
    text = "".join(agent.format()[-TRACEBACK_FRAMES:])
    return _bounded(f"{what} stack at the timeout (most recent call last):\n" + text)


def cut_turn(run: RunResult, calls: Iterable[ToolCall], agent: str, tool_definitions: Definitions | None = None
             ) -> Turn:
    """The turn of a timed-out run: those of `calls` (the calls of its trace) that had ended by the timeout, in
    start order, with the run's input and case id and no final answer (output "", as the normalizer gives a turn
    whose messages were captured, as the harness does, without one: its response checks fail), offering
    `tool_definitions` (`offered_union`)."""
    mine = sorted((c for c in calls if 0 < c.end_ns <= run.deadline_ns), key=lambda c: (c.start_ns, c.span_id))
    return Turn(
        input_text=run.input_text,
        calls=tuple(reconcile_across(mine)),  # a call requested in one of the groups and run in another counts once
        agent=agent,
        trace_id=run.trace_id,
        span_id=run.span_id,
        conversation_id=run.conversation_id,
        case_id=run.case_id,
        output_text="",
        tool_definitions=tool_definitions,
        start_ns=run.deadline_ns - int(run.duration_s * 1e9),
        end_ns=run.deadline_ns,
    )


def offered_union(run: RunResult, merged: Sequence[Turn]) -> Definitions | None:
    """The tools offered in the turns `merged` into the run's turn, joined as turn assembly joins a turn's
    (monitor.assembly._offered `joined`: first definition of a name wins, bounded): the run's own turn's first, then
    those of the turnless groups (a timed-out run's own chat spans: its turn span never came), then those of the
    agent's inner turns, each in release order. A timed-out run's are all those of its turns, as the assembler cannot
    tell when a tool was offered (its calls are cut at the timeout; its offered tools are not)."""
    own = next((t for t in merged if not t.turnless and t.span_id == run.span_id), None)
    rest = sorted((t for t in merged if t is not own), key=lambda t: not t.turnless)  # stable: turnless ones first
    return joined(own.tool_definitions if own is not None else None, [d for t in rest if (d := t.tool_definitions)])


def run_turn(run: RunResult, traced: Sequence[Turn], agent: str) -> Turn | None:
    """The turn a run is judged by, from the turns of its trace: its own (the harness's `agent_turn`) with the calls
    and offered tools of the other turns of the trace that are the same agent's (turns the agent opened itself under
    its own name, e.g. a GenAI `invoke_agent` span of a framework, nest in it) and of calls without a turn
    (`offered_union`: `from_definitions: true` judges a call of a tool offered in any of them as serve does); a
    timed-out run's is cut at the timeout (`cut_turn`). Its input and answer are the run's, whole (the span's may be
    cut).

    A turn of another agent name in the trace (a sub-agent the agent called: `agent_turn(agent="other-bot")`) is
    that agent's turn, not part of the run's: `serve` and `replay` judge it on its own, against that agent's rules,
    and so its calls are not counted here either, so that eval's figures for the agent are those serve gives. (The
    calls of a sub-agent turn still open at a timeout have no turn yet: they are counted with the run's.)"""
    if run.timed_out:
        mine = [t for t in traced if t.turnless or t.agent == agent]
        return cut_turn(run, (c for t in mine for c in t.calls), agent, offered_union(run, mine))
    whole = [t for t in traced if not t.turnless]
    own = next((t for t in whole if t.span_id == run.span_id), None)
    if own is None:
        return whole[0] if whole else None
    others = [t for t in traced if t is not own and (t.turnless or t.agent == own.agent)]
    inner = [c for t in others for c in t.calls]
    if inner:  # a call requested in one of the turns and run in another counts once, as in one turn
        calls = tuple(reconcile_across(sorted((*own.calls, *inner), key=lambda c: (c.start_ns, c.span_id))))
    else:
        calls = own.calls
    offered = offered_union(run, [own, *others])
    # The span keeps at most the content length (16,384 characters by default) of the input and of the answer, and a
    # cut one reads as not captured: the run has both whole (a long answer's response checks were skipped, not failed).
    answer = run.output if run.output is not None else own.output_text
    if calls is own.calls and offered is own.tool_definitions and own.input_text == run.input_text \
            and own.output_text == answer:
        return own
    return dataclasses.replace(own, calls=calls, tool_definitions=offered, input_text=run.input_text,
                               output_text=answer)


class _AsyncRun:
    """The event loop and task of an async agent's run, so that a run past its timeout can be cancelled (a thread
    cannot be stopped; a task can)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False

    def started(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> bool:
        """Records the run's task; False when the run was cancelled before it started."""
        with self._lock:
            self._loop, self._task = loop, task
            return not self._cancelled

    def cancel(self) -> bool:
        """Cancels the task (from another thread); False when there is none (a sync agent, or not started yet)."""
        with self._lock:
            self._cancelled = True
            loop, task = self._loop, self._task
        if loop is None or task is None:
            return False
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:  # the loop has closed: the run ended meanwhile
            return False
        return True


def _call_agent(fn: AgentFn, text: str, extra: dict[str, Any], run: _AsyncRun) -> Any:
    result = fn(text, **extra)
    if inspect.isawaitable(result):
        return asyncio.run(_await(result, run))
    return result


async def _await(aw: Any, run: _AsyncRun) -> Any:
    task = asyncio.current_task()
    if task is not None and not run.started(asyncio.get_running_loop(), task):
        if inspect.iscoroutine(aw):
            aw.close()  # never run: closed, not left 'never awaited'
        raise asyncio.CancelledError("timed out before it started")
    return await aw


class Harness:
    """Use as a context manager: installs its provider into the instrumentation and restores the old one."""

    def __init__(self, *, agent_name: str = "agent", capture_content: bool = True, service_name: str = "toolwatch-eval"
                 ) -> None:
        self.agent_name = agent_name
        self.exporter = DrainingExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        self.processor = RunProcessor(self.exporter)  # also fed spans of an application's own provider
        self.provider.add_span_processor(self.processor)
        self.assembler = TurnAssembler(grace_s=0.0, turnless_timeout_s=3600.0)
        self._capture = capture_content
        self._saved: tuple[Any, Any] | None = None
        self._lock = threading.Lock()
        self._run_traces: set[str] = set()  # trace ids of the runs' turns
        self._deadlines: dict[str, int] = {}  # trace id -> time of the timeout (ns) of a timed-out run
        self._abandoned: list[threading.Thread] = []  # the agent threads of timed-out runs still running
        self.late_calls = 0  # calls collected of a timed-out run's trace that ended after its timeout

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
        """Run `fn(text, **extra)` inside `agent_turn`. A run past `timeout_s` is abandoned: it keeps its trace and
        span ids and the time of the timeout, `timeout_s` after its start however late this thread wakes (`cut_turn`
        makes its turn), and nothing the agent does later."""
        result = RunResult(text, case_id, conversation_id=conversation_id)
        done = RunResult(text, case_id)  # what the agent's thread writes; copied into `result` if it finished
        ids: list[str] = []  # trace and span id of the turn, as soon as it is open
        kwargs = dict(extra or {})
        async_run = _AsyncRun()

        begun = time.monotonic()
        returned = threading.Event()  # the agent returned: what is left is the wait for its calls, ended by the timeout

        def body() -> None:
            started = time.perf_counter()
            try:
                with agent_turn(text, agent=self.agent_name, case_id=case_id, conversation_id=conversation_id) as turn:
                    ctx = trace.get_current_span().get_span_context()
                    ids[:] = [f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"]
                    self._note_run(ids[0])  # now: a turn opened after the timeout is still a run's, not a stray
                    out = _call_agent(fn, text, kwargs, async_run)
                    returned.set()
                    # Calls the agent left running (a tool in a thread under copy_context().run it did not wait for)
                    # end inside its turn, as serve's grace period waits for them: up to LATE_CALLS_S, not past the
                    # timeout.
                    waited = time.monotonic()
                    until = waited + LATE_CALLS_S
                    if timeout_s is not None:
                        until = min(until, begun + timeout_s)
                    left = self.processor.wait_ended(ctx.trace_id, until)
                    if left:
                        logger.warning("the agent returned with %d tool call(s) still running %.3g s later (input %r): "
                                       "they are not counted for its run (wait for the calls it starts before it "
                                       "returns)", left, time.monotonic() - waited, text[:80])
                    if isinstance(out, str):
                        done.output = out
                        turn.set_output(out)
                    else:  # no answer text (None, or a dict, ...): recorded as an empty answer (respond checks fail)
                        turn.set_output("")
                        if out is not None:
                            done.answer_type = type(out).__qualname__
            except BaseException as exc:  # noqa: BLE001 - the agent's failure is a result, not a crash
                # CancelledError (an async agent's cancelled task) and SystemExit are no Exceptions, but end the run
                # as failed all the same; only a Ctrl-C on the main thread (no timeout) is the user's, not the agent's
                if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
                    raise
                done.error = f"{type(exc).__name__}: {exc}"
                done.traceback = format_traceback(exc)
            finally:
                done.duration_s = time.perf_counter() - started

        if timeout_s is None:
            body()
        else:
            worker = threading.Thread(target=body, name="toolwatch-agent", daemon=True)
            begun_ns = time.time_ns()
            worker.start()
            worker.join(timeout_s)
            if worker.is_alive() and returned.is_set():  # its wait for the calls left running ends at the timeout
                worker.join(CANCEL_GRACE_S)
            if worker.is_alive():
                # The timeout is that long after the start, not when this thread wakes: an agent holding the GIL
                # (CPU work, a C extension) can keep it from waking for long, and its calls meanwhile are past it.
                result.deadline_ns = begun_ns + int(timeout_s * 1e9)
                result.trace_id, result.span_id = ids if ids else ("", "")
                self._note_run(result.trace_id)
                self._note_timeout(result.trace_id, result.deadline_ns, worker)
                result.timed_out = True
                result.error = f"timed out after {timeout_s:g} s"
                result.traceback = thread_stack(worker)
                result.duration_s = timeout_s
                if async_run.cancel():  # an async agent: cancelled; its CancelledError shows where it was waiting
                    worker.join(CANCEL_GRACE_S)
                    if not worker.is_alive() and done.traceback:
                        result.traceback = _bounded(f"Cancelled at the timeout:\n{done.traceback}")
                return result
        result.trace_id, result.span_id = ids if ids else ("", "")
        self._note_run(result.trace_id)
        result.output, result.error, result.traceback = done.output, done.error, done.traceback
        result.duration_s, result.answer_type = done.duration_s, done.answer_type
        return result

    def _note_run(self, trace_id: str) -> None:
        if trace_id:
            with self._lock:
                self._run_traces.add(trace_id)

    def _note_timeout(self, trace_id: str, deadline_ns: int, worker: threading.Thread) -> None:
        with self._lock:
            if trace_id:
                if len(self._deadlines) >= MAX_OPEN_TRACES:  # the oldest go (their late calls are not counted)
                    del self._deadlines[next(iter(self._deadlines))]
                self._deadlines[trace_id] = deadline_ns
            self._abandoned = [t for t in self._abandoned if t.is_alive()]
            self._abandoned.append(worker)

    def still_running(self) -> int:
        """How many timed-out runs' agents are still running (their threads cannot be stopped)."""
        with self._lock:
            self._abandoned = [t for t in self._abandoned if t.is_alive()]
            return len(self._abandoned)

    def _count_late(self, turns: Iterable[Turn]) -> None:
        """Adds to `late_calls` the calls of `turns` that a timed-out run made after its timeout (those `cut_turn`
        leaves out). Called under the lock."""
        for t in turns:
            deadline = self._deadlines.get(t.trace_id)
            if deadline is not None:
                self.late_calls += sum(1 for c in t.calls if not 0 < c.end_ns <= deadline)

    def stray_turns(self, turns: Iterable[Turn]) -> list[Turn]:
        """The turnless turns of `turns` whose trace is no run's: calls made outside every run's turn (in a thread
        that did not carry the OpenTelemetry context), which serve judges alone."""
        with self._lock:
            runs = set(self._run_traces)
        return [t for t in turns if t.turnless and t.trace_id not in runs]

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
            self._count_late(turns)
        return turns

    def run_and_collect(self, fn: AgentFn, text: str, **kwargs: Any) -> RunResult:
        """`run` then `collect`, attaching the run's turn (`run_turn`; none when none was recorded) and the stray
        turns collected with it (`stray_turns`) (sequential use: probe, scenarios)."""
        result = self.run(fn, text, **kwargs)
        collected = self.collect()
        traced = [t for t in collected if result.trace_id and t.trace_id == result.trace_id]
        turn = run_turn(result, traced, self.agent_name)
        result.turns = [turn] if turn is not None else []
        result.strays = self.stray_turns(collected)
        return result
