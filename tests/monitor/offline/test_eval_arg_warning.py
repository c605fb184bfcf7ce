"""`toolwatch eval`: an argument check of a scenario step or a dataset case on an argument the tool's JSON Schema
does not allow (`additionalProperties: false`, not in `properties`: a misspelt argument) fails every call that keeps
to the schema. As `toolwatch rules check` does for rule files, eval warns of it, at the check's place in the
scenario or dataset file: on stderr before the run (with -q too) and in the report's notes; not an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli.eval_cmd import eval_
from tests.monitor.offline.conftest import TRIAGE_RULES

AGENT = "examples.triage.agent:triage"
INPUT = "[AUTH] CRIT authd: token refresh failed region=eu-west-1"
NOT_ALLOWED = ("argument check on 'log_exerpt', which the schema of pull_auth_telemetry does not allow "
               "(additionalProperties: false; its properties: log_excerpt, window_minutes): it fails every call "
               "that keeps to the schema")

SCENARIO = f"""agent: incident-triage
rules: [{TRIAGE_RULES}]
scenarios:
  - name: auth-outage
    steps:
      - user: "{INPUT}"
        expect:
          calls:
            - tool: pull_auth_telemetry
              args: {{log_exerpt: {{regex: 'token refresh failed'}}}}
          response: {{regex: '(?m)^Result: '}}
"""

DATASET_YAML = f"""- id: auth-short
  input: "{INPUT}"
  call: [{{tool: pull_auth_telemetry, exactly: 1, args: {{log_exerpt: {{regex: 'token refresh'}}}}}}]
- input: "{INPUT}"
  call:
    - tool: pull_auth_telemetry
      args:
        window_minutes: {{one_of: [5, 10, 15, ""]}}
        log_exerpt: {{regex: 'token'}}
"""

DATASET_JSONL = "\n".join(json.dumps(c) for c in (
    {"id": "ok", "input": INPUT, "call": [{"tool": "pull_auth_telemetry", "args": {"log_excerpt": {"regex": "t"}}}]},
    {"id": "auth-short", "input": INPUT,
     "call": [{"tool": "pull_auth_telemetry", "args": {"log_exerpt": {"regex": "token refresh"}}}]},
)) + "\n"

DATASET_RULE_FILE = f"""version: 1
agent: incident-triage
cases:
  - id: auth-short
    input: "{INPUT}"
    any_of:
      - none: true
      - call:
          - tool: pull_billing_telemetry
            max: 1
          - tool: pull_auth_telemetry
            args: {{log_exerpt: {{regex: 'token refresh'}}}}
"""


def _place(path: Path, text: str, nth: int = 0, column: bool = True) -> str:
    """`path:line:column` of the `nth` `log_exerpt` of `text` (the argument's key; column 1 in a JSON-lines file,
    whose errors are placed at the line)."""
    found = [(n, line.index("log_exerpt") + 1) for n, line in enumerate(text.splitlines(), 1) if "log_exerpt" in line]
    line, col = found[nth]
    return f"{path}:{line}:{col if column else 1}"


def _eval(*args: str, report: Path) -> tuple[int, str, str, list[str]]:
    res = CliRunner().invoke(eval_, [*args, "--agent", AGENT, "--no-progress", "--json", str(report)])
    notes = json.loads(report.read_text())["notes"] if report.exists() else []
    return res.exit_code, res.stderr, res.output, notes


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "keeps to the schema" in ln]


@pytest.mark.parametrize("quiet", [False, True])
def test_a_step_checking_an_argument_the_schema_forbids_is_warned_of_at_its_place(tmp_path: Path,
                                                                                   quiet: bool) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    code, stderr, output, notes = _eval("--scenario", str(path), *(["-q"] if quiet else []),
                                        report=tmp_path / "r.json")
    warning = f"warning: {_place(path, SCENARIO)}: auth-outage, step 1, call 1: {NOT_ALLOWED}"
    assert code == 0, output  # a warning, not an error: the run goes on (and its step fails)
    assert _warnings(stderr) == [warning], stderr
    assert output.index(warning) < output.index("Tool call accuracy: "), output  # printed before the run's report
    assert warning in notes, notes


def test_a_step_checking_allowed_arguments_is_not_warned_of(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("log_exerpt", "log_excerpt"), encoding="utf-8")
    code, stderr, output, notes = _eval("--scenario", str(path), "-q", report=tmp_path / "r.json")
    assert code == 0 and "1/1 scenario(s) passed every step" in " ".join(notes), output
    assert _warnings(stderr) == [] and not any("keeps to the schema" in n for n in notes), (stderr, notes)


@pytest.mark.parametrize(("name", "text", "expected"), [
    # each case by its key (`#2`: the id-less second case); a `one_of` with "" accepts a missing argument: no warning
    ("cases.yaml", DATASET_YAML, [(0, "auth-short", True), (1, "#2", True)]),
    ("cases.jsonl", DATASET_JSONL, [(0, "auth-short", False)]),
    ("dataset.yaml", DATASET_RULE_FILE, [(0, "auth-short", True)]),  # a rule file with `cases`, in an any_of
])
def test_a_case_checking_an_argument_the_schema_forbids_is_warned_of_at_its_place(
        tmp_path: Path, name: str, text: str, expected: list[tuple[int, str, bool]]) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    for quiet in ([], ["-q"]):
        code, stderr, output, notes = _eval("--dataset", str(path), "--rules", str(TRIAGE_RULES), *quiet,
                                            report=tmp_path / "r.json")
        warned = [f"warning: {_place(path, text, nth, column)}: case {key!r}: {NOT_ALLOWED}"
                  for nth, key, column in expected]
        assert code == 0, output
        assert _warnings(stderr) == warned, stderr
        assert output.index(warned[0]) < output.index("Tool call accuracy: "), output
        assert [n for n in notes if "keeps to the schema" in n] == warned, notes


@pytest.mark.parametrize(("name", "text"), [("cases.yaml", DATASET_YAML), ("cases.jsonl", DATASET_JSONL),
                                            ("dataset.yaml", DATASET_RULE_FILE)])
def test_a_case_checking_allowed_arguments_is_not_warned_of(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text.replace("log_exerpt", "log_excerpt"), encoding="utf-8")
    code, stderr, output, notes = _eval("--dataset", str(path), "--rules", str(TRIAGE_RULES), "-q",
                                        report=tmp_path / "r.json")
    assert code == 0 and notes, output
    assert _warnings(stderr) == [] and not any("keeps to the schema" in n for n in notes), (stderr, notes)
