"""eval's exit code when no run of the agent completed: every run (or scenario step) raised or timed out. Through the
real command line in a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.monitor.offline.conftest import REPO, SUPPORT_RULES
from tests.monitor.offline.test_eval import DATASET

CASES = DATASET  # the labelled cases of test_eval: two orders and a greeting
HINT = "`toolwatch -v eval ...` prints the agent's traceback"

SCENARIO = """
agent: support
rules: [support.yaml]
scenarios:
  - name: orders
    steps:
      - user: where is order 1
        expect: {calls: [{tool: get_order_status, args: {order_id: "1"}}]}
      - user: where is order 2
        expect: {calls: [{tool: get_order_status, args: {order_id: "2"}}]}
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "support.yaml").write_text(SUPPORT_RULES, encoding="utf-8")
    (tmp_path / "cases.yaml").write_text(CASES, encoding="utf-8")
    (tmp_path / "scenario.yaml").write_text(SCENARIO, encoding="utf-8")
    return tmp_path


def _eval(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", "from monitor.cli import main; main()", "eval", *args,
                           "--no-progress"], cwd=where, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def _dataset(where: Path, agent: str, *args: str) -> subprocess.CompletedProcess[str]:
    return _eval(where, "--dataset", "cases.yaml", "--rules", "support.yaml", "--agent",
                 f"tests.monitor.offline.agents:{agent}", *args)


def test_an_eval_whose_every_run_raised_exits_2_after_its_report(files: Path) -> None:
    """The agent raised on every case (a model backend down, a missing key): exit 0 with no gate, as if the agent had
    been evaluated, and a CI job went green. The calls each run made before it raised are judged (here 2 of 3
    right), so even a gate could pass. Now the report is written and printed, then an error says no run completed,
    exit 2 (the agent could not be run, as one that does not import), with a gate or without."""
    res = _dataset(files, "raising_agent", "--json", "r.json")
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Tool call accuracy: 2/3 (66.7%)" in res.stdout  # the report, whole, before the error
    error = "error: every run raised or timed out (3 of 3): no run of the agent completed"
    assert error in res.stderr.splitlines(), res.stderr
    assert f"3 run(s) raised or timed out; {HINT}" in res.stdout, res.stdout  # how to see why: the report's note
    notes = json.loads((files / "r.json").read_text(encoding="utf-8"))["notes"]
    assert "every run raised or timed out (3 of 3): no run of the agent completed (exit 2)" in notes, notes
    gated = _dataset(files, "raising_agent", "-q", "--fail-under", "accuracy=0.5")
    assert gated.returncode == 2, (gated.returncode, gated.stderr)
    assert "All gates passed." in gated.stdout and error in gated.stderr.splitlines(), gated.stdout + gated.stderr
    assert f"warning: 3 run(s) raised or timed out; {HINT}" in gated.stderr, gated.stderr  # -q: the warning's


def test_an_eval_where_some_runs_completed_keeps_its_exit_code(files: Path) -> None:
    """One run of three raised: the agent was evaluated; with no gate the exit is 0, as before."""
    res = _dataset(files, "raising_on_hello", "-q")
    assert res.returncode == 0, (res.returncode, res.stderr)
    assert "1 run(s) raised or timed out" in res.stderr and "every run" not in res.stderr, res.stderr


def test_a_scenario_eval_whose_every_step_raised_exits_2(files: Path) -> None:
    res = _eval(files, "--scenario", "scenario.yaml", "--agent", "tests.monitor.offline.agents:exiting_agent", "-q")
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert res.stderr.splitlines()[-2:] == [
        f"warning: 2 run(s) raised or timed out; {HINT} (the JUnit report has every one)",
        "error: every step raised or timed out (2 of 2): no step of the agent completed"], res.stderr


def test_an_eval_whose_every_run_raised_says_so_when_a_form_cannot_be_written(files: Path) -> None:
    res = _dataset(files, "raising_agent", "-q", "--json", "/dev/full")
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "every run raised or timed out (3 of 3)" in res.stderr and "cannot write /dev/full" in res.stderr, \
        res.stderr


def test_with_v_the_error_does_not_send_the_reader_to_v(files: Path) -> None:
    """`toolwatch -v eval` has printed the agent's tracebacks: the error that no run completed no longer ends by
    saying that `toolwatch -v eval ...` prints them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", "from monitor.cli import main; main()", "-v", "eval", "--dataset",
                          "cases.yaml", "--rules", "support.yaml", "--agent",
                          "tests.monitor.offline.agents:raising_agent", "--no-progress", "-q"], cwd=files, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "RuntimeError: model backend down" in res.stderr  # the tracebacks, printed
    assert res.stderr.splitlines()[-1] == ("error: every run raised or timed out (3 of 3): no run of the agent "
                                           "completed"), res.stderr


def _cli(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`toolwatch ARGS` (the options before the command too: -v)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", "from monitor.cli import main; main()", *args], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("form", [(), ("--json", "-")], ids=["summary-on-stdout", "json-on-stdout"])
@pytest.mark.parametrize("quiet", [(), ("-q",)], ids=["", "q"])
@pytest.mark.parametrize("verbose", [(), ("-v",)], ids=["", "v"])
@pytest.mark.parametrize(("input_args", "unit", "runs"), [
    (("--dataset", "cases.yaml", "--rules", "support.yaml", "--agent", "tests.monitor.offline.agents:raising_agent"),
     "run", 3),
    (("--scenario", "scenario.yaml", "--agent", "tests.monitor.offline.agents:exiting_agent"), "step", 2),
], ids=["dataset", "scenario"])
def test_when_no_run_completed_stderr_says_each_thing_once(files: Path, input_args: tuple[str, ...], unit: str,
                                                           runs: int, verbose: tuple[str, ...],
                                                           quiet: tuple[str, ...], form: tuple[str, ...]) -> None:
    """Every run raised: stderr said how to see the agent's traceback twice with -q (in the warning that runs raised,
    then again in the error that none completed), and with the summary on stderr (a form on stdout) said that no run
    completed twice too (its note, then the error). Each is said once there now; the error is the last line, and the
    report's forms still record why the exit was 2 (its note)."""
    res = _cli(files, *verbose, "eval", *input_args, "--no-progress", *quiet, *form)
    assert res.returncode == 2, (res.returncode, res.stderr)
    error = f"every {unit} raised or timed out ({runs} of {runs}): no {unit} of the agent completed"
    assert res.stderr.count(error) == 1, res.stderr
    assert res.stderr.count(HINT) == (1 if not verbose and (quiet or form) else 0), res.stderr  # -v: tracebacks
    assert res.stderr.splitlines()[-1] == f"error: {error}", res.stderr
    assert res.stderr.count(f"{runs} run(s) raised or timed out") == (1 if quiet or form else 0), res.stderr
    terminal = res.stderr + ("" if form else res.stdout)  # what a terminal shows, but for the JSON
    assert terminal.count(HINT) == (0 if verbose else 1), terminal
    if form:
        assert f"{error} (exit 2)" in json.loads(res.stdout)["notes"], res.stdout
