"""Replay of OTLP JSON lines and protobuf files through the live judge path."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli.replay_cmd import replay
from monitor.evaluate import Harness
from monitor.judge import Judge
from monitor.replay import Replayer, SourceError, detect_format, expand_sources, replay_files
from monitor.report import ReportBuilder
from tests.monitor.offline.agents import SUPPORT_INPUTS, support_agent
from tests.monitor.offline.conftest import (
    capture_spans,
    one_span_request,
    replay_sorted,
    varint,
    verdict_key,
    write_span_files,
)


@pytest.fixture(scope="module")
def batches() -> list[object]:
    return capture_spans(support_agent, SUPPORT_INPUTS)


def test_every_format_gives_the_verdicts_of_the_assembled_turns(
    batches: list[object], support_judge: Judge, tmp_path: Path
) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from monitor.assembly import TurnAssembler
    from monitor.otlp import decode_protobuf

    asm = TurnAssembler()
    spans = decode_protobuf(encode_spans([s for b in batches for s in b]).SerializeToString())  # type: ignore[attr-defined]
    direct = sorted((support_judge.judge(t) for t in asm.add(spans, 0) + asm.flush()), key=verdict_key)
    assert len(direct) == len(SUPPORT_INPUTS)
    files = write_span_files(batches, tmp_path)
    assert detect_format(files["jsonl"]) == "jsonl" and detect_format(files["single"]) == "pb"
    for name, path in files.items():
        verdicts, r = replay_sorted(support_judge, [path])
        assert verdicts == direct, name
        assert r.stats.turns == 10 and r.stats.turnless == 0 and not r.stats.bad_records


def test_replayed_figures_match_the_known_mix(batches: list[object], support_judge: Judge, tmp_path: Path) -> None:
    files = write_span_files(batches, tmp_path)
    b = ReportBuilder()
    r = Replayer(support_judge, b.add)
    replay_files(r, [files["jsonl"]])
    assert b.tally.format_accuracy() == "Tool call accuracy: 5/9 (55.6%)"
    assert b.tally.hallucinated == 1 and b.tally.missed == 3 and b.tally.schema_checked_calls == 8


def test_directories_gzip_and_bad_lines(batches: list[object], support_judge: Judge, tmp_path: Path) -> None:
    files = write_span_files(batches, tmp_path / "d")
    lines = files["jsonl"].read_text().splitlines()
    (tmp_path / "d" / "single.binpb").unlink()
    (tmp_path / "d" / "spans.pb").unlink()
    files["jsonl"].unlink()
    first = tmp_path / "d" / "a.jsonl"
    first.write_text("\n".join(lines[:5] + ["{not json", '{"resourceSpans": 3}']) + "\n")
    (tmp_path / "d" / "sub").mkdir()
    with gzip.open(tmp_path / "d" / "sub" / "b.jsonl.gz", "wt") as fh:
        fh.write("\n".join(lines[5:]) + "\n")
    (tmp_path / "d" / "notes.txt").write_text("ignored")
    paths = expand_sources([tmp_path / "d"])
    assert [p.name for p in paths] == ["a.jsonl", "b.jsonl.gz"]
    verdicts, r = replay_sorted(support_judge, paths)
    assert len(verdicts) == 10
    assert [(b.where, b.path.endswith("a.jsonl")) for b in r.stats.bad_records] == [("line 6", True), ("line 7", True)]


def test_missing_and_empty_sources(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        expand_sources([tmp_path / "nope.jsonl"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no span files"):
        expand_sources([tmp_path / "empty"])


def test_corrupt_protobuf_is_reported_not_raised(support_judge: Judge, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\x0a\xff\xff\xff\x0f garbage")
    verdicts, r = replay_sorted(support_judge, [bad])
    assert verdicts == [] and len(r.stats.bad_records) == 1
    assert "message 1" in r.stats.bad_records[0].where


def test_cli_replay_writes_reports_and_prints_accuracy(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    files = write_span_files(batches, tmp_path / "in")
    out = tmp_path / "out"
    args = [str(files["pb"]), "--rules", str(support_rules), "--no-progress", "--json", str(out / "r.json"),
            "--markdown", str(out / "r.md"), "--junit", str(out / "r.xml"), "--html", str(out / "r.html")]
    res = CliRunner().invoke(replay, args)
    assert res.exit_code == 0, res.output
    assert "Tool call accuracy: 5/9 (55.6%)" in res.output
    data = json.loads((out / "r.json").read_text())
    assert data["command"] == "replay" and data["counts"]["judged_calls"] == 9
    assert (out / "r.xml").read_text().count("<testcase") == 10
    assert "Tool call accuracy: 5/9 (55.6%)" in (out / "r.html").read_text()


def test_cli_replay_strict_and_bad_rules(batches: list[object], support_rules: Path, tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text("{oops\n")
    res = CliRunner().invoke(replay, [str(bad), "--rules", str(support_rules), "--no-progress", "--strict", "-q"])
    assert res.exit_code == 2 and "line 1" in res.output
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\ncatalog: {tools: [{name: a, nope: 1}]}\n")
    res = CliRunner().invoke(replay, [str(bad), "--rules", str(broken), "--no-progress"])
    assert res.exit_code == 2 and "broken.yaml" in res.output


def test_harness_restores_the_instrumentation_state() -> None:
    from instrumentation._context import TRACING

    before = TRACING.provider
    with Harness(agent_name="x"):
        assert TRACING.provider is not before
    assert TRACING.provider is before


def test_cli_truncated_gzip_keeps_what_was_read_reports_and_exits_2(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """A cut .gz: the lines before the cut are replayed, the files after it too, the report is printed and
    written, the error names the file and the offset, and the exit code is 2."""
    files = write_span_files(batches, tmp_path)
    data = gzip.compress(files["jsonl"].read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    lines = files["jsonl"].read_bytes().splitlines(keepends=True)
    after = tmp_path / "after.jsonl"  # the last two turns, replayed after the cut file
    after.write_bytes(b"".join(lines[-2:]))
    out = tmp_path / "r.json"
    res = CliRunner().invoke(replay, [str(cut), str(after), "--rules", str(support_rules), "--no-progress",
                                      "--json", str(out)])
    assert res.exit_code == 2, res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert line.startswith(f"error: {cut}: cannot read past byte ") and "of its decompressed content" in line
    offset = int(line.split("past byte ")[1].split()[0])
    whole = next(i for i in range(len(lines) + 1) if sum(map(len, lines[:i + 1])) > offset)
    assert 0 < whole < len(lines) - 2 and sum(map(len, lines[:whole])) == offset  # the offset is a line boundary
    assert f"(after {whole} lines, which were replayed)" in line
    assert "Tool call accuracy:" in res.stdout
    report = json.loads(out.read_text())
    assert report["counts"]["turns"] == whole + 2  # the whole lines of the cut file, then the next file


def test_cli_corrupt_gzip_is_a_read_error_and_the_next_file_is_replayed(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """Corrupt deflate data in a .gz (zlib.error, not an OSError) is a read error like a cut .gz: the files after it
    are replayed, the report is written, the error names the file, and the exit code is 2."""
    files = write_span_files(batches, tmp_path)
    data = bytearray(gzip.compress(files["jsonl"].read_bytes()))
    data[13:20] = b"\xff" * 7  # inside the first deflate block
    corrupt = tmp_path / "corrupt.jsonl.gz"
    corrupt.write_bytes(bytes(data))
    out = tmp_path / "r.json"
    res = CliRunner().invoke(replay, [str(corrupt), str(files["jsonl"]), "--rules", str(support_rules),
                                      "--no-progress", "-q", "--json", str(out)])
    assert res.exit_code == 2, res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert line.startswith(f"error: {corrupt}: cannot read at byte 0 of its decompressed content: "), line
    assert "while decompressing data" in line, line
    assert "Tool call accuracy: 5/9 (55.6%)" in res.stdout  # the next file, whole
    assert json.loads(out.read_text())["counts"]["turns"] == len(SUPPORT_INPUTS)


def test_cli_nothing_judged_because_every_span_was_rejected_is_an_error(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """Ids in base64 (the protobuf JSON mapping, not OTLP JSON): every span rejected, no turn. Exit 2 with the
    counts and a hint, on stderr, with -q too."""
    import base64

    def b64(hex_id: str) -> str:
        return base64.b64encode(bytes.fromhex(hex_id)).decode()

    files = write_span_files(batches, tmp_path)
    out = []
    for line in files["jsonl"].read_text().splitlines():
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = b64(span[key])
        out.append(json.dumps(doc))
    path = tmp_path / "b64.jsonl"
    path.write_text("\n".join(out) + "\n")
    spans = sum(len(ss["spans"]) for ln in out for rs in json.loads(ln)["resourceSpans"] for ss in rs["scopeSpans"])
    for quiet in ([], ["-q"]):
        res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", *quiet])
        assert res.exit_code == 2, res.output
        err = res.stderr.splitlines()
        counts = f"{spans} of {spans} span(s) rejected by the decoder (invalid_id={spans})"
        assert f"error: no turns replayed: {counts}" in err
        assert any(ln.startswith("hint: ") and "hex" in ln and "base64" in ln for ln in err), err


def test_the_bad_id_reason_replay_hints_on_is_what_the_decoder_counts() -> None:
    from monitor.otlp import REASON_BAD_ID, parse_json

    span = {"traceId": "abcd", "spanId": "0102030405060708", "name": "execute_tool x",
            "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    assert dict(parse_json(line.encode()).rejected) == {REASON_BAD_ID: 1}


def test_cli_nothing_judged_because_every_record_was_bad_is_an_error(support_rules: Path, tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_text('{"resourceSpans": 3}\n{oops\n')
    for quiet in ([], ["-q"]):
        res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", *quiet])
        assert res.exit_code == 2, res.output
        (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
        assert line.startswith(f"error: no turns replayed: 2 undecodable record(s) skipped (first: {path}: line 1: ")
        assert "--format" in res.stderr


def test_cli_quiet_still_names_what_was_skipped(batches: list[object], support_rules: Path, tmp_path: Path) -> None:
    files = write_span_files(batches, tmp_path)
    path = tmp_path / "some-bad.jsonl"
    path.write_text(files["jsonl"].read_text() + "{oops\n")
    res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", "-q"])
    assert res.exit_code == 0, res.output
    assert res.stdout == "Tool call accuracy: 5/9 (55.6%)\n"
    assert res.stderr.splitlines() == [f"warning: 1 undecodable record(s) skipped (first: {path}: line 11: "
                                       + res.stderr.split(": line 11: ", 1)[1].rstrip("\n")]


@pytest.mark.parametrize(
    ("content", "spans"),
    [
        ("", 0),
        ('{"resourceSpans": []}\n', 0),
        (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": "0102030405060708090a0b0c0d0e0f10", "spanId": "0102030405060708", "name": "GET /orders",
             "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]}) + "\n", 1),
    ],
    ids=["empty file", "no spans", "no GenAI span"],
)
def test_cli_a_capture_without_turns_is_warned_of(support_rules: Path, tmp_path: Path, content: str,
                                                  spans: int) -> None:
    """Nothing to judge is not an error (a quiet hour's capture), but it is said, also with -q: a capture of the wrong
    service or an agent that is not instrumented otherwise prints only 'absent' figures."""
    path = tmp_path / "capture.jsonl"
    path.write_text(content)
    for quiet in ([], ["-q"]):
        res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", *quiet])
        assert res.exit_code == 0, res.output
        warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")]
        assert warnings == [f"warning: no turns to judge: {spans} span(s) read, none of them an agent turn or a tool "
                            "call (GenAI invoke_agent / execute_tool spans); is the agent instrumented, and is this "
                            "its capture?"], res.stderr
    # no turn, so no "accuracy as iterations grow" series (it used to show one point: iteration 0, absent)
    res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress", "--json", "-"])
    assert json.loads(res.stdout)["series"] == {}, res.stdout
    res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--no-progress"])
    assert "iterations grow" not in res.stdout, res.stdout


async def _async_agent(text: str) -> str:
    import asyncio

    from tests.monitor.offline.agents import EXECUTOR

    await asyncio.sleep(0)
    await EXECUTOR.aexecute("get_order_status", {"order_id": "1"})
    return "done"


def test_harness_runs_async_agents_inside_the_turn() -> None:
    with Harness(agent_name="support") as h:
        for timeout in (None, 5.0):
            run = h.run_and_collect(_async_agent, "where is order 1", timeout_s=timeout)
            assert run.error is None and run.output == "done"
            (turn,) = run.turns
            assert [c.name for c in turn.calls] == ["get_order_status"] and turn.output_text == "done"


def test_cli_json_to_stdout_keeps_stdout_clean(batches: list[object], support_rules: Path, tmp_path: Path) -> None:
    files = write_span_files(batches, tmp_path)
    args = [str(files["jsonl"]), "--rules", str(support_rules), "--no-progress", "--json", "-"]
    res = CliRunner().invoke(replay, args)
    assert res.exit_code == 0
    assert json.loads(res.stdout)["accuracy_line"] == "Tool call accuracy: 5/9 (55.6%)"
    assert "Tool call accuracy: 5/9 (55.6%)" in res.stderr


def test_bad_records_are_bounded_and_counted(support_judge: Judge, tmp_path: Path) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_text("{nope\n" * 250)
    verdicts, r = replay_sorted(support_judge, [junk])
    assert verdicts == [] and r.stats.bad_records.total == 250 and len(r.stats.bad_records) == 100
    assert r.stats.bad_records[-1].where == "line 100"


def test_cli_replay_from_standard_input(batches: list[object], support_rules: Path, tmp_path: Path) -> None:
    files = write_span_files(batches, tmp_path)
    for fmt, path in (("auto", files["jsonl"]), ("pb", files["pb"])):
        res = CliRunner().invoke(replay, ["-", "--rules", str(support_rules), "--format", fmt, "--no-progress", "-q"],
                                 input=path.read_bytes())
        assert res.exit_code == 0, res.output
        assert "Tool call accuracy: 5/9 (55.6%)" in res.output


def test_gzip_content_is_detected_by_its_magic_bytes_on_standard_input_and_without_the_suffix(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """gzip was told by the `.gz` suffix only: `cat spans.jsonl.gz | toolwatch replay -`, or a gzip file named
    .jsonl, gave undecodable records or a lost framing (exit 2, no turn) with a hint about --format. gzip is now
    detected by its magic bytes, as zstd is (no OTLP JSON, protobuf request or framing starts with them)."""
    files = write_span_files(batches, tmp_path)
    for name in ("jsonl", "pb"):
        packed = gzip.compress(files[name].read_bytes())
        res = CliRunner().invoke(replay, ["-", "--rules", str(support_rules), "--no-progress", "-q"], input=packed)
        assert res.exit_code == 0, res.output
        assert "Tool call accuracy: 5/9 (55.6%)" in res.output
        misnamed = tmp_path / f"packed.{'jsonl' if name == 'jsonl' else 'pb'}"
        misnamed.write_bytes(packed)
        res = CliRunner().invoke(replay, [str(misnamed), "--rules", str(support_rules), "--no-progress", "-q"])
        assert res.exit_code == 0, res.output
        assert "Tool call accuracy: 5/9 (55.6%)" in res.output
    cut = gzip.compress(files["jsonl"].read_bytes())[:-30]
    res = CliRunner().invoke(replay, ["-", "--rules", str(support_rules), "--no-progress", "-q"], input=cut)
    assert res.exit_code == 2 and "standard input: cannot read" in res.output, res.output


def test_lines_longer_than_the_message_bound_are_skipped_and_reported(
    batches: list[object], support_judge: Judge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A JSON lines capture is read a line at a time with at most MAX_MESSAGE_BYTES + 1 bytes held: a longer line
    # (corrupt, or a file that is not JSON lines) is skipped and reported, and the lines after it are replayed.
    import io

    from monitor.otlp import bounded_lines
    from monitor.replay import _sources

    assert list(bounded_lines(io.BytesIO(b"abc\n" + b"x" * 25 + b"\ny\n" + b"z" * 11), 10)) == [
        b"abc\n",
        None,
        b"y\n",
        None,
    ]
    lines = write_span_files(batches, tmp_path / "d")["jsonl"].read_text().splitlines()
    bound = max(len(ln) for ln in lines) + 10
    monkeypatch.setattr(_sources, "MAX_MESSAGE_BYTES", bound)
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join([*lines[:3], " " * (3 * bound), *lines[3:]]) + "\n")
    verdicts, r = replay_sorted(support_judge, [path])
    assert len(verdicts) == 10
    assert [(b.where, "longer than" in b.message) for b in r.stats.bad_records] == [("line 4", True)]


def test_a_bare_protobuf_request_whose_bytes_also_tile_as_a_stream_is_read_whole(
    support_judge: Judge, tmp_path: Path
) -> None:
    """A bare request starts with 0x0a, which as a size is a 10-byte first message, and its bytes often tile as a
    length-delimited stream by chance (this failed the format test now and then, on random ids): it is one message."""
    from monitor.replay._framing import varint_frames

    bare = next(b for b in map(one_span_request, range(1000)) if varint_frames(b, 1 << 26)[1] == len(b))
    single, delimited = tmp_path / "one.binpb", tmp_path / "stream.pb"
    single.write_bytes(bare)
    _, r = replay_sorted(support_judge, [single])
    assert r.stats.requests == 1 and r.stats.spans == 1 and r.stats.bad_records.total == 0
    # A real stream of it (two messages, each after its size) is still read as a stream.
    delimited.write_bytes((varint(len(bare)) + bare) * 2)
    _, r = replay_sorted(support_judge, [delimited])
    assert r.stats.requests == 2 and r.stats.spans == 2 and r.stats.bad_records.total == 0


def test_cli_grace_and_turnless_timeout_take_zero_as_serve_does(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """`serve --grace 0` judges a turn as soon as it ends; replay takes the same values (it refused 0 before)."""
    files = write_span_files(batches, tmp_path / "in")
    base = [str(files["pb"]), "--rules", str(support_rules), "--no-progress", "-q"]
    res = CliRunner().invoke(replay, [*base, "--grace", "0", "--turnless-timeout", "0ms"])
    assert res.exit_code == 0, res.output
    assert "Tool call accuracy:" in res.output
    bad = CliRunner().invoke(replay, [*base, "--grace", "-1s"])
    assert bad.exit_code == 2 and "--grace" in bad.output


def test_cli_max_pending_replays_a_serve_run_that_set_it(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """Trace 1's turn span, then trace 2 whole, then trace 1's calls: held together (the default bound), trace 1's
    calls join their turn; with room for one pending trace (`serve --max-pending 1`), trace 2 evicts trace 1, whose
    turn is judged without its calls (missed) and whose calls then arrive late. Replay had no such option."""
    first, second = batches[0], batches[1]
    turn_spans = [s for s in first if s.name.startswith("invoke_agent")]  # type: ignore[attr-defined]
    call_spans = [s for s in first if s not in turn_spans]  # type: ignore[attr-defined]
    assert turn_spans and call_spans
    files = write_span_files([turn_spans, second, call_spans], tmp_path / "in")

    def missed(*extra: str) -> int:
        out = tmp_path / f"report{len(extra)}.json"
        res = CliRunner().invoke(replay, [str(files["pb"]), "--rules", str(support_rules), "--no-progress", "-q",
                                          "--json", str(out), *extra])
        assert res.exit_code == 0, res.output
        return int(json.loads(out.read_text())["counts"]["missed"])

    assert missed() == 0
    assert missed("--max-pending", "1") == 1


VALID_FORMATS = "one of auto, jsonl, pb, pb-be32, pb-varint, pb-single"


@pytest.mark.parametrize(("given", "kind", "looks"), [("pb", "jsonl", "OTLP JSON lines (jsonl)"),
                                                      ("pb-be32", "jsonl", "OTLP JSON lines (jsonl)"),
                                                      ("pb-single", "jsonl", "OTLP JSON lines (jsonl)"),
                                                      ("jsonl", "pb", "OTLP protobuf (pb)")])
def test_a_wrong_format_given_is_named_with_what_the_file_looks_like_and_the_valid_formats(
    batches: list[object], support_rules: Path, tmp_path: Path, given: str, kind: str, looks: str
) -> None:
    """A capture read with a --format it is not in: the hint asked `is this an OTLP trace capture? --format chooses
    how to read it` (pb, pb-single), or there was none (pb-be32), while --format itself was the mistake."""
    path = write_span_files(batches, tmp_path)[kind]
    res = CliRunner().invoke(replay, [str(path), "--rules", str(support_rules), "--format", given, "-q",
                                      "--no-progress"])
    assert res.exit_code == 2, res.output
    hints = [line for line in res.stderr.splitlines() if line.startswith("hint:")]
    assert hints == [f"hint: --format {given} was given, but {path} looks like {looks}: leave --format out to detect "
                     f"the format, or give the right one ({VALID_FORMATS})"]


@pytest.mark.parametrize(("given", "meant"), [("json", "jsonl"), ("proto", "pb-be32"), ("protobuf", None)])
def test_an_unknown_format_names_the_valid_ones_and_the_collector_names_it_means(
    support_rules: Path, given: str, meant: str | None
) -> None:
    """The help cites the Collector file exporter's `format: json` and `format: proto`: those words are what a user
    types; the error says which of ours each is."""
    res = CliRunner().invoke(replay, ["-", "--rules", str(support_rules), "--format", given], input="")
    assert res.exit_code == 2
    message = " ".join(res.stderr.split())
    assert f"Invalid value for '--format': {given!r} is not a format: {VALID_FORMATS}" in message
    if meant:
        assert f"(the Collector file exporter's format: {given} is --format {meant})" in message


def test_a_symlinked_directory_is_read_and_a_symlink_loop_ends(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """A capture directory linking in another (`today -> /data/2025-11-22`) lost that one's files silently: the
    listing did not follow symlinked directories. They are followed now, each real directory once, so a link back
    up (`loop -> ..`) ends; a dangling or self-looping link holds no data and is passed over."""
    elsewhere = tmp_path / "elsewhere"
    files = write_span_files(batches, elsewhere)
    files["pb"].unlink()
    files["single"].unlink()
    root = tmp_path / "captures"
    root.mkdir()
    (root / "today").symlink_to(elsewhere, target_is_directory=True)
    (root / "again").symlink_to(elsewhere, target_is_directory=True)  # the same directory: read once
    (root / "today-loop").symlink_to(root, target_is_directory=True)
    (root / "self.jsonl").symlink_to(root / "self.jsonl")
    (root / "gone.jsonl").symlink_to(tmp_path / "nothing")
    found = expand_sources([root])
    assert found == [root / "again" / "spans.jsonl"]
    res = CliRunner().invoke(replay, [str(root), "--rules", str(support_rules), "-q"])
    assert res.exit_code == 0, res.output
    assert "Tool call accuracy: 5/9 (55.6%)" in res.output


def test_cli_says_what_turn_assembly_dropped_as_serve_counts_it(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """A call read after its turn was judged is dropped as late, as serve drops it (and counts it in a metric):
    replay's report said nothing of it, so a capture read out of order (files split by group_by, a shell glob
    putting a rotated file's live part first) gave other verdicts with no word why. The report now counts each
    kind of span turn assembly dropped, in a note."""
    first = batches[0]
    turn_spans = [s for s in first if s.name.startswith("invoke_agent")]  # type: ignore[attr-defined]
    call_spans = [s for s in first if s not in turn_spans]  # type: ignore[attr-defined]
    files = write_span_files([turn_spans, call_spans, call_spans], tmp_path / "in")  # and an exporter's retry
    out = tmp_path / "report.json"
    res = CliRunner().invoke(replay, [str(files["jsonl"]), "--rules", str(support_rules), "--no-progress",
                                      "--grace", "0", "--json", str(out)])
    assert res.exit_code == 0, res.output
    notes = json.loads(out.read_text())["notes"]
    assert any(f"{len(call_spans)} late call(s)" in n and f"{len(call_spans)} duplicate span(s)" in n
               for n in notes), notes
    assert "late call(s)" in res.output
