"""Replay sources that are not regular files (FIFOs, process substitution, a terminal on standard input) and
content whose first bytes a plain check misses (a zstd stream opened by a skippable frame, a UTF-8 byte order mark,
UTF-16 text).
"""

from __future__ import annotations

import gzip
import os
import pty
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner

from monitor.cli.replay_cmd import replay
from monitor.judge import Judge
from monitor.replay import detect_format, expand_sources, total_bytes
from tests.monitor.offline.agents import SUPPORT_INPUTS, support_agent
from tests.monitor.offline.conftest import REPO, capture_spans, replay_sorted, write_span_files

ACCURACY = "Tool call accuracy: 5/9 (55.6%)"


@pytest.fixture(scope="module")
def batches() -> list[object]:
    return capture_spans(support_agent, SUPPORT_INPUTS)


@contextmanager
def fifo_fed(path: Path, data: bytes) -> Iterator[Path]:
    """A FIFO at `path` that a thread writes `data` to once a reader opens it (as `<(zcat spans.gz)` does)."""
    os.mkfifo(path)

    def feed() -> None:
        try:
            with open(path, "wb") as fh:
                fh.write(data)
        except BrokenPipeError:  # the reader left early (a test that failed)
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        yield path
    finally:
        if writer.is_alive():  # not read: open it once so the writer's open returns
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            os.close(fd)
        writer.join(timeout=10)


def _skippable(payload: bytes, nibble: int = 0) -> bytes:
    return bytes([0x50 | nibble]) + b"\x2a\x4d\x18" + len(payload).to_bytes(4, "little") + payload


def test_a_fifo_source_is_read_as_a_stream(batches: list[object], support_rules: Path, tmp_path: Path) -> None:
    """`toolwatch replay <(zcat spans.jsonl.gz)` or a named pipe: refused as 'no such file or directory' before
    (only regular files and directories were taken); now read as standard input is, detected the same way, with no
    size (progress shows bytes read of an unknown total)."""
    files = write_span_files(batches, tmp_path / "files")
    for name, data in (("plain", files["jsonl"].read_bytes()), ("gz", gzip.compress(files["pb"].read_bytes()))):
        with fifo_fed(tmp_path / f"{name}.fifo", data) as fifo:
            assert total_bytes(expand_sources([fifo])) is None
        with fifo_fed(tmp_path / f"{name}.cli", data) as fifo:
            res = CliRunner().invoke(replay, [str(fifo), "--rules", str(support_rules), "-q"])
            assert res.exit_code == 0, res.output
            assert ACCURACY in res.output


def test_a_fifo_that_does_not_read_as_the_format_given_is_not_reopened_for_the_hint(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """The hint for a --format that does not fit reopens the sources to see what they look like: a FIFO reopened
    waits for a writer that is gone, forever. A FIFO is not looked at again."""
    files = write_span_files(batches, tmp_path / "files")
    with fifo_fed(tmp_path / "spans.fifo", files["jsonl"].read_bytes()) as fifo:
        res = CliRunner().invoke(replay, [str(fifo), "--rules", str(support_rules), "--format", "pb-be32", "-q"])
    assert res.exit_code == 2, res.output
    assert "--format pb-be32 was given" in res.output


def test_a_fifo_given_twice_is_refused_before_anything_is_read(support_rules: Path, tmp_path: Path) -> None:
    """Read once, a FIFO opened again waits for a writer that is gone: the second would hang the replay."""
    fifo = tmp_path / "spans.fifo"
    os.mkfifo(fifo)
    res = CliRunner().invoke(replay, [str(fifo), str(fifo), "--rules", str(support_rules), "-q"])
    assert res.exit_code == 2
    assert "given twice" in res.output, res.output


def test_a_source_that_is_neither_a_file_a_directory_nor_a_stream_is_named_for_what_it_is(
    support_rules: Path, tmp_path: Path
) -> None:
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        res = CliRunner().invoke(replay, [str(sock_path), "--rules", str(support_rules), "-q"])
    assert res.exit_code == 2
    assert "is a socket" in res.output and "no such file" not in res.output, res.output


def test_standard_input_that_is_a_terminal_is_refused_at_once(support_rules: Path, tmp_path: Path) -> None:
    """`toolwatch replay -` typed at a shell prompt waited for input from the terminal, silently, forever."""
    parent, child = pty.openpty()
    try:
        code = "from monitor.cli import main; main()"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        res = subprocess.run([sys.executable, "-c", code, "replay", "-", "--rules", str(support_rules), "-q"],
                             stdin=child, capture_output=True, text=True, timeout=60, check=False, env=env,
                             cwd=tmp_path)
    finally:
        os.close(parent)
        os.close(child)
    assert res.returncode == 2, res.stderr
    assert "standard input (-) is a terminal" in res.stderr


def test_standard_input_that_is_closed_is_said_so(support_rules: Path, tmp_path: Path) -> None:
    """`toolwatch replay - <&-`: Python has no sys.stdin then; replay ended in an AttributeError traceback."""
    code = "from monitor.cli import main; main()"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", code, "replay", "-", "--rules", str(support_rules), "-q"],
                         capture_output=True, text=True, timeout=60, check=False, env=env, cwd=tmp_path,
                         preexec_fn=lambda: os.close(0))  # the child closes its stdin
    assert res.returncode == 2, res.stderr
    assert "standard input (-) is closed" in res.stderr and "Traceback" not in res.stderr


def test_a_terminal_given_by_name_is_refused_at_once(support_rules: Path) -> None:
    """/dev/stdin at a prompt, /dev/tty: a character device read as a stream, but one that never ends."""
    parent, child = pty.openpty()
    try:
        res = CliRunner().invoke(replay, [os.ttyname(child), "--rules", str(support_rules), "-q"])
    finally:
        os.close(parent)
        os.close(child)
    assert res.exit_code == 2
    assert "is a terminal" in res.output, res.output


def test_a_zstd_stream_opened_by_a_skippable_frame_is_detected(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """zstd was told by the magic of a data frame only: a stream that starts with a skippable frame (pzstd writes
    one before each frame) was read as undecodable lines or protobuf. Its magic (0x50..0x5F 2A 4D 18) starts no OTLP
    JSON, protobuf request or framing (as a 4-byte size it is past every bound) either."""
    files = write_span_files(batches, tmp_path / "files")
    for kind, nibble in (("jsonl", 0x0), ("pb", 0xE)):
        content = files[kind].read_bytes()
        half = len(content) // 2
        packed = b"".join(_skippable(b"pzstd" * 3, nibble) + zstandard.ZstdCompressor().compress(part)
                          for part in (content[:half], content[half:]))
        named = tmp_path / f"packed.{kind}"
        named.write_bytes(packed)
        assert detect_format(named) == kind
        for source, stdin in ((str(named), None), ("-", packed)):
            res = CliRunner().invoke(replay, [source, "--rules", str(support_rules), "-q"], input=stdin)
            assert res.exit_code == 0, res.output
            assert ACCURACY in res.output


def test_json_lines_after_a_utf8_byte_order_mark_are_json_without_a_suffix(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """A capture saved by a tool that writes a UTF-8 byte order mark, with no .json suffix to tell its format (or
    on standard input), was taken for protobuf: every line lost, exit 2."""
    files = write_span_files(batches, tmp_path / "files")
    marked = b"\xef\xbb\xbf" + files["jsonl"].read_bytes()
    unnamed = tmp_path / "capture"
    unnamed.write_bytes(marked)
    assert detect_format(unnamed) == "jsonl"
    for source, stdin in ((str(unnamed), None), ("-", marked)):
        res = CliRunner().invoke(replay, [source, "--rules", str(support_rules), "-q"], input=stdin)
        assert res.exit_code == 0, res.output
        assert ACCURACY in res.output


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("name", ["spans.jsonl", "spans"])
def test_json_lines_in_utf_16_are_one_clear_read_error(
    batches: list[object], support_judge: Judge, support_rules: Path, tmp_path: Path, encoding: str, name: str
) -> None:
    """Windows PowerShell 5.1 writes UTF-16 with a byte order mark when it redirects output (`... > spans.jsonl`).
    Such a capture was read as bytes: split at each 0x0a byte, the first and the last lines were undecodable records
    and the others decoded only because JSON decoding guessed the shifted bytes to be the other byte order (a file
    with no suffix was read as protobuf: one undecodable message). It is now one read error saying what it is and
    how to convert it, and nothing of it is half read."""
    text = write_span_files(batches, tmp_path / "in")["jsonl"].read_text(encoding="utf-8")
    path = tmp_path / name
    path.write_bytes(("\ufeff" + text).encode(encoding))
    verdicts, r = replay_sorted(support_judge, [path])
    assert not verdicts and not r.stats.bad_records.total
    assert r.stats.read_errors == [f"{path}: cannot read at byte 0 of its content: UTF-16 text (it starts with a "
                                   "byte order mark): OTLP JSON is UTF-8; convert it first (iconv -f UTF-16 -t "
                                   "UTF-8)"]
    res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", "-q"])
    assert res.exit_code == 2 and f"error: {r.stats.read_errors[0]}" in res.stderr.splitlines(), res.output


@pytest.mark.parametrize("content", [b"\xef\xbb\xbf", b"\xef\xbb\xbf\r\n", b"\xef\xbb\xbf\n\n"])
def test_a_capture_of_only_a_utf8_byte_order_mark_is_empty(
    support_judge: Judge, support_rules: Path, tmp_path: Path, content: bytes
) -> None:
    """An empty capture saved by a tool that writes a UTF-8 byte order mark (Notepad) holds it alone: it was an
    undecodable record, or a cut line, and exit 2 ("no turns replayed"), where an empty file is a capture without
    turns, warned of, exit 0. The mark is taken as the start of the text, as before JSON, so such a file is empty."""
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    verdicts, r = replay_sorted(support_judge, [path])
    assert not verdicts and not r.stats.bad_records.total and not r.stats.read_errors and not r.stats.requests
    res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", "-q"])
    assert res.exit_code == 0 and "warning: no turns to judge: 0 span(s) read" in res.stderr, res.output
