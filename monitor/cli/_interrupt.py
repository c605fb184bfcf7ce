"""Ctrl-C and SIGTERM during eval and probe: the first stops the runs (a KeyboardInterrupt, as Python's own SIGINT
handler raises; for SIGTERM, what a CI job's timeout or `kill` sends, its subclass Terminated) and gives both signals
their default action back, so that a second one of either, while the runs done are judged and the partial report is
written, ends the process at once (killed by the signal: a shell reports 130 or 143), as a second one ends `serve`.

A SIGTERM within ECHO_S of a first one is no second stop but its copy: `timeout` without --foreground (and a kill of
a process, then of its group) sends SIGTERM to the command and then to its process group, microseconds apart, and
that copy ended the process while the partial report was written. It is ignored; a later one ends the process.

A first signal once the runs are over (within `runs_over()`: the harness shut down, the report made and written, about
0.6 s, longer to a slow reader) raised there too: no report, or half of one, of runs all done. It is held instead: the
report, whole, is written (its gates evaluated: every run is in it), then the command exits 130 or 143 saying so. A
second one ends the process at once, as during a partial report. A form that could not be written (exit 2) is said,
and the exit is still the signal's, as for a partial report. A stop_on_signal within another handles nothing:
runs_over holds the outer one's signal.

A signal is not lost to an error that no handler expects (a bug: neither SystemExit nor a click error) raised after
it, held or raised (its KeyboardInterrupt replaced by that error while the runs stopped or the partial report was
made): the error's traceback is shown, as Python shows it, and the exit is still the signal's, saying it came.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

import click

from monitor._atomic import default_action, end_by_default
from monitor._text import visible
from monitor.evaluate import Terminated

# The handler each signal has when whoever started us left it alone: SIGINT's is Python's (KeyboardInterrupt),
# SIGTERM's the default action. Ignored (SIGINT in a script's background job, a parent ignoring SIGTERM; not by
# nohup, which ignores SIGHUP only), it stays so.
_UNTOUCHED: dict[signal.Signals, object] = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
_RAISES: dict[signal.Signals, Callable[[], KeyboardInterrupt]] = {signal.SIGINT: KeyboardInterrupt,
                                                                  signal.SIGTERM: Terminated}


ECHO_S = 0.5  # a SIGTERM this soon after the first is its copy (see the module docstring)
_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal, as a shell reports a process it ended
_NAMES = {signal.SIGINT: ("Aborted!", "Ctrl-C"), signal.SIGTERM: ("Terminated!", "SIGTERM")}


@dataclass(slots=True)
class _Stops:
    """What stop_on_signal does with a first signal: raise it (False), or, the runs over, hold it (True); the signal
    held, and the runs the report holds (said on exit)."""

    over: bool = False
    held: signal.Signals | None = None
    done: str = ""  # the runs over, as the exit says them: "300 runs"
    came: signal.Signals | None = None  # the first signal, held or raised


_current: _Stops | None = None  # the innermost stop_on_signal's, in the main thread


def _copies_ignored(since: float) -> Callable[[int, FrameType | None], None]:
    """SIGTERM's handler after a first one at `since` (time.monotonic()): ignores its copies, ends the process by the
    default action at a later one."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if time.monotonic() - since < ECHO_S:
            return
        end_by_default(signal.SIGTERM)  # a report's temporary file, were one being written, removed first

    return handler


@contextmanager
def stop_on_signal() -> Iterator[None]:
    """Within: the first SIGINT raises KeyboardInterrupt, the first SIGTERM Terminated, and either makes the next one
    of both end the process. A signal not left as it starts (ignored, or a handler of someone else's) is not touched,
    nor is anything outside the main thread. The previous handlers are back after, unless a signal came."""
    handled = {s: signal.getsignal(s) for s, untouched in _UNTOUCHED.items() if signal.getsignal(s) is untouched}
    if threading.current_thread() is not threading.main_thread() or not handled:
        yield  # no signal of ours: one within an outer stop_on_signal is the outer one's to raise or hold (runs_over)
        return
    global _current
    stops = _Stops()

    def first(signum: int, frame: FrameType | None) -> None:
        stops.came = signal.Signals(signum)
        now = time.monotonic()
        for s in handled:  # SIGTERM's copies ignored from the first SIGTERM on, never its default action meanwhile
            signal.signal(s, _copies_ignored(now) if s == signal.SIGTERM == signum else default_action())
        if stops.over:  # the report of runs all done is being made: held until it is out
            stops.held = signal.Signals(signum)
            return
        raise _RAISES[signal.Signals(signum)]()

    for s in handled:
        signal.signal(s, first)
    outer, _current = _current, stops
    try:
        yield
    except (SystemExit, click.ClickException) as exc:
        if stops.held is None:
            raise
        whole = ": the report is whole" if isinstance(exc, SystemExit) else ""
        if isinstance(exc, click.ClickException):  # a form not written (exit 2): said, the exit the signal's
            exc.show()
        ended, by = _NAMES[stops.held]
        print(f"{ended} The {by} came after the {stops.done} were over{whole}.", file=sys.stderr, flush=True)
        raise SystemExit(_EXIT[stops.held]) from None
    except Exception as exc:  # an error after a signal, held or raised: shown, and the exit still the signal's
        signum = stops.came  # the one held, if one is
        if signum is None:
            raise
        print(visible("".join(traceback.format_exception(exc))), end="", file=sys.stderr)  # no raw ESC of user text
        ended, by = _NAMES[signum]
        said = f"{ended} The {by} came after the {stops.done} were over." if stops.held else ended
        print(said, file=sys.stderr, flush=True)
        raise SystemExit(_EXIT[signum]) from None
    finally:
        _current = outer
        if stops.came is None:
            for s, previous in handled.items():
                signal.signal(s, previous)


def runs_over(done: int, unit: str = "runs") -> None:
    """The runs are over (`done` of them, in `unit`): a first Ctrl-C or SIGTERM from now on is held until the command
    exits (its report written whole), then ends it with 130 or 143. Nothing outside stop_on_signal."""
    if _current is not None:
        _current.over = True
        _current.done = f"{done} {unit}"


def runs_again() -> None:
    """More runs (probe's --compare-seeds runs) after runs_over: a first signal raises again, and one held meanwhile
    is raised now (KeyboardInterrupt, Terminated for SIGTERM), as if it had come as they began."""
    stops = _current
    if stops is None:
        return
    stops.over = False
    held, stops.held = stops.held, None
    if held is not None:
        raise _RAISES[held]()
