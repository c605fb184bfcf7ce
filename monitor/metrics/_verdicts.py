"""Verdict counters kept in plain dicts (updated per distinct verdict signature of a batch), rendered at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from monitor.metrics import names as n
from monitor.metrics._batch import MAX_CACHED, SIG_SCORED, Sig, VerdictBatch, cacheable
from monitor.metrics._labels import LabelPolicy
from monitor.verdict import TurnVerdict

Key = tuple[str, ...]
Counts = dict[Key, int]
Plan = tuple[tuple[int, int], ...]  # (slot, increment)s

# name -> (help, label names); the order of the dicts in VerdictCounters.tables follows this.
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    n.TOOL_CALLS: (
        "Tool calls by outcome (correct, wrong_tool, spurious, hallucinated, unjudged).",
        ("agent", "tool", "outcome"),
    ),
    n.JUDGED_CALLS: ("Calls in judged turns (the tool call accuracy denominator).", ("agent", "tool")),
    n.EXPECTED_CALLS: ("Expected calls: the sum of slot minimums over judged turns.", ("agent", "tool")),
    n.MISSED_CALLS: ("Expected calls that were not made.", ("agent", "tool")),
    n.TURNS: ("Turns judged or not (no matching expectation, or turnless).", ("agent", "judged")),
    n.TURN_CHECKS: ("Per-turn check results.", ("agent", "check", "result")),
    n.SCHEMA_CHECKED_CALLS: ("Calls whose arguments were checked against the tool's JSON Schema.", ("agent", "tool")),
    n.SCHEMA_VIOLATIONS: ("Calls violating the tool's JSON Schema, by kind.", ("agent", "tool", "kind")),
    n.SCHEMA_INVALID_CALLS: (
        "Calls violating the tool's JSON Schema (each once, whatever the kinds).",
        ("agent", "tool"),
    ),
    n.SCHEMA_VALID_CALLS: (
        "Calls valid against the tool's JSON Schema (of toolwatch_schema_checked_calls_total, all but the invalid "
        "ones): the schema adherence numerator.",
        ("agent", "tool"),
    ),
    n.ARGUMENT_CHECKED_CALLS: ("Correct calls with argument checks.", ("agent", "tool")),
    n.ARGUMENT_MISMATCHES: ("Correct calls failing an argument check.", ("agent", "tool")),
    n.ARGUMENT_OK_CALLS: (
        "Correct calls passing every argument check (of toolwatch_argument_checked_calls_total, all but the "
        "mismatches): the argument correctness numerator.",
        ("agent", "tool"),
    ),
    n.FORBIDDEN_CALLS: ("Calls of forbidden tools.", ("agent", "tool")),
    n.ORDER_VIOLATIONS: ("Turns violating an ordering constraint.", ("agent",)),
    n.CONFUSION: ("Confusion matrix of expected versus called tool.", ("agent", "expected", "actual")),
    n.RULE_FAILURES: ("Judged turns not end-to-end correct, by the expectation rule used.", ("agent", "rule")),
    n.TURNS_WITH_CALLS: (
        "Agent turns with at least one tool call (not the turnless ones: the tool usage rate is this over "
        "toolwatch_agent_turns_total).",
        ("agent",),
    ),
    n.TURNLESS_TURNS: (
        "Turnless turns (of toolwatch_turns_total): calls whose turn never arrived, judged alone after the timeout; "
        "no agent invocation.",
        ("agent",),
    ),
    n.AGENT_TURNS: (
        "Agent turns (of toolwatch_turns_total, all but the turnless ones): agent invocations, the tool usage "
        "rate's denominator.",
        ("agent",),
    ),
    n.SEQUENCE_SCORE: ("Sum of sequence scores over turns with ordering constraints.", ("agent",)),
    n.RESPONSE_CHECKED_TURNS: ("Turns with response checks.", ("agent",)),
}


class VerdictCounters:
    """The verdict counters (README, "Metrics"; each figure's terms as METRICS.md defines them).

    `add()` counts a batch by signature (see `_batch`): each distinct signature's increments (`plan()`, cached)
    are applied once, multiplied by the number of its verdicts; sequence scores are summed verdict by verdict.
    """

    def __init__(self, labels: LabelPolicy, *, max_plans: int = MAX_CACHED) -> None:
        self.labels = labels
        self.max_plans = max_plans
        self.sequence_score: dict[str, float] = {}
        self._tables: dict[str, Counts] = {name: {} for name in COUNTERS}
        # Each (table, key) counted has a slot: plans add to slots (list items, no hashing), and `tables`
        # copies the slots into the tables when read.
        self._slot_of: dict[str, dict[Key, int]] = {name: {} for name in COUNTERS}
        self._cells: list[tuple[Counts, Key]] = []
        self._counts: list[int] = []
        self._dirty = False
        self._tool_cache: dict[str, str] = {}
        self._plans: dict[Sig, Plan] = {}
        self._initial: set[tuple[str, Key]] = set()  # series created at 0 by set_labels

    @property
    def tables(self) -> dict[str, Counts]:
        """Counter name -> {label values: count}, up to date."""
        if self._dirty:
            for (table, key), value in zip(self._cells, self._counts, strict=True):
                table[key] = value
            self._dirty = False
        return self._tables

    def set_labels(self, labels: LabelPolicy, initial: Iterable[tuple[str, Key]] = ()) -> None:
        """New label sets, and the series to hold at 0 until their first event (see `_initial`). The series created
        at 0 before and not named now are removed while still 0; every other series keeps its count."""
        self.labels = labels
        self._tool_cache = {}
        self._plans = {}  # plans hold slots, renumbered below
        wanted = set(initial)
        stale = self._initial - wanted
        if stale:
            self._remove_zero(stale)
        slot_of = self._slot_of
        for name, key in wanted - self._initial:
            if name == n.SEQUENCE_SCORE:
                self.sequence_score.setdefault(key[0], 0.0)
            elif key not in slot_of[name]:
                self._slot(name, key)
                self._dirty = True  # the tables show the new slot when next read
        self._initial = wanted

    def _remove_zero(self, series: set[tuple[str, Key]]) -> None:
        tables = self.tables  # up to date
        for name, key in series:
            if name == n.SEQUENCE_SCORE:
                if self.sequence_score.get(key[0]) == 0.0:
                    del self.sequence_score[key[0]]
            elif tables[name].get(key) == 0:
                del tables[name][key]
        self._slot_of = {name: {} for name in COUNTERS}
        self._cells = []
        self._counts = []
        for name, table in tables.items():
            for key, value in table.items():
                self._slot_of[name][key] = len(self._counts)
                self._cells.append((table, key))
                self._counts.append(value)

    def _tool(self, name: str) -> str:
        label = self._tool_cache.get(name)
        if label is None:
            label = self.labels.tool(name)
            if len(self._tool_cache) < 4096 and len(name) <= 256:  # bounded in bytes too: names are free-form
                self._tool_cache[name] = label
        return label

    def add(self, verdicts: Iterable[TurnVerdict]) -> None:
        batch = VerdictBatch.of(verdicts)
        plans = self._plans
        counts = self._counts
        self._dirty = True
        scored = False
        for sig, count in batch.groups().items():
            plan = plans.get(sig)
            if plan is None:
                v = batch.example(sig)
                # Plans are kept while there is room; once full, only a signature seen twice in a batch replaces
                # them all. Signatures all new (client-chosen names) are counted directly.
                if not (len(plans) < self.max_plans or count > 1) or not cacheable(sig):
                    self._count(v, count)
                    scored = scored or bool(sig[SIG_SCORED])
                    continue
                if len(plans) >= self.max_plans:
                    plans.clear()
                plan = plans[sig] = self.plan(v)
            for slot, inc in plan:
                counts[slot] += inc * count
            if sig[SIG_SCORED]:
                scored = True
        if scored:  # a float: summed in verdict order, as one verdict at a time would
            seq = self.sequence_score
            agent_label = self.labels.agent
            for v in batch:
                s = v.sequence_score
                if s is not None and v.judged:
                    agent = agent_label(v.agent)
                    seq[agent] = seq.get(agent, 0.0) + s

    def _entries(self, v: TurnVerdict) -> list[tuple[str, Key, int]]:
        """What one verdict adds (all but the sequence score): (counter name, key, increment)s."""
        out: list[tuple[str, Key, int]] = []
        agent = self.labels.agent(v.agent)
        self._calls(v, agent, out.append)
        if v.judged:
            self._judged_turn(v, agent, out.append)
        return out

    def _slot(self, name: str, key: Key) -> int:
        slots = self._slot_of[name]
        slot = slots.get(key)
        if slot is None:  # as many slots as table entries: bounded by the label sets, like the tables
            slot = slots[key] = len(self._counts)
            self._cells.append((self._tables[name], key))
            self._counts.append(0)
        return slot

    def _count(self, v: TurnVerdict, times: int) -> None:
        counts = self._counts
        slot_of = self._slot_of
        for name, key, k in self._entries(v):
            s = slot_of[name].get(key)
            if s is None:
                s = self._slot(name, key)
            counts[s] += k * times

    def plan(self, v: TurnVerdict) -> Plan:
        """What one verdict adds to the tables (all but the sequence score): (slot, increment)s."""
        acc: dict[int, int] = {}
        slot_of = self._slot_of
        for name, key, k in self._entries(v):
            s = slot_of[name].get(key)
            if s is None:
                s = self._slot(name, key)
            acc[s] = acc.get(s, 0) + k
        return tuple(acc.items())

    def _calls(self, v: TurnVerdict, agent: str, out: Callable[[tuple[str, Key, int]], None]) -> None:
        tool_label = self._tool
        judged = v.judged
        out((n.TURNS, (agent, "true" if judged else "false"), 1))
        if v.turnless:  # calls whose turn never came: no agent turn, in neither term of the tool usage rate
            out((n.TURNLESS_TURNS, (agent,), 1))
        else:
            out((n.AGENT_TURNS, (agent,), 1))
            if v.calls:
                out((n.TURNS_WITH_CALLS, (agent,), 1))
        for c in v.calls:
            tool = tool_label(c.name)
            out((n.TOOL_CALLS, (agent, tool, c.outcome.value), 1))
            k = (agent, tool)
            if judged:
                out((n.JUDGED_CALLS, k, 1))
            if c.schema_valid is not None:
                out((n.SCHEMA_CHECKED_CALLS, k, 1))
                if c.schema_valid:  # the figures' numerators are counters of their own, not checked - failing
                    out((n.SCHEMA_VALID_CALLS, k, 1))
                else:
                    out((n.SCHEMA_INVALID_CALLS, k, 1))
                    for kind in sorted({x.kind.value for x in c.violations} or {"other"}):
                        out((n.SCHEMA_VIOLATIONS, (agent, tool, kind), 1))
            if c.args_ok is not None:
                out((n.ARGUMENT_CHECKED_CALLS, k, 1))
                if c.args_ok:
                    out((n.ARGUMENT_OK_CALLS, k, 1))
                else:
                    out((n.ARGUMENT_MISMATCHES, k, 1))
            if c.name in v.forbidden:  # one per call of a forbidden tool (v.forbidden names each tool once)
                out((n.FORBIDDEN_CALLS, k, 1))

    def _judged_turn(self, v: TurnVerdict, agent: str, out: Callable[[tuple[str, Key, int]], None]) -> None:
        tool_label = self._tool
        for m in v.missed:
            out((n.MISSED_CALLS, (agent, tool_label(m.tool)), 1))
        for tool, count in v.expected_by_tool:  # one entry per tool (the judge sums its slots' minimums)
            out((n.EXPECTED_CALLS, (agent, tool_label(tool)), count))
        matrix = self.labels.matrix
        for exp, act in v.confusion:
            out((n.CONFUSION, (agent, matrix(exp), matrix(act)), 1))
        checks = n.TURN_CHECKS
        if v.selection_ok is not None:
            out((checks, (agent, "selection", "pass" if v.selection_ok else "fail"), 1))
        out((checks, (agent, "args", "pass" if v.args_ok else "fail"), 1))
        out((checks, (agent, "schema", "pass" if v.schema_ok else "fail"), 1))
        if v.sequence_ok is not None:
            out((checks, (agent, "sequence", "pass" if v.sequence_ok else "fail"), 1))
            if not v.sequence_ok:
                out((n.ORDER_VIOLATIONS, (agent,), 1))
        if v.response_ok is not None:
            out((checks, (agent, "response", "pass" if v.response_ok else "fail"), 1))
            out((n.RESPONSE_CHECKED_TURNS, (agent,), 1))
        if v.end_to_end is not None:
            out((checks, (agent, "end_to_end", "pass" if v.end_to_end else "fail"), 1))
            if not v.end_to_end and v.rule:
                out((n.RULE_FAILURES, (agent, self.labels.rule(v.rule)), 1))
        if v.over_calling is not None:
            out((checks, (agent, "over_calling", "fail" if v.over_calling else "pass"), 1))
