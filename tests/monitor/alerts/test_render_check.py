"""`toolwatch alerts render --check` in CI, as a real process: an out-of-date file is said with the command that
renders it again, and, when it was rendered from other rule files, which ones."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")


def _check(rules: str, rendered: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOLWATCH, "alerts", "render", rules, "--check", str(rendered)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


def test_an_up_to_date_file_passes(tmp_path: Path) -> None:
    rendered = tmp_path / "toolwatch-rules.yml"
    shutil.copy(ROOT / "deploy" / "prometheus" / "toolwatch-rules.yml", rendered)
    res = _check("rules/incident-triage.yaml", rendered)
    assert res.returncode == 0 and "up to date" in res.stdout, res


def test_a_file_of_other_rule_files_names_them_and_the_command_to_run(tmp_path: Path) -> None:
    # It said only "render it again with `toolwatch alerts render`": neither which files nor that the file on disk
    # came from other ones (here the shipped file, rendered from incident-triage, checked against travel).
    rendered = tmp_path / "toolwatch-rules.yml"
    shutil.copy(ROOT / "deploy" / "prometheus" / "toolwatch-rules.yml", rendered)
    res = _check("rules/travel.yaml", rendered)
    assert res.returncode == 1, res
    assert f"toolwatch alerts render rules/travel.yaml -o {rendered}" in res.stderr, res.stderr
    assert "rendered from rules/incident-triage.yaml" in res.stderr, res.stderr


def test_an_edited_file_of_the_same_rule_files_says_the_command_only(tmp_path: Path) -> None:
    rendered = tmp_path / "toolwatch-rules.yml"
    rendered.write_text((ROOT / "deploy" / "prometheus" / "toolwatch-rules.yml").read_text() + "# edited\n")
    res = _check("rules/incident-triage.yaml", rendered)
    assert res.returncode == 1, res
    assert f"toolwatch alerts render rules/incident-triage.yaml -o {rendered}" in res.stderr, res.stderr
    assert "rendered from" not in res.stderr, res.stderr
