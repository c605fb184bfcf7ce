"""`toolwatch eval --dataset ... --rules rules/*.yaml`, as README's glob invites, in a real process: every turn is a
case of the dataset, judged by the case's own expectation whatever the rule files' agents, so no warning that "no
rule applies to them" (it was printed, with the same figures as with the one rule file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")


def _eval(rules: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOLWATCH, "eval", "--dataset", "examples/triage/cases.yaml", "--rules", *rules,
                           "--agent", "examples.triage.agent:triage", "-q", "--no-progress"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_dataset_under_rule_files_of_several_agents_is_not_said_unjudged() -> None:
    every = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "rules").glob("*.yaml"))
    assert len(every) > 1
    merged, alone = _eval(every), _eval(["rules/incident-triage.yaml"])
    assert merged.returncode == alone.returncode == 0, (merged.stderr, alone.stderr)
    assert merged.stdout == alone.stdout and "Tool call accuracy: " in merged.stdout, (merged.stdout, alone.stdout)
    assert "no rule applies" not in merged.stderr, merged.stderr


def test_a_probe_under_rule_files_of_several_agents_still_is() -> None:
    every = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "rules").glob("*.yaml"))
    res = subprocess.run([TOOLWATCH, "probe", "--generator", "examples.triage.generator:generate", "--agent",
                          "examples.triage.agent:triage", "--rules", *every, "--iterations", "3", "-q"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0 and "no rule applies" in res.stderr, res.stderr
