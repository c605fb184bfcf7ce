"""METRICS.md worked example: 40 judged incident-triage calls, 37 correct -> `Tool call accuracy: 37/40 (92.5%)`."""

from __future__ import annotations

import json

from monitor.judge import Judge, Tally
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from tests.monitor.judge.helpers import RULES

TOOLS = {
    "AUTH": "pull_auth_telemetry",
    "BILL": "pull_billing_telemetry",
    "FULF": "pull_fulfillment_telemetry",
    "RISK": "pull_risk_telemetry",
    "SUPP": "pull_support_telemetry",
}
BODIES = [
    "login failed for user 4411 after 3 retries",
    "card declined twice; see [AUTH] token refresh",
    "parcel 99 stuck at hub, [BILL] refund requested",
    "velocity rule fired for account 7 [SUPP]",
    "customer waited 40 minutes in chat [RISK]",
]


def test_worked_example_37_of_40() -> None:
    judge = Judge(load_rules([RULES / "incident-triage.yaml"]))
    tags = list(TOOLS)
    tally = Tally()
    for i in range(40):
        tag = tags[i % 5]
        line = f"[{tag}] {BODIES[(i * 3) % 5]}"
        tool = TOOLS[tag]
        if i in (7, 19, 33):  # three calls go to the subsystem named inside the body, or the next one
            tool = TOOLS[tags[(i + 1) % 5]]
        args = json.dumps({"log_excerpt": line})
        t = Turn(
            line,
            (ToolCall(tool, call_id=f"call_{i}", arguments=args),),
            agent="incident-triage",
            trace_id=f"{i:032x}",
            span_id=f"{i:016x}",
            output_text=f"Checked telemetry.\nResult: {tag.lower()} incident",
        )
        tally.add(judge.judge(t))
    assert tally.format_accuracy() == "Tool call accuracy: 37/40 (92.5%)"
    assert tally.judged_calls == 40 and tally.correct == 37 and tally.wrong_tool == 3
    assert tally.ratios()["missed_rate"] == 3 / 40
    assert tally.ratios()["schema_adherence"] == 1.0
    assert tally.ratios()["response_compliance"] == 1.0
    assert tally.ratios()["end_to_end_accuracy"] == 37 / 40
