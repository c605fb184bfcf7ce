"""A report, and every message, is written to a stdout or stderr whose encoding cannot hold some of its characters
(`PYTHONIOENCODING=ascii`, a Latin-1 locale): those characters are escaped, as Python's own stderr escapes them
(`\\xef`; `&#239;` in the XML forms, which an XML or HTML reader reads back as the character), never a traceback in
place of the report.

Through the real command line in a process of its own, whose stdout and stderr encodings the environment sets.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from monitor.cli._streams import escape_unencodable
from tests.monitor.offline.agents import support_agent
from tests.monitor.offline.conftest import REPO, SUPPORT_RULES, capture_spans, write_span_files

_INPUTS = ["where is order 1 café", "where is order 3 naïve ✓", "hello ünïcode"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Spans of turns whose inputs are not ASCII (order 3's fails: it is among the failing samples), and rules."""
    directory = tmp_path_factory.mktemp("enc")
    rules = directory / "support.yaml"
    rules.write_text(SUPPORT_RULES, encoding="utf-8")
    return write_span_files(capture_spans(support_agent, _INPUTS), directory)["jsonl"], rules


def _toolwatch(*args: str, encoding: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    return subprocess.run([sys.executable, "-c", "from monitor.cli import main; main()", *args], cwd=REPO, env=env,
                          capture_output=True, timeout=60, check=False)


def _replay(files: tuple[Path, Path], *extra: str, encoding: str) -> subprocess.CompletedProcess[bytes]:
    spans, rules = files
    return _toolwatch("replay", str(spans), "--rules", str(rules), *extra, encoding=encoding)


_ENCODINGS = pytest.mark.parametrize("encoding", ["ascii", "latin-1"])


def _escapes(encoding: str, xml: bool) -> str:
    """The failing sample's input as a stdout of `encoding` shows it: `\\u2713` for ✓; ï is `\\xef` in ASCII, itself
    in Latin-1. The XML forms are ASCII on both, every other character a reference (`&#239;`, `&#10003;`): they say
    they are UTF-8, which ASCII is and Latin-1 is not."""
    if xml:
        return "na&#239;ve &#10003;"
    return "na\xefve \\u2713" if encoding == "latin-1" else "na\\xefve \\u2713"


@_ENCODINGS
@pytest.mark.parametrize("form", [[], ["--markdown", "-"], ["--html", "-"], ["--junit", "-"]],
                         ids=["terminal", "markdown", "html", "junit"])
def test_a_report_to_a_stdout_that_cannot_encode_it_escapes_what_it_cannot(files: tuple[Path, Path], form: list[str],
                                                                           encoding: str) -> None:
    """Each form on an ASCII or a Latin-1 stdout: written whole, the characters it lacks escaped (the terminal
    report's own `·` too, in ASCII), the exit that of the same run on a UTF-8 stdout. An XML reader reads the
    input as it was. A form on stdout puts the summary (with the failing inputs) and the progress line on stderr,
    escaped there as Python escapes what stderr cannot encode."""
    utf8 = _replay(files, *form, encoding="utf-8")
    assert utf8.returncode == 0, utf8.stderr.decode()
    res = _replay(files, *form, encoding=encoding)
    err = res.stderr.decode(encoding, "replace")
    assert res.returncode == utf8.returncode, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    out = res.stdout.decode(encoding)
    xml = form in (["--html", "-"], ["--junit", "-"])
    assert _escapes(encoding, xml) in out, out[-3000:]
    if xml:  # UTF-8 as they say (`encoding="UTF-8"`, `<meta charset="utf-8">`): ASCII, what else there is referred to
        assert res.stdout.isascii(), [line for line in res.stdout.splitlines() if not line.isascii()][:3]
    if form == ["--junit", "-"]:  # read as the input was, from the bytes, as a reader of the file reads them
        texts = [f.text or "" for f in ET.fromstring(res.stdout).iter("failure")]
        assert any("where is order 3 naïve ✓" in t for t in texts), texts
    if not form and encoding == "ascii":
        assert "\\xb7" in out  # the confusion matrix's empty cells
    if form:
        assert _escapes(encoding, False) in err and "replay" in err, err[-3000:]


def test_rules_explain_of_a_call_that_stdout_cannot_encode(files: tuple[Path, Path]) -> None:
    """`rules explain` names the call it was given (a tool name not in the catalog) on a Latin-1 stdout. (On an
    ASCII one, click writes its own messages as UTF-8: it takes ASCII for a misconfigured stream.)"""
    _, rules = files
    res = _toolwatch("rules", "explain", str(rules), "--input", "where is order 7", "--call",
                     'größe✓={"order_id": "7"}', encoding="latin-1")
    err = res.stderr.decode("latin-1")
    assert res.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert "call 0 größe\\u2713: " in res.stdout.decode("latin-1"), res.stdout


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])
def test_a_stream_that_writes_file_name_bytes_back_still_does(monkeypatch: pytest.MonkeyPatch, errors: str) -> None:
    """An ASCII stdout as the C locale opens it without UTF-8 mode (errors="surrogateescape": a file name's bytes
    that are no text come back as they were): those still do; what it cannot encode is escaped, not an error."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors=errors)
    monkeypatch.setattr(sys, "stdout", stream)
    escape_unencodable()
    stream.write("r\udcffport.json: naïve \ud800 ✓")
    stream.flush()
    kept = b"\xff" if errors == "surrogateescape" else b"\\udcff"
    assert raw.getvalue() == b"r" + kept + b"port.json: na\\xefve \\ud800 \\u2713"
