"""Writing a file whole or not at all (the reports of replay, eval and probe; `alerts render -o`).

The text goes to a temporary file beside the path, which os.replace then puts in its place: a reader (a CI step, a
dashboard, Prometheus reloading its rules) or a kill midway never sees half a file, and a failed write (a full disk)
leaves the file as it was and no temporary file behind. Nor does a signal midway: an exception it raises
(KeyboardInterrupt, SystemExit) passes through the write, which removes the file; one whose action is the default,
to end the process (SIGTERM, SIGHUP; SIGINT after a first one in eval and probe), is handled while the main thread
writes, and removes the file before it ends the process as the default action would (`end_by_default`, which
cli._interrupt calls to end the process itself). Only a kill no code sees (SIGKILL, a crash) leaves one:
`.NAME.PID.XXXXXXXX.tmp`, named after the process that wrote it, so that a later write of the same file removes it
once that process is gone and the file is older than STALE_S (a process of that number in another PID namespace
that shares the directory, a container's, may be writing it). A file replaced keeps its permission bits; a symbolic
link is followed, its target replaced.

What is no regular file is written directly, never replaced: a FIFO or a device (`/dev/null`), and the process's own
stdout or stderr by any name (`/dev/stdout`, `/dev/fd/1`, or the file they were redirected to: written through the
stream, after what was printed to it, as `-` is). So is a file whose directory cannot be written but which can.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TextIO

logger = logging.getLogger(__name__)

# The most bytes a file name has: 255 (NAME_MAX, the longest name most file systems take). A temporary file's name
# keeps as much of the file's as fits with what it adds: `.`, `.PID.XXXXXXXX.tmp`, the PID of at least 7 digits
# (Linux's largest, 4194304) so that the cut is the same whatever the PID.
_NAME_MAX = 255
_TEMPORARY = re.compile(r"\.(.+)\.([1-9][0-9]{0,9})\.[0-9a-f]{8}\.tmp", re.DOTALL)
STALE_S = 60.0  # a temporary file older than this, of a process that is gone, is left from a kill: removed

# The signals whose default action ends the process, handled while the main thread writes (see the docstring).
_ENDING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
_unfinished: set[str] = set()  # the temporary files being written: one per thread writing, at most
_writing = 0  # the main thread's writes in progress (the handlers above are theirs while it is not 0)


def end_by_default(signum: int) -> None:
    """End the process by `signum`'s default action, the temporary files of the writes in progress removed first."""
    for name in list(_unfinished):
        with contextlib.suppress(OSError):
            os.unlink(name)
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)


def _ending(signum: int, frame: FrameType | None) -> None:
    """A signal's handler while the main thread writes, instead of its default action: that action, once the
    temporary files are removed."""
    end_by_default(signum)


def default_action() -> Callable[[int, FrameType | None], None] | signal.Handlers:
    """The handler to give a signal that is to end the process (by its default action) from now on: SIG_DFL, or while
    the main thread writes, one that removes the temporary file first (and is SIG_DFL again after the write)."""
    return _ending if _writing else signal.SIG_DFL


@contextlib.contextmanager
def _signals_remove(temporary: Path) -> Iterator[None]:
    """Within: `temporary` is removed before a signal ends the process by its default action (handled, in the main
    thread, for those whose handler is the default one), or when an exception passes."""
    global _writing
    main = threading.current_thread() is threading.main_thread()
    name = os.fspath(temporary)
    _unfinished.add(name)  # before the handlers are: one that runs at once removes it too
    try:
        if main:
            _writing += 1
            for s in _ENDING:
                if signal.getsignal(s) is signal.SIG_DFL:
                    signal.signal(s, _ending)
        yield
    except BaseException:  # a failed write, a Ctrl-C: the file stays as it was, no temporary file beside it
        if name in _unfinished:  # not when it could not be made (`_made_not`): that name may be another's file
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise
    finally:
        _unfinished.discard(name)
        if main:
            _writing -= 1
            for s in _ENDING if not _writing else ():
                if signal.getsignal(s) is _ending:  # also those given it meanwhile (default_action)
                    signal.signal(s, signal.SIG_DFL)


def _made_not(temporary: Path) -> None:
    """The temporary file could not be made: none to remove at a signal or an error (one that had its name, another
    process's of the same PID in another PID namespace that drew the same token, is not ours)."""
    _unfinished.discard(os.fspath(temporary))


def _stem(name: str, pid: int) -> str:
    """The part of the file `name` its temporary file's name keeps, written by process `pid`: whole characters (cut
    at the byte, within one of two or more bytes, the name was no text, and the cut of a shorter room, which every
    temporary name of the file starts with, no start of that of a longer one as text: its leftovers were not found)."""
    room = _NAME_MAX - len(f"..{pid:07d}.XXXXXXXX.tmp")
    stem = name
    while len(os.fsencode(stem)) > room:  # a name has at most NAME_MAX bytes: at most that many turns
        stem = stem[:-1]
    return stem


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # EPERM: another user's; no PID at all
        return False
    return False


def _remove_stale(target: Path) -> None:
    """Remove the temporary files of `target` that a kill left (their process gone, older than STALE_S). One named
    after this process that is none of its writes in progress is of a process gone that had its PID (each run of a
    container has the same one: PID 1); it stayed for good, its process taken for alive."""
    old = time.time() - STALE_S
    pid, ours = os.getpid(), {os.path.basename(name) for name in list(_unfinished)}
    start = f".{_stem(target.name, 10**9)}"  # how every one's name starts (the stem of the longest PID, the shortest)
    with contextlib.suppress(OSError), os.scandir(target.parent) as entries:
        for entry in entries:
            m = _TEMPORARY.fullmatch(entry.name) if entry.name.startswith(start) else None
            if m is None or m[1] != _stem(target.name, int(m[2])):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            gone = entry.name not in ours if int(m[2]) == pid else _gone(int(m[2]))
            if stat.S_ISREG(st.st_mode) and st.st_mtime < old and gone:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    logger.info("removed %s, left by a write that process %s did not finish", entry.path, m[2])


def stream_of(path: str) -> TextIO | None:
    """sys.stdout or sys.stderr when `path` is the file (pipe, terminal, regular file) it writes to, else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    for stream in (sys.stdout, sys.stderr):
        try:
            own = os.fstat(stream.fileno())
        except (OSError, ValueError, AttributeError):  # replaced by one without a file (a test runner's capture)
            continue
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
            return stream
    return None


def _direct(path: str, text: str, encoding: str) -> None:
    with open(path, "w", encoding=encoding) as fh:
        fh.write(text)


def write_atomically(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` whole or not at all (the module's docstring says how, and which paths are written
    directly); the missing parent directories are made. Raises OSError when it cannot be written."""
    name = os.fspath(path)
    stream = stream_of(name)
    if stream is not None:
        stream.write(text)
        stream.flush()
        return
    target = Path(os.path.realpath(name))
    try:
        old = target.stat()
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        _direct(name, text, encoding)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target)
    pid = os.getpid()
    temporary = target.with_name(f".{_stem(target.name, pid)}.{pid}.{secrets.token_hex(4)}.tmp")
    with _signals_remove(temporary):  # from before the file is made: a signal the moment it exists removes it too
        try:  # 0o666 less the umask, as the file itself would be made
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as exc:
            _made_not(temporary)
            if not isinstance(exc, PermissionError) or old is None or not os.access(target, os.W_OK):
                raise
            fd = None  # a directory we may not write to, a file we may: written in place, below
        if fd is not None:
            with open(fd, "w", encoding=encoding) as fh:
                if old is not None:
                    os.fchmod(fh.fileno(), stat.S_IMODE(old.st_mode))
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())  # the data on disk before the name points at it (a crash meanwhile)
            os.replace(temporary, target)
    if fd is None:
        _direct(name, text, encoding)
