"""The verdict log stays within --verdict-log-max-bytes x (1 + backups) whatever the turns, and survives its folder."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from monitor.judge import Judge
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.serve import VerdictLog
from monitor.verdict import TurnVerdict
from tests.monitor.service.conftest import RULES, ServeFactory, wait_for
from tests.monitor.service.spans import Call, TurnSpec, record_turns


def _files(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + "*"))


def test_a_verdict_larger_than_the_log_is_shortened_to_fit(tmp_path: Path) -> None:
    # 900 calls of made-up tools with 8,000-character names: a 7 MB line, which went whole into a log bounded at
    # 64 KiB a file (4 files of 7 MB with a 1 MiB bound, through `toolwatch serve`).
    judge = Judge(load_rules([RULES]))
    calls = tuple(ToolCall(f"made_up_{i}_" + "x" * 8000, arguments="{}") for i in range(900))
    big = judge.judge(Turn("[BILL] " + "\ud800" + "y" * 5000, calls))
    small = judge.judge(Turn("[BILL] y", (ToolCall("pull_auth_telemetry", arguments="{}"),)))
    path = tmp_path / "v.jsonl"
    limit = 64 << 10
    log = VerdictLog(path, max_bytes=limit, backups=3)
    for _ in range(6):
        log.write([big, small])
    log.close()
    files = _files(path)
    assert len(files) == 4
    assert all(0 < f.stat().st_size <= limit for f in files), [f.stat().st_size for f in files]
    records = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    shortened = [r for r in records if "calls_omitted" in r]
    assert shortened and len(shortened) + sum(1 for r in records if len(r["calls"]) == 1) == len(records)
    for r in shortened:
        assert r["calls_omitted"] > 0 and len(r["calls"]) + r["calls_omitted"] == 900
        assert r["failed"] is True and r["reason"] and r["input"].startswith("[BILL] \ud800y")
        assert all(c["name"].startswith("made_up_") and len(c["name"]) <= 203 for c in r["calls"])
    assert log.written == 12 and log.failed == 0


def test_a_huge_turn_through_serve_keeps_the_disk_bound(serve: ServeFactory, tmp_path: Path) -> None:
    path = tmp_path / "logs" / "v.jsonl"
    limit = 64 << 10
    thread, server = serve(verdict_log=str(path), verdict_log_max_bytes=limit)
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=20)
    for k in range(5):
        calls = [Call(f"made_up_{k}_{i}_" + "x" * 2000) for i in range(300)]
        assert exporter.export(record_turns([TurnSpec("z" * 50_000, calls)])) is SpanExportResult.SUCCESS
    exporter.shutdown()  # type: ignore[no-untyped-call]
    wait_for(lambda: server.pipeline.turns_judged == 5, timeout=10)
    log = server.pipeline.verdict_log
    assert log is not None
    thread.call(log.flush)  # on the server's loop, which owns the log (it is not thread-safe)
    files = _files(path)
    assert len(files) == 4 and all(0 < f.stat().st_size <= limit for f in files), [f.stat().st_size for f in files]


def _verdict(text: str = "y") -> TurnVerdict:
    judge = Judge(load_rules([RULES]))
    return judge.judge(Turn("[BILL] " + text, (ToolCall("pull_auth_telemetry", arguments="{}"),)))


def test_a_log_whose_folder_is_removed_is_made_again_at_the_next_flush(tmp_path: Path) -> None:
    # The folder removed under a log that then had to rotate: the rotation could not open the file again, and every
    # flush after it raised "I/O operation on closed file" (a traceback from the service's worker ten times a second,
    # the log never written again until the folder came back and the log filled up).
    import shutil

    v = _verdict("x" * 300)
    path = tmp_path / "logs" / "v.jsonl"
    log = VerdictLog(path, max_bytes=4096, backups=3, all_turns=True)
    log.write([v] * 5)
    shutil.rmtree(path.parent)
    log.write([v] * 20)  # into the removed file, then a rotation that cannot move it: the file is made again
    log.flush()  # never raises
    assert path.exists()
    assert log.failed == 1 and log.written == 24  # only the line that found no file to go to is lost
    log.write([v] * 3)
    log.flush()
    assert log.written == 27 and log.failed == 1
    lines = [json.loads(x) for f in _files(path) for x in f.read_text().splitlines()]
    assert 3 <= len(lines) <= 27
    log.close()


def test_a_log_whose_file_is_removed_is_opened_again_at_the_next_flush(tmp_path: Path) -> None:
    v = _verdict()
    path = tmp_path / "logs" / "v.jsonl"
    log = VerdictLog(path, all_turns=True)
    log.write([v])
    path.unlink()
    log.flush()  # the path no longer names the open file: a new one is opened
    log.write([v, v])
    log.close()
    assert len(path.read_text().splitlines()) == 2


def test_a_log_removed_while_serving_is_written_again(serve: ServeFactory, tmp_path: Path) -> None:
    import shutil

    path = tmp_path / "logs" / "v.jsonl"
    _, server = serve(verdict_log=str(path), verdict_log_all=True)
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)

    def send(n: int) -> None:
        for _ in range(n):
            turn = TurnSpec("[BILL] y", [Call("pull_auth_telemetry", {})])
            assert exporter.export(record_turns([turn])) is SpanExportResult.SUCCESS

    send(3)
    wait_for(lambda: server.pipeline.turns_judged == 3, timeout=5)
    shutil.rmtree(path.parent)
    wait_for(path.exists, timeout=3)  # the service's flush, about once a second, makes it again
    send(4)
    wait_for(lambda: server.pipeline.turns_judged == 7, timeout=5)
    wait_for(lambda: len(path.read_text().splitlines()) == 4, timeout=3)
    exporter.shutdown()  # type: ignore[no-untyped-call]


def test_every_line_a_full_disk_loses_is_counted(tmp_path: Path) -> None:
    """Lines go to an 8 KiB buffer first: a failed flush lost every line in it but counted one, so 2000 lines to a
    full device read `failed=80, written=1920` with nothing on disk. Each lost line is counted, and reported."""
    full = tmp_path / "v.jsonl"
    full.symlink_to("/dev/full")
    lost: list[int] = []
    log = VerdictLog(full, all_turns=True, on_lost=lost.append)
    v = _verdict()
    for _ in range(2000):
        log.write([v])
    log.flush()
    log.close()
    assert (log.written, log.failed, sum(lost)) == (0, 2000, 2000)
    ok = VerdictLog(tmp_path / "ok.jsonl", all_turns=True, on_lost=lost.append)
    ok.write([v] * 50)
    ok.flush()
    ok.close()
    assert (ok.written, ok.failed) == (50, 0) and len((tmp_path / "ok.jsonl").read_text().splitlines()) == 50


def test_a_record_of_non_ascii_text_keeps_the_smallest_bound(tmp_path: Path) -> None:
    """Texts were cut to 200 characters, which JSON writes as up to 12 bytes each (\\ud83d\\ude00): a record of
    an input of emoji and CJK was 1.2-1.5 KB in files bounded at 1024 bytes. Texts are cut shorter until it fits."""
    judge = Judge(load_rules([RULES]))
    name = "made_up_" + " é障😀" * 100
    v = judge.judge(Turn("[BILL] " + " é障😀" * 300, (ToolCall(name, arguments="{}"),) * 3))
    path = tmp_path / "v.jsonl"
    log = VerdictLog(path, max_bytes=1024, backups=3)
    for _ in range(5):
        log.write([v])
    log.close()
    files = _files(path)
    assert len(files) == 4 and all(0 < f.stat().st_size <= 1024 for f in files), [f.stat().st_size for f in files]
    records = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert all(r["input"].startswith("[BILL] ") and r["failed"] for r in records)


_FILE_LIMIT_RUN = r"""
import json, resource, sys
from pathlib import Path
from monitor.judge import Judge
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.serve import VerdictLog

rules, path, limit, flush_every = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
v = Judge(load_rules([rules])).judge(Turn("[BILL] y", (ToolCall("pull_auth_telemetry", arguments="{}"),)))
lost = []
log = VerdictLog(path, all_turns=True, on_lost=lost.append)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))  # writes past it fail (EFBIG)
for i in range(2000):
    log.write([v])
    if flush_every and i % flush_every == flush_every - 1:
        log.flush()
log.flush()
log.close()
print(json.dumps({"written": log.written, "failed": log.failed, "reported": sum(lost)}))
"""


def test_lines_a_full_file_loses_are_counted_as_the_lines_not_on_disk(tmp_path: Path) -> None:
    """Lines reach the disk in 8 KiB pieces between flushes: a write that failed at a file size limit counted every
    line since the last flush lost (2,000 of 2,000 with 205 whole on disk). The lines lost are those not on disk."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    for flush_every in (0, 300, 7):  # never (the 8 KiB buffer fills), now and then, often
        path = tmp_path / f"v{flush_every}.jsonl"
        run = subprocess.run(
            [sys.executable, "-c", _FILE_LIMIT_RUN, str(RULES), str(path), "100000", str(flush_every)],
            cwd=root, capture_output=True, text=True, timeout=60, check=True,
        )
        counts = json.loads(run.stdout)
        data = path.read_bytes()
        assert 90_000 < len(data) <= 100_000
        whole, _, piece = data.rpartition(b"\n")  # a piece of a line the limit cut (removed at the next open)
        assert b"\n" not in piece and b'{"time":'.startswith(piece[:8])
        on_disk = [json.loads(line) for line in whole.splitlines()]
        assert counts == {"written": len(on_disk), "failed": 2000 - len(on_disk), "reported": 2000 - len(on_disk)}, (
            flush_every, len(on_disk))



_CUT_BEFORE_NEWLINE_RUN = r"""
import json, resource, sys
from pathlib import Path
from monitor.judge import Judge
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.serve import VerdictLog

rules, path, whole = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
v = Judge(load_rules([rules])).judge(Turn("[BILL] y", (ToolCall("pull_auth_telemetry", arguments="{}"),)))
lost = []
log = VerdictLog(path, all_turns=True, on_lost=lost.append)
log.write([v])  # one line, to learn its size: the lines of one write() are as long as each other
log.flush()
line = path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (line * whole - 1, resource.RLIM_INFINITY))  # all but the newline of one
log.write([v] * 200)  # fails (EFBIG): the file holds the lines before the last one whole, and that one but its newline
log.flush()  # the log opens its file again, the limit still there
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # room again
log.write([v] * 3)
log.flush()
log.close()
print(json.dumps({"written": log.written, "failed": log.failed, "reported": sum(lost)}))
"""


def test_a_line_a_failure_left_without_its_newline_is_no_line_counted_lost_yet_on_disk(tmp_path: Path) -> None:
    """A write cut just before a line's newline leaves the whole record but its newline. Counted lost, it stayed
    at the end of the file without its newline when the log opened it again while the failure went on (the newline
    could not be added): the next line written once there was room again went on after it, two records on one line
    of broken JSON (and one of them counted lost). Every line on disk is whole and counted written, the others lost."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    for whole in (2, 7, 40):  # lines in the file when the write failed, the last one without its newline
        path = tmp_path / f"v{whole}.jsonl"
        run = subprocess.run(
            [sys.executable, "-c", _CUT_BEFORE_NEWLINE_RUN, str(RULES), str(path), str(whole)],
            cwd=root, capture_output=True, text=True, timeout=60, check=True,
        )
        counts = json.loads(run.stdout)
        data = path.read_bytes()
        assert data.endswith(b"\n"), whole
        on_disk = [json.loads(line) for line in data.splitlines()]  # each line one record
        assert counts == {"written": len(on_disk), "failed": 204 - len(on_disk), "reported": 204 - len(on_disk)}, (
            whole, len(on_disk))


_ROTATE_FAILING_RUN = r"""
import json, resource, sys
from pathlib import Path
from monitor.judge import Judge
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.serve import VerdictLog

rules, path, max_bytes, limit = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
v = Judge(load_rules([rules])).judge(Turn("[BILL] y", (ToolCall("pull_auth_telemetry", arguments="{}"),)))
lost = []
log = VerdictLog(path, all_turns=True, max_bytes=max_bytes, on_lost=lost.append)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))  # writes past it fail (EFBIG)
for _ in range(40):
    log.write([v])
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
log.flush()
log.close()
print(json.dumps({"written": log.written, "failed": log.failed, "reported": sum(lost)}))
"""


def test_a_file_rotated_when_its_last_lines_cannot_be_written_keeps_no_piece_of_a_record(tmp_path: Path) -> None:
    """Rotation closes the file (its last flush fails on a full device or at a file size limit, a piece of a line
    written) and moves it aside: the piece went with it, never cut (only the file the log opens is), so the backup
    ended in a line of broken JSON (`jq` stops there). Every line of every file is a whole record, one counted."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    path = tmp_path / "v.jsonl"
    run = subprocess.run(  # the 8 KiB buffer written at 8,192 bytes; at 12,000 the rotation's flush passes 10,000
        [sys.executable, "-c", _ROTATE_FAILING_RUN, str(RULES), str(path), "12000", "10000"],
        cwd=root, capture_output=True, text=True, timeout=60, check=True,
    )
    counts = json.loads(run.stdout)
    files = _files(path)
    assert len(files) == 2 and counts["failed"] > 0, (files, counts)
    for f in files:
        data = f.read_bytes()
        assert data.endswith(b"\n"), f
        assert all(json.loads(line)["failed"] for line in data.splitlines()), f
    on_disk = sum(len(f.read_bytes().splitlines()) for f in files)
    assert counts == {"written": on_disk, "failed": 40 - on_disk, "reported": 40 - on_disk}, (counts, on_disk)


def test_a_log_closed_when_its_last_lines_cannot_be_written_ends_with_a_whole_line(tmp_path: Path) -> None:
    """The service stopping on a full device (or at a file size limit): the last flush, at close, writes a piece of a
    line. It stayed at the end of the file until a log opened it again. Every line is a whole record, one counted."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    path = tmp_path / "v.jsonl"
    script = _ROTATE_FAILING_RUN.replace("log.flush()\nlog.close()", "log.close()").replace(
        "resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n", "")
    run = subprocess.run(  # no rotation: 40 lines of about 500 bytes, the writes past 10,000 bytes fail
        [sys.executable, "-c", script, str(RULES), str(path), str(1 << 20), "10000"],
        cwd=root, capture_output=True, text=True, timeout=60, check=True,
    )
    counts = json.loads(run.stdout)
    data = path.read_bytes()
    assert counts["failed"] > 0 and data.endswith(b"\n"), (counts, data[-80:])
    on_disk = [json.loads(line) for line in data.splitlines()]
    assert counts == {"written": len(on_disk), "failed": 40 - len(on_disk), "reported": 40 - len(on_disk)}


_EMPTY_ROTATIONS_RUN = r"""
import json, resource, sys
from pathlib import Path
from monitor.judge import Judge
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.serve import VerdictLog

rules, path = sys.argv[1], Path(sys.argv[2])
v = Judge(load_rules([rules])).judge(Turn("[BILL] y", (ToolCall("pull_auth_telemetry", arguments="{}"),)))
log = VerdictLog(path, all_turns=True, max_bytes=4096, backups=3)
for _ in range(40):  # the backups fill
    log.write([v])
    log.flush()
before = [p.read_bytes() for p in path.parent.glob(path.name + "*")]  # the file and its backups
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # no write goes through (EFBIG)
for _ in range(100):
    log.write([v])  # 4 KiB of lines fill no 8 KiB buffer: they fail at the rotation's close, the file empty
log.close()
after = {p.name: p.read_bytes() for p in path.parent.glob(path.name + ".*")}
sizes = {name: len(data) for name, data in sorted(after.items())}
print(json.dumps({"kept": all(data in before for data in after.values()), "sizes": sizes}))
"""


def test_rotations_while_nothing_can_be_written_keep_the_backups(tmp_path: Path) -> None:
    """With the device full, every line of a file is lost, the file left empty: rotating it still moved it aside, and
    each rotation pushed out a backup of whole records, soon all of them (backups=3: four rotations), for empty
    files. A file with nothing to keep is not moved aside: the backups are files of before, none empty."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    run = subprocess.run(
        [sys.executable, "-c", _EMPTY_ROTATIONS_RUN, str(RULES), str(tmp_path / "v.jsonl")],
        cwd=root, capture_output=True, text=True, timeout=60, check=True,
    )
    out = json.loads(run.stdout)
    assert out["kept"] and len(out["sizes"]) == 3 and all(out["sizes"].values()), out
