"""Judge: Turn -> TurnVerdict, exactly per METRICS.md. Pure and thread-safe after construction."""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Iterator, Sequence
from typing import Any

from monitor._json import PLAIN_CHARS
from monitor.judge import _args, _plan
from monitor.judge._catalog import Catalog, TurnTools
from monitor.judge._conditions import holds
from monitor.judge._outcomes import AltResult, evaluate, score_sensitive
from monitor.judge._parse import DECODER, NOT_CAPTURED, Malformed, loads, parse_arguments, schema_result
from monitor.judge._reason import note_requested, reason
from monitor.judge._router import Router
from monitor.judge._schema import SchemaValidator
from monitor.judge._sequence import sequence_check
from monitor.records import RequestedCall, Turn
from monitor.rules import Expectation, RuleSet
from monitor.rules._model import ArgCheck, Forbid
from monitor.verdict import ArgCheckResult, CallVerdict, Outcome, SchemaViolation, TurnVerdict

CASE_ID_ATTRIBUTE = "toolwatch.case.id"
_CALL = CallVerdict  # positional, in field order
_TURN = TurnVerdict  # positional, in field order
MAX_CACHE = 16_384  # entries of the per-judge outcome / reason caches (cleared when full)
MAX_CACHED_CALLS = 16  # turns with more calls are not cached (bounds the memory a cache entry holds)
MAX_CACHED_NAME_CHARS = 1024  # nor turns whose tool names are longer in all (names come from the agent)
MAX_PLANNED_CALLS = 4  # turns with more calls take the general path (no plan is looked up for them; read by the C
# dispatch when a judge is made)


def _cacheable(names: tuple[str, ...]) -> bool:
    return len(names) <= MAX_CACHED_CALLS and sum(map(len, names)) <= MAX_CACHED_NAME_CHARS


SchemaResult = tuple[bool | None, tuple[SchemaViolation, ...]]
_PlanFn = _plan.Plan  # (in Judge, `_plan` is the method)
_VALID: SchemaResult = (True, ())
_NO_SCHEMA: SchemaResult = (None, ())
_scan: Any = getattr(json.scanner, "c_make_scanner", None)
_scan_once = _scan(DECODER) if _scan is not None else None


def _loads(text: str) -> Any:
    """`loads` (strict JSON) without its Python-level wrapper frames for the common case (no surrounding whitespace
    and at most PLAIN_CHARS characters: a longer text is parsed within a budget, `loads`)."""
    if _scan_once is not None and len(text) <= PLAIN_CHARS:
        try:
            value, end = _scan_once(text, 0)
        except StopIteration:
            return loads(text)  # leading whitespace, or the parser's own error
        if end == len(text):
            return value
    return loads(text)


def _parse_call(text: str | None, validator: SchemaValidator | None) -> tuple[Any, SchemaResult]:
    """One call's arguments parsed once (NOT_CAPTURED, Malformed with the parser's message, or the value) and checked
    against its tool's schema ((None, ()) without one): the pass of the general path and of several-call plans."""
    if text is None:
        p: Any = NOT_CAPTURED
    else:
        try:
            p = _loads(text)
        except (ValueError, RecursionError):
            p = parse_arguments(text)  # Malformed, with the parser's message
    if validator is None:
        return p, _NO_SCHEMA
    fast = validator.fast
    # The common case inline: the compiled validator accepts the parsed arguments.
    try:
        accepted = fast is not None and type(p) is dict and fast.is_valid(p)
    except Exception:  # noqa: BLE001 - values the fast validator cannot convert: ask the reference
        accepted = False
    return p, (_VALID if accepted else schema_result(validator, p, True))


class _Scope:
    """What applies to turns of one agent: its router, forbid rules and tools."""

    __slots__ = ("router", "forbid", "tools", "agent", "turn_tools", "plans", "prefix_n", "by_prefix")

    def __init__(
        self,
        agent: str | None,
        rules: Sequence[Expectation],
        forbid: Sequence[Forbid],
        tools: frozenset[str],
        catalog: Catalog,
    ) -> None:
        self.agent = agent
        self.router = Router(rules)
        self.forbid = tuple(forbid)
        self.tools = tools
        self.turn_tools: TurnTools = catalog.for_turn(Turn(""), tools)  # for turns that offer no definitions
        # Per rule (router order): call name (one call), () (no call) or the names (2 to MAX_PLANNED_CALLS calls)
        # -> plan. None: no plans (cases).
        self.plans: list[_Plans] | None = [_Plans(i) for i in range(len(self.router.rules))]
        # Routing by plain prefixes of one length: the prefix finds the rule's plans directly.
        table = self.router.prefix_table()
        self.prefix_n = table[0] if table is not None else 0
        self.by_prefix = {p: self.plans[i] for p, i in table[1].items()} if table is not None else {}


class _Plans(dict[Any, _plan.Plan]):
    """The plans of one rule of a scope."""

    __slots__ = ("rule",)

    def __init__(self, rule: int) -> None:
        super().__init__()
        self.rule = rule


class _Scored:
    """The assignments of one (expectation, names, in_catalog) that depend on argument scores: the scores evaluate
    asks for (the same ones, in the same order, whatever the answers) and the result for each answer seen."""

    __slots__ = ("asks", "results")
    MAX_RESULTS = 64

    def __init__(self, asks: tuple[tuple[int, int, int], ...]) -> None:
        self.asks = asks
        self.results: dict[tuple[int, ...], AltResult] = {}



def _slot_score(checks: tuple[ArgCheck, ...], parsed: Any, text: str) -> int:
    """Score units of a call (its arguments `parsed`) in a slot with `checks`: 2 per check that passes; a call whose
    arguments were not captured 2n - 1 of 2n (unknown, between all and one failing); arguments that are not JSON
    fail every check (as slot_checks says), a one_of that lists "" too."""
    if parsed is NOT_CAPTURED:
        return 2 * len(checks) - 1
    if type(parsed) is Malformed:
        return 0
    return 2 * _args.score(checks, parsed, text)

class Judge:
    """Judges turns against a RuleSet.

    `.catalog` is every declared tool (safe as a metric label value); `.agents` the agents the rule files
    name. Turns of an agent named by a file use that file's rules plus the unscoped files' rules; turns of
    other agents use the unscoped rules; turns without an agent name use every rule.
    """

    def __init__(self, ruleset: RuleSet) -> None:
        self.ruleset = ruleset
        self.catalog: frozenset[str] = ruleset.catalog
        self.agents: frozenset[str] = ruleset.agents
        self._tools = Catalog(ruleset)
        exps = ruleset.expectations
        every = frozenset(self.catalog)
        self._all = _Scope(None, exps, [f for _, f in ruleset.forbid], every, self._tools)
        self._other = _Scope(
            None, [e for e in exps if e.agent is None], [f for a, f in ruleset.forbid if a is None], every, self._tools
        )
        scoped = dict(ruleset.scoped_tools)
        self._scopes = {
            a: _Scope(
                a,
                [e for e in exps if e.agent in (None, a)],
                [f for s, f in ruleset.forbid if s in (None, a)],
                scoped.get(a, every),
                self._tools,
            )
            for a in ruleset.agents
        }
        self._from_definitions = ruleset.from_definitions
        self._cases_by_id = dict(ruleset.cases_by_id)
        self._cases_by_input = dict(ruleset.cases_by_input)
        self._outcome_cache: dict[tuple[Any, ...], AltResult] = {}
        # Turns whose assignment depends on argument scores: per (expectation, names, in_catalog), the scores asked
        # for (always the same ones, in the same order, for one key) and the result for each answer.
        self._scored_cache: dict[tuple[Any, ...], _Scored] = {}
        self._scored_count = 0
        self._reason_cache: dict[tuple[Any, ...], str] = {}
        self._plan_count = 0  # plans held by every scope in all (at most MAX_CACHE: cleared when full)
        self._variant_count = 0  # assignments kept by the plans of several calls in all (likewise)
        if self._cases_by_id or self._cases_by_input or _scan_once is None:
            for s in (self._all, self._other, *self._scopes.values()):
                s.plans = None  # labelled cases are found before routing: the general path only
        # judge() in C when the plans are (monitor/judge/_cplan.c, Dispatch): the same lookups, then the plan, then
        # _general when it answers None; every turn it does not settle so goes to Judge.judge. An instance
        # attribute, found before the method: calls skip a Python frame. Not for subclasses that redefine judge().
        if _plan._C is not None and type(self).judge is Judge.judge:
            # fmt: off
            self.judge = _plan._C.Dispatch(  # type: ignore[method-assign]
                self, Judge.judge, self._scopes, self._other, self._all, bool(self._from_definitions), _Plans,
                MAX_PLANNED_CALLS,
            )
            # fmt: on

    def _scope(self, agent: str) -> _Scope:
        if not agent:
            return self._all
        return self._scopes.get(agent, self._other)

    def expectation(self, turn: Turn) -> Expectation | None:
        """The expectation for a turn: its labelled case, else the first matching rule, else None."""
        scope = self._scope(turn.agent)
        if self._cases_by_id or self._cases_by_input:
            case = self._case(turn)
            if case is not None:
                return case
        return scope.router.route(turn)

    def _case(self, turn: Turn) -> Expectation | None:
        cid = turn.case_id
        if cid is None:
            raw = turn.attributes.get(CASE_ID_ATTRIBUTE)
            cid = raw if isinstance(raw, str) else None
        agent = turn.agent
        found = self._cases_by_input.get(turn.input_text, ())  # the case of the id first, then those of the input
        if cid is not None and cid in self._cases_by_id:
            found = (self._cases_by_id[cid], *found)
        for exp in found:
            # A scoped case applies to its agent's turns and to turns without an agent name (as scoped rules do).
            if exp.agent is None or not agent or agent == exp.agent:
                return exp
        return None

    def scoping(self) -> tuple[dict[str, frozenset[str]], dict[str, str]]:
        """How this judge scopes turns by agent, for what must follow it (the metrics' series created at 0): the
        tools each agent named by a rule file may call (agents not listed: the whole catalog), and the agent each
        scoped rule and labelled case applies to (rules and cases not listed apply to every agent; a case id of
        cases of several scopes is not listed)."""
        unscoped = {e.id for e in self._other.router.rules}
        tools = {a: s.tools for a, s in self._scopes.items() if s.tools != self.catalog}
        rule_agents = {e.id: a for a, s in self._scopes.items() for e in s.router.rules if e.id not in unscoped}
        case_agents: dict[str, str | None] = {}
        for e in self._reachable_cases():
            case_agents[e.id] = e.agent if case_agents.get(e.id, e.agent) == e.agent else None
        rule_agents.update((i, a) for i, a in case_agents.items() if a is not None)
        return tools, rule_agents

    def _reachable_cases(self) -> list[Expectation]:
        """The labelled cases a turn can take (by its case id or by its input)."""
        return [*self._cases_by_id.values(), *(e for es in self._cases_by_input.values() for e in es)]

    def checked_tools(self) -> tuple[dict[str | None, frozenset[str]] | None, dict[str | None, frozenset[str]]]:
        """For what must follow this judge (the metrics' series created at 0), per agent scope: the tools whose calls
        can be checked against a schema (None: any tool, catalog or not, as offered definitions bring schemas with
        `from_definitions`), and the tools whose calls can have their arguments checked (the tools of the slots with
        checks of its rules and labelled cases, that its turns' catalog can hold; a call fills a slot only then).
        Keys: each agent the rule files name; "" for turns without an agent name (every rule and case); None for the
        other agents (the unscoped rules and cases). Names as the rules give them: a slot's tool may be outside the
        catalog with `from_definitions`."""
        cases = self._reachable_cases()
        scopes: dict[str | None, _Scope] = {"": self._all, None: self._other}
        scopes.update(self._scopes)
        open_ = self._from_definitions

        def checked(key: str | None, scope: _Scope) -> frozenset[str]:
            exps = [*scope.router.rules, *(e for e in cases if e.agent is None or key == "" or e.agent == key)]
            return frozenset(
                s.tool
                for e in exps
                for alt in e.alternatives
                for s in alt.slots
                if s.checks and (open_ or s.tool in scope.tools)
            )

        arguments = {key: checked(key, s) for key, s in scopes.items()}
        if open_:
            return None, arguments
        schemas = frozenset(self._tools.validators)
        return {key: schemas & s.tools for key, s in scopes.items()}, arguments

    def judge(self, turn: Turn) -> TurnVerdict:
        """The verdict of one turn (never raises on bad call data: it is judged as such). Its reason names the calls
        the model requested that never ran (note_requested; such turns never take the C dispatch)."""
        v = self._judge(turn)
        for c in turn.calls:
            if isinstance(c, RequestedCall):
                note_requested(turn, v)
                break
        return v

    def _judge(self, turn: Turn) -> TurnVerdict:
        """The verdict of one turn, as the judge decides it.

        A turn with up to MAX_PLANNED_CALLS calls whose rule is found takes its plan (see _plan): keyed by the call
        name (one call), () (no call) or the tuple of call names (several); the plan or the judge sends anything else
        to the general path, `_general`, which gives the same verdicts."""
        agent = turn.agent
        scope = self._scopes.get(agent, self._other) if agent else self._all
        plans = scope.plans
        if plans is not None and not turn.turnless and not (self._from_definitions and turn.tool_definitions):
            calls = turn.calls
            if len(calls) == 1:
                key: Any = calls[0].name
            elif not calls:
                key = ()
            elif len(calls) <= MAX_PLANNED_CALLS:
                key = tuple([c.name for c in calls])
            else:
                return self._general(turn)
            n = scope.prefix_n
            if n:
                table = scope.by_prefix.get(turn.input_text.lstrip()[:n])
            else:
                i = scope.router.index(turn)
                table = plans[i] if i >= 0 else None
            if table is not None:
                v = (table.get(key) or self._plan(scope, table, key))(turn)
                if v is not None:
                    return v
        return self._general(turn)

    def _plan(self, scope: _Scope, table: _Plans, key: Any) -> _plan.Plan:
        """The plan of turns of `scope` routed to rule `table.rule` whose call names are `key` (kept in
        `table` when cacheable)."""
        assert scope.plans is not None
        i = table.rule
        names: tuple[str, ...]
        if isinstance(key, str):
            names = (key,)
        elif type(key) is tuple and all(type(n) is str for n in key):
            names = key
        else:
            return _plan.general  # call names that are not str (not kept): the general path
        if not _cacheable(names):
            return _plan.general
        exp = scope.router.rules[i]
        tools = scope.turn_tools
        in_catalog = tuple(n in tools.names for n in names)
        plan: _plan.Plan = _plan.general
        rules = scope.forbid + exp.forbid
        if len(names) > 1:
            if all(f.unless is None for f in rules if f.tool in names):
                plan = self._several(exp, names, in_catalog, tools, rules)
        elif not _sensitive(exp, names, in_catalog) and all(f.unless is None for f in rules if f.tool in names):
            best = self._best(exp, names, in_catalog, (NOT_CAPTURED,) * len(names), "")  # scores are not read
            forbidden = _forbidden(Turn(""), names, rules) if names and rules else ()
            seq = sequence_check(names, exp.order) if exp.order else (None, None)
            ok_reason = self._ok_reason(exp, names)
            if names:
                alt = exp.alternatives[best.alternative]
                slot = best.slots[0]
                checks = alt.slots[slot].checks if slot is not None else ()
                validator = tools.validators.get(key) if in_catalog[0] else None
                plan = _plan.one_call(
                    exp, best, key, in_catalog[0], validator, checks, forbidden, seq, ok_reason, _scan_once
                )
            else:
                plan = _plan.no_call(exp, best, forbidden, seq, ok_reason)
        if self._plan_count >= MAX_CACHE:
            self._clear_plans()
        table[key] = plan
        self._plan_count += 1
        return plan

    def _clear_plans(self) -> None:
        for s in (self._all, self._other, *self._scopes.values()):
            for d in s.plans or ():
                d.clear()
        self._plan_count = self._variant_count = 0

    def _kept_variant(self) -> None:
        """A plan of several calls kept one more assignment (see _plan.several_calls): all plans are dropped when
        they keep MAX_CACHE in all."""
        self._variant_count += 1
        if self._variant_count >= MAX_CACHE:
            self._clear_plans()

    def _several(
        self, exp: Expectation, names: tuple[str, ...], in_catalog: tuple[bool, ...], tools: TurnTools, rules: Any
    ) -> _PlanFn:
        """The plan of turns routed to `exp` whose calls are `names` (two or more; see _plan.several_calls)."""
        if _sensitive(exp, names, in_catalog):
            best = None  # per turn, by the argument scores (the same function as the general path's, same caches)
        else:
            best = self._best(exp, names, in_catalog, (NOT_CAPTURED,) * len(names), "")  # scores are not read

        def best_of(parsed: list[Any], text: str) -> AltResult:
            return self._best(exp, names, in_catalog, parsed, text)

        def asks_of() -> tuple[tuple[int, int, int], ...] | None:
            scored = self._scored_cache.get((id(exp), names, in_catalog))
            return scored.asks if scored is not None else None

        forbidden = _forbidden(Turn(""), names, rules) if rules else ()
        seq = sequence_check(names, exp.order) if exp.order else (None, None)
        validators = tuple(tools.validators.get(n) if k else None for n, k in zip(names, in_catalog, strict=True))
        # fmt: off
        return _plan.several_calls(
            exp, names, in_catalog, validators, best, best_of, asks_of, self._kept_variant, forbidden, seq,
            self._ok_reason(exp, names), _parse_call, NOT_CAPTURED,
        )
        # fmt: on

    def _general(self, turn: Turn) -> TurnVerdict:
        """The verdict of one turn by the general path (any turn; no plans)."""
        agent = turn.agent
        scope = self._scopes.get(agent, self._other) if agent else self._all
        tools = scope.turn_tools
        if self._from_definitions and turn.tool_definitions:
            tools = self._tools.for_turn(turn, scope.tools)
        known = tools.names
        validators = tools.validators
        names_l: list[str] = []
        flags: list[bool] = []
        parsed: list[Any] = []
        schema: list[SchemaResult] = []
        for c in turn.calls:  # one pass: parse the arguments once, check them against the tool's schema
            name = c.name
            k = name in known
            p, checked = _parse_call(c.arguments, validators.get(name) if k else None)
            names_l.append(name)
            flags.append(k)
            parsed.append(p)
            schema.append(checked)
        names, in_catalog = tuple(names_l), tuple(flags)
        if turn.turnless:
            return self._unjudged(turn, in_catalog, parsed, schema, (), turnless=True)
        if self._cases_by_id or self._cases_by_input:
            exp = self._case(turn) or scope.router.route(turn)
        else:
            exp = scope.router.route(turn)
        forbidden: tuple[str, ...] = ()
        if names and (scope.forbid or (exp is not None and exp.forbid)):
            rules = scope.forbid + exp.forbid if exp is not None else scope.forbid
            forbidden = _forbidden(turn, names, rules)
        if exp is None:
            return self._unjudged(turn, in_catalog, parsed, schema, forbidden, turnless=False)
        return self._judged(turn, exp, names, in_catalog, parsed, schema, forbidden)

    def _unjudged(
        self,
        turn: Turn,
        in_catalog: Sequence[bool],
        parsed: Sequence[Any],
        schema: Sequence[SchemaResult],
        forbidden: tuple[str, ...],
        *,
        turnless: bool,
    ) -> TurnVerdict:
        cvs = tuple(
            _CALL(
                i,
                c.name,
                c.call_id,
                Outcome.UNJUDGED if known else Outcome.HALLUCINATED,
                known,
                None,
                sv[0],
                sv[1],
                None,
                (),
                p is not NOT_CAPTURED,
            )
            for i, (c, known, p, sv) in enumerate(zip(turn.calls, in_catalog, parsed, schema, strict=True))
        )
        # fmt: off
        return _TURN(
            turn.agent, turn.trace_id, turn.span_id, turn.input_text, False, turnless, None, None, cvs, (), 0, None,
            None, True, all(c.schema_valid is not False for c in cvs), None, None, forbidden, None, None, None, (),
            reason(turn, None, cvs, (), forbidden, None, None, turnless=turnless), (),
        )
        # fmt: on

    def _best(
        self, exp: Expectation, names: tuple[str, ...], in_catalog: tuple[bool, ...], parsed: Any, text: str
    ) -> AltResult:
        """The kept alternative's outcomes; cached when argument scores cannot change the assignment, else cached
        by the scores it read."""
        key = (id(exp), names, in_catalog)  # expectations live as long as the judge
        got = self._outcome_cache.get(key)
        if got is not None:
            return got

        def score(k: int, i: int, j: int) -> int:
            """Score units of call i in slot j of alternative k (see _outcomes.ScoreFn)."""
            return _slot_score(exp.alternatives[k].slots[j].checks, parsed[i], text)

        scored = self._scored_cache.get(key)
        known: Iterator[int] | None = None  # on a miss, evaluate asks for the same scores again, in the same order
        if scored is not None:
            answers = tuple([score(k, i, j) for k, i, j in scored.asks])
            got = scored.results.get(answers)
            if got is not None:
                return got
            known = iter(answers)
        counts = _counts(names, in_catalog)
        sensitive = False
        best: AltResult | None = None
        asks: list[tuple[int, int, int]] = []
        said: list[int] = []
        for k, alt in enumerate(exp.alternatives):

            def passed(i: int, j: int, k: int = k) -> int:
                asks.append((k, i, j))
                said.append(next(known) if known is not None else score(k, i, j))
                return said[-1]

            sensitive = sensitive or score_sensitive(alt, counts)
            res = evaluate(k, alt, names, in_catalog, passed)
            if best is None or res.key() < best.key():
                best = res
        assert best is not None
        if _cacheable(names):
            if not sensitive:
                if len(self._outcome_cache) >= MAX_CACHE:
                    self._outcome_cache.clear()
                self._outcome_cache[key] = best
            elif len(said) <= MAX_CACHED_CALLS:
                self._keep_scored(key, tuple(asks), tuple(said), best)
        return best

    def _keep_scored(self, key: tuple[Any, ...], asks: tuple[Any, ...], said: tuple[int, ...], best: AltResult) -> None:
        if self._scored_count >= MAX_CACHE:
            self._scored_cache.clear()
            self._scored_count = 0
        scored = self._scored_cache.get(key)
        if scored is None:
            scored = self._scored_cache[key] = _Scored(asks)
        if len(scored.results) < _Scored.MAX_RESULTS:
            scored.results[said] = best
            self._scored_count += 1

    def _judged(
        self,
        turn: Turn,
        exp: Expectation,
        names: tuple[str, ...],
        in_catalog: tuple[bool, ...],
        parsed: Sequence[Any],
        schema: Sequence[SchemaResult],
        forbidden: tuple[str, ...],
    ) -> TurnVerdict:
        text = turn.input_text
        best = self._outcome_cache.get((id(exp), names, in_catalog)) or self._best(exp, names, in_catalog, parsed, text)
        alt = exp.alternatives[best.alternative]
        cvs = []
        args_ok_turn = schema_ok = True
        for i, c in enumerate(turn.calls):
            slot = best.slots[i]
            args_ok: bool | None = None
            results: tuple[ArgCheckResult, ...] = ()
            p = parsed[i]
            if slot is not None and p is not NOT_CAPTURED:
                checks = alt.slots[slot].checks
                if checks:
                    results, args_ok = _args.slot_checks(checks, p, text)
                    if not args_ok:
                        args_ok_turn = False
            valid, violations = schema[i]
            if valid is False:
                schema_ok = False
            cvs.append(
                _CALL(
                    i, c.name, c.call_id, best.outcomes[i], in_catalog[i], slot, valid, violations, args_ok, results,
                    p is not NOT_CAPTURED,
                )
            )  # fmt: skip
        call_verdicts = tuple(cvs)
        selection_ok = best.errors == 0
        seq_ok: bool | None = None
        seq_score: float | None = None
        if exp.order:
            seq_ok, seq_score = sequence_check(names, exp.order)
        response_ok: bool | None = None
        output = turn.output_text
        if exp.respond and output is not None:
            response_ok = True
            for r in exp.respond:
                if (r.contains is not None and r.contains not in output) or (
                    r.regex is not None and not r.regex.matcher(output.encode("utf-8", "surrogatepass"))
                ):
                    response_ok = False
                    break
        end_to_end = (
            selection_ok
            and args_ok_turn
            and schema_ok
            and seq_ok is not False
            and response_ok is not False
            and not forbidden
        )
        if end_to_end:
            why = self._reason_cache.get((id(exp), names)) or self._ok_reason(exp, names)
        else:
            why = reason(turn, exp, call_verdicts, best.missed, forbidden, seq_ok, response_ok, turnless=False)
        # fmt: off
        return _TURN(
            turn.agent, turn.trace_id, turn.span_id, text, True, False, exp.id, best.alternative, call_verdicts,
            best.missed, alt.expected_calls, alt.max_calls, selection_ok, args_ok_turn, schema_ok, seq_ok, seq_score,
            forbidden, response_ok, end_to_end, alt.max_calls is not None and len(names) > alt.max_calls,
            best.confusion, why, alt.expected_by_tool,
        )
        # fmt: on

    def _ok_reason(self, exp: Expectation, names: tuple[str, ...]) -> str:
        key = (id(exp), names)
        got = self._reason_cache.get(key)
        if got is None:
            got = reason(Turn(""), exp, (), (), (), None, None, turnless=False, called=names)
            if _cacheable(names):
                if len(self._reason_cache) >= MAX_CACHE:
                    self._reason_cache.clear()
                self._reason_cache[key] = got
        return got


def _counts(names: tuple[str, ...], in_catalog: tuple[bool, ...]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, known in zip(names, in_catalog, strict=True):
        if known:
            counts[name] = counts.get(name, 0) + 1
    return counts


def _sensitive(exp: Expectation, names: tuple[str, ...], in_catalog: tuple[bool, ...]) -> bool:
    """Whether argument scores can change the kept alternative's assignment (as `Judge._best` decides)."""
    counts = _counts(names, in_catalog)
    return any(score_sensitive(alt, counts) for alt in exp.alternatives)


def _forbidden(turn: Turn, names: Sequence[str], rules: Sequence[Forbid]) -> tuple[str, ...]:
    called = set(names)
    out: list[str] = []
    for f in rules:
        if f.tool in called and f.tool not in out and (f.unless is None or not holds(f.unless, turn)):
            out.append(f.tool)
    return tuple(out)
