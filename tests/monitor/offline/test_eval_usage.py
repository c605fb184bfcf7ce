"""`toolwatch eval` as a new user first types it, in a real process: a rule file holding its own `cases` given both
as the dataset and as --rules, and an agent module that is not importable from the folder it runs in."""

from __future__ import annotations

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
