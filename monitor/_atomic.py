"""Writing a file whole or not at all (the reports of replay, eval and probe; `alerts render -o`).

The text goes to a temporary file beside the path, which os.replace then puts in its place: a reader (a CI step, a
dashboard, Prometheus reloading its rules) or a kill midway never sees half a file, and a failed write (a full disk)
leaves the file as it was and no temporary file behind (only a kill while it is written can leave one, hidden:
`.NAME.XXXXXXXX.tmp`). A file replaced keeps its permission bits; a symbolic link is followed, its target replaced.

What is no regular file is written directly, never replaced: a FIFO or a device (`/dev/null`), and the process's own
stdout or stderr by any name (`/dev/stdout`, `/dev/fd/1`, or the file they were redirected to: written through the
stream, after what was printed to it, as `-` is). So is a file whose directory cannot be written but which can.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import TextIO

# The most bytes of the file's name that its temporary file's name keeps: 255 (NAME_MAX, the longest name most file
# systems take) less the 14 the temporary name adds (`.`, `.XXXXXXXX.tmp`).
_STEM_BYTES = 255 - 14


def _stream_of(path: str) -> TextIO | None:
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
    stream = _stream_of(name)
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
    # The temporary name is the file's, cut to fit where the file's fits (a name of up to NAME_MAX bytes).
    stem = os.fsdecode(os.fsencode(target.name)[:_STEM_BYTES])
    temporary = target.with_name(f".{stem}.{secrets.token_hex(4)}.tmp")
    try:  # 0o666 less the umask, as the file itself would be made
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except PermissionError:
        if old is None or not os.access(target, os.W_OK):
            raise
        _direct(name, text, encoding)  # a directory we may not write to, a file we may
        return
    try:
        with open(fd, "w", encoding=encoding) as fh:
            if old is not None:
                os.fchmod(fh.fileno(), stat.S_IMODE(old.st_mode))
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())  # the data on disk before the name points at it (a crash meanwhile)
        os.replace(temporary, target)
    except BaseException:  # a failed write, a Ctrl-C: the file stays as it was, no temporary file beside it
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
