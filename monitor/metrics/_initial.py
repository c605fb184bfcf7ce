"""The verdict counter series created at 0 before their first event.

Prometheus' `increase()` and `rate()` see growth only between two samples of one series: a series that first
appears with the value 1 looks flat, so the first hallucinated call of an agent would never reach an alert. Every
series whose label values are all known in advance is therefore created at 0 when the metrics start and on every
rules reload: agents of the configuration and the rules plus `__other__`, catalog tools plus `__other__`, the fixed
outcomes, schema violation kinds, turn checks and results, and the rule ids.

Bounded, with A agents and T tools (each counting `__other__`), R rules and C catalog tools (T = C + 1):
  per agent          20: turns by judged (2), turn checks x results (14), 4 more (order violations, ...)
  per agent, tool    19: calls by outcome (5), 8 counters (missed, forbidden, ...), schema violation kinds (6)
  per agent, rule    1                                        (rule failures)
  confusion matrix   (C + 1) x (C + 3) per agent, only while that is <= MATRIX_MAX_PER_AGENT (C <= 18)
that is A x (20 + 19 T + R) series plus the matrix; and never more than `budget` (MAX_INITIAL_SERIES) in all:
families are taken in the order below while they fit, the others appear with their first event (logged).
`VerdictCounters.set_labels` removes the series created here that a reload no longer names while they are still 0,
so reloads do not pile them up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from monitor.metrics import names as n
from monitor.metrics._labels import LabelPolicy
from monitor.verdict import NONE_LABEL, UNKNOWN_LABEL, Outcome, ViolationKind

logger = logging.getLogger(__name__)

Key = tuple[str, ...]
Series = tuple[str, Key]  # (counter name, label values)

MAX_INITIAL_SERIES = 20_000
MATRIX_MAX_PER_AGENT = 400

_PER_AGENT = (n.ORDER_VIOLATIONS, n.TURNS_WITH_CALLS, n.RESPONSE_CHECKED_TURNS, n.SEQUENCE_SCORE)
_PER_TOOL = (
    n.JUDGED_CALLS,
    n.EXPECTED_CALLS,
    n.MISSED_CALLS,
    n.SCHEMA_CHECKED_CALLS,
    n.SCHEMA_INVALID_CALLS,
    n.ARGUMENT_CHECKED_CALLS,
    n.ARGUMENT_MISMATCHES,
    n.FORBIDDEN_CALLS,
)


def matrix_cells(catalog: Iterable[str]) -> list[tuple[str, str]]:
    """The confusion cells a judged turn can reach: rows a catalog tool or `(none)`; columns a catalog tool,
    `(none)`, `(unknown)` (a hallucinated name) or `__other__` (a tool offered by the turn, outside the rules)."""
    tools = sorted(catalog)
    return [(r, c) for r in (*tools, NONE_LABEL) for c in (*tools, NONE_LABEL, UNKNOWN_LABEL, n.OTHER)]


def initial_series(labels: LabelPolicy, rules: Iterable[str] = (), *, budget: int = MAX_INITIAL_SERIES) -> list[Series]:
    """The series to create at 0 for these label sets and rule ids, within `budget`."""
    agents = [*sorted(labels.agents - {n.OTHER}), n.OTHER]
    tools = [*sorted(labels.tools - {n.OTHER}), n.OTHER]
    catalog = len(tools) - 1
    rule_ids = sorted({labels.rule(r) for r in rules if not r.startswith("case:")})
    checks = [(check, result) for check in n.CHECKS for result in ("pass", "fail")]

    def per_agent() -> Iterator[Series]:
        for a in agents:
            yield from ((n.TURNS, (a, judged)) for judged in ("true", "false"))
            yield from ((n.TURN_CHECKS, (a, check, result)) for check, result in checks)
            yield from ((name, (a,)) for name in _PER_AGENT)

    # (what, how many series, the series): sizes first, so that a family over the bound is never built.
    n_a, n_t = len(agents), len(tools)
    families: list[tuple[str, int, Callable[[], Iterator[Series]]]] = [
        ("per agent", n_a * (2 + len(checks) + len(_PER_AGENT)), per_agent),
        (
            n.TOOL_CALLS,
            n_a * n_t * len(Outcome),
            lambda: ((n.TOOL_CALLS, (a, t, o.value)) for a in agents for t in tools for o in Outcome),
        ),
        (
            "per tool",
            n_a * n_t * len(_PER_TOOL),
            lambda: ((name, (a, t)) for name in _PER_TOOL for a in agents for t in tools),
        ),
        (
            n.SCHEMA_VIOLATIONS,
            n_a * n_t * len(ViolationKind),
            lambda: ((n.SCHEMA_VIOLATIONS, (a, t, k.value)) for a in agents for t in tools for k in ViolationKind),
        ),
        (n.RULE_FAILURES, n_a * len(rule_ids), lambda: ((n.RULE_FAILURES, (a, r)) for a in agents for r in rule_ids)),
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
    if skipped:
        logger.warning(
            "%d agents x %d tools: %s series not created at 0 (over the bound of %d); they appear with their first "
            "event, which increase() and rate() then miss",
            len(agents),
            len(tools),
            ", ".join(skipped),
            budget,
        )
    return out
