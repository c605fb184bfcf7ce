"""Ctrl-C during eval and probe: the first stops the runs (a KeyboardInterrupt, as Python's own handler raises) and
gives SIGINT its default action back, so that a second one, while the runs done are judged and the partial report is
written, ends the process at once (killed by SIGINT: a shell reports 130), as a second Ctrl-C ends `serve`.

SIGTERM is left alone: it ends these commands at once, with no report, as before (its default action).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def second_ctrl_c_ends() -> Iterator[None]:
    """Within: the first SIGINT raises KeyboardInterrupt and makes the next one end the process. Nothing changes
    when SIGINT is not Python's handler (ignored, as in a shell's background job or under nohup) or outside the main
    thread. The previous handler is back after, unless a SIGINT came."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    came = False

    def first(signum: int, frame: FrameType | None) -> None:
        nonlocal came
        came = True
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        if not came:
            signal.signal(signal.SIGINT, signal.default_int_handler)
