"""First smoke test of the judge API against the shipped incident-triage rules."""

from __future__ import annotations

from pathlib import Path

from monitor.judge import Judge, Tally
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.verdict import Outcome

RULES = Path(__file__).resolve().parents[3] / "rules"


def test_incident_triage_routes_by_leading_tag() -> None:
    judge = Judge(load_rules([RULES / "incident-triage.yaml"]))
    assert "pull_auth_telemetry" in judge.catalog
    assert judge.agents == frozenset({"incident-triage"})
    good = Turn("[AUTH] token expired [BILL]", (ToolCall("pull_auth_telemetry", arguments='{"log_excerpt": "x"}'),))
    bad = Turn("[AUTH] token expired [BILL]", (ToolCall("pull_billing_telemetry", arguments='{"log_excerpt": "x"}'),))
    tally = Tally()
    for turn in (good, bad):
        tally.add(judge.judge(turn))
    assert judge.judge(good).calls[0].outcome is Outcome.CORRECT
    assert judge.judge(bad).calls[0].outcome is Outcome.WRONG_TOOL
    assert tally.format_accuracy() == "Tool call accuracy: 1/2 (50.0%)"
