"""Captures cut short by a writer that stopped mid-record (a Collector still writing, or killed) or otherwise damaged:
what came before the damage is replayed, and the file is a read error saying where, whatever its format."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner

from monitor.cli.replay_cmd import replay
from monitor.judge import Judge
from monitor.replay import SourceError, detect_format
from tests.monitor.offline.agents import SUPPORT_INPUTS, support_agent
from tests.monitor.offline.conftest import capture_spans, replay_sorted, write_span_files


@pytest.fixture(scope="module")
def batches() -> list[object]:
    return capture_spans(support_agent, SUPPORT_INPUTS)


@pytest.mark.parametrize("compress", ["", ".gz", ".zst"])
def test_a_json_lines_capture_cut_inside_its_last_line_is_a_read_error_after_the_whole_lines(
    batches: list[object], support_judge: Judge, support_rules: Path, tmp_path: Path, compress: str
) -> None:
    """The Collector's `format: json` (its default) writes each request as one line ending in a newline. A capture
    cut inside its last line gave that line as one undecodable record ("invalid JSON: Unterminated string ...") and
    exit 0, while the same capture cut in its proto format, or cut inside its .gz, is a read error (exit 2) saying
    that it was cut and where. A last line with no newline that does not decode is now the same read error: the
    whole lines before it are replayed, the error names the byte where the cut line starts."""
    lines = write_span_files(batches, tmp_path / "in")["jsonl"].read_bytes().splitlines(keepends=True)
    whole = b"".join(lines[:-1])
    content = whole + lines[-1][: len(lines[-1]) // 2]
    packed = {"": content, ".gz": gzip.compress(content), ".zst": zstandard.ZstdCompressor().compress(content)}
    path = tmp_path / f"live.jsonl{compress}"
    path.write_bytes(packed[compress])
    verdicts, r = replay_sorted(support_judge, [path])
    assert len(verdicts) == len(lines) - 1 and not r.stats.bad_records.total
    what = "decompressed content" if compress else "content"
    (error,) = r.stats.read_errors
    assert error.startswith(f"{path}: cannot read past byte {len(whole)} of its {what} (after {len(lines) - 1} lines, "
                            f"which were replayed): cut short: the last line ({len(lines[-1]) // 2} bytes) has no "
                            "newline and is not a whole request: invalid JSON: "), error
    out = tmp_path / "report.json"
    res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", "-q",
                                      "--json", str(out)])
    assert res.exit_code == 2, res.output
    assert f"error: {error}" in res.stderr.splitlines(), res.stderr
    assert json.loads(out.read_text())["counts"]["turns"] == len(lines) - 1


def test_a_cut_capture_of_one_line_says_so_and_a_last_line_without_newline_that_decodes_is_whole(
    batches: list[object], support_judge: Judge, tmp_path: Path
) -> None:
    lines = write_span_files(batches, tmp_path / "in")["jsonl"].read_bytes().splitlines(keepends=True)
    one = tmp_path / "one.jsonl"
    one.write_bytes(lines[0][:100])
    verdicts, r = replay_sorted(support_judge, [one])
    assert not verdicts and not r.stats.bad_records.total
    (error,) = r.stats.read_errors
    assert error.startswith(f"{one}: cannot read at byte 0 of its content: cut short: the last line (100 bytes) has "
                            "no newline"), error
    unended = tmp_path / "unended.jsonl"  # a writer that leaves off the last newline: every line is whole
    unended.write_bytes(b"".join(lines).rstrip(b"\n"))
    verdicts, r = replay_sorted(support_judge, [unended])
    assert len(verdicts) == len(lines) and not r.stats.read_errors and not r.stats.bad_records.total
    for last in (b"{not json\n", b'{"resourceSpans": 3}'):  # ends in a newline, or is whole JSON: a bad record
        bad_last = tmp_path / "bad_last.jsonl"
        bad_last.write_bytes(b"".join(lines) + last)
        verdicts, r = replay_sorted(support_judge, [bad_last])
        assert len(verdicts) == len(lines) and not r.stats.read_errors, last
        assert [b.where for b in r.stats.bad_records] == [f"line {len(lines) + 1}"], last


@pytest.mark.parametrize("fmt", ["jsonl", "pb", "pb-be32"])
@pytest.mark.parametrize("damage", ["cut .gz", "corrupt .gz", "not zstd past its magic"])
def test_a_damaged_compressed_capture_read_with_a_format_given_is_a_read_error_not_a_crash(
    batches: list[object], support_rules: Path, tmp_path: Path, fmt: str, damage: str
) -> None:
    """With --format given, a file not read to its end is opened again to say what it looks like (the hint). That
    second look read the damage again and raised past the CLI: a corrupt .gz (zlib.error) or data that is not zstd
    after a zstd magic (ZstdError) ended replay in a traceback, exit 1, and a .gz cut in its first bytes (EOFError)
    in click's "Aborted!", exit 1, after the report; the read error is exit 2. detect_format now raises
    SourceError for a file it cannot read, and the hint passes over it."""
    data = gzip.compress(write_span_files(batches, tmp_path / "in")["jsonl"].read_bytes())
    damaged = {"cut .gz": data[:15], "corrupt .gz": data[:13] + b"\xff" * 7 + data[20:],
               "not zstd past its magic": b"\x28\xb5\x2f\xfd" + b"\xff" * 100}[damage]
    path = tmp_path / ("capture.zst" if damage.startswith("not zstd") else "capture.jsonl.gz")
    path.write_bytes(damaged)
    with pytest.raises(SourceError, match=f"^{path}: cannot read"):
        detect_format(path)
    res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", "-q",
                                      "--format", fmt])
    assert res.exit_code == 2, (res.output, res.exception)
    assert "Aborted!" not in res.output and (res.exception is None or isinstance(res.exception, SystemExit))
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {path}: cannot read"), res.stderr


@pytest.mark.parametrize("keep", [15, 200])  # in the gzip header's first block; inside the first line's data
def test_a_gz_capture_cut_before_its_first_whole_line_names_the_offset(
    batches: list[object], support_rules: Path, tmp_path: Path, keep: int
) -> None:
    """The README promises the error names the file and the offset. A .gz cut before its first whole line said only
    `cannot read: Compressed file ended before the end-of-stream marker was reached`; it names the byte of its
    decompressed content that could not be read past (0: where its first line starts), as a cut past whole lines
    does."""
    data = gzip.compress(write_span_files(batches, tmp_path / "in")["jsonl"].read_bytes())
    path = tmp_path / "capture.jsonl.gz"
    path.write_bytes(data[:keep])
    d = zlib.decompressobj(wbits=31)
    assert b"\n" not in d.decompress(data[:keep])  # no whole line in what is left
    res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", "-q"])
    assert res.exit_code == 2, (res.output, res.exception)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert errors == [f"error: {path}: cannot read at byte 0 of its decompressed content: Compressed file ended "
                      "before the end-of-stream marker was reached"], res.stderr


@pytest.mark.parametrize(("gate", "passed"), [("accuracy=0.1", True), ("accuracy=1.0", False)])
def test_a_gate_with_a_file_not_read_to_its_end_exits_2_and_every_form_says_why(
    batches: list[object], support_rules: Path, tmp_path: Path, gate: str, passed: bool
) -> None:
    """A gate over a capture cut short: exit 2 (the input error) whether the gate passed or failed, as the exit codes
    say, never 0 on the part read. The report's forms recorded `All gates passed.` with no word of the read error
    (only JUnit had it): a CI job that posts the Markdown showed a green gate. Every form's notes now say the file
    was not read to its end and that the figures and gates are of what was read."""
    lines = write_span_files(batches, tmp_path / "in")["jsonl"].read_bytes().splitlines(keepends=True)
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:50])
    out = tmp_path / "out"
    res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", "-q",
                                      "--fail-under", gate, "--json", str(out / "r.json"), "--markdown",
                                      str(out / "r.md")])
    assert res.exit_code == 2, res.output
    data = json.loads((out / "r.json").read_text())
    assert [g["passed"] for g in data["gates"]] == [passed]
    (error,) = [ln.removeprefix("error: ") for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    note = ("1 file(s) not read to their end (exit 2): the figures and gates are of what was read before; first: "
            f"{error}")
    assert note in data["notes"], data["notes"]
    assert error in (out / "r.md").read_text()
