"""Warnings about valid but suspicious rule sets: rules that can never match, alerts that can never fire."""

from __future__ import annotations

from monitor.rules._burn import objective_warnings
from monitor.rules._model import Always, Expectation, Prefix, RuleSet


def _covers(earlier: Expectation, later: Expectation) -> bool:
    """Whether every turn `later` matches is matched by `earlier` (a sufficient, cheap test)."""
    if earlier.agent is not None and earlier.agent != later.agent:
        return False
    a, b = earlier.when, later.when
    if isinstance(a, Always) or a == b:
        return True
    return isinstance(a, Prefix) and isinstance(b, Prefix) and b.text.startswith(a.text)


def shadowed_rules(rs: RuleSet) -> list[str]:
    """One line per `expect` rule an earlier rule always matches first (first-match routing never reaches it)."""
    out = []
    rules = rs.expectations
    for j, later in enumerate(rules):
        for earlier in rules[:j]:
            if _covers(earlier, later):
                out.append(
                    f"{later.source}:{later.line}: warning: rule {later.id!r} can never match: "
                    f"rule {earlier.id!r} ({earlier.source}:{earlier.line}) matches first"
                )
                break
    return out


def unreachable_cases(rs: RuleSet) -> list[str]:
    """One line per case without an id that live serving never judges a turn by: such a case is found by its input,
    and an earlier case has that input too and applies to every turn it would (a turn's case is its id's, else the
    first case of its input that applies to the turn's agent). `eval` runs each case of a dataset under a key of its
    own, so there it still counts."""
    seen: dict[str, list[Expectation]] = {}  # input -> the cases of that input so far
    out = []
    for cid, text, exp in rs.cases:
        if text is None:
            continue
        before = seen.setdefault(text, [])
        other = next((o for o in before if o.agent is None or o.agent == exp.agent), None)
        before.append(exp)
        if cid is None and other is not None:
            out.append(
                f"{exp.source}:{exp.line}: warning: case {exp.id!r} is never reached by `serve`: case {other.id!r} "
                f"({other.source}:{other.line}) has the same input and comes first (a case without an id is found "
                "by its input); give it an id"
            )
    return out


def unfireable_alerts(rs: RuleSet) -> list[str]:
    """One line per burn-rate alert of an `objective` that can never fire (the loader refuses an objective none of
    whose burn-rate alerts can)."""
    return [
        f"{a.source}:{a.line}: warning: alert {a.name!r}: {w}"
        for a in rs.alerts
        if a.objective is not None
        for w in objective_warnings(a.objective)
    ]
