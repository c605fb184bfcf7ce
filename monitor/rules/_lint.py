"""Warnings about valid but suspicious rule sets: rules that can never match, alerts that can never fire, argument
checks on arguments the tool's schema forbids."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from monitor.rules._burn import objective_warnings
from monitor.rules._model import All, Always, Condition, Expectation, Prefix, RuleSet


def shadowed_rules(rs: RuleSet) -> list[str]:
    """One line per `expect` rule an earlier rule always matches first (first-match routing never reaches it).

    The earlier rule must apply to the later one's agent (have its agent, or none) and have no `when`, the same
    `when`, or a `prefix` the later one's extends (a sufficient, cheap test); the first such rule is named. One pass:
    the first rule of each (scope, when) and of each (scope, prefix) is kept, and a prefix is looked for at each
    length an earlier prefix has (comparing every pair took 50 s for 10,000 rules)."""
    out = []
    first_when: dict[tuple[str | None, Condition], int] = {}  # Always() included: it equals itself
    first_prefix: dict[tuple[str | None, str], int] = {}
    lengths: set[int] = set()
    rules = rs.expectations
    for j, later in enumerate(rules):
        when = later.when
        found = [first_when.get((s, when)) for s in _scopes(later)]
        found += [first_when.get((s, _ALWAYS)) for s in _scopes(later)]
        if isinstance(when, Prefix):
            text = when.text
            found += [first_prefix.get((s, text[:n])) for n in lengths if n <= len(text) for s in _scopes(later)]
        earlier_at = min((i for i in found if i is not None), default=None)
        if earlier_at is not None:
            earlier = rules[earlier_at]
            out.append(
                f"{later.source}:{later.line}: warning: rule {later.id!r} can never match: "
                f"rule {earlier.id!r} ({earlier.source}:{earlier.line}) matches first"
            )
        first_when.setdefault((later.agent, when), j)
        if isinstance(when, Prefix):
            first_prefix.setdefault((later.agent, when.text), j)
            lengths.add(len(when.text))
    return out


_ALWAYS = Always()


def spaced_prefixes(rs: RuleSet) -> list[str]:
    """One line per `expect` rule whose `when` needs a prefix that begins with whitespace (alone, or among conditions
    that must all hold): the input's leading whitespace is set aside before a prefix is compared, so it never
    matches."""
    out = []
    for rule in rs.expectations:
        text = _spaced_prefix(rule.when)
        if text is not None:
            out.append(
                f"{rule.source}:{rule.line}: warning: rule {rule.id!r} can never match: its prefix {text!r} begins "
                f"with whitespace, which an input loses before a prefix is compared (write {text.lstrip()!r})"
            )
    return out


def _spaced_prefix(when: Condition) -> str | None:
    """The text of a prefix beginning with whitespace that `when` needs (itself, or one of all its parts), or None."""
    if isinstance(when, Prefix):
        return when.text if when.text[:1].isspace() else None
    if isinstance(when, All):
        return next((t for t in map(_spaced_prefix, when.parts) if t is not None), None)
    return None


def _scopes(rule: Expectation) -> tuple[str | None, ...]:
    """The agent scopes whose rules apply to every turn `rule` matches: every agent's (None), and its own."""
    return (None,) if rule.agent is None else (None, rule.agent)


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


@dataclass(frozen=True, slots=True)
class ForbiddenArgument:
    """An argument check on an argument the schema of its slot's tool allows no call to have (`forbidden_checks`)."""

    expectation: Expectation
    alternative: int  # index in expectation.alternatives
    slot: int  # Slot.index in that alternative
    tool: str
    argument: str
    allowed: tuple[str, ...]  # the only argument names the tool's schema allows

    @property
    def message(self) -> str:
        return (f"argument check on {self.argument!r}, which the schema of {self.tool} does not allow "
                f"(additionalProperties: false; its properties: {', '.join(self.allowed) or 'none'}): it fails every "
                "call that keeps to the schema")

    def path(self, entry: Mapping[str, Any]) -> tuple[str | int, ...]:
        """The key path of the check inside `entry`, the rule or case (as written) the expectation was compiled from:
        `call[slot].args.<argument>`, or `any_of[alternative].call[slot].args.<argument>`."""
        head: tuple[str | int, ...] = ("any_of", self.alternative, "call") if "any_of" in entry else ("call",)
        return (*head, self.slot, "args", self.argument)


def forbidden_checks(rs: RuleSet, expectations: Iterable[Expectation] | None = None) -> list[ForbiddenArgument]:
    """The argument checks of `expectations` (default: every `expect` rule and labelled case of `rs`) on an argument
    that the tool's schema (in `rs`) allows no call to have: `additionalProperties: false` beside `properties` without
    it and no `patternProperties` (the usual sign of a misspelt argument). A missing argument fails every check but
    `one_of` with "", so the check fails every call that keeps to the schema; that `one_of` is left out."""
    allowed: dict[str, tuple[str, ...]] = {}  # tool -> the only argument names its schema allows
    for tool in rs.tools:
        schema = tool.schema
        if schema is None or schema.get("additionalProperties") is not False or "patternProperties" in schema:
            continue
        properties = schema.get("properties", {})
        if isinstance(properties, dict):
            allowed[tool.name] = tuple(properties)
    if expectations is None:
        expectations = (*rs.expectations, *(e for _, _, e in rs.cases))
    out = []
    for exp in expectations:
        for a, alt in enumerate(exp.alternatives):
            for slot in alt.slots:
                names = allowed.get(slot.tool)
                if names is None:
                    continue
                for check in slot.checks:
                    if check.argument in names or (check.mode == "one_of" and "" in check.expected):
                        continue
                    out.append(ForbiddenArgument(exp, a, slot.index, slot.tool, check.argument, names))
    return out


def forbidden_arguments(rs: RuleSet) -> list[str]:
    """One line per argument check (of an `expect` rule or a labelled case) on an argument that the tool's schema
    allows no call to have (`forbidden_checks`)."""
    return [f"{f.expectation.source}:{f.expectation.line}: warning: rule {f.expectation.id!r}: {f.message}"
            for f in forbidden_checks(rs)]


def unfireable_alerts(rs: RuleSet) -> list[str]:
    """One line per burn-rate alert of an `objective` that can never fire (the loader refuses an objective none of
    whose burn-rate alerts can), and per alert on a tool no catalog declares (`from_definitions` lets it name an
    offered tool): only declared tools are metric label values, so that tool's per-tool series never exists."""
    out = []
    catalog = rs.catalog
    for a in rs.alerts:
        where = f"{a.source}:{a.line}: warning: alert {a.name!r}"
        if a.tool is not None and a.tool not in catalog:
            out.append(f"{where}: tool {a.tool!r} is in no catalog (only offered): /metrics counts its calls as "
                       "`__other__`, so this alert can never fire; declare it in a catalog")
        if a.objective is not None:
            out.extend(f"{where}: {w}" for w in objective_warnings(a.objective))
    return out
