"""What /metrics must publish for a set of oracle verdicts (README "Metrics", each term as METRICS.md defines it).

Label folding: agent and tool label values are only the rules' and configuration's names, anything else is
`__other__`; confusion cells keep `(none)` and `(unknown)`. A folded count is the sum of the counts it folds.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator

from tests.monitor.oracle.oracle import NONE, OTHER, UNKNOWN, TurnResult

Key = tuple[str, ...]
CHECKS = ("selection", "args", "schema", "sequence", "response", "end_to_end", "over_calling")


class Labels:
    def __init__(self, tools: Iterable[str], agents: Iterable[str]) -> None:
        self.tools = frozenset(tools)
        self.agents = frozenset(agents)

    def tool(self, name: str) -> str:
        return name if name in self.tools else OTHER

    def agent(self, name: str) -> str:
        return name if name in self.agents else OTHER

    def cell(self, name: str) -> str:
        return name if name in (NONE, UNKNOWN) else self.tool(name)


def _pf(flag: bool | None) -> str:
    return "pass" if flag else "fail"


Phases = Iterable[tuple[Iterable[TurnResult], Labels]]  # verdicts counted under each label set (rules reloads)


def _each(phases: Phases) -> Iterator[tuple[TurnResult, Labels]]:
    for results, labels in phases:
        for r in results:
            yield r, labels


def counters(phases: Phases) -> dict[str, Counter[Key]]:
    """Counter name (without `_total`) -> {label values: count}; only what some turn counted."""
    out: dict[str, Counter[Key]] = defaultdict(Counter)
    for r, labels in _each(phases):
        a = labels.agent(r.agent)
        out["toolwatch_turns"][(a, "true" if r.judged else "false")] += 1
        if r.turnless:
            out["toolwatch_turnless_turns"][(a,)] += 1
        else:  # an agent turn (the tool usage rate's denominator; a turnless group is no turn)
            out["toolwatch_agent_turns"][(a,)] += 1
            if r.calls:  # with calls: the numerator
                out["toolwatch_turns_with_calls"][(a,)] += 1
        for c in r.calls:
            k = (a, labels.tool(c.name))
            out["toolwatch_tool_calls"][(*k, c.outcome)] += 1
            if r.judged:
                out["toolwatch_judged_calls"][k] += 1
            if c.schema_valid is not None:
                out["toolwatch_schema_checked_calls"][k] += 1
                if c.schema_valid:  # schema adherence's numerator, one counter
                    out["toolwatch_schema_valid_calls"][k] += 1
                else:
                    out["toolwatch_schema_invalid_calls"][k] += 1
                    for kind in c.kinds:
                        out["toolwatch_schema_violations"][(*k, kind)] += 1
            if c.args_ok is not None:
                out["toolwatch_argument_checked_calls"][k] += 1
                if c.args_ok:  # argument correctness's numerator, one counter
                    out["toolwatch_argument_ok_calls"][k] += 1
                else:
                    out["toolwatch_argument_mismatches"][k] += 1
            if c.name in r.forbidden:
                out["toolwatch_forbidden_calls"][k] += 1
        if r.judged:
            _judged(r, a, labels, out)
    return out


def _judged(r: TurnResult, a: str, labels: Labels, out: dict[str, Counter[Key]]) -> None:
    for tool in r.missed:
        out["toolwatch_missed_calls"][(a, labels.tool(tool))] += 1
    for tool, n in r.expected_by_tool.items():
        if n:
            out["toolwatch_expected_calls"][(a, labels.tool(tool))] += n
    for e, x in r.confusion:
        out["toolwatch_confusion"][(a, labels.cell(e), labels.cell(x))] += 1
    checks = out["toolwatch_turn_checks"]
    checks[(a, "selection", _pf(r.selection_ok))] += 1
    checks[(a, "args", _pf(r.args_ok))] += 1
    checks[(a, "schema", _pf(r.schema_ok))] += 1
    if r.seq_ok is not None:
        checks[(a, "sequence", _pf(r.seq_ok))] += 1
        if not r.seq_ok:
            out["toolwatch_order_violations"][(a,)] += 1
    if r.response_ok is not None:
        checks[(a, "response", _pf(r.response_ok))] += 1
        out["toolwatch_response_checked_turns"][(a,)] += 1
    checks[(a, "end_to_end", _pf(r.end_to_end))] += 1
    if not r.end_to_end and r.rule is not None:
        out["toolwatch_rule_failures"][(a, r.rule)] += 1
    checks[(a, "over_calling", _pf(not r.over_calling))] += 1


def sequence_scores(phases: Phases) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for r, labels in _each(phases):
        if r.judged and r.seq_score is not None:
            out[labels.agent(r.agent)] += r.seq_score
    return out


def gauges(phases: Phases) -> dict[str, dict[Key, float]]:
    """The rolling ratios over a window holding these verdicts: absent where the denominator is 0."""
    agent: dict[str, Counter[str]] = defaultdict(Counter)
    tool: dict[Key, Counter[str]] = defaultdict(Counter)
    for r, labels in _each(phases):
        if not r.judged:
            continue
        a = labels.agent(r.agent)
        agent[a]["turns"] += 1
        agent[a]["selection"] += bool(r.selection_ok)
        agent[a]["e2e"] += bool(r.end_to_end)
        for c in r.calls:
            t = labels.tool(c.name)
            for vec in (agent[a], tool[(a, t)]):
                vec["judged"] += 1
                vec["correct"] += c.outcome == "correct"
                vec["spurious"] += c.outcome == "spurious"
        for name in r.missed:
            for vec in (agent[a], tool[(a, labels.tool(name))]):
                vec["missed"] += 1
        for name, n in r.expected_by_tool.items():
            for vec in (agent[a], tool[(a, labels.tool(name))]):
                vec["expected"] += n
    return _ratios(agent, tool)


def _ratios(agent: dict[str, Counter[str]], tool: dict[Key, Counter[str]]) -> dict[str, dict[Key, float]]:
    out: dict[str, dict[Key, float]] = defaultdict(dict)
    for a, v in agent.items():
        for name, num, den in (
            ("toolwatch_tool_call_accuracy_ratio", "correct", "judged"),
            ("toolwatch_spurious_call_ratio", "spurious", "judged"),
            ("toolwatch_missed_call_ratio", "missed", "expected"),
            ("toolwatch_selection_accuracy_ratio", "selection", "turns"),
            ("toolwatch_end_to_end_accuracy_ratio", "e2e", "turns"),
        ):
            if v[den]:
                out[name][(a,)] = v[num] / v[den]
    for k, v in tool.items():
        for name, num, den in (
            ("toolwatch_tool_accuracy_ratio", "correct", "judged"),
            ("toolwatch_tool_spurious_call_ratio", "spurious", "judged"),
            ("toolwatch_tool_missed_call_ratio", "missed", "expected"),
        ):
            if v[den]:
                out[name][k] = v[num] / v[den]
    return out
