"""`toolwatch demo --rules` with a file scoped to another agent, in a real process: one warning, and advice the demo
can follow. It said "give --agent-name", an option of eval and probe that demo does not have, and the monitor in the
process added serve's own warning with "pass --agent incident-triage", another option demo does not have."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")


def test_demo_with_rules_of_another_agent_warns_once_with_advice_it_can_follow() -> None:
    res = subprocess.run([TOOLWATCH, "demo", "--turns", "5", "--rate", "0", "--port", "0", "--metrics-port", "0",
                          "--rules", "rules/travel.yaml"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    about = [line for line in res.stderr.splitlines() if "incident-triage" in line]
    assert len(about) == 1, res.stderr
    assert "--agent" not in about[0] and "agent: incident-triage" in about[0], about[0]
