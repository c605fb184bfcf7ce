"""Whether the demo's output has no reader any more (`toolwatch demo | head -3` after head exited)."""

from __future__ import annotations

import select

from rich.console import Console


def reader_gone(console: Console) -> bool:
    """True once the pipe or terminal the console writes to has no reader: a poll of its descriptor reports an error
    or hang-up. Found without writing, so the demo can stop at once rather than at its next status line; False where
    the file has no descriptor or the platform has no poll."""
    if not hasattr(select, "poll"):
        return False
    try:
        fd = console.file.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    try:
        events = poller.poll(0)
    except OSError:
        return False
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in events)
