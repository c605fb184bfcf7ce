"""`toolwatch eval` as a new user first types it, in a real process: a rule file holding its own `cases` given both
as the dataset and as --rules, and an agent module that is not importable from the folder it runs in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.monitor.offline.conftest import REPO

TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")
AGENT = "examples.triage.agent:triage"


def _eval(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOLWATCH, "eval", "--no-progress", "-q", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_a_rule_file_with_cases_is_a_dataset_also_when_given_to_rules(tmp_path: Path) -> None:
    # `--dataset` takes "a rule file with `cases`", and every other command takes the rules with --rules: given both
    # ways, the file was loaded twice and refused against itself ("duplicate case id 'auth-short'", every case).
    rules = tmp_path / "triage.yaml"
    rules.write_text((REPO / "rules" / "incident-triage.yaml").read_text(encoding="utf-8")
                     + f"\ncases: {REPO / 'examples' / 'triage' / 'cases.yaml'}\n", encoding="utf-8")
    alone = _eval("--dataset", str(rules), "--agent", AGENT)
    assert alone.returncode == 0, alone.stderr[-3000:]
    for spelling in (str(rules), str(tmp_path / "." / "triage.yaml")):
        both = _eval("--dataset", str(rules), "--rules", spelling, "--agent", AGENT)
        assert both.returncode == 0, both.stderr[-3000:]
        assert both.stdout == alone.stdout and "Tool call accuracy: " in both.stdout, (both.stdout, alone.stdout)


def test_an_agent_package_not_in_the_folder_says_where_modules_are_imported_from(tmp_path: Path) -> None:
    # Run from another folder, `examples.triage.agent:triage` said only "No module named 'examples'".
    res = _eval("--dataset", str(REPO / "examples" / "triage" / "cases.yaml"),
                "--rules", str(REPO / "rules" / "incident-triage.yaml"), "--agent", AGENT, cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "No module named 'examples'" in res.stderr and "PYTHONPATH" in res.stderr, res.stderr
    assert "the folder that holds examples/" in res.stderr, res.stderr


def test_an_agent_module_that_exits_on_import_is_an_import_error_not_a_gate_failure(tmp_path: Path) -> None:
    # A module guarding its set-up with `sys.exit("set OPENAI_API_KEY first")` at import made toolwatch exit 1, the
    # code of a failed gate, with the message alone and no word of --agent; exit 0 for `sys.exit()`.
    (tmp_path / "keyed_agent.py").write_text('import sys\nsys.exit("set OPENAI_API_KEY first")\n'
                                             "def agent(text):\n    return text\n", encoding="utf-8")
    (tmp_path / "quiet_agent.py").write_text("import sys\nsys.exit()\n", encoding="utf-8")
    common = ("--rules", str(REPO / "rules" / "incident-triage.yaml"))
    for module, says in (("keyed_agent", "SystemExit: set OPENAI_API_KEY first"), ("quiet_agent", "SystemExit: None")):
        res = _eval("--dataset", str(REPO / "examples" / "triage" / "cases.yaml"), *common, "--agent",
                    f"{module}:agent", cwd=tmp_path)
        assert res.returncode == 2, (res.returncode, res.stderr[-3000:])
        said = f"Invalid value for '--agent': '{module}:agent': cannot import {module}: {says}"
        assert said in res.stderr, res.stderr
        probe = subprocess.run([TOOLWATCH, "probe", "--no-progress", "-q", "--generator", f"{module}:gen", "--agent",
                                AGENT, *common], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert probe.returncode == 2, (probe.returncode, probe.stderr[-3000:])
        assert f"Invalid value for '--generator': '{module}:gen': cannot import {module}: {says}" in probe.stderr


SLOW_AGENT = """
import time
from examples.triage.agent import triage

def agent(line):
    time.sleep(0.15)
    return triage(line)
"""


def _slow_eval(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT, encoding="utf-8")
    return subprocess.run(
        [TOOLWATCH, "eval", "--dataset", str(REPO / "examples" / "triage" / "cases.yaml"), "--rules",
         str(REPO / "rules" / "incident-triage.yaml"), "--agent", "slow_agent:agent",
         "--json", str(tmp_path / "r.json")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **env},
    )


def test_a_long_run_logged_to_a_file_says_how_far_it_is_while_it_runs(tmp_path: Path) -> None:
    # With stderr not a terminal (a CI log, `2>&1 | tee`), the bar is not redrawn: a long eval printed nothing until
    # its end (CI systems stop a job silent for 10 minutes). A plain line now says how far it is every interval.
    res = _slow_eval(tmp_path, {"TOOLWATCH_PROGRESS_INTERVAL": "300ms"})
    assert res.returncode == 0, res.stderr[-3000:]
    lines = re.findall(r"^eval: ([1-7])/8 \((\d+)%\), (\d+:\d\d:\d\d) elapsed.*$", res.stderr, re.M)
    assert lines, res.stderr
    done = [int(n) for n, _, _ in lines]
    assert done == sorted(done) and all(int(p) == round(100 * int(n) / 8) for n, p, _ in lines), lines
    default = _slow_eval(tmp_path, {"TOOLWATCH_PROGRESS_INTERVAL": ""})  # 30 s: none in a run of about 1.2 s
    assert default.returncode == 0 and not re.search(r"^eval: \d", default.stderr, re.M), default.stderr
    bad = _slow_eval(tmp_path, {"TOOLWATCH_PROGRESS_INTERVAL": "soon"})
    assert bad.returncode == 0, bad.stderr[-3000:]
    assert "ignoring TOOLWATCH_PROGRESS_INTERVAL='soon'" in bad.stderr, bad.stderr


SIGNATURES = """
from examples.triage.agent import triage

def one(line):
    return triage(line)

def two(line, history):
    return triage(line)

def gen_no_rng():
    return "[AUTH] x"
"""


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOLWATCH, *args, "--no-progress", "-q"], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(cwd)])})


def test_an_agent_or_generator_that_cannot_take_the_call_is_refused_before_any_run(tmp_path: Path) -> None:
    # A scenario agent without `history` raised TypeError in every step: exit 0, "3 run(s) raised", accuracy 0/0, and
    # the cause only with -v. An agent or generator that cannot be called as the command calls it is a usage error.
    (tmp_path / "sig.py").write_text(SIGNATURES, encoding="utf-8")
    rules = ("--rules", str(REPO / "rules" / "incident-triage.yaml"))
    scenario = _run(tmp_path, "eval", "--scenario", str(REPO / "examples" / "triage" / "scenario.yaml"),
                    "--agent", "sig:one")
    assert scenario.returncode == 2, (scenario.returncode, scenario.stderr)
    assert ("Invalid value for '--agent': 'sig:one' cannot be called as fn(input, history=[...]), as a scenario "
            "step calls it (history: the conversation's earlier messages): got an unexpected keyword argument "
            "'history'") in scenario.stderr, scenario.stderr
    dataset = _run(tmp_path, "eval", "--dataset", str(REPO / "examples" / "triage" / "cases.yaml"), *rules,
                   "--agent", "sig:two")
    assert dataset.returncode == 2, (dataset.returncode, dataset.stderr)
    assert ("Invalid value for '--agent': 'sig:two' cannot be called as fn(input), as a case calls it: missing a "
            "required argument: 'history'") in dataset.stderr, dataset.stderr
    probe = _run(tmp_path, "probe", "--generator", "sig:gen_no_rng", "--agent", "sig:one", *rules)
    assert probe.returncode == 2, (probe.returncode, probe.stderr)
    assert ("Invalid value for '--generator': 'sig:gen_no_rng' cannot be called as fn(rng), as the probe calls it "
            "(rng: a random.Random): too many positional arguments") in probe.stderr, probe.stderr
    agent = _run(tmp_path, "probe", "--generator", "examples.triage.generator:generate", "--agent", "sig:two", *rules)
    assert agent.returncode == 2 and "'sig:two' cannot be called as fn(input)" in agent.stderr, agent.stderr
    ok = _run(tmp_path, "eval", "--scenario", str(REPO / "examples" / "triage" / "scenario.yaml"), "--agent",
              "sig:two")  # history taken positionally is fine
    assert ok.returncode == 0 and ok.stdout == "Tool call accuracy: 3/4 (75.0%)\n", (ok.stdout, ok.stderr)


def test_a_gate_or_baseline_on_pass_hat_k_without_trials_says_trials_compute_it(tmp_path: Path) -> None:
    # `eval` without --trials said pass^k "is not computed by this command", as if eval had no pass^k at all.
    common = ("--dataset", str(REPO / "examples" / "triage" / "cases.yaml"), "--rules",
              str(REPO / "rules" / "incident-triage.yaml"), "--agent", AGENT)
    base = tmp_path / "base.json"
    assert _eval(*common, "--trials", "3", "--json", str(base)).returncode == 0
    res = _eval(*common, "--fail-under", "pass^k=0.9", "--baseline", str(base))
    assert res.returncode == 1, res.stderr[-3000:]
    assert ("Not compared with the baseline: pass^k (chance that k trials of a case all pass) (pass_hat_k) is in "
            "the baseline but not computed by this run (eval --dataset computes it with --trials 2 or more)\n"
            ) in res.stdout, res.stdout
    assert ("  - pass^k (chance that k trials of a case all pass) (pass_hat_k) is not computed by this run (eval "
            "--dataset computes it with --trials 2 or more), gate < 90.00%\n") in res.stdout, res.stdout


def test_the_answer_note_takes_the_article_of_each_type() -> None:
    from monitor.cli.eval_cmd import answer_note

    assert answer_note(["int", "dict", None, "int", "Answer"]) == (
        "4 run(s) returned an Answer or a dict or an int, not the answer text: recorded as no answer, so their "
        "response checks fail (return the answer as a str)")
