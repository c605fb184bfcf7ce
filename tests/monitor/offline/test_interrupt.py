"""Ctrl-C and SIGTERM during `eval` and `probe`: the report of the runs done so far, marked partial in every form
(naming the signal), then exit 130 (SIGINT) or 143 (SIGTERM, what a CI job's timeout or `kill` sends).

Through the real command line in a process of its own, sent the signal once the agent has started the run that stalls
(it logs each run's start to a file): the runs before it are done, the one going on is not waited for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest

from monitor.cli._interrupt import runs_again, runs_over, stop_on_signal
from monitor.evaluate import Terminated
from monitor.report.output import ReportWriteError
from tests.monitor.offline.conftest import REPO, SUPPORT_RULES

# SIGINT as an interactive shell leaves it to a foreground job (a test runner may have it ignored).
_MAIN = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
         "from monitor.cli import main; main()")


# ... and SIGTERM ignored, as a process started under `nohup`-like wrappers or by a parent ignoring it inherits it.
_MAIN_TERM_IGNORED = f"import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); {_MAIN}"


def _start(args: list[str], log: Path, *, starts: int, main: str = _MAIN) -> subprocess.Popen[str]:
    """The command line running `args`, once `starts` runs have started (lines in `log`)."""
    log.touch()
    proc = subprocess.Popen([sys.executable, "-c", main, *args], cwd=REPO,
                            env={**os.environ, "TOOLWATCH_TEST_RUN_LOG": str(log)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(log.read_text().splitlines()) < starts and time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"exited {proc.returncode} before {starts} runs started: {out[-2000:]} {err[-2000:]}")
        time.sleep(0.05)
    assert len(log.read_text().splitlines()) >= starts, "the runs did not start"
    return proc


class Stop(NamedTuple):
    """A signal that stops the runs, as the report names it, and the exit code after the partial report."""

    signum: signal.Signals
    by: str
    code: int


CTRL_C = Stop(signal.SIGINT, "Ctrl-C", 130)
SIGTERM = Stop(signal.SIGTERM, "SIGTERM", 143)
STOPS = pytest.mark.parametrize("stop", [CTRL_C, SIGTERM], ids=["ctrl-c", "sigterm"])


def _interrupt(proc: subprocess.Popen[str], stop: Stop = CTRL_C) -> tuple[str, str, float]:
    proc.send_signal(stop.signum)
    sent = time.monotonic()
    out, err = proc.communicate(timeout=60)
    return out, err, time.monotonic() - sent


def _dataset(tmp_path: Path) -> tuple[Path, Path]:
    rules = tmp_path / "support.yaml"
    rules.write_text(SUPPORT_RULES, encoding="utf-8")
    cases = tmp_path / "cases.yaml"
    inputs = ["where is order 1", "where is order 2", "where is order 3 (stall)", "where is order 4"]
    cases.write_text("".join(f"- id: o{n}\n  input: {text}\n"
                             f"  call: [{{tool: get_order_status, exactly: 1, args: {{order_id: '{n}'}}}}]\n"
                             for n, text in enumerate(inputs, 1)), encoding="utf-8")
    return cases, rules


def _forms(tmp_path: Path) -> list[str]:
    return ["--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"), "--junit",
            str(tmp_path / "r.xml"), "--html", str(tmp_path / "r.html")]


def _assert_partial_forms(tmp_path: Path, command: str, done: int, planned: int, unit: str,
                          stop: Stop = CTRL_C) -> ET.Element:
    """Every form says it is partial, with how many of the planned runs were done and the signal that stopped them;
    gates are not evaluated."""
    said = f"{done} of {planned} {unit}"
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["interrupted"]["completed"] == done and data["interrupted"]["planned"] == planned, data["interrupted"]
    assert data["interrupted"]["unit"] == unit
    assert data["interrupted"]["signal"] == stop.signum.name
    assert data["interrupted"]["message"].startswith(f"Interrupted ({stop.by}): "), data["interrupted"]
    assert said in data["interrupted"]["message"] and "partial" in data["interrupted"]["message"]
    assert data["gates"] is None  # a gate was asked, but not evaluated on part of the runs
    assert "not evaluated" in data["interrupted"]["message"]
    md = (tmp_path / "r.md").read_text()
    first = md.split("\n## ", 1)[0]  # before the first section: next to the title and the accuracy line
    assert f"Interrupted ({stop.by})" in first and said in first and "partial" in first, first
    assert "## Gates" not in md
    html = (tmp_path / "r.html").read_text()
    assert 'id="interrupted"' in html and said in html and f"Interrupted ({stop.by})" in html
    suites = ET.parse(tmp_path / "r.xml").getroot()
    assert int(suites.get("errors", "0")) >= 1  # a CI test view is not green over an interrupted run
    (case,) = [c for c in suites.iter("testcase") if c.get("classname") == f"toolwatch.{command}.run"]
    error = case.find("error")
    assert case.get("name") == "interrupted" and error is not None
    assert error.get("type") == "toolwatch.Interrupted" and said in (error.get("message") or "")
    assert f"Interrupted ({stop.by})" in (error.get("message") or "") and f"at {stop.by}" in (error.text or "")
    props = {p.get("name"): p.get("value") for p in suites.iter("property")}
    assert props["interrupted"] == said
    return suites


@STOPS
def test_a_stop_during_an_eval_writes_the_partial_report_and_exits_128_plus_the_signal(tmp_path: Path,
                                                                                      stop: Stop) -> None:
    """Ctrl-C ended an eval at once with no report: an hour of runs lost to a Ctrl-C near the end; SIGTERM (a CI
    job's timeout, `kill`) still did. The runs done (two of four; the third stalls) are reported, in every form, as a
    partial run stopped by that signal; the gate is not evaluated; the exit is 130 for Ctrl-C, 143 for SIGTERM."""
    cases, rules = _dataset(tmp_path)
    proc = _start(["eval", "--dataset", str(cases), "--rules", str(rules), "--agent",
                   "tests.monitor.offline.agents:logging_stalling_agent", "--no-progress", "--fail-under",
                   "accuracy=0.99", *_forms(tmp_path)], tmp_path / "runs.log", starts=3)
    out, err, took = _interrupt(proc, stop)
    assert proc.returncode == stop.code, (proc.returncode, err[-3000:])
    assert took < 10, f"exited {took:.1f} s after {stop.by}"
    assert "Traceback" not in err, err[-3000:]
    assert f"Interrupted ({stop.by}): partial report of 2 of 4 runs" in out, out[-3000:]
    assert "gates not evaluated" in out and "All gates passed" not in out and "FAILED" not in out
    # where the gates' outcome would be: under the summary's last line
    assert out.rstrip().splitlines()[-2:] == [
        "Tool call accuracy: 2/2 (100.0%)",
        f"Interrupted ({stop.by}): partial report of 2 of 4 runs; gates not evaluated"]
    assert "2 of 4 runs" in err.splitlines()[-1] and ("Aborted!" if stop is CTRL_C else "Terminated!") in err
    suites = _assert_partial_forms(tmp_path, "eval", 2, 4, "runs", stop)
    names = [c.get("name") for c in suites.iter("testcase")]
    assert names == ["interrupted", "o1", "o2"]  # the runs done, not the one going on nor the one not started
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["counts"]["turns"] == 2 and [c["name"] for c in data["cases"]] == ["o1", "o2"]
    # the runs done, not those planned (it said `4 case(s) x 1 trial(s); pass rate 100.0%`)
    assert data["notes"][0] == f"2 of 4 runs done before {stop.by} (4 case(s) x 1 trial(s) planned); pass rate 100.0%"


def test_pass_hat_k_of_an_interrupted_eval_says_which_cases_it_is_over(tmp_path: Path) -> None:
    """pass^k after Ctrl-C is over the cases whose k trials were all done: a case cut short (1 of its 2 trials done)
    is left out of pass^2 and counts in pass^1, and one not started in neither. The report gave the figures with no
    word of it (each pass^k row over other cases). The note and the pass^k table now say over how many cases each is."""
    _, rules = _dataset(tmp_path)
    cases = tmp_path / "cases.yaml"
    inputs = ["where is order 1", "where is order 2 (stall)", "where is order 3"]  # o2's second trial stalls
    cases.write_text("".join(f"- id: o{n}\n  input: {text}\n"
                             f"  call: [{{tool: get_order_status, exactly: 1, args: {{order_id: '{n}'}}}}]\n"
                             for n, text in enumerate(inputs, 1)), encoding="utf-8")
    proc = _start(["eval", "--dataset", str(cases), "--rules", str(rules), "--agent",
                   "tests.monitor.offline.agents:logging_second_stalling_agent", "--trials", "2", "--no-progress",
                   "--json", str(tmp_path / "r.json")], tmp_path / "runs.log", starts=4)
    out, err, _ = _interrupt(proc)
    assert proc.returncode == 130, (proc.returncode, err[-3000:])
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["interrupted"]["completed"] == 3 and data["k"] == 2, data["interrupted"]
    assert data["figures"]["pass_hat_k"] == 1.0  # o1's two trials, both passed
    assert ("pass^2 = 100.0%, over the 1 of 3 case(s) whose 2 trials were all done before Ctrl-C (1 cut short, "
            "1 not started: left out)") in data["notes"], data["notes"]
    (table,) = [t for t in data["tables"] if t["title"].startswith("pass^k")]
    assert table["columns"] == ["k", "pass^k", "cases"]
    assert table["rows"] == [["1", "100.0%", "2"], ["2", "100.0%", "1"]]


def test_sigterm_ignored_at_the_start_stays_ignored(tmp_path: Path) -> None:
    """A process started with SIGTERM ignored keeps ignoring it during the runs (as serve's start-up does): the runs
    go on; a Ctrl-C then stops them as ever."""
    cases, rules = _dataset(tmp_path)
    proc = _start(["eval", "--dataset", str(cases), "--rules", str(rules), "--agent",
                   "tests.monitor.offline.agents:logging_stalling_agent", "--no-progress", *_forms(tmp_path)],
                  tmp_path / "runs.log", starts=3, main=_MAIN_TERM_IGNORED)
    proc.send_signal(signal.SIGTERM)
    time.sleep(1.5)
    assert proc.poll() is None, proc.communicate()
    out, err, _ = _interrupt(proc, CTRL_C)
    assert proc.returncode == 130, (proc.returncode, err[-3000:])
    _assert_partial_forms(tmp_path, "eval", 2, 4, "runs", CTRL_C)


@STOPS
def test_a_stop_before_the_runs_ends_the_command_with_its_code_and_no_traceback(tmp_path: Path, stop: Stop) -> None:
    """A signal while the dataset is read (a FIFO nobody writes), before any run: no report (there is no run), the
    exit code of the signal, no traceback."""
    _, rules = _dataset(tmp_path)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-c", _MAIN, "eval", "--dataset", str(fifo), "--rules", str(rules),
                             "--agent", "tests.monitor.offline.agents:support_agent", "--no-progress"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while True:  # until the command opens the FIFO to read it (opening it to write fails before)
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
    # Into its read by now: a signal just before a blocking system call is entered is handled only when the call
    # returns (CPython runs the handler between bytecodes), and the read of a FIFO nobody writes never does.
    time.sleep(0.5)
    try:
        out, err, _ = _interrupt(proc, stop)
    finally:
        os.close(writer)
    assert proc.returncode == stop.code, (proc.returncode, err[-3000:])
    assert "Traceback" not in err and ("Aborted!" if stop is CTRL_C else "Terminated!") in err, err[-3000:]


def test_quiet_eval_interrupted_says_so_after_the_accuracy_line(tmp_path: Path) -> None:
    cases, rules = _dataset(tmp_path)
    proc = _start(["eval", "--dataset", str(cases), "--rules", str(rules), "--agent",
                   "tests.monitor.offline.agents:logging_stalling_agent", "-q", "--json", "-"],
                  tmp_path / "runs.log", starts=3)
    out, err, _ = _interrupt(proc)
    assert proc.returncode == 130, (proc.returncode, err[-3000:])
    assert json.loads(out)["interrupted"]["completed"] == 2  # stdout is the JSON alone
    assert "Tool call accuracy: 2/2 (100.0%)" in err
    assert "Interrupted (Ctrl-C): partial report of 2 of 4 runs" in err


@STOPS
def test_a_stop_during_a_scenario_eval_reports_the_steps_done(tmp_path: Path, stop: Stop) -> None:
    """The steps done are reported; the note counts as passed only the scenarios run to their end (it counted `s`,
    one step of three done, as a scenario that passed every step)."""
    rules = tmp_path / "support.yaml"
    rules.write_text(SUPPORT_RULES, encoding="utf-8")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        "agent: support\nrules: [support.yaml]\nscenarios:\n"
        "  - name: a\n    steps:\n"
        "      - {user: where is order 10, expect: {calls: [{tool: get_order_status}]}}\n"
        "  - name: s\n    steps:\n"
        "      - {user: where is order 1, expect: {calls: [{tool: get_order_status}]}}\n"
        "      - {user: where is order 2 (stall), expect: {calls: [{tool: get_order_status}]}}\n"
        "      - {user: where is order 3, expect: {calls: [{tool: get_order_status}]}}\n"
        "  - name: t\n    steps:\n"
        "      - {user: where is order 11, expect: {calls: [{tool: get_order_status}]}}\n", encoding="utf-8")
    proc = _start(["eval", "--scenario", str(scenario), "--agent",
                   "tests.monitor.offline.agents:logging_stalling_agent", "--no-progress", *_forms(tmp_path)],
                  tmp_path / "runs.log", starts=3)
    out, err, _ = _interrupt(proc, stop)
    assert proc.returncode == stop.code, (proc.returncode, err[-3000:])
    assert f"Interrupted ({stop.by}): partial report of 2 of 5 steps" in out, out[-3000:]
    suites = _assert_partial_forms(tmp_path, "eval", 2, 5, "steps", stop)
    assert [c.get("name") for c in suites.iter("testcase")] == ["interrupted", "a step 1", "s step 1"]
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["notes"][0] == (f"2 of 5 steps done before {stop.by}: 1/1 scenario(s) run to their end passed every "
                                "step (free mode); 1 cut short, 1 not started"), data["notes"]


def _probe(tmp_path: Path, *options: str) -> subprocess.Popen[str]:
    """The example-like probe whose third run stalls, every report form asked for, started and at its third run."""
    rules = tmp_path / "support.yaml"
    rules.write_text(SUPPORT_RULES, encoding="utf-8")
    return _start(["probe", "--generator", "tests.monitor.offline.agents:stalling_inputs", "--agent",
                   "tests.monitor.offline.agents:logging_stalling_agent", "--rules", str(rules), "--pool", "1",
                   "--no-progress", *options, *_forms(tmp_path)], tmp_path / "runs.log", starts=3)  # fmt: skip


@STOPS
def test_a_stop_during_a_probe_writes_the_partial_report_and_exits_128_plus_the_signal(tmp_path: Path,
                                                                                      stop: Stop) -> None:
    proc = _probe(tmp_path, "--iterations", "10", "--fail-under", "accuracy=0.5")
    out, err, took = _interrupt(proc, stop)
    assert proc.returncode == stop.code, (proc.returncode, err[-3000:])
    assert took < 10 and "Traceback" not in err, err[-3000:]
    assert f"Interrupted ({stop.by}): partial report of 2 of 10 runs" in out, out[-3000:]
    assert "gates not evaluated" in out and "All gates passed" not in out
    suites = _assert_partial_forms(tmp_path, "probe", 2, 10, "runs", stop)
    assert [c.get("name") for c in suites.iter("testcase")] == ["interrupted", "run 1", "run 2"]


@pytest.mark.parametrize(("first", "second"), [(CTRL_C, CTRL_C), (SIGTERM, SIGTERM), (CTRL_C, SIGTERM),
                                               (SIGTERM, CTRL_C)], ids=lambda s: s.signum.name)
def test_a_second_stop_while_the_report_is_written_ends_at_once(tmp_path: Path, first: Stop, second: Stop) -> None:
    """The JSON report goes to a FIFO nobody reads: writing it blocks. A second Ctrl-C or SIGTERM, after either, then
    ends the process at once, by the signal's default action (a shell reports 130 or 143), as it ends `serve`."""
    cases, rules = _dataset(tmp_path)
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    proc = _start(["eval", "--dataset", str(cases), "--rules", str(rules), "--agent",
                   "tests.monitor.offline.agents:logging_stalling_agent", "--no-progress", "--json", str(fifo)],
                  tmp_path / "runs.log", starts=3)
    proc.send_signal(first.signum)
    time.sleep(1.5)
    assert proc.poll() is None, "did not wait to write the report"
    out, err, took = _interrupt(proc, second)
    assert proc.returncode == -second.signum, (proc.returncode, err[-3000:])
    assert took < 5


@STOPS
def test_a_stop_during_the_compare_seeds_runs_reports_the_whole_probe_without_the_comparison(tmp_path: Path,
                                                                                            stop: Stop) -> None:
    proc = _probe(tmp_path, "--iterations", "2", "--compare-seeds", "3")  # the third run is the comparison's first
    out, err, _ = _interrupt(proc, stop)
    assert proc.returncode == stop.code, (proc.returncode, err[-3000:])
    assert (f"Interrupted ({stop.by}): partial report of 2 of 2 runs, without the --compare-seeds comparison it was "
            "running; gates not evaluated") in out, out[-3000:]
    _assert_partial_forms(tmp_path, "probe", 2, 2, "runs", stop)
    data = json.loads((tmp_path / "r.json").read_text())
    assert list(data["series"]) == ["art accuracy"]  # not the other strategy's, cut short
    assert not any(t["title"].startswith("Runs to the first failure") for t in data["tables"])


def test_the_copy_of_a_sigterm_sent_to_the_process_group_does_not_end_the_report(tmp_path: Path) -> None:
    """`timeout` without --foreground sends SIGTERM to the command and then to its process group: two, microseconds
    apart. The second ended the process while the partial report was written (no report in 3 runs of 5); a SIGTERM
    within a moment of the first is that copy, not a second stop."""
    cases, rules = _dataset(tmp_path)
    args = ["eval", "--dataset", str(cases), "--rules", str(rules), "--agent",
            "tests.monitor.offline.agents:logging_stalling_agent", "--no-progress", *_forms(tmp_path)]
    for attempt in range(3):
        for form in ("r.json", "r.md", "r.xml", "r.html"):
            (tmp_path / form).unlink(missing_ok=True)
        log = tmp_path / f"runs{attempt}.log"
        log.touch()
        proc = subprocess.Popen(["timeout", "-s", "TERM", "4", sys.executable, "-c", _MAIN, *args], cwd=REPO,
                                env={**os.environ, "TOOLWATCH_TEST_RUN_LOG": str(log)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 124, (proc.returncode, err[-3000:])  # timeout's own: it timed the command out
        assert "Traceback" not in err, err[-3000:]
        _assert_partial_forms(tmp_path, "eval", 2, 4, "runs", SIGTERM)


def _whole_report_then_stopped(args: list[str], stop: Stop, runs: int) -> dict[str, object]:
    """`args` (a command writing its JSON report to stdout, more than a pipe holds) run until its report has begun to
    come out, the signal sent while the rest waits for the reader; the JSON report read whole afterwards."""
    proc = subprocess.Popen([sys.executable, "-c", _MAIN, *args, "--no-progress", "--json", "-"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    head = proc.stdout.read(4096)  # the runs are over: their report is being written
    assert len(head) == 4096, proc.communicate()
    proc.send_signal(stop.signum)
    rest, err_bytes = proc.communicate(timeout=60)
    err = err_bytes.decode()
    assert proc.returncode == stop.code, (proc.returncode, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    last = err.rstrip().splitlines()[-1]
    assert last == (f"{'Aborted!' if stop is CTRL_C else 'Terminated!'} The {stop.by} came after the {runs} runs were "
                    "over: the report is whole."), err[-3000:]
    data = json.loads(head + rest)
    assert data["interrupted"] is None
    return dict(data)


@STOPS
def test_a_stop_after_the_runs_while_the_report_is_written_leaves_the_report_whole(tmp_path: Path,
                                                                                   stop: Stop) -> None:
    """Once the runs were over, a Ctrl-C or SIGTERM while the report was made and written (the harness shutting
    down, the forms rendered: about 0.6 s, or longer writing to a slow reader) raised there: no report, or half of
    one, of runs all done. It now lets the report be written whole, with the gates evaluated (all runs are in it),
    then exits 130 or 143 saying why."""
    _, rules = _dataset(tmp_path)
    cases = tmp_path / "many.yaml"  # a JSON report of 300 cases is about twice what a pipe holds
    cases.write_text("".join(f"- id: o{n}\n  input: where is order {n}\n"
                             f"  call: [{{tool: get_order_status, exactly: 1, args: {{order_id: '{n}'}}}}]\n"
                             for n in range(1, 301)), encoding="utf-8")
    data = _whole_report_then_stopped(["eval", "--dataset", str(cases), "--rules", str(rules), "--agent",
                                       "tests.monitor.offline.agents:support_agent", "--fail-under",
                                       "accuracy=0.9"], stop, 300)
    assert data["counts"]["turns"] == 300  # type: ignore[index]
    assert len(data["cases"]) == 300  # type: ignore[arg-type]
    assert [g["passed"] for g in data["gates"]] == [True]  # type: ignore[attr-defined]


@STOPS
def test_a_stop_after_a_probe_s_runs_leaves_its_report_whole(tmp_path: Path, stop: Stop) -> None:
    rules = tmp_path / "support.yaml"
    rules.write_text(SUPPORT_RULES, encoding="utf-8")
    data = _whole_report_then_stopped(["probe", "--generator", "tests.monitor.offline.agents:order_inputs",
                                       "--agent", "tests.monitor.offline.agents:support_agent", "--rules",
                                       str(rules), "--iterations", "300", "--pool", "2"], stop, 300)
    assert data["counts"]["turns"] == 300  # type: ignore[index]


@STOPS
def test_a_stop_after_the_compare_seeds_runs_names_them_in_the_exit_line(tmp_path: Path, stop: Stop) -> None:
    """A Ctrl-C or SIGTERM once probe's --compare-seeds comparison was over too (sent here as the Markdown form is
    rendered) is held until the report is out, as after the probe's own runs; the exit line said `came after the 2
    runs were over`, naming the probe's runs only, as if the comparison in the report had not run."""
    rules = tmp_path / "support.yaml"
    rules.write_text(SUPPORT_RULES, encoding="utf-8")
    signalling = (f"import os, signal, monitor.report.output as o\n"
                  f"real = o.render_markdown\n"
                  f"def render(report):\n"
                  f"    os.kill(os.getpid(), signal.{stop.signum.name})\n"
                  f"    return real(report)\n"
                  f"o.render_markdown = render\n{_MAIN}")
    res = subprocess.run([sys.executable, "-c", signalling, "probe", "--generator",
                          "tests.monitor.offline.agents:order_inputs", "--agent",
                          "tests.monitor.offline.agents:support_agent", "--rules", str(rules), "--iterations", "2",
                          "--compare-seeds", "1", "--no-progress", "-q", "--markdown", str(tmp_path / "r.md"),
                          "--json", str(tmp_path / "r.json")],
                         cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == stop.code, (res.returncode, res.stderr[-3000:])
    ended = "Aborted!" if stop is CTRL_C else "Terminated!"
    assert res.stderr.rstrip().splitlines()[-1] == (
        f"{ended} The {stop.by} came after the 2 runs and the --compare-seeds comparison were over: the report is "
        "whole."), res.stderr[-3000:]
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["interrupted"] is None
    assert any(t["title"].startswith("Runs to the first failure") for t in data["tables"])


@contextmanager
def _handlers_kept() -> Iterator[object]:
    """SIGTERM's and SIGINT's handlers as they were after the block (a signal within stop_on_signal leaves the default
    actions in place, for a second one to end the process); SIGTERM's handler given to the block."""
    previous, previous_int = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        yield previous
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_a_signal_held_after_the_probe_s_runs_stops_the_comparison_as_it_begins(capsys: pytest.CaptureFixture[str]
                                                                                 ) -> None:
    """In process: a SIGTERM once the runs are over is held (no exception), raised as Terminated when more runs
    begin (probe's --compare-seeds runs, which then report the probe's runs without the comparison); one held till
    the end turns the command's exit into 143, saying why."""
    with _handlers_kept() as previous:
        with stop_on_signal():
            runs_over(3)
            signal.raise_signal(signal.SIGTERM)  # held
            with pytest.raises(Terminated):
                runs_again()
        assert signal.getsignal(signal.SIGTERM) is not previous  # a second one would end the process
    with _handlers_kept(), pytest.raises(SystemExit) as exit_, stop_on_signal():
        runs_over(2, "steps")
        signal.raise_signal(signal.SIGTERM)
        runs_over(2, "steps")  # nothing raised: held
        raise SystemExit(1)  # a gate failed
    assert exit_.value.code == 143
    assert capsys.readouterr().err == "Terminated! The SIGTERM came after the 2 steps were over: the report is whole.\n"


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_a_signal_after_the_runs_is_held_by_the_stop_on_signal_that_handles_it(capsys: pytest.CaptureFixture[str]
                                                                                ) -> None:
    """A stop_on_signal within another handles no signal (the outer one does): runs_over within it holds the outer
    one's next signal, which then ends the command with 143, as at the top level (it raised Terminated)."""
    with _handlers_kept(), pytest.raises(SystemExit) as exit_, stop_on_signal():
        with stop_on_signal():
            runs_over(4)
            signal.raise_signal(signal.SIGTERM)  # held
            raise SystemExit(0)
    assert exit_.value.code == 143
    assert capsys.readouterr().err == "Terminated! The SIGTERM came after the 4 runs were over: the report is whole.\n"


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_a_signal_held_is_not_lost_when_a_form_cannot_be_written(capsys: pytest.CaptureFixture[str]) -> None:
    """A SIGTERM held while the report was written, and a form that could not be (ReportWriteError, exit 2): the
    error is said, then the command exits 143 (the signal's, as a partial report whose form is not written), not 2
    with the SIGTERM forgotten."""
    with _handlers_kept(), pytest.raises(SystemExit) as exit_, stop_on_signal():
        runs_over(5)
        signal.raise_signal(signal.SIGTERM)  # held
        raise ReportWriteError("cannot write r.json: No space left on device")
    assert exit_.value.code == 143
    assert capsys.readouterr().err == ("Error: cannot write r.json: No space left on device\n"
                                       "Terminated! The SIGTERM came after the 5 runs were over.\n")


@STOPS
def test_a_signal_held_is_not_lost_when_the_report_then_fails_with_an_error(tmp_path: Path, stop: Stop) -> None:
    """A Ctrl-C or SIGTERM while the report of runs all done is made (held), and then an error no handler expects
    (here the Markdown form failing to render: a bug): the error's traceback is shown, then the command exits as the
    signal asks (130, 143) saying it came, not 1 as if no signal had come."""
    cases, rules = _dataset(tmp_path)
    cases.write_text(cases.read_text().replace(" (stall)", ""), encoding="utf-8")
    failing = (f"import os, signal, monitor.report.output as o\n"
               f"def render(report):\n"
               f"    os.kill(os.getpid(), signal.{stop.signum.name})\n"
               f"    raise RuntimeError('the form failed')\n"
               f"o.render_markdown = render\n{_MAIN}")
    res = subprocess.run([sys.executable, "-c", failing, "eval", "--dataset", str(cases), "--rules", str(rules),
                          "--agent", "tests.monitor.offline.agents:support_agent", "--no-progress", "--markdown",
                          str(tmp_path / "r.md")], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == stop.code, (res.returncode, res.stderr[-3000:])
    lines = res.stderr.rstrip().splitlines()
    assert "Traceback" in res.stderr and "RuntimeError: the form failed" in lines, res.stderr[-3000:]
    ended = "Aborted!" if stop is CTRL_C else "Terminated!"
    assert lines[-1] == f"{ended} The {stop.by} came after the 4 runs were over.", res.stderr[-3000:]


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_a_signal_raised_is_not_lost_when_an_error_takes_its_place(capsys: pytest.CaptureFixture[str]) -> None:
    """A signal that stopped the runs (raised: KeyboardInterrupt, Terminated), whose exception was then replaced by
    another (an error while the runs were stopped, a bug while the partial report was made): the error is shown,
    and the exit is the signal's (143), not 1."""
    with _handlers_kept(), pytest.raises(SystemExit) as exit_, stop_on_signal():
        try:
            signal.raise_signal(signal.SIGTERM)
        except Terminated:
            raise RuntimeError("while stopping") from None
    assert exit_.value.code == 143
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: while stopping" in err, err
    assert err.rstrip().splitlines()[-1] == "Terminated!", err


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_an_error_with_no_signal_is_raised_as_it_was() -> None:
    with _handlers_kept(), pytest.raises(RuntimeError, match="no signal"), stop_on_signal():
        runs_over(1)
        raise RuntimeError("no signal")
