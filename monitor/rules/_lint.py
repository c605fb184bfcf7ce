"""Warnings about valid but suspicious rule sets: rules that can never match."""

from __future__ import annotations

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
