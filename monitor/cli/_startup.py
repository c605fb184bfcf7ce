"""SIGHUP while `toolwatch serve` starts: remembered, not fatal.

Users send SIGHUP after editing rules, and a process manager may send it at any moment, also while the service is
still importing and starting (about a second) and its own handler is not installed yet; the default action then ended
the process. `hold_sighup` runs first thing when the command line is imported, for `serve` only (other commands
keep the default: a hang-up ends them): from then a SIGHUP is only remembered, and `take_sighup` tells the server,
once its handlers are installed, to reload the rules. SIGTERM keeps its default action during start-up, and SIGINT
gets it (unless it was ignored): either ends the process at once. Python's own SIGINT handler raises KeyboardInterrupt
wherever the main thread is, also inside a callback whose exceptions are only printed (seen: in importlib's module-lock
callback, "Exception ignored in ... KeyboardInterrupt"); that Ctrl-C was lost and the server started and served on.
The server's loop installs its own handlers once it is up.

Only the signal module is imported here, and the packages `monitor` and `monitor.cli` import nothing before it: this
runs before the rest of the command line is imported, about 2 ms after the interpreter's own start-up (which no
Python code can guard: with a SIGHUP then, the process ends). Before, the package's records and verdict modules and
the logging module came first, some 20 ms more (50-250 ms on a busy machine).
"""

from __future__ import annotations

import signal

TYPE_CHECKING = False  # not typing's (see monitor/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import FrameType

_held = False
_pending = False


def _on_sighup(signum: int, frame: FrameType | None) -> None:
    global _pending
    _pending = True


def _is_serve(argv: Sequence[str]) -> bool:
    """Whether argv runs `toolwatch serve`: its first word after the group's -v options is `serve`."""
    for arg in argv[1:]:
        if arg == "--verbose" or (len(arg) > 1 and arg[0] == "-" and set(arg[1:]) == {"v"}):
            continue
        return arg == "serve"
    return False


def hold_sighup(argv: Sequence[str]) -> None:
    """For `serve` (and in the main thread, where handlers are set): a SIGHUP from now on is remembered, and a
    SIGINT ends the process at once, as SIGTERM does, until the server's loop handles both."""
    global _held
    if _held or not _is_serve(argv) or not hasattr(signal, "SIGHUP"):
        return
    try:
        signal.signal(signal.SIGHUP, _on_sighup)
    except ValueError:  # not the main thread
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored by whoever started us
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    _held = True


def take_sighup() -> bool:
    """Whether a SIGHUP arrived since hold_sighup (then forgotten). Call once the server's own handler replaced
    ours, so that none falls between the two."""
    global _pending
    pending, _pending = _pending, False
    return pending
