"""The verdict log: JSON lines of failing turns (or all turns), each with its reason, rotated by size."""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from monitor.verdict import CallVerdict, TurnVerdict

logger = logging.getLogger(__name__)


def verdict_record(v: TurnVerdict, *, at: float | None = None) -> dict[str, Any]:
    return {
        "time": round(time.time() if at is None else at, 3),
        "agent": v.agent,
        "trace_id": v.trace_id,
        "span_id": v.span_id,
        "judged": v.judged,
        "turnless": v.turnless,
        "failed": v.failed,
        "rule": v.rule,
        "reason": v.reason,
        "input": v.input_text[:2000],
        "calls": [
            {
                "name": c.name,
                "outcome": c.outcome.value,
                **({"schema_valid": c.schema_valid} if c.schema_valid is not None else {}),
                **({"args_ok": c.args_ok} if c.args_ok is not None else {}),
                **({"violations": [f"{x.kind.value}: {x.message}" for x in c.violations]} if c.violations else {}),
            }
            for c in v.calls
        ],
        "missed": [m.tool for m in v.missed],
        "end_to_end": v.end_to_end,
    }


_str: Callable[[str], str] = json.encoder.encode_basestring  # a JSON string, non-ASCII kept (ensure_ascii=False)
_JSON = {True: "true", False: "false", None: "null"}


def _call_json(c: CallVerdict) -> str:
    out = f'{{"name":{_str(c.name)},"outcome":"{c.outcome._value_}"'  # outcome values need no escaping
    if c.schema_valid is not None:
        out += ',"schema_valid":' + _JSON[c.schema_valid]
    if c.args_ok is not None:
        out += ',"args_ok":' + _JSON[c.args_ok]
    if c.violations:
        out += ',"violations":[' + ",".join([_str(f"{x.kind.value}: {x.message}") for x in c.violations]) + "]"
    return out + "}"


def _line(v: TurnVerdict, time_json: str, failed: bool) -> str:
    rule = v.rule
    calls = v.calls
    missed = v.missed
    return (
        f'{{"time":{time_json},"agent":{_str(v.agent)},"trace_id":{_str(v.trace_id)},"span_id":{_str(v.span_id)}'
        f',"judged":{_JSON[v.judged]},"turnless":{_JSON[v.turnless]},"failed":{_JSON[failed]}'
        f',"rule":{"null" if rule is None else _str(rule)},"reason":{_str(v.reason)}'
        f',"input":{_str(v.input_text[:2000])}'
        f',"calls":[{",".join([_call_json(c) for c in calls]) if calls else ""}]'
        f',"missed":[{",".join([_str(m.tool) for m in missed]) if missed else ""}]'
        f',"end_to_end":{_JSON[v.end_to_end]}}}'
    )


def verdict_line(v: TurnVerdict, at: float) -> str:
    """`json.dumps(verdict_record(v, at=at), ensure_ascii=False, separators=(",", ":"))`, written directly
    (about 3x faster than building the dict and encoding it; a test keeps the two equal)."""
    return _line(v, repr(round(at, 3)), v.failed)


SHORT = 200  # characters of a name or text kept in a record shortened to fit the log


def _cut(text: str, n: int = SHORT) -> str:
    return text if len(text) <= n else text[:n] + "..."


def _cut_record(whole: dict[str, Any], failed: bool, n: int) -> dict[str, Any]:
    """A copy of the record `whole` with its texts and names cut to `n` characters, its calls as they are."""
    rec = dict(whole)
    rec["failed"] = failed
    for key in ("agent", "trace_id", "span_id", "rule", "reason", "input"):
        if isinstance(rec[key], str):
            rec[key] = _cut(rec[key], n)
    rec["missed"] = [_cut(m, n) for m in rec["missed"]]
    calls = [dict(c) for c in whole["calls"]]
    for c in calls:
        c["name"] = _cut(c["name"], n)
        if "violations" in c:
            c["violations"] = [_cut(x, n) for x in c["violations"][:10]]
    rec["calls"] = calls
    return rec


def shortened_line(v: TurnVerdict, at: float, failed: bool, limit: int) -> str:
    """The record of `v` in at most `limit` bytes when it can be (a record of a turn of many calls with long made-up
    tool names can pass any size): texts and names cut to SHORT characters, and the calls that fit, in order, with
    `calls_omitted` counting those left out. ASCII only (lone surrogates escaped), so its length is its size."""
    whole = verdict_record(v, at=at)
    n = SHORT
    while True:  # texts cut to n characters, fewer while the record without its calls is over the limit: JSON
        rec = _cut_record(whole, failed, n)  # writes a character in up to 12 bytes (\ud83d\ude00)
        bare = {**rec, "calls": [], "calls_omitted": len(rec["calls"])}
        if n == 0 or len(json.dumps(bare, separators=(",", ":"))) < limit:
            break
        n //= 2
    calls = rec["calls"]
    rec["calls"] = []
    rec["calls_omitted"] = len(calls)
    room = limit - len(json.dumps(rec, separators=(",", ":"))) - 1  # the newline; calls_omitted only gets shorter
    kept = 0
    for c in calls:
        room -= len(json.dumps(c, separators=(",", ":"))) + (1 if kept else 0)  # a comma between calls
        if room < 0:
            break
        kept += 1
    rec["calls"], rec["calls_omitted"] = calls[:kept], len(calls) - kept
    return json.dumps(rec, separators=(",", ":"))


REOPEN_S = 1.0  # seconds between tries to open the log again after it could not be
_TAIL_CHUNK = 1 << 16  # bytes read at a time looking back for the end of the file's last whole line
_RECORD_START = b'{"time":'  # how every record begins (_line, verdict_record, shortened_line)


def _whole_record(tail: bytes) -> bool:
    """Whether `tail` is a whole record (a JSON object), only its newline missing."""
    try:
        return isinstance(json.loads(tail), dict)
    except (ValueError, RecursionError):
        return False


def drop_partial_line(path: Path, most: int) -> int:
    """Cut the regular file at `path` back to the end of its last whole line when what follows is the piece of a
    record (`{"time":` begins every record; a shorter piece, part of that) of at most `most` bytes (no record is
    longer); the bytes cut. A write cut short (the device full, a file size limit) leaves part of a line at the end of
    the file, to which the next record would be appended: one line of broken JSON, with a whole record lost in it (and
    `jq` stops there); a whole record missing only its newline gets it. Any other ending (a file given as the log by
    mistake, a JSON file without its last newline among them) is left as it is, and so is a file that cannot be read
    and written here (opening it for appending says what is wrong)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return 0
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return 0
    try:
        end = pos = os.fstat(fd).st_size
        floor = max(0, end - most)
        while pos > floor:
            start = max(floor, pos - _TAIL_CHUNK)
            chunk = os.pread(fd, pos - start, start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                pos = start + newline + 1
                break
            pos = start
        else:
            if pos > 0:  # no line ends within the longest record: not a piece of one
                return 0
        head = os.pread(fd, len(_RECORD_START), pos)  # other JSON (`{"` too) is no piece of a record
        if len(head) < 2 or not _RECORD_START.startswith(head):
            return 0
        if _whole_record(os.pread(fd, end - pos, pos)):  # cut just before its newline: the record is whole
            os.pwrite(fd, b"\n", end)
            return 0
        os.ftruncate(fd, pos)
        return end - pos
    except OSError:
        return 0
    finally:
        os.close(fd)


def _end_line(fd: int, start: int) -> int:
    """The file open on `fd` (for appending) ends with a whole line but its newline, which began at `start`: 1 when
    the newline could be added, else 0, the line cut off."""
    try:
        if os.write(fd, b"\n") == 1:
            return 1
    except OSError:
        pass
    try:
        os.ftruncate(fd, start)  # a file only gets smaller: a full device or a file size limit allows it
    except OSError:
        pass
    return 0


class VerdictLog:
    """Appends verdict records to `path`; when it exceeds `max_bytes` it becomes `path.1` (then `.2` ...). A record
    larger than `max_bytes` is shortened to fit (`shortened_line`): the files never hold more than their bound."""

    def __init__(self, path: str | Path, *, all_turns: bool = False, max_bytes: int = 64 << 20, backups: int = 3,
                 on_lost: Callable[[int], None] | None = None):
        if max_bytes < 1024:
            raise ValueError("verdict log max_bytes must be at least 1024")
        self.path = Path(path)
        self.all_turns = all_turns
        self.max_bytes = max_bytes
        self.backups = max(backups, 1)
        self.written = 0  # lines written and not known lost (those still buffered count: a failed flush takes them off)
        self.failed = 0  # lines that could not be written (the disk is full, ...): logged, counted, never raised
        self.on_lost = on_lost  # told how many lines each failure lost (the service counts them on /metrics)
        # where each line written into the file object since its last flush that went through ends in the file: a
        # failure counts lost only those the file does not hold whole (8 bytes a line, emptied at each flush and
        # rotation, so bounded by the lines of one file)
        self._ends = array("q")
        self._base = 0  # where the first of them begins
        self._fh: IO[str] | None = None
        self._size = 0
        self._file_id = (0, 0)  # (st_dev, st_ino) of the file open
        self._next_open = 0.0  # monotonic time of the next try to open the file again after a failure
        self._open()  # OSError: the service does not start without its log

    def _open(self) -> None:
        """(Re)open the file, making its folder again when it is gone, without the part of a line a write cut short
        left at its end."""
        self._next_open = time.monotonic() + REOPEN_S
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_partial_line()
        fh = self.path.open("a", encoding="utf-8")
        st = os.fstat(fh.fileno())
        self._fh, self._size, self._file_id = fh, fh.tell(), (st.st_dev, st.st_ino)
        self._base = self._size

    def _drop_partial_line(self) -> None:
        cut = drop_partial_line(self.path, self.max_bytes)
        if cut:
            logger.warning("verdict log %s: the last %d bytes, a record an earlier write cut short (a full device?), "
                           "removed", self.path, cut)

    def _close_fh(self, failure: Exception | None = None) -> None:
        """Close the file; lines its last flush could not write, or a `failure` before it, are counted lost (it never
        raises for them). Lines reach the disk in pieces of the file object's buffer before any flush, and a write
        that fails can write part of one, its buffer perhaps dropped (closing it then raises nothing): those the file
        holds whole once it is closed are written, the others lost. The piece of a line at its end is cut here when
        the path still names the file (else when it is opened again): left there, it stayed at a stop, and a rotation
        moved it aside. A whole record but its newline gets it here, or is cut: left so, it was given its newline when
        opened again, on disk though counted lost, or, the newline not written then either, the next line went on
        after it, two records on one line."""
        fh, self._fh = self._fh, None
        ends, self._ends = self._ends, array("q")
        if fh is None:
            return
        watch = -1  # the file, to see how far it reaches once closed
        if ends:
            try:
                watch = os.dup(fh.fileno())
            except (OSError, ValueError):
                pass
        try:
            try:
                fh.close()  # closed even when its last flush fails (OSError)
            except (OSError, ValueError) as exc:
                failure = exc
            if failure is not None and ends:  # lines the failure or the last flush lost
                on_disk = 0
                try:
                    st = os.fstat(watch)
                    if stat.S_ISREG(st.st_mode):
                        on_disk = bisect_right(ends, st.st_size)
                        if on_disk < len(ends) and ends[on_disk] == st.st_size + 1:
                            on_disk += _end_line(watch, ends[on_disk - 1] if on_disk else self._base)
                except OSError:
                    pass
                lost = len(ends) - on_disk
                self.written -= lost
                self._count_lost(failure, lost)
                if not self._moved():
                    self._drop_partial_line()
        finally:
            if watch >= 0:
                os.close(watch)

    def _moved(self) -> bool:
        """The path no longer names the open file: removed (with its folder, perhaps) or moved away by hand."""
        try:
            st = os.stat(self.path)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self._file_id

    def write(self, verdicts: Sequence[TurnVerdict]) -> None:
        at = time.time()
        time_json = repr(round(at, 3))
        all_turns = self.all_turns
        for v in verdicts:
            failed = v.failed
            if not (all_turns or failed):
                continue
            line = _line(v, time_json, failed) + "\n"
            size = len(line)
            if not line.isascii():
                try:
                    size = len(line.encode("utf-8"))
                except UnicodeEncodeError:  # lone surrogates (OTLP JSON "\ud800" escapes): keep them escaped
                    line = json.dumps(verdict_record(v, at=at), separators=(",", ":")) + "\n"
                    size = len(line)
            if size > self.max_bytes:  # one record larger than a whole file: shortened, so the disk bound holds
                line = shortened_line(v, at, failed, self.max_bytes) + "\n"
                size = len(line)
            try:
                fh = self._fh
                if fh is None:  # closed by a failure: opened again at most every REOPEN_S, else the line is lost
                    if time.monotonic() < self._next_open:
                        raise OSError("the file could not be opened again yet")
                    self._open()
                if self._size + size > self.max_bytes and self._size > 0:
                    self._rotate()
                    if self._size > 0:  # the file could not be moved aside: it would pass its bound
                        raise OSError("the file could not be rotated")
                fh = self._fh
                assert fh is not None
            except (OSError, ValueError) as exc:  # verdicts are counted already: an unwritable log loses only lines
                self._failed(exc, 1)
                continue
            self._size += size
            self.written += 1
            self._ends.append(self._size)
            try:
                fh.write(line)
            except (OSError, ValueError) as exc:  # this line and those before it not on disk whole are lost
                self._failed(exc, 0)

    def _rotate(self) -> None:
        try:
            self._close_fh()
            try:
                empty = os.stat(self.path).st_size == 0
            except OSError:
                empty = False
            if empty:  # every line of it lost (a full device): nothing to keep, so no backup is pushed out for it
                return
            for i in range(self.backups - 1, 0, -1):
                src = self.path.with_name(f"{self.path.name}.{i}")
                if src.exists():
                    os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        finally:
            self._open()

    def _failed(self, exc: Exception, lines: int) -> None:
        """A failure that lost `lines` lines (never written into the file object) and the lines still in the file
        object's buffer that its flush cannot write (which a failed write or flush leaves there: the file object is
        dropped with them, and opened again at the next flush)."""
        if self._ends:
            self._close_fh(exc)  # counts the lines it leaves off the disk
        self._count_lost(exc, lines)

    def _count_lost(self, exc: Exception, lost: int) -> None:
        before, self.failed = self.failed, self.failed + lost
        if lost and self.on_lost is not None:
            self.on_lost(lost)
        if lost and (before == 0 or before // 10_000 != self.failed // 10_000):
            logger.error("verdict log %s: cannot write (%s); %d lines lost so far", self.path, exc, self.failed)

    def flush(self) -> None:
        """Write out buffered lines; called about once a second by the service, it also opens the file again when
        it was closed by a failure or when its path no longer names it (the file or its folder removed or moved
        away while serving: lines would go on into a file no one can see)."""
        try:
            if self._fh is not None:
                self._fh.flush()
                del self._ends[:]
                self._base = self._size
            if self._fh is None or self._moved():
                self._close_fh()
                self._open()
        except (OSError, ValueError) as exc:
            self._failed(exc, 0)

    def close(self) -> None:
        self._close_fh()
