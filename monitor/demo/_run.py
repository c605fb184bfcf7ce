"""`toolwatch demo`: the monitor in-process, the simulated triage agent exporting to it over OTLP/HTTP."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live

from instrumentation import CountingBatchSpanProcessor, configure, shutdown, telemetry_stats
from monitor.demo._agent import TriageAgent
from monitor.demo._logs import LogLineGenerator
from monitor.demo._model import SimulatedTriageModel
from monitor.demo._output import reader_gone
from monitor.demo._view import VerdictFeed, figures_table, render
from monitor.judge import Tally
from monitor.serve import Server, ServerThread, Settings

DEFAULT_RULES = Path(__file__).resolve().parents[2] / "rules" / "incident-triage.yaml"


@dataclass(slots=True)
class DemoResult:
    turns_sent: int
    turns_judged: int
    mistakes_injected: int
    tally: Tally
    metrics_url: str
    seconds: float
    spans_dropped: int = 0  # by the agent's exporter (queue full): their turns arrive incomplete, or never
    output_closed: bool = False  # the output lost its reader (`| head`): the demo stopped early, nothing to print


def _free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _port(host: str, port: int, console: Console, what: str) -> int:
    if port and not _free(host, port):
        console.print(f"[yellow]port {port} ({what}) is in use; using a free port instead[/yellow]", soft_wrap=True)
        return 0
    return port


PIPED_STATUS_EVERY_S = 5.0  # output not a terminal: the status line on the first turn, then this often
RATE_AFTER_S = 1.0  # the turns/s figure is shown once the demo has run this long (over less it means nothing)


def status_line(sent: int, turns: int | None, judged: int, elapsed_s: float, metrics_url: str) -> str:
    """The head line of the live view after `elapsed_s` seconds (`turns` None: --forever). The rate shows once
    the demo has run RATE_AFTER_S: before, one turn over a millisecond would read as a thousand turns/s."""
    speed = f"{sent / elapsed_s:.0f}" if elapsed_s >= RATE_AFTER_S else "—"
    total = "∞" if turns is None else str(turns)
    return f"turns sent {sent}/{total}   judged {judged}   {speed} turns/s   metrics {metrics_url}" + (
        "" if turns is None else "   (Ctrl-C stops early)"
    )


_LONGEST_SLEEP_S = 3600.0


class _Woken(Exception):
    """Raised by the SIGTERM handler to end a sleep between turns."""


class _Sigterm:
    """SIGTERM ends the demo as Ctrl-C does: no more turns are sent, the turns sent are judged and the summary
    printed (exit 0). A turn being run is finished first: only the sleep between turns is cut short.

    Installed only from the main thread, where Python runs signal handlers; the previous handler is restored on exit."""

    def __init__(self) -> None:
        self.requested = False
        self._sleeping = False
        self._previous: Callable[[int, FrameType | None], Any] | int | None = None
        self._installed = False

    def __enter__(self) -> _Sigterm:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if self._sleeping:
            self._sleeping = False
            raise _Woken

    def sleep(self, seconds: float) -> None:
        # The handler raises only while _sleeping is set, and that is only inside the outer try: _Woken never
        # escapes. The inner finally clears the flag whatever ends the sleep: after a Ctrl-C (KeyboardInterrupt out
        # of time.sleep) a SIGTERM during the shutdown must not raise _Woken out of it.
        try:
            self._sleeping = True
            try:
                end = time.monotonic() + seconds
                while not self.requested and (left := end - time.monotonic()) > 0:
                    time.sleep(min(left, _LONGEST_SLEEP_S))  # a very low --rate: time.sleep refuses 1e300 s
            finally:
                self._sleeping = False
        except _Woken:
            pass


def _holds_spans(thread: ServerThread) -> bool:
    """Whether the monitor still holds spans it will judge soon: queued, or turns in their grace period. Calls whose
    turn span never came (dropped by the agent's exporter) wait for --turnless-timeout, longer than the demo waits:
    the monitor's stop judges them. Asked on the monitor's loop, between two of its steps (a step takes records from
    the queue and judges in one go)."""

    def holds() -> bool:
        pipeline = thread.server.pipeline if thread.server is not None else None
        return pipeline is not None and (pipeline.queued > 0 or pipeline.assembler.pending_turns > 0)

    return bool(thread.call(holds))


def _let_export_catch_up(provider: object, sigterm: _Sigterm) -> None:
    """At a rate over what can be exported (--rate 0: as fast as possible): wait while the agent's export queue is
    over 3/4 full, until it is half empty, so the agent waits for its spans to leave instead of its exporter dropping
    them."""
    processor = getattr(provider, "processor", None)
    if not isinstance(processor, CountingBatchSpanProcessor) or not processor.queue_capacity:
        return
    if processor.queue_length * 4 > processor.queue_capacity * 3:
        while processor.queue_length * 2 > processor.queue_capacity and not sigterm.requested:
            sigterm.sleep(0.005)


def _start_monitor(
    host: str,
    port: int,
    metrics_port: int,
    rules: str | Path | None,
    grace_s: float,
    feed: VerdictFeed,
    console: Console,
) -> tuple[ServerThread, Server]:
    """The in-process monitor on the ports given, or a free one for each that is busy. A port seen free may be taken
    before the bind (another demo starting at once): the ports are checked again and the start retried."""
    while True:
        ports = (_port(host, port, console, "OTLP/HTTP"), _port(host, metrics_port, console, "metrics"))
        settings = Settings(
            rules=(str(rules or DEFAULT_RULES),),
            port=ports[0],
            metrics_port=ports[1],
            grace_s=grace_s,
            watch_rules=False,
        )
        thread = ServerThread(settings, on_verdicts=feed)
        try:
            return thread, thread.start()
        except OSError:
            again = (_port(host, ports[0], console, "OTLP/HTTP"), _port(host, ports[1], console, "metrics"))
            if again == ports:  # no port turned busy meanwhile: not that race
                raise
            port, metrics_port = again  # each retry takes a free port for one more: two at most


def run_demo(
    *,
    turns: int = 2000,
    forever: bool = False,
    rate: float = 100.0,
    seed: int = 0,
    rules: str | Path | None = None,
    port: int = 4318,
    metrics_port: int = 9464,
    grace_s: float = 2.0,
    console: Console | None = None,
) -> DemoResult:
    """Run the demo; returns what was sent and judged. `rate` is turns per second (0 = as fast as possible)."""
    console = console or Console()
    host = "127.0.0.1"
    feed = VerdictFeed()
    thread, server = _start_monitor(host, port, metrics_port, rules, grace_s, feed, console)
    provider = configure(
        service_name="incident-triage-demo",
        exporter="otlp-http",
        endpoint=server.endpoint,
        schedule_delay_millis=200,
        max_export_batch_size=512,
        set_global=False,
        capture_content=True,
    )
    agent = TriageAgent(SimulatedTriageModel(seed))
    lines = LogLineGenerator(seed)
    # soft_wrap: lines with addresses and figures stay whole (piped, rich wrapped them at 80 columns)
    console.print(f"metrics: [bold]{server.metrics_url}[/bold]   OTLP/HTTP: {server.endpoint}", soft_wrap=True)
    sent = mistakes = 0
    dropped_before = telemetry_stats().dropped_spans
    t0 = time.monotonic()
    interval = 1.0 / rate if rate > 0 else 0.0

    def header() -> str:
        total = None if forever else turns
        return status_line(sent, total, server.pipeline.turns_judged, time.monotonic() - t0, server.metrics_url)

    live = Live(
        render(header(), feed, server.metrics), console=console, refresh_per_second=4, auto_refresh=console.is_terminal
    )
    output_closed = exported = False

    def stop_exporting() -> None:  # once: the agent's spans out before the monitor stops (its exporter retries else)
        nonlocal exported
        if not exported:
            exported = True
            shutdown(provider)

    with _Sigterm() as sigterm:  # kept until the pending turns are judged: a SIGTERM meanwhile changes nothing
        try:
            with live:
                last_draw = 0.0
                last_line = float("-inf")
                while (forever or sent < turns) and not sigterm.requested:
                    result = agent.run(lines.line())
                    sent += 1
                    mistakes += bool(result.response.mistakes)
                    now = time.monotonic()
                    if now - last_draw > 0.25:
                        if reader_gone(console):
                            output_closed = True
                            break
                        live.update(render(header(), feed, server.metrics))
                        last_draw = now
                        if not console.is_terminal and now - last_line >= PIPED_STATUS_EVERY_S:
                            console.print(header(), soft_wrap=True)  # no live view: a steady trail of progress instead
                            last_line = now
                    if interval:
                        sigterm.sleep(max(0.0, t0 + sent * interval - time.monotonic()))
                    _let_export_catch_up(provider, sigterm)  # at any rate: over what can be exported, spans dropped
                stop_exporting()  # flush the exporter
                # Show the last turns judged; stopped by SIGTERM, thread.stop() below judges them at once instead.
                deadline = time.monotonic() + grace_s + 15
                while (
                    server.pipeline.turns_judged < sent
                    and time.monotonic() < deadline
                    and not (sigterm.requested or output_closed)
                    and _holds_spans(thread)  # else the turns not judged never arrived (their spans were dropped)
                ):
                    live.update(render(header(), feed, server.metrics))
                    time.sleep(0.1)
                if output_closed:
                    live.transient = True  # nothing more to draw for no one (its last frame would not be written)
                live.update(render(header(), feed, server.metrics))
        except KeyboardInterrupt:
            pass
        except BrokenPipeError:  # found by a write before the poll above saw it
            output_closed = True
        finally:
            stop_exporting()
            thread.stop()  # judges the pending turns
    tally, _ = feed.snapshot()
    dropped = telemetry_stats().dropped_spans - dropped_before
    return DemoResult(
        sent,
        server.pipeline.turns_judged,
        mistakes,
        tally,
        server.metrics_url,
        time.monotonic() - t0,
        dropped,
        output_closed,
    )


def print_summary(result: DemoResult, console: Console) -> None:
    t = result.tally
    console.print()
    console.rule("summary")
    console.print(
        f"{result.turns_sent} turns sent, {result.turns_judged} judged in {result.seconds:.1f} s; "
        f"the simulated model made mistakes in {result.mistakes_injected} turns.",
        soft_wrap=True,
    )
    if result.spans_dropped:
        console.print(
            f"[yellow]the agent's exporter dropped {result.spans_dropped} spans (its queue was full: the agent ran "
            "faster than the spans could be exported; lower --rate)[/yellow]",
            soft_wrap=True,
        )
    console.print(f"[bold]{t.format_accuracy()}[/bold]", soft_wrap=True)
    console.print(
        f"spurious calls {t.spurious}, wrong-tool calls {t.wrong_tool}, hallucinated calls {t.hallucinated}, "
        f"missed calls {t.missed} of {t.expected_calls} expected, schema-invalid calls "
        f"{t.schema_checked_calls - t.schema_valid_calls}",
        soft_wrap=True,
    )
    console.print(figures_table(t, _EmptyWindows()))  # type: ignore[arg-type]


class _EmptyWindows:
    """Stands in for the metrics after the server stopped: no window columns in the summary table."""

    def window_counts(self) -> dict[str, object]:
        return {}
