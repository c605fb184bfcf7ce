"""probe's exit code when no run of the agent completed (every run raised or timed out), as eval's
(test_eval_exit.py), and the errors it says when a report form cannot be written. Through the real command line in a
process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.monitor.offline.conftest import REPO, SUPPORT_RULES, TRIAGE_RULES

AGENTS = "tests.monitor.offline.agents"
NONE_COMPLETED = "every run raised or timed out (3 of 3): no run of the agent completed"
HINT = "`toolwatch -v probe ...` prints the agent's traceback"  # in the note (-q: the warning) that runs raised


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    path = tmp_path / "support.yaml"
    path.write_text(SUPPORT_RULES, encoding="utf-8")
    return path


def _probe(where: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", "from monitor.cli import main; main()", "probe", *args,
                           "--no-progress"], cwd=where, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def _support(where: Path, rules: Path, agent: str, *args: str, generator: str = "order_inputs",
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return _probe(where, "--generator", f"{AGENTS}:{generator}", "--agent", f"{AGENTS}:{agent}", "--rules",
                  str(rules), "--iterations", "3", *args, env=env)


def test_a_probe_whose_every_run_raised_exits_2_after_its_report(tmp_path: Path, rules: Path) -> None:
    """The agent raised on every run (a model backend down, a missing key): probe exited 0, as if the agent had been
    probed, while eval exits 2 for it. Now the report is written and printed, then an error says no run completed,
    exit 2, with a gate or without (a gate can pass on the calls the runs made before they raised)."""
    res = _support(tmp_path, rules, "raising_agent", "--json", "r.json")
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Tool call accuracy: " in res.stdout  # the report, whole, before the error
    assert res.stderr.splitlines()[-1] == f"error: {NONE_COMPLETED}", res.stderr
    assert f"3 run(s) raised or timed out; {HINT}" in res.stdout, res.stdout
    notes = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["notes"]
    assert f"{NONE_COMPLETED} (exit 2)" in notes, notes
    gated = _support(tmp_path, rules, "raising_agent", "-q", "--fail-under", "accuracy=0")
    assert gated.returncode == 2, (gated.returncode, gated.stderr)
    assert "All gates passed." in gated.stdout, gated.stdout
    assert gated.stderr.splitlines()[-2:] == [f"warning: 3 run(s) raised or timed out; {HINT} (the JUnit report has "
                                              "every one)", f"error: {NONE_COMPLETED}"], gated.stderr


def test_a_probe_whose_every_run_raised_says_so_when_a_form_cannot_be_written(tmp_path: Path, rules: Path) -> None:
    res = _support(tmp_path, rules, "raising_agent", "-q", "--json", "/dev/full")
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert f"error: {NONE_COMPLETED}" in res.stderr.splitlines(), res.stderr
    assert res.stderr.index(NONE_COMPLETED) < res.stderr.index("cannot write /dev/full"), res.stderr


def test_a_probe_where_some_runs_completed_keeps_its_exit_code(tmp_path: Path, rules: Path) -> None:
    """Some runs raised (on `hello there`), some completed (`where is order 1`): the agent was probed; exit 0 with
    no gate, as before."""
    res = _support(tmp_path, rules, "raising_on_hello", "-q", generator="hello_or_order_1")
    assert res.returncode == 0, (res.returncode, res.stderr)
    assert res.stdout == "Tool call accuracy: 2/2 (100.0%)\n", res.stdout  # the two runs on `where is order 1`
    assert res.stderr.startswith("warning: 1 run(s) raised or timed out") and "error" not in res.stderr, res.stderr


@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupted_probe_whose_every_run_raised_keeps_the_signal_s_exit_code(tmp_path: Path, rules: Path,
                                                                                  name: str, code: int) -> None:
    """Stopped by Ctrl-C or SIGTERM after runs that all raised: the partial report, 130 or 143, and no error that no
    run completed (the runs not done could have)."""
    res = _support(tmp_path, rules, "signalling_raiser", "-q", env={"TOOLWATCH_TEST_SIGNAL": name})
    assert res.returncode == code, (res.returncode, res.stderr)
    assert "raised or timed out" in res.stderr and "no run of the agent completed" not in res.stderr, res.stderr


def test_a_generator_error_is_said_when_a_form_cannot_be_written(tmp_path: Path) -> None:
    """A generator that raised ends the probe with an error naming it (exit 2), said after the report; a report form
    that could not be written then (/dev/full: a disk that fills) raised its error before it, so with -q only
    `cannot write` was printed and the generator's failure went unsaid. Both are said now, the generator's first."""
    res = _probe(tmp_path, "--generator", "tests.monitor.offline.test_probe:broken_generator", "--agent",
                 "examples.triage.agent:triage", "--rules", str(TRIAGE_RULES), "--iterations", "3", "-q", "--json",
                 "/dev/full")
    assert res.returncode == 2, (res.returncode, res.stderr)
    error = "error: the generator tests.monitor.offline.test_probe:broken_generator raised RuntimeError: no more ideas"
    assert error in res.stderr and "cannot write /dev/full: No space left on device" in res.stderr, res.stderr
    assert res.stderr.index(error) < res.stderr.index("cannot write /dev/full"), res.stderr
    assert "Traceback" not in res.stderr


def test_a_generator_error_after_runs_that_all_raised_says_both(tmp_path: Path, rules: Path) -> None:
    """The generator raised after two runs, both of which raised: the two errors are said, the generator's last (it
    ended the probe), exit 2."""
    res = _support(tmp_path, rules, "raising_agent", "-q", "--pool", "1", generator="two_orders_then_raise")
    assert res.returncode == 2, (res.returncode, res.stderr)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert errors == [
        "error: every run raised or timed out (2 of 2): no run of the agent completed",
        f"error: the generator {AGENTS}:two_orders_then_raise raised RuntimeError: no more ideas; the probe stopped "
        "after 2 runs"], res.stderr


@pytest.mark.parametrize("command", ["eval", "probe"])
def test_help_says_the_exit_code_when_no_run_completed(command: str) -> None:
    from click.testing import CliRunner

    from monitor.cli import main

    res = CliRunner().invoke(main, [command, "--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "Exits 2, after the report, when no run of the agent completed (every one raised or timed out)." in " ".join(
        res.output.split()), res.output


def test_with_v_the_error_does_not_send_the_reader_to_v(tmp_path: Path, rules: Path) -> None:
    """`toolwatch -v probe` has printed the agent's tracebacks: the error that no run completed no longer ends by
    saying that `toolwatch -v probe ...` prints them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", "from monitor.cli import main; main()", "-v", "probe", "--generator",
                          f"{AGENTS}:order_inputs", "--agent", f"{AGENTS}:raising_agent", "--rules", str(rules),
                          "--iterations", "3", "--no-progress", "-q"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "RuntimeError: model backend down" in res.stderr  # the tracebacks, printed
    assert res.stderr.splitlines()[-1] == f"error: {NONE_COMPLETED}", res.stderr


GENERATOR_ERROR = (f"the generator {AGENTS}:two_orders_then_raise raised RuntimeError: no more ideas; the probe "
                   "stopped after 2 runs")


@pytest.mark.parametrize("form", [(), ("--json", "-")], ids=["summary-on-stdout", "json-on-stdout"])
@pytest.mark.parametrize("quiet", [(), ("-q",)], ids=["", "q"])
@pytest.mark.parametrize("verbose", [(), ("-v",)], ids=["", "v"])
@pytest.mark.parametrize(("agent", "generator", "errors"), [
    ("raising_agent", "order_inputs", [NONE_COMPLETED]),
    ("raising_agent", "two_orders_then_raise",
     ["every run raised or timed out (2 of 2): no run of the agent completed", GENERATOR_ERROR]),
    ("support_agent", "two_orders_then_raise", [GENERATOR_ERROR]),
], ids=["none-completed", "both", "generator"])
def test_probe_errors_are_said_once_on_stderr(tmp_path: Path, rules: Path, agent: str, generator: str,
                                              errors: list[str], verbose: tuple[str, ...], quiet: tuple[str, ...],
                                              form: tuple[str, ...]) -> None:
    """Without -q, probe prints its report's notes on stderr before the report: the note that no run completed, and
    the generator's error, were said there, then again as the `error:` lines after the report (with a form on stdout,
    a third time in the summary, on stderr too). Each is said once on stderr now, as the error lines that end it; the
    report's forms still record them (its notes), and how to see the agent's tracebacks is said once."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", "from monitor.cli import main; main()", *verbose, "probe",
                          "--generator", f"{AGENTS}:{generator}", "--agent", f"{AGENTS}:{agent}", "--rules",
                          str(rules), "--iterations", "3", "--pool", "1", "--no-progress", *quiet, *form],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 2, (res.returncode, res.stderr)
    for error in errors:
        assert res.stderr.count(error) == 1, (error, res.stderr)
    assert res.stderr.count(HINT) == (1 if agent == "raising_agent" and not verbose else 0), res.stderr
    said = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]  # with -v the generator's traceback
    assert said == [f"error: {e}" for e in errors], res.stderr  # is between them
    assert res.stderr.splitlines()[-1] == f"error: {errors[-1]}", res.stderr
    if form:
        notes = json.loads(res.stdout)["notes"]
        assert errors[-1] in notes if agent == "support_agent" else f"{errors[0]} (exit 2)" in notes, notes
