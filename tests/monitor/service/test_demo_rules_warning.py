"""`toolwatch demo --rules` with a file scoped to another agent, in a real process: one warning, and advice the demo
can follow. It said "give --agent-name", an option of eval and probe that demo does not have, and the monitor in the
process added serve's own warning with "pass --agent incident-triage", another option demo does not have."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli import main
from tests.monitor.service.conftest import ServeFactory
from tests.monitor.service.test_unnamed_agents import _send

ROOT = Path(__file__).resolve().parents[3]
TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")


def test_demo_with_rules_of_another_agent_warns_once_with_advice_it_can_follow() -> None:
    res = subprocess.run([TOOLWATCH, "demo", "--turns", "5", "--rate", "0", "--port", "0", "--metrics-port", "0",
                          "--rules", "rules/travel.yaml"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    about = [line for line in res.stderr.splitlines() if "incident-triage" in line]
    assert len(about) == 1, res.stderr
    assert "--agent" not in about[0] and "agent: incident-triage" in about[0], about[0]


def test_the_demo_leaves_serves_warning_on_for_the_rest_of_the_process(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # The demo silenced serve's agent warning for the rest of the process (a CliRunner run, then a server).
    res = CliRunner().invoke(main, ["demo", "--turns", "2", "--rate", "0", "--port", "0", "--metrics-port", "0",
                                    "--rules", str(ROOT / "rules" / "travel.yaml")])
    assert res.exit_code == 0, res.output
    _, server = serve(rules=(str(ROOT / "rules" / "travel.yaml"),))
    with caplog.at_level(logging.INFO):
        _send(server, ["weather-bot"])
    assert any("weather-bot" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
