"""The recorded PromQL figures over the service's counters equal the judge's own Tally figures (METRICS.md).

Real judge verdicts go into both a `ToolwatchMetrics` (the /metrics counters) and a `Tally`; the exposed
counter values become promtool input series growing at that value per minute, so every rate ratio over the
window equals the ratio of the counts; promtool evaluates the rendered recording rules and must get Tally's figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.alerts import render
from monitor.judge import Judge, Tally
from monitor.metrics import ToolwatchMetrics
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict
from tests.deploy.binaries import ROOT, promtool

AGENT = "incident-triage"
SCALE = 1_000_000


def _turn(line: str, *calls: tuple[str, str], output: str = "Result: triaged") -> Turn:
    return Turn(
        input_text=line,
        calls=tuple(ToolCall(name=n, arguments=a, call_id=f"c{i}") for i, (n, a) in enumerate(calls)),
        agent=AGENT,
        output_text=output,
    )


OK = '{"log_excerpt": "error burst"}'
TURNS = [
    *[_turn("[AUTH] login errors", ("pull_auth_telemetry", OK))] * 5,
    _turn("[AUTH] login errors", ("pull_billing_telemetry", OK)),  # wrong tool + missed
    _turn("[BILL] refunds", ("pull_billing_telemetry", OK), ("pull_billing_telemetry", OK)),  # spurious, over-calling
    _turn("[RISK] fraud", ("pull_risk_telemetry", OK), ("pull_everything", OK)),  # hallucinated
    _turn("[FULF] late parcels"),  # missed, no call
    _turn("[SUPP] tickets", ("pull_support_telemetry", '{"log_excerpt": "x", "window_minutes": "ten"}')),  # schema
    _turn("[AUTH] login errors", ("pull_auth_telemetry", '{"log_excerpt": "   "}')),  # argument mismatch
    _turn("[BILL] refunds", ("pull_billing_telemetry", OK), output="no result line"),  # response check fails
    _turn("[MISC] unknown subsystem", ("pull_auth_telemetry", OK)),  # unjudged
    _turn("[MISC] unknown subsystem", ("made_up_tool", OK)),  # hallucinated in an unjudged turn
    _turn("[MISC] nothing to do"),  # unjudged, no call
    *[Turn(input_text="", calls=(ToolCall(name="pull_auth_telemetry", arguments=OK),), agent=AGENT,
           turnless=True)] * 3,  # calls whose turn never came: no agent turn, in neither term of the usage rate
]


def _series(metrics: ToolwatchMetrics) -> list[dict[str, str]]:
    out = []
    for family in text_string_to_metric_families(generate_latest(metrics.registry()).decode()):
        for sample in family.samples:
            if family.type == "counter" and sample.name.endswith("_total") and sample.value > 0:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                out.append({"series": f"{sample.name}{{{labels}}}", "values": f"0+{sample.value:g}x10"})
    return out


def _check(tmp_path: Path, verdicts: list[TurnVerdict], figures: dict[str, float | None]) -> Any:
    ruleset = load_rules([ROOT / "rules" / "incident-triage.yaml"])
    metrics = ToolwatchMetrics(tools=ruleset.catalog, agents=ruleset.agents)
    metrics.observe(verdicts)
    rules = tmp_path / "rules.yml"
    rules.write_text(render({"alerts": []}))
    tests = []
    for key, value in figures.items():
        samples = [] if value is None else [{"labels": f'{{agent="{AGENT}"}}', "value": round(value * SCALE)}]
        tests.append({"expr": f"round(agent:toolwatch_{key}:ratio_rate5m * {SCALE})", "eval_time": "10m",
                      "exp_samples": samples})  # fmt: skip
    unit = {"rule_files": [str(rules)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": _series(metrics), "promql_expr_test": tests}]}  # fmt: skip
    path = tmp_path / "parity_test.yml"
    path.write_text(yaml.safe_dump(unit, sort_keys=False))
    return promtool("test", "rules", path)


def test_recorded_figures_equal_the_tally(tmp_path: Path) -> None:
    judge = Judge(load_rules([ROOT / "rules" / "incident-triage.yaml"]))
    verdicts = [judge.judge(t) for t in TURNS]
    tally = Tally()
    for v in verdicts:
        tally.add(v)
    figures = tally.ratios()
    # the mix exercises every kind of count (sequence accuracy has no ordering rule here: absent on both sides)
    assert tally.wrong_tool and tally.spurious and tally.hallucinated and tally.missed and tally.unjudged
    assert tally.schema_checked_calls > tally.schema_valid_calls and tally.args_checked_calls > tally.args_ok_calls
    assert tally.over_calling_turns and tally.response_checked_turns > tally.response_ok_turns
    assert figures["sequence_accuracy"] is None
    assert tally.turnless_turns == 3 and figures["tool_usage_rate"] == 13 / 15  # 15 agent turns, 2 without a call
    result = _check(tmp_path, verdicts, figures)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_adherence_counts_a_call_violating_two_kinds_once(tmp_path: Path) -> None:
    judge = Judge(load_rules([ROOT / "rules" / "incident-triage.yaml"]))
    turns = [*TURNS[:5], _turn("[SUPP] tickets", ("pull_support_telemetry", '{"excerpt": "x"}'))]  # required+extra
    verdicts = [judge.judge(t) for t in turns]
    tally = Tally()
    for v in verdicts:
        tally.add(v)
    assert sum(tally.violations.values()) > tally.schema_checked_calls - tally.schema_valid_calls  # two kinds, one call
    result = _check(tmp_path, verdicts, {"schema_adherence": tally.ratios()["schema_adherence"]})
    assert result.returncode == 0, result.stdout + result.stderr
