"""Run multi-step scenarios: free-run (the agent's own replies carry forward) or step-wise (teacher-forced:
each step sees the scenario's reference replies, so one early mistake does not fail every later step). A step
without `reference` feeds the agent's own reply forward in step-wise mode too; `own_reply_steps` names those steps
so the command can warn of them.

Each step is one `agent_turn` (conversation id per scenario run, case id `<scenario>:<step>`), judged
against the step's expectations compiled by the judge's own rule loader as labelled cases; the tool-call
count bounds are checked here. The agent is called as `fn(text, history=[{"role", "content"}, ...])`.
"""

from __future__ import annotations

import json
import re
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from monitor.evaluate import AgentFn, Harness, Interrupted, RunResult
from monitor.judge import Judge
from monitor.rules import RuleFileError, RuleSet, load_rules
from monitor.rules._errors import place
from monitor.rules._lint import forbidden_checks
from monitor.rules._read import MAX_FILE_BYTES
from monitor.scenario._model import Scenario, ScenarioError, ScenarioFile, Step, load_scenarios
from monitor.verdict import TurnVerdict

MODES = ("free", "step")


def case_id(scenario: Scenario, step: Step) -> str:
    return f"{scenario.name}:{step.index}"


def step_case(scenario: Scenario, step: Step, tools: Sequence[str] = ()) -> dict[str, Any]:
    """The step's expectation as a labelled case in the rule-file format. A step without `calls` or `none`
    takes every tool of the catalog (`tools`) as an optional call, any number of times."""
    case: dict[str, Any] = {"id": case_id(scenario, step), "input": step.user}
    if step.expects_none or (step.any_calls and not tools):  # no declared tool that a call could be
        case["none"] = True
    elif step.any_calls:
        case["call"] = [{"tool": t, "min": 0} for t in tools]
    else:
        case["call"] = [dict(s) for s in step.slots]
    respond = [{"contains": c} for c in step.contains] + [{"regex": r} for r in step.regex]
    if respond:
        case["respond"] = respond
    return case


def build_judge(sf: ScenarioFile, extra_rules: list[Path] | None = None) -> Judge:
    """Rules of the file (and `extra_rules`) plus one case per step; raises RuleFileError (a rule file) or
    ScenarioError (a step, at its place in the scenario file; a rule file of the file's `rules` that does not read, at
    its name there)."""
    rules = [*sf.rules, *(extra_rules or [])]
    steps = [(sc, st) for sc in sf.scenarios for st in sc.steps]
    tools: tuple[str, ...] = ()
    if any(st.any_calls for _, st in steps):
        tools = tuple(t.name for t in _load_rules(sf, rules).tools)
    with tempfile.TemporaryDirectory(prefix="toolwatch-scenario-") as tmp:
        cases = Path(tmp) / f"{sf.path.stem}.cases.jsonl"
        _write_cases(sf, steps, tools, cases)
        wrapper = Path(tmp) / f"{sf.path.stem}.yaml"
        doc: dict[str, Any] = {"version": 1, "cases": cases.name}
        if sf.agent:
            doc["agent"] = sf.agent
        wrapper.write_text(yaml.safe_dump(doc), encoding="utf-8")
        try:
            return Judge(_load_rules(sf, [*rules, wrapper]))
        except RuleFileError as exc:
            pairs = [(e.file == str(cases) and 1 <= e.line <= len(steps), e) for e in exc.errors]
            if not all(of_step or e.file == str(wrapper) for of_step, e in pairs):
                raise  # a rule file's errors (with the steps' ones, if any, in the file they are in)
            raise ScenarioError.of([_step_error(sf, *steps[e.line - 1], e, rules) if of_step else
                                    _error_at(sf, ("agent",), f"agent: {e.message}") for of_step, e in pairs]) from None


def _load_rules(sf: ScenarioFile, paths: list[Path]) -> RuleSet:
    """`load_rules(paths)`; a rule file that the scenario file names and that does not read (missing, unreadable, too
    large: an error at no place in it) is a ScenarioError at its name in the scenario file, with the loader's other
    errors (a line each, unplaced in the scenario file)."""
    try:
        return load_rules(paths)
    except RuleFileError as exc:
        named = {str(r): at for r, at in zip(sf.rules, sf.rules_at, strict=True)}
        if not any(e.line <= 0 and e.file in named for e in exc.errors):
            raise
        raise ScenarioError.of([_error_at(sf, named[e.file], f"rules: {e.file}: {e.message}")
                                if e.line <= 0 and e.file in named else ScenarioError(str(e)) for e in exc.errors]
                               ) from None


def load_and_build(path: str | Path, extra_rules: list[Path] | None = None) -> tuple[ScenarioFile, Judge]:
    """`load_scenarios` then `build_judge`. A file with steps in error has the catalog of its other steps checked
    too: their problems (an unknown tool, a bad check) are reported with the file's, in file order, at once. (A rule
    file in error leaves the file's own problems alone: the rule file's come once those are fixed.)"""
    try:
        sf = load_scenarios(path)
    except ScenarioError as exc:
        if exc.partial is None or not exc.partial.scenarios:
            raise
        try:
            build_judge(exc.partial, extra_rules)
        except ScenarioError as more:
            found = sorted((*exc.errors, *more.errors), key=lambda e: e.at)  # stable: unplaced ones first
            raise ScenarioError.of(found) from None
        except RuleFileError:
            raise exc from None
        raise
    return sf, build_judge(sf, extra_rules)


def forbidden_step_arguments(sf: ScenarioFile, judge: Judge) -> list[str]:
    """One line per argument check of a step on an argument its tool's schema allows no call to have (the check
    `toolwatch rules check` warns of: it fails every call that keeps to the schema), at the argument's place in the
    scenario file: `file:line:column: scenario, step n, call k: ...`. `judge` is `build_judge(sf, ...)`'s, whose
    last cases are the steps, in file order."""
    steps = [(sc, st) for sc in sf.scenarios for st in sc.steps]
    cases = judge.ruleset.cases[len(judge.ruleset.cases) - len(steps):] if steps else ()
    if [cid for cid, _, _ in cases] != [case_id(sc, st) for sc, st in steps]:
        return []  # not expected: build_judge loads the steps last
    of_step = {id(exp): pair for pair, (_, _, exp) in zip(steps, cases, strict=True)}
    out = []
    for found in forbidden_checks(judge.ruleset, (exp for _, _, exp in cases)):  # in file order
        sc, st = of_step[id(found.expectation)]
        path = (*st.path, "expect", "calls", found.slot, "args", found.argument)  # a step's calls are its slots
        line, column = sf.marks.at(path, key=True) if sf.marks is not None else (0, 0)
        out.append(f"{place(str(sf.path), line, column)}: {sc.name}, step {st.index}, call {found.slot + 1}: "
                   f"{found.message}")
    return out


def _write_cases(sf: ScenarioFile, steps: list[tuple[Scenario, Step]], tools: tuple[str, ...], cases: Path) -> None:
    """The steps' expectations as a labelled-cases file, a step at a time, within the bound of a cases file
    (MAX_FILE_BYTES): the step that goes past it is a ScenarioError at its place, before more is built."""
    written = 0
    with cases.open("w", encoding="utf-8") as fh:
        for sc, st in steps:
            line = _json_within(step_case(sc, st, tools), MAX_FILE_BYTES - written - 1)
            if line is None:
                any_steps = sum(s.any_calls for _, s in steps)
                hint = (f"a step without `calls` expects any of the {len(tools)} catalog tools, and its case lists "
                        f"each ({any_steps} such steps): give such steps `calls`, or " if any_steps and tools else "")
                raise _error_at(sf, st.path, f"{sc.name}, step {st.index}: the steps up to here make more than "
                                             f"{MAX_FILE_BYTES:,} bytes of expectations (the limit of a cases file)",
                                hint + "split the scenarios into several files")
            fh.write(line + "\n")
            written += len(line) + 1  # ASCII: json.dumps escapes the rest


def _json_within(value: Any, limit: int) -> str | None:
    """`value` as JSON (ASCII), or None when it takes more than `limit` characters (no more is built)."""
    parts: list[str] = []
    size = 0
    for chunk in json.JSONEncoder().iterencode(value):
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return "".join(parts)


def _error_at(sf: ScenarioFile, path: tuple[str | int, ...], message: str, hint: str = "") -> ScenarioError:
    line, column = sf.marks.at(path) if sf.marks is not None else (0, 0)
    return ScenarioError(f"{place(str(sf.path), line, column)}: {message}", hint, at=(line, column))


def agent_name_conflict(sf: ScenarioFile, agent_name: str | None) -> ScenarioError | None:
    """The error of an `--agent-name` other than the file's `agent` (None: no conflict): the turns would carry that
    name while the steps' expectations are scoped to the file's agent, so no step would match its turn."""
    if agent_name is None or sf.agent is None or agent_name == sf.agent:
        return None
    return _error_at(sf, ("agent",), f"the scenario file's agent is {sf.agent!r}, --agent-name gives {agent_name!r}: "
                     f"the steps' expectations apply to the turns of {sf.agent!r} only",
                     "drop --agent-name, or change the file's `agent`")


def _key_path(key: str) -> list[str | int]:
    """`[3].call[1].args.city` -> [3, "call", 1, "args", "city"]."""
    return [int(i) if i else name for i, name in re.findall(r"\[(\d+)\]|([^.\[\]]+)", key)]


def _step_error(sf: ScenarioFile, scenario: Scenario, step: Step, exc: RuleFileError, rules: list[Path]
                ) -> ScenarioError:
    """A rule-loader error in the case compiled from a step, at the step's place in the scenario file."""
    rest = _key_path(exc.key)[1:]  # the path inside the case, after its index
    where = f"{scenario.name}, step {step.index}"
    path: tuple[str | int, ...] = (*step.path, "expect")
    if rest[:1] == ["call"] and step.slots and len(rest) > 1 and isinstance(rest[1], int):
        where += f", call {rest[1] + 1}"
        path = (*path, "calls", *rest[1:])
    elif rest[:1] == ["respond"] and len(rest) > 1 and isinstance(rest[1], int):
        k = rest[1]
        path = (*path, "response", *(("contains", k) if k < len(step.contains) else ("regex", k - len(step.contains))),
                *rest[2:])
    elif rest[:1] == ["input"]:
        path = (*step.path, "user")
    hint = ""
    if "not in the catalog" in exc.message:
        hint = ("name the rule file with the tool catalog: `rules: [FILE]` in the scenario file, or --rules FILE"
                if not rules else
                f"fix the tool name, or declare the tool in the catalog of {', '.join(str(r) for r in rules)}")
    return _error_at(sf, path, f"{where}: {exc.message}", hint)


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
    strays: list[TurnVerdict] = field(default_factory=list)  # calls outside every step's turn, judged alone

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
        reasons.append(run.error if run.timed_out else f"agent raised {run.error}")
    if not verdict.judged:
        reasons.append("the step's expectation did not match its turn")
    elif verdict.end_to_end is not True or verdict.failed:
        reasons.append(verdict.reason)
    if not count_ok:
        reasons.append(f"{n} tool call(s), expected between {step.min_calls or 0} and "
                       f"{'any' if step.max_calls is None else step.max_calls}")
    return count_ok, not reasons, "; ".join(reasons) or verdict.reason


def own_reply_steps(sf: ScenarioFile) -> list[str]:
    """The steps whose agent's own reply step-wise mode feeds forward, as `file:line: scenario S, step n`: those
    without `reference` but the last of each scenario (whose reply no step reads)."""
    return [f"{sf.path}:{step.line}: scenario {scenario.name}, step {step.index}"
            for scenario in sf.scenarios for step in scenario.steps[:-1] if step.reference is None]


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
    try:
        _run(sf, agent, judge, harness, out, timeout_s, on_step)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: the steps done come back in Interrupted
        raise Interrupted(out, exc) from None
    return out


def _run(sf: ScenarioFile, agent: AgentFn, judge: Judge, harness: Harness, out: ScenarioRun, timeout_s: float | None,
         on_step: Callable[[StepResult], Any] | None) -> None:
    mode = out.mode
    for scenario in sf.scenarios:
        history: list[dict[str, str]] = []
        conversation = f"{scenario.name}-{uuid.uuid4().hex[:8]}"
        for step in scenario.steps:
            run = harness.run_and_collect(agent, step.user, case_id=case_id(scenario, step),
                                          conversation_id=conversation, timeout_s=timeout_s,
                                          extra={"history": [dict(m) for m in history]})
            verdict = judge.judge(run.turns[0]) if run.turns else None
            out.strays += [judge.judge(t) for t in run.strays]
            count_ok, passed, reason = _judge_step(step, run, verdict)
            result = StepResult(scenario.name, step, run, verdict, count_ok, passed, reason)
            out.steps.append(result)
            if on_step is not None:
                on_step(result)
            reply = step.reference if mode == "step" and step.reference is not None else (run.output or "")
            history += [{"role": "user", "content": step.user}, {"role": "assistant", "content": reply}]
