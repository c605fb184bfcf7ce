"""Replay of what the OpenTelemetry Collector file exporter writes: every framing and zstd compression it has.

The files are written byte for byte as the exporter (contrib exporter/fileexporter) writes them, from requests the
real OTel SDK encoder made:
- `format: proto`: each message after its size as a 4-byte big-endian unsigned integer (`exportMessageAsBuffer`);
- `compression: zstd`, legacy mode: each message zstd-compressed (one frame, as `EncodeAll`), then framed as above,
  for `format: proto` and for `format: json` alike;
- `compression: zstd` under the native-compression feature gate: the whole file is one zstd stream, a new frame at
  each flush, of JSON lines (`format: json`) or of 4-byte framed messages (`format: proto`).
Each must give the verdicts of the plain JSON lines replay of the same spans.
"""

from __future__ import annotations

import gzip
import io
import tracemalloc
from pathlib import Path
from typing import cast

import pytest
import zstandard
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from monitor.cli.replay_cmd import replay
from monitor.judge import Judge
from monitor.otlp import request_to_json
from monitor.replay import BadRecords, Replayer, detect_format, expand_sources, read_source, replay_files
from monitor.verdict import TurnVerdict
from tests.monitor.offline.agents import SUPPORT_INPUTS, support_agent
from tests.monitor.offline.conftest import (
    capture_spans,
    one_span_request,
    replay_sorted,
    varint,
    write_span_files,
)


@pytest.fixture(scope="module")
def batches() -> list[object]:
    return capture_spans(support_agent, SUPPORT_INPUTS)


def be32(message: bytes) -> bytes:
    """`exportMessageAsBuffer`: the size as a 4-byte big-endian unsigned integer, then the message."""
    return len(message).to_bytes(4, "big") + message


def zstd_frame(data: bytes) -> bytes:
    """One whole zstd frame, its content size in the header, as the exporter's legacy `EncodeAll` makes it."""
    return zstandard.ZstdCompressor().compress(data)


def zstd_stream(writes: list[bytes], flush_every: int = 3) -> bytes:
    """The native mode's one stream: writes go to a streaming encoder, a frame is finished at each flush."""
    out = io.BytesIO()
    for i in range(0, len(writes), flush_every):
        obj = zstandard.ZstdCompressor().compressobj()
        out.write(b"".join(obj.compress(w) for w in writes[i : i + flush_every]) + obj.flush())
    return out.getvalue()


def messages(batches: list[object]) -> tuple[list[bytes], list[bytes]]:
    """Each batch's request, from the SDK's encoder: as protobuf, and as the exporter's OTLP JSON."""
    reqs = [encode_spans(b) for b in batches]  # type: ignore[arg-type]
    return [r.SerializeToString() for r in reqs], [request_to_json(r).encode() for r in reqs]


def write_collector_files(batches: list[object], directory: Path) -> dict[str, Path]:
    protos, jsons = messages(batches)
    directory.mkdir(parents=True, exist_ok=True)
    lines: list[bytes] = []
    for j in jsons:  # exportMessageAsLine: the message, then "\n", in two writes
        lines += [j, b"\n"]
    contents = {
        "proto.bin": b"".join(map(be32, protos)),  # format: proto
        "proto-zstd": b"".join(be32(zstd_frame(m)) for m in protos),  # + compression: zstd (legacy)
        "json-zstd.json": b"".join(be32(zstd_frame(m)) for m in jsons),  # format: json + zstd (legacy)
        "json.jsonl.zst": zstd_stream(lines),  # format: json + zstd (native)
        "proto.log.zst": zstd_stream([be32(m) for m in protos]),  # format: proto + zstd (native)
    }
    for name, data in contents.items():
        (directory / name).write_bytes(data)
    return {name: directory / name for name in contents}


def test_every_collector_file_gives_the_verdicts_of_the_json_lines_replay(
    batches: list[object], support_judge: Judge, tmp_path: Path
) -> None:
    expected, plain = replay_sorted(support_judge, [write_span_files(batches, tmp_path / "plain")["jsonl"]])
    assert len(expected) == len(SUPPORT_INPUTS) and not plain.stats.bad_records
    for name, path in write_collector_files(batches, tmp_path / "collector").items():
        verdicts, r = replay_sorted(support_judge, [path])
        assert verdicts == expected, name
        assert (r.stats.requests, r.stats.spans, r.stats.turns) == (
            plain.stats.requests,
            plain.stats.spans,
            plain.stats.turns,
        ), name
        assert r.stats.bad_records.total == 0 and not r.stats.read_errors, (name, list(r.stats.bad_records))
        assert detect_format(path) == ("pb" if "proto" in name or name == "json-zstd.json" else "jsonl"), name


def test_the_cli_reads_a_collector_proto_file_and_forced_framings(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    files = write_collector_files(batches, tmp_path)
    for path, fmt in (
        (files["proto.bin"], "auto"),
        (files["proto.bin"], "pb"),
        (files["proto-zstd"], "pb-be32"),
        (files["json.jsonl.zst"], "jsonl"),
    ):
        res = CliRunner().invoke(
            replay, [str(path), "--rules", str(support_rules), "--no-progress", "-q", "--format", fmt]
        )
        assert res.exit_code == 0, (fmt, res.output)
        assert "Tool call accuracy: 5/9 (55.6%)" in res.output
    protos, _ = messages(batches)
    res = CliRunner().invoke(
        replay, ["-", "--rules", str(support_rules), "--no-progress", "-q"], input=files["proto-zstd"].read_bytes()
    )
    assert res.exit_code == 0 and "Tool call accuracy: 5/9 (55.6%)" in res.output, res.output
    forced = tmp_path / "varint.pb"
    forced.write_bytes(b"".join(varint(len(m)) + m for m in protos))
    res = CliRunner().invoke(
        replay, [str(forced), "--rules", str(support_rules), "--no-progress", "-q", "--format", "pb-varint"]
    )
    assert res.exit_code == 0 and "Tool call accuracy: 5/9 (55.6%)" in res.output, res.output


def test_the_three_framings_are_told_apart_for_every_size(support_judge: Judge, tmp_path: Path) -> None:
    """Requests of 40 bytes to 70 KiB (one- to three-byte varint sizes, 4-byte sizes with each high byte zero):
    a 4-byte framed stream, a varint stream and a bare message of each are each read as what they are."""
    for n, size in enumerate([*range(0, 300, 7), 1000, 20_000, 70_000]):
        message = one_span_request(size)
        for kind, data, requests in (
            ("be32", be32(message) * 2, 2),
            ("varint", (varint(len(message)) + message) * 2, 2),
            ("bare", message, 1),
        ):
            path = tmp_path / f"{kind}-{n}"
            path.write_bytes(data)
            _, r = replay_sorted(support_judge, [path])
            assert (r.stats.requests, r.stats.spans, r.stats.bad_records.total) == (requests, requests, 0), (kind, size)


@pytest.mark.parametrize("compress", [False, True])
def test_a_cut_collector_file_keeps_the_whole_messages_before_the_cut(
    batches: list[object], support_judge: Judge, tmp_path: Path, compress: bool
) -> None:
    """A Collector still writing (or killed) leaves a partial last message: the others are replayed and the file is
    one read error saying where (compressed or not: the file cannot be read to its end either way)."""
    protos, _ = messages(batches)
    path = tmp_path / ("live.pb.zst" if compress else "live.pb")
    whole = b"".join(map(be32, protos))
    path.write_bytes(zstd_frame(whole[:-10]) if compress else whole[:-10])
    verdicts, r = replay_sorted(support_judge, [path])
    assert r.stats.requests == len(protos) - 1 and len(verdicts) == len(protos) - 1
    assert not r.stats.bad_records
    content = "decompressed content" if compress else "content"
    assert r.stats.read_errors == [
        f"{path}: cannot read past byte {len(whole) - 4 - len(protos[-1])} of its {content} (after {len(protos) - 1} "
        f"messages, which were replayed): cut short: {len(protos[-1]) - 10} of the {len(protos[-1])} bytes of the "
        "message"
    ]


def test_a_misframed_file_is_a_read_error_and_the_cli_exits_2(
    batches: list[object], support_rules: Path, support_judge: Judge, tmp_path: Path
) -> None:
    """A size past the message bound (the framing is lost) and a forced varint stream that does not tile: what was
    read before is replayed, the file is a read error, and replay exits 2 after its report."""
    protos, _ = messages(batches)
    lost = tmp_path / "lost.bin"
    lost.write_bytes(be32(protos[0]) + b"\xff\xff\xff\xff" + be32(protos[1]))
    _, r = replay_sorted(support_judge, [lost])
    assert r.stats.requests == 1 and not r.stats.bad_records
    (error,) = r.stats.read_errors
    assert error.startswith(f"{lost}: cannot read past byte {4 + len(protos[0])} of its content (after 1 messages")
    assert "over the 67108864 byte limit" in error
    first = tmp_path / "first.bin"
    first.write_bytes(be32(protos[0])[:-1])
    _, r = replay_sorted(support_judge, [first])
    assert r.stats.read_errors == [
        f"{first}: cannot read at byte 0 of its content: cut short: "
        f"{len(protos[0]) - 1} of the {len(protos[0])} bytes of the message"
    ]
    cut = tmp_path / "cut.pb"
    cut.write_bytes(b"".join(varint(len(m)) + m for m in protos)[:-10])
    _, r = replay_sorted(support_judge, [cut], fmt="pb-varint")
    assert r.stats.requests == len(protos) - 1 and not r.stats.bad_records
    (error,) = r.stats.read_errors
    assert "no varint message size fits the rest of the file" in error, error
    res = CliRunner().invoke(replay, [str(lost), "--rules", str(support_rules), "--no-progress", "-q"])
    assert res.exit_code == 2, res.output
    assert "Tool call accuracy: 1/1 (100.0%)" in res.stdout and res.stderr.startswith(f"error: {lost}: cannot read")


@pytest.mark.parametrize("compress", [False, True])
def test_a_cut_varint_stream_keeps_its_whole_messages_without_format(
    batches: list[object], support_rules: Path, support_judge: Judge, tmp_path: Path, compress: bool
) -> None:
    """A varint-delimited stream cut inside its last message, read with the format detected: the whole file was
    tried as one bare message and was one undecodable record (the 9 whole messages before the cut lost, a hint to
    force pb-varint), while the same stream in a .gz cut short itself kept them. Content that does not tile, holds
    whole messages and does not start as a bare request does (0x0a) is read as a cut varint stream."""
    protos, _ = messages(batches)
    data = b"".join(varint(len(m)) + m for m in protos)[:-10]
    assert data[:1] != b"\x0a"
    path = tmp_path / ("cut.pb.gz" if compress else "cut.pb")
    path.write_bytes(gzip.compress(data) if compress else data)
    verdicts, r = replay_sorted(support_judge, [path])
    assert r.stats.requests == len(protos) - 1 and len(verdicts) == len(protos) - 1
    assert not r.stats.bad_records
    (error,) = r.stats.read_errors
    content = "decompressed content" if compress else "content"
    tiled = len(data) - (len(protos[-1]) - 10) - len(varint(len(protos[-1])))
    assert error.startswith(f"{path}: cannot read past byte {tiled} of its {content} (after {len(protos) - 1} "
                            "messages, which were replayed)"), error
    res = CliRunner().invoke(replay, ["-", "--rules", str(support_rules), "--no-progress", "-q", "--format", "pb"],
                             input=data)
    assert res.exit_code == 2 and "Tool call accuracy: 5/8" in res.stdout, res.output
    assert "standard input: cannot read past byte" in res.stderr


def test_a_cut_zstd_stream_replays_what_was_read_and_names_where_it_ends(
    batches: list[object], support_judge: Judge, tmp_path: Path
) -> None:
    _, jsons = messages(batches)
    frames = zstd_stream([j + b"\n" for j in jsons], flush_every=3)
    path = tmp_path / "cut.jsonl.zst"
    path.write_bytes(frames[:-3])  # the end of the last frame (its last block's tail) is missing
    verdicts, r = replay_sorted(support_judge, [path])
    (error,) = r.stats.read_errors
    assert error.startswith(f"{path}: cannot read past byte ") and "decompressed content" in error, error
    assert "inside a frame" in error
    assert 0 < len(verdicts) < len(jsons)


@pytest.mark.parametrize("junk", [b"\0" * 8, b"garbage!", b"\x28\xb5"])
def test_junk_after_a_zstd_stream_keeps_what_came_before_it(
    batches: list[object], support_judge: Judge, tmp_path: Path, junk: bytes
) -> None:
    """Bytes after the last frame that are not a frame (padding, a stray write, half a magic): every line of the
    frames before them is replayed, then a read error says where the zstd data ended."""
    _, jsons = messages(batches)
    expected, _ = replay_sorted(support_judge, [write_span_files(batches, tmp_path / "plain")["jsonl"]])
    frames = zstd_stream([j + b"\n" for j in jsons], flush_every=3)
    path = tmp_path / "tail.jsonl.zst"
    path.write_bytes(frames + junk)
    verdicts, r = replay_sorted(support_judge, [path])
    assert verdicts == expected and r.stats.requests == len(jsons)
    (error,) = r.stats.read_errors
    assert error.startswith(
        f"{path}: cannot read past byte {sum(len(j) + 1 for j in jsons)} of its decompressed "
        f"content (after {len(jsons)} lines, which were replayed): "
    ), error
    assert error.endswith(f" at byte {len(frames)} of the zstd data") if len(junk) >= 4 else "inside a frame" in error


def test_junk_between_zstd_frames_ends_the_stream_there(
    batches: list[object], support_judge: Judge, tmp_path: Path
) -> None:
    _, jsons = messages(batches)
    first = zstd_frame(b"".join(j + b"\n" for j in jsons[:4]))
    path = tmp_path / "mid.jsonl.zst"
    path.write_bytes(first + b"garbage!" + zstd_frame(b"".join(j + b"\n" for j in jsons[4:])))
    _, r = replay_sorted(support_judge, [path])
    assert r.stats.requests == 4
    (error,) = r.stats.read_errors
    assert error.endswith(f"not a zstd frame (starts {b'garb'.hex()}) at byte {len(first)} of the zstd data"), error


def test_the_zstd_frame_walker_takes_only_the_zstd_bytes() -> None:
    """`feed` takes the bytes up to the first header that is not a frame's, also when that header began in an
    earlier chunk, and nothing after it."""
    from monitor.replay._framing import _FrameWalker

    data = zstd_frame(b"a" * 1000)
    whole = _FrameWalker()
    assert whole.feed(data + b"junk and more") == len(data) and whole.error is not None
    assert whole.feed(b"more") == 0
    split = _FrameWalker()
    assert split.feed(data + b"ju") == len(data) + 2 and split.error is None  # maybe a magic yet
    assert split.feed(b"nk") == 0 and f"at byte {len(data)} " in str(split.error)


def test_zstd_bombs_are_refused_within_the_bounds(
    support_judge: Judge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small zstd data that expands past the bounds: a framed message, a JSON line inside a zstd file, and a
    varint-delimited file read whole; each is refused with no more than the bound (+1 byte) decompressed."""
    from monitor.replay import _sources

    monkeypatch.setattr(_sources, "MAX_MESSAGE_BYTES", 1 << 20)
    monkeypatch.setattr(_sources, "MAX_SINGLE_FILE_BYTES", 4 << 20)
    bomb = zstd_frame(b"{" + b" " * (64 << 20))  # 64 MiB in a few KiB
    assert len(bomb) < 64 * 1024
    framed = tmp_path / "bomb.pb"
    framed.write_bytes(be32(bomb) + be32(one_span_request(3)))
    _, r = replay_sorted(support_judge, [framed])
    assert r.stats.requests == 1 and [b.where for b in r.stats.bad_records] == ["message 1 at byte 0"]
    assert "more than 1048576 bytes" in r.stats.bad_records[0].message
    lines = tmp_path / "bomb.jsonl.zst"
    lines.write_bytes(zstd_frame(b"{" + b" " * (64 << 20) + b"\n" + request_to_json(encode_spans([])).encode() + b"\n"))
    _, r = replay_sorted(support_judge, [lines])
    assert [(b.where, "longer than" in b.message) for b in r.stats.bad_records] == [("line 1", True)]
    assert r.stats.requests == 1 and not r.stats.read_errors
    whole = tmp_path / "bomb.binpb"
    whole.write_bytes(zstd_frame(b"\x0a" * (64 << 20)))
    _, r = replay_sorted(support_judge, [whole])
    (error,) = r.stats.read_errors
    assert "over the 4194304 byte limit" in error and r.stats.requests == 0


def test_the_zstd_frame_walker_finds_every_frame_end() -> None:
    """Frames with and without content size and checksum, a skippable frame: the walker is at a frame boundary
    after exactly the bytes that end a frame, so a stream cut anywhere else is known to be cut."""
    from monitor.replay._framing import _FrameWalker

    frames = [
        zstandard.ZstdCompressor(write_checksum=True).compress(b"a" * 1000),
        zstd_stream([b"line %d\n" % i for i in range(2000)], flush_every=2000),  # no content size, blocks
        b"\x5a\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"skip!",
        zstandard.ZstdCompressor(level=19).compress(bytes(range(256)) * 600),  # more than one 128 KiB block
        zstandard.ZstdCompressor().compress(b""),
    ]
    data = b"".join(frames)
    ends = {sum(map(len, frames[: i + 1])) for i in range(len(frames))} | {0}
    for cut in range(len(data) + 1):
        walker = _FrameWalker()
        walker.feed(data[:cut])
        assert walker.at_frame_boundary == (cut in ends), cut
    whole = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True).read()
    assert len(whole) == 1000 + len(b"".join(b"line %d\n" % i for i in range(2000))) + 256 * 600


def test_directories_hold_zstd_captures_by_their_inner_suffix(batches: list[object], tmp_path: Path) -> None:
    from monitor.replay import expand_sources

    write_collector_files(batches, tmp_path)
    assert [p.name for p in expand_sources([tmp_path])] == ["json-zstd.json", "json.jsonl.zst", "proto.bin"]


@pytest.mark.parametrize(("live", "backups"), [
    # the Collector README's own `path: ./foo`: no extension, the time (and timberjack's reason) at the end
    ("foo", ["foo-2025-04-30T15-00-00.000-size", "foo-2025-04-30T16-30-00.000-size"]),
    # an extension: the time before it; lumberjack (older Collectors) wrote no reason
    ("traces.json", ["traces-2025-04-30T15-00-00.000.json", "traces-2025-04-30T16-30-00.000-size.json"]),
])
def test_a_rotated_collector_directory_is_replayed_oldest_first(
    batches: list[object], support_judge: Judge, tmp_path: Path, live: str, backups: list[str]
) -> None:
    """With `rotation:` the exporter renames a full file to its name with the time in it and goes on writing to
    `path`: the backups, oldest first, hold what came before the live file. Order decides verdicts (here, with
    --grace 0, a turn read before its call is judged without it and the call is late). A directory whose files
    have no extension was refused as holding no span files; the live file must come after its backups (a plain
    sort, or a shell glob, puts `foo` first)."""
    first, later = cast("list[ReadableSpan]", batches[0]), cast("list[ReadableSpan]", batches[9])
    calls = [s for s in first if s.name.startswith("execute_tool")]
    turn = [s for s in first if s not in calls]
    assert calls and turn
    d = tmp_path / "capture"
    d.mkdir()
    for name, groups in zip([*backups, live], [[calls], [turn], [later]], strict=True):
        (d / name).write_text("".join(request_to_json(encode_spans(g)) + "\n" for g in groups))
    (d / "notes.txt").write_text("not spans\n")

    def accuracy(paths: list[Path]) -> list[tuple[str, bool, bool | None, int]]:
        out: list[TurnVerdict] = []
        replay_files(Replayer(support_judge, out.append, grace_s=0), paths)
        return sorted((v.input_text, v.turnless, v.end_to_end, len(v.calls)) for v in out)

    in_order = [d / b for b in backups] + [d / live]
    assert expand_sources([d]) == in_order
    assert accuracy(expand_sources([d])) == accuracy(in_order)
    assert accuracy(in_order) != accuracy(in_order[::-1])  # the order is what decides here


def test_directory_order_is_by_path_with_each_backup_just_before_its_live_file(tmp_path: Path) -> None:
    names = ["traces.json", "b/x.json", "traces-2025-01-01T00-00-00.000-size.json.gz", "a.json", "foo.json",
             "foo.json-2025-01-01T00-00-00.000-size", "foo.json-2024-12-31T23-59-59.999-time", "notes.txt",
             "app-2025-01-01T00-00-00.000-size.log"]
    for name in names:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    assert [p.relative_to(tmp_path).as_posix() for p in expand_sources([tmp_path])] == [
        "a.json", "b/x.json",
        "foo.json-2024-12-31T23-59-59.999-time", "foo.json-2025-01-01T00-00-00.000-size", "foo.json",
        "traces-2025-01-01T00-00-00.000-size.json.gz", "traces.json",
    ]


def test_a_compressed_protobuf_file_read_whole_is_held_once(tmp_path: Path) -> None:
    """A varint-delimited or bare protobuf file is read whole (up to 512 MiB decompressed); compressed, it was read in
    pieces then joined, holding it twice at the peak (1025 MiB resident for 500 MiB). The peak of what Python
    allocates while reading it now stays under 1.5 times the content."""
    size = 128 << 20
    path = tmp_path / "zeros.pb.gz"
    with gzip.open(path, "wb", compresslevel=1) as fh:  # a varint size no message has: read as one message
        fh.write(b"\xff" * 9 + b"\x01")
        for _ in range(size >> 20):
            fh.write(bytes(1 << 20))
    errors = BadRecords()
    tracemalloc.start()
    try:
        assert list(read_source(path, errors)) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert errors.total == 1 and "invalid OTLP protobuf" in errors[0].message
    assert peak < 1.5 * size, peak / size
