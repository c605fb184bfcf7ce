"""The verdict counter series created at 0 before their first event.

Prometheus' `increase()` and `rate()` see growth only between two samples of one series: a series that first
appears with the value 1 looks flat, so the first hallucinated call of an agent would never reach an alert. Every
series whose label values are all known in advance, and that some turn can count, is therefore created at 0 when
the metrics start and on every rules reload: agents of the configuration and the rules plus `__other__`, catalog
tools plus `__other__`, the fixed outcomes, schema violation kinds, turn checks and results, and the rule ids
(labelled cases all as `case`).

Left out, as no turn can count them (as the judge scopes rules and tools, see `monitor.judge.Judge`):
  - hallucinated calls of a catalog tool: a hallucinated name is not in the catalog, so its label is `__other__`;
    except for an agent whose rule files scope its tools (`agent_tools`): the catalog tools outside them are
    hallucinated when it calls them, under their own names;
  - failures of a rule or labelled case scoped to an agent (`rule_agents`) for the other agents: only that agent's
    turns and turns without an agent name (`__other__`) use it;
  - schema checks (checked, valid, invalid, violation kinds) of a tool without a schema (`schema_tools`, from
    `Judge.checked_tools`): `__other__` and the catalog tools that declare none, and those outside the agent's scoped
    tools; unless the rule files take offered tools (`from_definitions`), whose definitions bring schemas to any
    name (`schema_tools` None);
  - argument checks (checked, ok, mismatches) of a tool no slot with checks names (`argument_tools`): only a call
    filling such a slot of a rule or labelled case of its agent is checked; `__other__` only for such a slot's tool
    outside the catalog (`from_definitions`).

Bounded, with A agents and T tools (each counting `__other__`), R rules (and `case` with labelled cases) and C
catalog tools (T = C + 1), S tools that can be schema-checked (those declaring a schema; T with `from_definitions`)
and K tools with argument checks, without scoped rules or tools:
  per agent          23: turns by judged (2), turn checks x results (14), 6 more (order violations, ...),
                         hallucinated calls of `__other__` (1)
  per agent, tool    8: calls by outcome but hallucinated (4), judged, expected, missed and forbidden calls (4)
  per agent, S tool  9: schema checked, valid and invalid calls (3), schema violation kinds (6)
  per agent, K tool  3: argument checked, ok and mismatched calls
  per agent, rule    1                                        (rule failures)
  confusion matrix   (C + 1) x (C + 3) per agent, only while that is <= MATRIX_MAX_PER_AGENT (C <= 18)
that is A x (23 + 8 T + 9 S + 3 K + R) series plus the matrix; and never more than `budget` (MAX_INITIAL_SERIES) in
all: families are taken in the order below while they fit, the others appear with their first event (a warning
says which; a budget of 0 creates none and says nothing). `VerdictCounters.set_labels` removes the series created
here that a reload no longer names while they are still 0, so reloads do not pile them up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from monitor.metrics import names as n
from monitor.metrics._labels import LabelPolicy
from monitor.verdict import NONE_LABEL, UNKNOWN_LABEL, Outcome, ViolationKind

Key = tuple[str, ...]
# Per agent scope (an agent the rule files name; "" for turns without an agent name; None for the other agents),
# tool names as the rules give them; None: any tool (see `monitor.judge.Judge.checked_tools`).
Checked = Mapping[str | None, Iterable[str]] | None
Series = tuple[str, Key]  # (counter name, label values)

MAX_INITIAL_SERIES = 20_000
MATRIX_MAX_PER_AGENT = 400

_PER_AGENT = (
    n.ORDER_VIOLATIONS,
    n.TURNS_WITH_CALLS,
    n.TURNLESS_TURNS,
    n.AGENT_TURNS,
    n.RESPONSE_CHECKED_TURNS,
    n.SEQUENCE_SCORE,
)
_PER_TOOL = (n.JUDGED_CALLS, n.EXPECTED_CALLS, n.MISSED_CALLS, n.FORBIDDEN_CALLS)
_PER_SCHEMA_TOOL = (n.SCHEMA_CHECKED_CALLS, n.SCHEMA_INVALID_CALLS, n.SCHEMA_VALID_CALLS)
_PER_ARGUMENT_TOOL = (n.ARGUMENT_CHECKED_CALLS, n.ARGUMENT_MISMATCHES, n.ARGUMENT_OK_CALLS)


def matrix_cells(catalog: Iterable[str]) -> list[tuple[str, str]]:
    """The confusion cells a judged turn can reach: rows a catalog tool or `(none)`; columns a catalog tool,
    `(none)`, `(unknown)` (a hallucinated name) or `__other__` (a tool offered by the turn, outside the rules)."""
    tools = sorted(catalog)
    return [(r, c) for r in (*tools, NONE_LABEL) for c in (*tools, NONE_LABEL, UNKNOWN_LABEL, n.OTHER)]


def _failing(
    labels: LabelPolicy, rules: Iterable[str], rule_agents: Mapping[str, str], agents: list[str]
) -> dict[str, list[str]]:
    """Per agent, the rule labels its turns can fail: its own rules' and the unscoped ones' (every rule's for
    `__other__`, which holds the turns without an agent name). Labelled cases fold into one label, `case`, that an
    agent can fail when one of them applies to it."""
    scopes: dict[str, set[str | None]] = {}  # rule label -> the agents its rules are scoped to (None: every agent)
    for r in rules:
        scopes.setdefault(labels.rule(r), set()).add(rule_agents.get(r))
    return {a: [r for r in sorted(scopes) if None in scopes[r] or a in scopes[r] or a == n.OTHER] for a in agents}


def initial_series(
    labels: LabelPolicy,
    rules: Iterable[str] = (),
    *,
    budget: int = MAX_INITIAL_SERIES,
    agent_tools: Mapping[str, Iterable[str]] | None = None,
    rule_agents: Mapping[str, str] | None = None,
    schema_tools: Checked = None,
    argument_tools: Checked = None,
) -> tuple[list[Series], str | None]:
    """The series to create at 0 for these label sets and rule ids, within `budget`; and, when families were left
    out over the budget (not when it is 0), the warning that says which.

    `agent_tools`: agent -> the tools its turns may call, for the agents whose rule files scope them (the others
    call the whole catalog). `rule_agents`: rule id -> the agent its rule file is scoped to (the others apply to
    every agent). `schema_tools`, `argument_tools`: per agent scope, the tools whose calls can be checked against a
    schema, and for arguments (None: every tool and `__other__`)."""
    agents = [*sorted(labels.agents - {n.OTHER}), n.OTHER]
    tools = [*sorted(labels.tools - {n.OTHER}), n.OTHER]
    catalog = len(tools) - 1
    checks = [(check, result) for check in n.CHECKS for result in ("pass", "fail")]
    scoped_tools = {a: frozenset(ts) for a, ts in (agent_tools or {}).items()}
    outcomes = [o.value for o in Outcome if o is not Outcome.HALLUCINATED]
    # Per agent, the tools whose calls can be hallucinated (their label: __other__, or a catalog tool outside
    # the agent's scope) and the rules its turns can fail (unscoped, its own; every rule for __other__, which holds
    # the turns without an agent name).
    hallucinated = {
        a: [t for t in tools[:-1] if a in scoped_tools and t not in scoped_tools[a]] + [n.OTHER] for a in agents
    }
    failing = _failing(labels, rules, rule_agents or {}, agents)
    # Per agent, the tool labels its calls can be schema-checked and argument-checked under. The label __other__
    # holds the turns without an agent name (scope "": every rule and tool), the agents no rule file names
    # (scope None) take the unscoped rules.

    def checkable(by_scope: Checked) -> dict[str, list[str]]:
        if by_scope is None:
            return {a: tools for a in agents}
        out = {}
        for a in agents:
            scope = "" if a == n.OTHER else a if a in by_scope else None
            got = {labels.tool(t) for t in by_scope.get(scope, ())}
            out[a] = [t for t in tools if t in got]
        return out

    schema = checkable(schema_tools)
    arguments = checkable(argument_tools)

    def per_agent() -> Iterator[Series]:
        for a in agents:
            yield from ((n.TURNS, (a, judged)) for judged in ("true", "false"))
            yield from ((n.TURN_CHECKS, (a, check, result)) for check, result in checks)
            yield from ((name, (a,)) for name in _PER_AGENT)

    def tool_calls() -> Iterator[Series]:
        for a in agents:
            yield from ((n.TOOL_CALLS, (a, t, o)) for t in tools for o in outcomes)
            yield from ((n.TOOL_CALLS, (a, t, Outcome.HALLUCINATED.value)) for t in hallucinated[a])

    def per_tool() -> Iterator[Series]:
        yield from ((name, (a, t)) for name in _PER_TOOL for a in agents for t in tools)
        yield from ((name, (a, t)) for name in _PER_SCHEMA_TOOL for a in agents for t in schema[a])
        yield from ((name, (a, t)) for name in _PER_ARGUMENT_TOOL for a in agents for t in arguments[a])

    # (what, how many series, the series): sizes first, so that a family over the bound is never built.
    n_a, n_t = len(agents), len(tools)
    n_schema, n_arguments = sum(map(len, schema.values())), sum(map(len, arguments.values()))
    families: list[tuple[str, int, Callable[[], Iterator[Series]]]] = [
        ("per agent", n_a * (2 + len(checks) + len(_PER_AGENT)), per_agent),
        (n.TOOL_CALLS, n_a * n_t * len(outcomes) + sum(map(len, hallucinated.values())), tool_calls),
        (
            "per tool",
            n_a * n_t * len(_PER_TOOL) + n_schema * len(_PER_SCHEMA_TOOL) + n_arguments * len(_PER_ARGUMENT_TOOL),
            per_tool,
        ),
        (
            n.SCHEMA_VIOLATIONS,
            n_schema * len(ViolationKind),
            lambda: ((n.SCHEMA_VIOLATIONS, (a, t, k.value)) for a in agents for t in schema[a] for k in ViolationKind),
        ),
        (
            n.RULE_FAILURES,
            sum(map(len, failing.values())),
            lambda: ((n.RULE_FAILURES, (a, r)) for a in agents for r in failing[a]),
        ),
    ]
    cells_per_agent = (catalog + 1) * (catalog + 3)
    if cells_per_agent <= MATRIX_MAX_PER_AGENT:
        cells = matrix_cells(tools[:-1])
        families.append(
            (n.CONFUSION, n_a * cells_per_agent, lambda: ((n.CONFUSION, (a, e, c)) for a in agents for e, c in cells))
        )
    out: list[Series] = []
    skipped: list[str] = []
    for what, size, series in families:
        if len(out) + size <= budget:
            out.extend(series())
        else:
            skipped.append(f"{what} ({size})")
    warning = None
    if skipped and budget > 0:
        warning = (
            f"{n_a - 1} agents and {catalog} catalog tools (and __other__ for each): "
            f"{', '.join(skipped)} series not created at 0 (over the bound of {budget}); they appear with their "
            "first event, which increase() and rate() then miss"
        )
    return out, warning
