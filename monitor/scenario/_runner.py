"""Run multi-step scenarios: free-run (the agent's own replies carry forward) or step-wise (teacher-forced:
each step sees the scenario's reference replies, so one early mistake does not fail every later step).

Each step is one `agent_turn` (conversation id per scenario run, case id `<scenario>:<step>`), judged
against the step's expectations compiled by the judge's own rule loader as labelled cases; the tool-call
count bounds are checked here. The agent is called as `fn(text, history=[{"role", "content"}, ...])`.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from monitor.evaluate import AgentFn, Harness, RunResult
from monitor.judge import Judge
from monitor.rules import load_rules
from monitor.scenario._model import Scenario, ScenarioFile, Step
from monitor.verdict import TurnVerdict

MODES = ("free", "step")


def case_id(scenario: Scenario, step: Step) -> str:
    return f"{scenario.name}:{step.index}"


def step_case(scenario: Scenario, step: Step) -> dict[str, Any]:
    """The step's expectation as a labelled case in the rule-file format."""
    case: dict[str, Any] = {"id": case_id(scenario, step), "input": step.user}
    if step.expects_none:
        case["none"] = True
    else:
        case["call"] = [dict(s) for s in step.slots]
    respond = [{"contains": c} for c in step.contains] + [{"regex": r} for r in step.regex]
    if respond:
        case["respond"] = respond
    return case


def build_judge(sf: ScenarioFile, extra_rules: list[Path] | None = None) -> Judge:
    """Rules of the file (and `extra_rules`) plus one case per step; raises RuleFileError / ScenarioError."""
    with tempfile.TemporaryDirectory(prefix="toolwatch-scenario-") as tmp:
        cases = Path(tmp) / f"{sf.path.stem}.cases.jsonl"
        cases.write_text("".join(json.dumps(step_case(sc, st)) + "\n" for sc in sf.scenarios for st in sc.steps),
                         encoding="utf-8")
        wrapper = Path(tmp) / f"{sf.path.stem}.yaml"
        doc: dict[str, Any] = {"version": 1, "cases": cases.name}
        if sf.agent:
            doc["agent"] = sf.agent
        wrapper.write_text(yaml.safe_dump(doc), encoding="utf-8")
        return Judge(load_rules([*sf.rules, *(extra_rules or []), wrapper]))


@dataclass(slots=True)
class StepResult:
    scenario: str
    step: Step
    run: RunResult
    verdict: TurnVerdict | None
    count_ok: bool
    passed: bool
    reason: str


@dataclass(slots=True)
class ScenarioRun:
    mode: str
    steps: list[StepResult] = field(default_factory=list)

    @property
    def pass_rate(self) -> float | None:
        return sum(s.passed for s in self.steps) / len(self.steps) if self.steps else None

    def scenarios_passed(self) -> tuple[int, int]:
        by: dict[str, bool] = {}
        for s in self.steps:
            by[s.scenario] = by.get(s.scenario, True) and s.passed
        return sum(by.values()), len(by)


def _judge_step(step: Step, run: RunResult, verdict: TurnVerdict | None) -> tuple[bool, bool, str]:
    if verdict is None:
        return False, False, run.error or "no turn was recorded"
    n = len(verdict.calls)
    count_ok = (step.min_calls is None or n >= step.min_calls) and (step.max_calls is None or n <= step.max_calls)
    reasons = []
    if run.error:
        reasons.append(f"agent raised {run.error}")
    if not verdict.judged:
        reasons.append("the step's expectation did not match its turn")
    elif verdict.end_to_end is not True or verdict.failed:
        reasons.append(verdict.reason)
    if not count_ok:
        reasons.append(f"{n} tool call(s), expected between {step.min_calls or 0} and "
                       f"{'any' if step.max_calls is None else step.max_calls}")
    return count_ok, not reasons, "; ".join(reasons) or verdict.reason


def run_scenarios(
    sf: ScenarioFile,
    agent: AgentFn,
    judge: Judge,
    harness: Harness,
    *,
    mode: str = "free",
    timeout_s: float | None = None,
    on_step: Callable[[StepResult], Any] | None = None,
) -> ScenarioRun:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    out = ScenarioRun(mode)
    for scenario in sf.scenarios:
        history: list[dict[str, str]] = []
        conversation = f"{scenario.name}-{uuid.uuid4().hex[:8]}"
        for step in scenario.steps:
            run = harness.run_and_collect(agent, step.user, case_id=case_id(scenario, step),
                                          conversation_id=conversation, timeout_s=timeout_s,
                                          extra={"history": [dict(m) for m in history]})
            verdict = judge.judge(run.turns[0]) if run.turns else None
            count_ok, passed, reason = _judge_step(step, run, verdict)
            result = StepResult(scenario.name, step, run, verdict, count_ok, passed, reason)
            out.steps.append(result)
            if on_step is not None:
                on_step(result)
            reply = step.reference if mode == "step" and step.reference is not None else (run.output or "")
            history += [{"role": "user", "content": step.user}, {"role": "assistant", "content": reply}]
    return out
