"""SIGHUP never ends `toolwatch serve`, also while it stops.

While serving, SIGHUP is the loop's (a rule reload). At shutdown the loop's handler drops it, and once the pending
turns are judged and their verdicts written it is handed over to being ignored until the exit: the loop's close, and
the interpreter's exit for a handler of Python's, would restore the default action (the end of the process). The
handover restores the default action for a moment (asyncio does so on removing a handler): a SIGHUP then must find
it blocked in every thread still alive, the loop's own (`ignore_from`) and the threads the service starts, which are
born with it blocked (`blocked` around their start, or `block_here` as they begin). The signal is still caught for
the process meanwhile: the kernel hands it to a thread that does not block it, the loop's.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def blocked() -> Iterator[None]:
    """SIGHUP blocked in this thread meanwhile, and in the threads it starts meanwhile for their whole life."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def block_here() -> None:
    """SIGHUP blocked in this thread from now on (the initializer of an executor's threads)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})


def ignore_from(loop: asyncio.AbstractEventLoop) -> None:
    """SIGHUP ignored from now until the process exits, instead of handled by `loop` (in the loop's thread)."""
    with blocked():
        loop.remove_signal_handler(signal.SIGHUP)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
