"""Which files a replay reads: each capture file once, however it is reached (given twice, through a directory given
too, a link to it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli.replay_cmd import replay
from monitor.replay import SourceError, expand_sources
from tests.monitor.offline.agents import SUPPORT_INPUTS, support_agent
from tests.monitor.offline.conftest import capture_spans, write_span_files

ACCURACY = "Tool call accuracy: 5/9 (55.6%)"


@pytest.fixture(scope="module")
def batches() -> list[object]:
    return capture_spans(support_agent, SUPPORT_INPUTS)


def _capture(batches: list[object], directory: Path) -> Path:
    files = write_span_files(batches, directory)
    files["pb"].unlink()
    files["single"].unlink()
    return files["jsonl"]


@pytest.mark.parametrize("how", ["the file twice", "its directory and the file", "a directory and its subdirectory",
                                 "the directory twice", "the file and a link to it"])
def test_a_file_reached_twice_through_the_sources_given_is_refused_before_anything_is_read(
    batches: list[object], support_rules: Path, tmp_path: Path, how: str
) -> None:
    """The same file given twice was read twice: its spans fed turn assembly again, which drops them as duplicates
    only while it remembers the turns it released (the last 65,536), so a capture of more turns than that was judged
    twice (a file of 200,000 turns given twice: 400,000 turns judged), and a smaller one gave a report of twice the
    files, requests and spans, and a note of as many duplicate spans. A file reached twice is now refused, naming
    both ways it was given, before anything is read, as a FIFO or `-` given twice is."""
    spans = _capture(batches, tmp_path / "captures" / "day1")
    link = tmp_path / "link.jsonl"
    link.symlink_to(spans)
    day, root = spans.parent, spans.parent.parent
    sources = {"the file twice": [spans, spans], "its directory and the file": [day, spans],
               "a directory and its subdirectory": [root, day], "the directory twice": [day, day],
               "the file and a link to it": [spans, link]}[how]
    with pytest.raises(SourceError, match="given twice") as exc:
        expand_sources(sources)
    assert str(exc.value).startswith(f"{link if how == 'the file and a link to it' else spans}: "), exc.value
    if how == "the directory twice":  # it read 'given twice: by DAY and by DAY'
        assert f"given twice (in {day}, given twice)" in str(exc.value), exc.value
    out = tmp_path / "report.json"
    res = CliRunner().invoke(replay, [*map(str, sources), "--rules", str(support_rules), "--no-progress",
                                      "--json", str(out)])
    assert res.exit_code == 2, res.output
    assert "given twice" in res.stderr and not out.exists(), res.output


def test_a_link_in_a_capture_directory_to_a_file_in_it_is_read_once_in_the_file_s_place(
    batches: list[object], support_rules: Path, tmp_path: Path
) -> None:
    """A capture directory holding a link to one of its files (`latest.jsonl -> spans.jsonl`) had that file read
    twice (the second time as duplicates, or judged again past what turn assembly remembers), and at the link's
    place in the order, which decides late spans. The file is read once, at its own place; a hard link too."""
    spans = _capture(batches, tmp_path / "captures")
    (spans.parent / "a-latest.jsonl").symlink_to(spans)  # sorts first
    (spans.parent / "z-hard.jsonl").hardlink_to(spans)
    assert expand_sources([spans.parent]) == [spans]
    out = tmp_path / "report.json"
    res = CliRunner().invoke(replay, [str(spans.parent), "--rules", str(support_rules), "--no-progress",
                                      "--json", str(out)])
    assert res.exit_code == 0, res.output
    notes = json.loads(out.read_text())["notes"]
    assert notes[0] == "1 file(s), 10 export requests, 19 spans, 10 turns (0 turnless)", notes
    assert not any("duplicate" in n for n in notes), notes
    assert ACCURACY in res.output


@pytest.mark.parametrize("name", ["x" * 300 + ".jsonl", "x" * 300 + "/spans.jsonl"])
def test_a_source_that_cannot_be_looked_at_is_an_input_error_naming_it(
    support_rules: Path, tmp_path: Path, name: str
) -> None:
    """A source whose status cannot be read for a reason other than its absence ended replay in a traceback (exit 1):
    Path.is_dir() raises for all but a few errors. A name too long does it; so does, for a user other than root, a
    file in a directory it may not search (a Collector's data directory, often mode 0750), which is permission
    denied. Such a source is now an input error naming it and the reason (exit 2), as a missing one is."""
    source = tmp_path / name
    with pytest.raises(SourceError, match="cannot read: File name too long") as exc:
        expand_sources([source])
    assert str(exc.value).startswith(f"{source}: "), exc.value
    res = CliRunner().invoke(replay, [str(source), "--rules", str(support_rules), "--no-progress"])
    assert res.exit_code == 2, (res.output, res.exception)
    assert "cannot read: File name too long" in res.stderr, res.stderr
