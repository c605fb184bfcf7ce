"""Report files are written whole or not at all: to a temporary file beside the path, then renamed over it, so a
reader (a CI step, a dashboard polling it) or a kill never sees half a report, and a failed write leaves the file as
it was and no temporary file behind. Paths that are no regular file (a FIFO, /dev/stdout) are written directly."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from monitor._atomic import STALE_S, write_atomically
from tests.monitor.offline.agents import SUPPORT_INPUTS, support_agent
from tests.monitor.offline.conftest import REPO, capture_spans, write_span_files

_MAIN = "from monitor.cli import main; main()"


@pytest.fixture(scope="module")
def span_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_span_files(capture_spans(support_agent, SUPPORT_INPUTS), tmp_path_factory.mktemp("w"))["jsonl"]


def _toolwatch(*args: str, main: str = _MAIN, stdout: IO[str] | int = subprocess.PIPE
               ) -> subprocess.CompletedProcess[str]:
    """The real command line in a process of its own."""
    return subprocess.run([sys.executable, "-c", main, *args], cwd=REPO, text=True, timeout=120, stdout=stdout,
                          stderr=subprocess.PIPE, check=False)


def _replay(span_file: Path, rules: Path, *extra: str, main: str = _MAIN, stdout: IO[str] | int = subprocess.PIPE
            ) -> subprocess.CompletedProcess[str]:
    return _toolwatch("replay", str(span_file), "--rules", str(rules), "--no-progress", "-q", *extra, main=main,
                      stdout=stdout)


def test_a_reader_never_sees_half_a_report(tmp_path: Path) -> None:
    """A reader polling the report while it is written again and again reads one whole version or another, never a
    part (the file was truncated, then written: a reader saw it empty or cut)."""
    path = tmp_path / "r.json"
    versions = [json.dumps({"version": n, "cases": ["x" * 200] * 20_000}) for n in range(6)]
    write_atomically(path, versions[0])
    done = threading.Event()
    seen: list[str] = []

    def read() -> None:
        while not done.is_set():
            seen.append(path.read_text(encoding="utf-8"))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for text in versions[1:]:
            write_atomically(path, text)
    finally:
        done.set()
        reader.join()
    assert seen and all(text in versions for text in seen), sorted({len(t) for t in seen})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_report_replaces_the_file_and_keeps_its_mode_and_a_link_to_it(span_file: Path, support_rules: Path,
                                                                        tmp_path: Path) -> None:
    """Replaced, not rewritten: a reader holding the old file reads it whole. The old file's permissions stay; a
    symbolic link to the report stays a link, to the new report."""
    reports = tmp_path / "reports"
    reports.mkdir()
    old = reports / "r.json"
    old.write_text("old", encoding="utf-8")
    old.chmod(0o640)
    held = old.open(encoding="utf-8")
    elsewhere = tmp_path / "out"
    elsewhere.mkdir()
    target = elsewhere / "linked.json"
    target.write_text("old", encoding="utf-8")
    link = reports / "link.json"
    link.symlink_to(target)
    try:
        res = _replay(span_file, support_rules, "--json", str(old), "--markdown", str(link))
        assert res.returncode == 0, res.stderr
        assert held.read() == "old"  # the file it had open is whole, not truncated under it
    finally:
        held.close()
    assert json.loads(old.read_text(encoding="utf-8"))["command"] == "replay"
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    assert link.is_symlink() and target.read_text(encoding="utf-8").startswith("# toolwatch replay")
    assert sorted(p.name for p in reports.iterdir()) == ["link.json", "r.json"]
    assert sorted(p.name for p in elsewhere.iterdir()) == ["linked.json"]


def test_a_failed_write_keeps_the_old_report_and_leaves_no_temporary_file(span_file: Path, support_rules: Path,
                                                                         tmp_path: Path) -> None:
    """The write fails past a file size limit (EFBIG, as a full disk fails it with ENOSPC): the report there before
    stays whole, no temporary file is left, and the command says it could not write the report (exit 2)."""
    reports = tmp_path / "reports"
    reports.mkdir()
    old = reports / "r.json"
    old.write_text('{"old": true}', encoding="utf-8")
    limited = f"import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048)); {_MAIN}"
    res = _replay(span_file, support_rules, "--json", str(old), main=limited)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert f"cannot write {old}: File too large" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert old.read_text(encoding="utf-8") == '{"old": true}'
    assert sorted(p.name for p in reports.iterdir()) == ["r.json"]


def test_a_fifo_is_written_directly_and_stays_one(span_file: Path, support_rules: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    fifo = reports / "r.json"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text(encoding="utf-8")))
    reader.start()
    try:
        res = _replay(span_file, support_rules, "--json", str(fifo))
    finally:
        if reader.is_alive() and not got:  # the command did not open it (or is done with it): the reader's open returns
            with fifo.open("w", encoding="utf-8"):
                pass
        reader.join(timeout=30)
    assert res.returncode == 0, res.stderr
    assert json.loads(got[0])["command"] == "replay"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in reports.iterdir()) == ["r.json"]


def test_dev_stdout_redirected_to_a_file_is_written_in_place(span_file: Path, support_rules: Path,
                                                             tmp_path: Path) -> None:
    """`--json /dev/stdout > out.txt`: the file stdout has open gets the report alone, as with `--json -`, the summary
    on stderr (it followed the report there: no JSON reader could read the file). Replaced by a new file of the same
    name, the report would be there alone, but the file the shell opened lost."""
    reports = tmp_path / "reports"
    reports.mkdir()
    out = reports / "out.txt"
    with out.open("w", encoding="utf-8") as fh:
        res = _replay(span_file, support_rules, "--json", "/dev/stdout", stdout=fh)
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["command"] == "replay"
    assert res.stderr.startswith("Tool call accuracy: "), res.stderr
    assert sorted(p.name for p in reports.iterdir()) == ["out.txt"]


@pytest.mark.parametrize("path", ["/dev/stdout", "/proc/self/fd/1"])
def test_a_path_that_is_stdout_is_stdout(span_file: Path, support_rules: Path, path: str) -> None:
    """`--json /dev/stdout | jq`: the report alone on the pipe, the summary on stderr, as for `--json -` (they were
    mixed: no JSON reader could read the stream); and with another form on `-`, the usage error of two on stdout."""
    res = _replay(span_file, support_rules, "--json", path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["command"] == "replay"
    assert res.stderr.startswith("Tool call accuracy: "), res.stderr
    both = _replay(span_file, support_rules, "--json", path, "--markdown", "-")
    assert both.returncode == 2 and both.stdout == "", both
    assert "only one report can go to stdout" in both.stderr and "--json and --markdown" in both.stderr, both.stderr


def test_a_form_thrown_away_is_no_second_report_on_stdout(span_file: Path, support_rules: Path) -> None:
    """A form to /dev/null and another to '-' while stdout goes to /dev/null too: /dev/null is no stream of stdout's
    (nothing reads it), so the first is not taken for a second report on stdout (a usage error)."""
    res = _replay(span_file, support_rules, "--json", os.devnull, "--markdown", "-", stdout=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr


def test_alerts_render_output_is_written_whole_too(tmp_path: Path) -> None:
    """`alerts render -o` writes the rules file Prometheus reloads: through the same helper, replaced whole."""
    rules = REPO / "rules" / "incident-triage.yaml"
    out = tmp_path / "rules.yml"
    out.write_text("old", encoding="utf-8")
    before = out.stat().st_ino
    res = _toolwatch("alerts", "render", str(rules), "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_text(encoding="utf-8").startswith("# Generated by `toolwatch alerts render")
    assert out.stat().st_ino != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rules.yml"]


def test_a_report_name_near_the_longest_a_directory_takes_is_written(span_file: Path, support_rules: Path,
                                                                    tmp_path: Path) -> None:
    """A file name of 250 bytes (a directory takes 255): the check before the run passed it, and the temporary
    file's name, 14 characters longer, failed the write after it (`File name too long`), the report lost."""
    reports = tmp_path / "reports"
    reports.mkdir()
    long = reports / ("r" * 245 + ".json")
    res = _replay(span_file, support_rules, "--json", str(long))
    assert res.returncode == 0, res.stderr
    assert json.loads(long.read_text(encoding="utf-8"))["command"] == "replay"
    assert sorted(p.name for p in reports.iterdir()) == [long.name]


def test_a_report_to_a_non_blocking_stdout_waits_for_the_reader(support_rules: Path, tmp_path: Path) -> None:
    """stdout a pipe in non-blocking mode (a parent's, e.g. a Node.js runner's, shared descriptor) and a reader slower
    than the writer: the report waits for room in the pipe and comes out whole, exit 0, as to a blocking one (it was
    cut after what the pipe held: 'cannot write -: Resource temporarily unavailable', exit 2)."""
    cases = tmp_path / "many.yaml"  # a JSON report of 300 cases is about twice what a pipe holds
    cases.write_text("".join(f"- id: o{n}\n  input: where is order {n}\n"
                             f"  call: [{{tool: get_order_status, exactly: 1, args: {{order_id: '{n}'}}}}]\n"
                             for n in range(1, 301)), encoding="utf-8")
    r, w = os.pipe()
    os.set_blocking(w, False)
    with os.fdopen(r, "rb") as reader:
        proc = subprocess.Popen([sys.executable, "-c", _MAIN, "eval", "--dataset", str(cases), "--rules",
                                 str(support_rules), "--agent", "tests.monitor.offline.agents:support_agent",
                                 "--no-progress", "-q", "--json", "-"], cwd=REPO, stdout=w, stderr=subprocess.PIPE)
        os.close(w)
        head = reader.read(1)  # the report has begun: the pipe fills while nobody reads
        threading.Event().wait(1.0)
        data = head + reader.read()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert len(json.loads(data)["cases"]) == 300


def _signalled_in_write(*steps: str) -> str:
    """A command line whose report writes send the process `steps` (signal names, or `wait` for 0.6 s: past the time
    a second SIGTERM is taken for a copy of the first) once the report's text is in the temporary file, before it
    takes the report's name: a signal (a kill, Ctrl-C) in the middle of the write."""
    sends = "; ".join("time.sleep(0.6)" if s == "wait" else f"os.kill(os.getpid(), signal.{s})" for s in steps)
    return ("import os, signal, time\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "_fsync = os.fsync\n"
            f"def fsync(fd):\n    {sends}\n    _fsync(fd)\n"
            f"os.fsync = fsync\n{_MAIN}")


def _eval(support_rules: Path, tmp_path: Path, *extra: str, main: str = _MAIN) -> subprocess.CompletedProcess[str]:
    cases = tmp_path / "cases.yaml"
    cases.write_text("".join(f"- id: o{n}\n  input: where is order {n}\n"
                             f"  call: [{{tool: get_order_status, exactly: 1, args: {{order_id: '{n}'}}}}]\n"
                             for n in range(1, 4)), encoding="utf-8")
    return _toolwatch("eval", "--dataset", str(cases), "--rules", str(support_rules), "--agent",
                      "tests.monitor.offline.agents:support_agent", "--no-progress", "-q", *extra, main=main)


@pytest.mark.parametrize(("command", "steps", "code"), [
    ("replay", ["SIGTERM"], -signal.SIGTERM),  # its default action: a kill, no exception
    ("replay", ["SIGINT"], 130),  # Python's KeyboardInterrupt
    ("eval", ["SIGTERM", "SIGINT"], -signal.SIGINT),  # the first held till the report is out, the second ends it
    ("eval", ["SIGTERM", "wait", "SIGTERM"], -signal.SIGTERM),  # a second SIGTERM, no copy of the first
], ids=["replay-sigterm", "replay-sigint", "eval-held-then-sigint", "eval-held-then-sigterm"])
def test_a_signal_that_ends_the_command_during_a_write_leaves_no_temporary_file(
        span_file: Path, support_rules: Path, tmp_path: Path, command: str, steps: list[str], code: int) -> None:
    """A kill or Ctrl-C while a report is written ends the command as it did (killed by the signal, or 130), and the
    old report stays; the temporary file beside it, which the signal's default action left there, is removed."""
    reports = tmp_path / "reports"
    reports.mkdir()
    old = reports / "r.json"
    old.write_text('{"old": true}', encoding="utf-8")
    main = _signalled_in_write(*steps)
    res = (_replay(span_file, support_rules, "--json", str(old), main=main) if command == "replay" else
           _eval(support_rules, tmp_path, "--json", str(old), main=main))
    assert res.returncode == code, (res.returncode, res.stderr[-3000:])
    assert old.read_text(encoding="utf-8") == '{"old": true}'
    assert sorted(p.name for p in reports.iterdir()) == ["r.json"]


def test_a_temporary_file_left_by_a_hard_kill_goes_at_a_later_write_once_its_process_is_gone(
        span_file: Path, support_rules: Path, tmp_path: Path) -> None:
    """SIGKILL in the middle of a write leaves the temporary file (no code runs): its name says the process that
    wrote it, and a later write of the same report removes it once that process is gone and the file is older than
    any write takes (STALE_S: a process of that number in another PID namespace sharing the directory may be
    writing). One of a process still there (stopped mid-write) stays, and so does one too recent."""
    reports = tmp_path / "reports"
    reports.mkdir()
    target = reports / "r.json"
    writes = [subprocess.Popen([sys.executable, "-c", _signalled_in_write(stop), "replay", str(span_file), "--rules",
                                str(support_rules), "--no-progress", "-q", "--json", str(target)],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for stop in ("SIGKILL", "SIGSTOP")]
    killed, stopped = writes
    try:
        assert killed.wait(timeout=60) == -signal.SIGKILL
        _, status = os.waitpid(stopped.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), status
        (dead,) = [p for p in reports.iterdir() if f".{killed.pid}." in p.name]
        (alive,) = [p for p in reports.iterdir() if f".{stopped.pid}." in p.name]
        assert dead.name.startswith(".r.json.") and alive.name.endswith(".tmp")
        os.utime(dead)  # recent however long the stopped one took to start (a loaded machine)
        other = reports / f".other.json.{killed.pid}.0123abcd.tmp"  # another report's: not this write's to remove
        other.write_text("x", encoding="utf-8")
        old = time.time() - STALE_S - 60
        os.utime(alive, (old, old))
        os.utime(other, (old, old))
        assert _replay(span_file, support_rules, "--json", str(target)).returncode == 0
        assert sorted(p.name for p in reports.iterdir()) == sorted([alive.name, dead.name, other.name, "r.json"])
        os.utime(dead, (old, old))  # it was too recent
        assert _replay(span_file, support_rules, "--json", str(target)).returncode == 0
        assert sorted(p.name for p in reports.iterdir()) == sorted([alive.name, other.name, "r.json"])
    finally:
        for write in writes:
            write.kill()
            write.wait()
    assert json.loads(target.read_text(encoding="utf-8"))["command"] == "replay"


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_a_write_leaves_the_signal_handlers_as_they_were(tmp_path: Path) -> None:
    """The handlers a write gives the signals whose action is the default one are theirs only while it writes."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        write_atomically(tmp_path / "r.json", "{}")
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _killed_in_write(path: Path) -> int:
    """The PID of a process that SIGKILL ended in the middle of a write of `path` (its temporary file left), gone."""
    script = ("import os, signal, sys\n"
              "os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)\n"
              "from monitor._atomic import write_atomically\n"
              "write_atomically(sys.argv[1], '{}')\n")
    proc = subprocess.run([sys.executable, "-c", script, str(path)], cwd=REPO, timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL
    return int(next(p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")).rsplit(".", 3)[1])


def _aged(path: Path) -> None:
    old = time.time() - STALE_S - 60
    os.utime(path, (old, old))


@pytest.mark.parametrize("name", ["r.json", "x" + "ä" * 120 + ".json", "報告" * 40 + ".json", "a" * 250 + ".json"],
                         ids=["short", "long-2-byte", "long-3-byte", "long-ascii"])
def test_a_left_temporary_file_of_a_long_name_goes_too(tmp_path: Path, name: str) -> None:
    """A file name too long for the temporary name to keep whole (cut to fit NAME_MAX, in bytes: within a character
    of two or three bytes) has its leftover removed by a later write as a short one has (that of a name whose
    characters are more than one byte stayed: its cut, at the byte, read back as another text than the cut of the
    shortest name that every leftover's starts with)."""
    target = tmp_path / name
    _killed_in_write(target)
    (left,) = tmp_path.iterdir()
    assert len(os.fsencode(left.name)) <= 255
    _aged(left)
    write_atomically(target, "[]")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_left_temporary_file_of_a_process_of_our_own_pid_goes(tmp_path: Path) -> None:
    """A leftover named after a PID that is now this process's (the same PID each run in a container: PID 1) is no
    write of ours in progress once it is older than STALE_S: removed (it stayed for good, its process taken for alive).
    A recent one stays (another PID namespace sharing the directory may be writing it)."""
    target = tmp_path / "r.json"
    old, recent = (tmp_path / f".r.json.{os.getpid()}.{n}.tmp" for n in ("0123abcd", "4567cdef"))
    old.write_text("x", encoding="utf-8")
    recent.write_text("x", encoding="utf-8")
    _aged(old)
    write_atomically(target, "[]")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([recent.name, "r.json"])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_signal_just_as_the_temporary_file_is_made_leaves_none(tmp_path: Path, signum: signal.Signals) -> None:
    """A signal whose default action ends the process that comes the moment the temporary file exists (before the
    write has begun) removes it too: the handler is there before the file is (it came only after, and the file
    stayed)."""
    script = ("import os, signal, sys\n"
              "_open = os.open\n"
              "def opened(path, *args, **kwargs):\n"
              "    fd = _open(path, *args, **kwargs)\n"
              f"    if os.fspath(path).endswith('.tmp'): os.kill(os.getpid(), {int(signum)})\n"
              "    return fd\n"
              "os.open = opened\n"
              "from monitor._atomic import write_atomically\n"
              "write_atomically(sys.argv[1], '{}')\n")
    target = tmp_path / "r.json"
    target.write_text("old", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", script, str(target)], cwd=REPO, timeout=60, check=False)
    assert proc.returncode == -signum
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert target.read_text(encoding="utf-8") == "old"


def test_a_temporary_name_already_taken_is_not_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that has the name the write drew for its temporary file (another PID namespace's process of the same
    PID that drew the same token) is not the write's: the write fails (the name is taken) and leaves it there."""
    import secrets

    monkeypatch.setattr(secrets, "token_hex", lambda n: "0123abcd")
    taken = tmp_path / f".r.json.{os.getpid()}.0123abcd.tmp"
    taken.write_text("another's", encoding="utf-8")
    with pytest.raises(FileExistsError):
        write_atomically(tmp_path / "r.json", "{}")
    assert taken.read_text(encoding="utf-8") == "another's"
    assert sorted(p.name for p in tmp_path.iterdir()) == [taken.name]


@pytest.mark.parametrize("case", ["cut", "strict", "no-turns"])
def test_a_form_that_cannot_be_written_still_says_what_of_the_input_could_not_be_read(
    span_file: Path, support_rules: Path, tmp_path: Path, case: str
) -> None:
    """A report form whose write fails after the run (/dev/full: a disk that fills) raised its error before replay
    said what of its input could not be read: a file not read to its end, undecodable records under --strict, no turn
    replayed. Only `cannot write` was printed (with -q nothing else), so the fix looked like a free disk. Both are
    said now, the input's errors first, and the exit is 2 (an input error, and a form not written)."""
    lines = span_file.read_bytes().splitlines(keepends=True)
    path = tmp_path / "in.jsonl"
    extra: list[str] = []
    if case == "cut":
        path.write_bytes(b"".join(lines[:-1]) + lines[-1][:50])
        expected = f"error: {path}: cannot read past byte"
    elif case == "strict":
        path.write_bytes(b"not json\n" + b"".join(lines))
        extra = ["--strict"]
        expected = f"error: 1 undecodable record(s) (--strict); first: {path}: line 1: invalid JSON"
    else:
        path.write_bytes(b"not json\n")
        expected = f"error: no turns replayed: 1 undecodable record(s) skipped (first: {path}: line 1: invalid JSON"
    fine = _replay(path, support_rules, *extra)
    assert fine.returncode == 2 and expected in fine.stderr, fine.stderr  # as it is said when every form is written
    res = _replay(path, support_rules, *extra, "--json", "/dev/full")
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "cannot write /dev/full: No space left on device" in res.stderr, res.stderr
    assert expected in res.stderr, res.stderr
    assert res.stderr.index(expected) < res.stderr.index("cannot write /dev/full"), res.stderr
    assert "Traceback" not in res.stderr
