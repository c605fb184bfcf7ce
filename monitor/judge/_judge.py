"""Judge: Turn -> TurnVerdict, exactly per METRICS.md. Pure and thread-safe after construction."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from monitor.judge import _args
from monitor.judge._catalog import Catalog
from monitor.judge._conditions import holds
from monitor.judge._outcomes import AltResult, evaluate
from monitor.judge._reason import reason
from monitor.judge._router import Router
from monitor.judge._sequence import sequence_score
from monitor.records import ToolCall, Turn
from monitor.rules import Expectation, RuleSet
from monitor.rules._model import Forbid
from monitor.verdict import ArgCheckResult, CallVerdict, Outcome, SchemaViolation, TurnVerdict, ViolationKind

CASE_ID_ATTRIBUTE = "toolwatch.case.id"
_NOT_CAPTURED: Any = object()
_MALFORMED: Any = object()


class _Scope:
    """What applies to turns of one agent: its router, forbid rules and tools."""

    __slots__ = ("router", "forbid", "tools", "agent")

    def __init__(
        self, agent: str | None, rules: Sequence[Expectation], forbid: Sequence[Forbid], tools: frozenset[str]
    ):
        self.agent = agent
        self.router = Router(rules)
        self.forbid = tuple(forbid)
        self.tools = tools


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
        self._all = _Scope(None, exps, [f for _, f in ruleset.forbid], every)
        self._other = _Scope(
            None,
            [e for e in exps if e.agent is None],
            [f for a, f in ruleset.forbid if a is None],
            every,
        )
        scoped = dict(ruleset.scoped_tools)
        self._scopes = {
            a: _Scope(
                a,
                [e for e in exps if e.agent in (None, a)],
                [f for s, f in ruleset.forbid if s in (None, a)],
                scoped.get(a, every),
            )
            for a in ruleset.agents
        }
        self._cases_by_id = dict(ruleset.cases_by_id)
        self._cases_by_input = dict(ruleset.cases_by_input)

    def _scope(self, agent: str) -> _Scope:
        if not agent:
            return self._all
        return self._scopes.get(agent, self._other)

    def expectation(self, turn: Turn) -> Expectation | None:
        """The expectation for a turn: its labelled case, else the first matching rule, else None."""
        scope = self._scope(turn.agent)
        if self._cases_by_id or self._cases_by_input:
            case = self._case(turn, scope)
            if case is not None:
                return case
        return scope.router.route(turn)

    def _case(self, turn: Turn, scope: _Scope) -> Expectation | None:
        cid = turn.case_id
        if cid is None:
            raw = turn.attributes.get(CASE_ID_ATTRIBUTE)
            cid = raw if isinstance(raw, str) else None
        exp = self._cases_by_id.get(cid) if cid is not None else None
        if exp is None:
            exp = self._cases_by_input.get(turn.input_text)
        if exp is not None and exp.agent is not None and scope.agent not in (None, exp.agent):
            return None
        return exp

    def judge(self, turn: Turn) -> TurnVerdict:
        scope = self._scope(turn.agent)
        calls = turn.calls
        tools = self._tools.for_turn(turn, scope.tools)
        names = [c.name for c in calls]
        in_catalog = [n in tools.names for n in names]
        parsed = [_parse(c) for c in calls]
        schema = [self._schema(tools, c.name, p, known) for c, p, known in zip(calls, parsed, in_catalog, strict=True)]
        if turn.turnless:
            return self._unjudged(turn, None, in_catalog, parsed, schema, (), turnless=True)
        exp = self.expectation(turn)
        forbidden = _forbidden(turn, names, scope.forbid + (exp.forbid if exp is not None else ()))
        if exp is None:
            return self._unjudged(turn, None, in_catalog, parsed, schema, forbidden, turnless=False)
        return self._judged(turn, exp, in_catalog, parsed, schema, forbidden)

    def _schema(
        self, tools: Any, name: str, parsed: Any, known: bool
    ) -> tuple[bool | None, tuple[SchemaViolation, ...]]:
        if not known or parsed is _NOT_CAPTURED:
            return None, ()
        validator = tools.validator(name)
        if validator is None:
            return None, ()
        if isinstance(parsed, _Malformed):
            return False, (SchemaViolation(ViolationKind.MALFORMED, "", parsed.message),)
        if validator.is_valid(parsed):
            return True, ()
        return False, validator.violations(parsed)

    def _unjudged(
        self,
        turn: Turn,
        exp: Expectation | None,
        in_catalog: Sequence[bool],
        parsed: Sequence[Any],
        schema: Sequence[tuple[bool | None, tuple[SchemaViolation, ...]]],
        forbidden: tuple[str, ...],
        *,
        turnless: bool,
    ) -> TurnVerdict:
        cvs = tuple(
            CallVerdict(
                index=i,
                name=c.name,
                call_id=c.call_id,
                outcome=Outcome.UNJUDGED if known else Outcome.HALLUCINATED,
                in_catalog=known,
                schema_valid=sv[0],
                violations=sv[1],
                arguments_captured=p is not _NOT_CAPTURED,
            )
            for i, (c, known, p, sv) in enumerate(zip(turn.calls, in_catalog, parsed, schema, strict=True))
        )
        return TurnVerdict(
            agent=turn.agent,
            trace_id=turn.trace_id,
            span_id=turn.span_id,
            input_text=turn.input_text,
            judged=False,
            turnless=turnless,
            rule=None,
            alternative=None,
            calls=cvs,
            missed=(),
            expected_calls=0,
            max_calls=None,
            selection_ok=None,
            args_ok=True,
            schema_ok=all(c.schema_valid is not False for c in cvs),
            sequence_ok=None,
            sequence_score=None,
            forbidden=forbidden,
            response_ok=None,
            end_to_end=None,
            over_calling=None,
            confusion=(),
            reason=reason(turn, None, cvs, (), forbidden, None, None, turnless=turnless),
        )

    def _judged(
        self,
        turn: Turn,
        exp: Expectation,
        in_catalog: Sequence[bool],
        parsed: Sequence[Any],
        schema: Sequence[tuple[bool | None, tuple[SchemaViolation, ...]]],
        forbidden: tuple[str, ...],
    ) -> TurnVerdict:
        calls = turn.calls
        names = [c.name for c in calls]
        text = turn.input_text
        best: AltResult | None = None
        for k, alt in enumerate(exp.alternatives):

            def passed(i: int, j: int, alt: Any = alt) -> int:
                return _args.score(alt.slots[j].checks, _arguments(parsed[i]), text)

            res = evaluate(k, alt, names, in_catalog, passed)
            if best is None or res.key() < best.key():
                best = res
        assert best is not None
        alt = exp.alternatives[best.alternative]
        cvs = []
        for i, c in enumerate(calls):
            slot = best.slots[i]
            args_ok: bool | None = None
            results: tuple[ArgCheckResult, ...] = ()
            p = parsed[i]
            if slot is not None and alt.slots[slot].checks and p is not _NOT_CAPTURED:
                results = _args.run_checks(alt.slots[slot].checks, _arguments(p), text)
                if isinstance(p, _Malformed):
                    bad = "<malformed arguments>"
                    results = tuple(ArgCheckResult(r.argument, r.mode, r.expected, bad, False) for r in results)
                args_ok = all(r.ok for r in results)
            cvs.append(
                CallVerdict(
                    index=i,
                    name=c.name,
                    call_id=c.call_id,
                    outcome=best.outcomes[i],
                    in_catalog=in_catalog[i],
                    slot=slot,
                    schema_valid=schema[i][0],
                    violations=schema[i][1],
                    args_ok=args_ok,
                    arg_results=results,
                    arguments_captured=p is not _NOT_CAPTURED,
                )
            )
        call_verdicts = tuple(cvs)
        selection_ok = best.errors == 0
        args_ok_turn = all(c.args_ok is not False for c in call_verdicts)
        schema_ok = all(c.schema_valid is not False for c in call_verdicts)
        seq_ok: bool | None = None
        seq_score: float | None = None
        if exp.order:
            seq_score = sequence_score(names, exp.order)
            seq_ok = all(sequence_score(names, (o,)) == 1.0 for o in exp.order)
        response_ok = _response(exp, turn.output_text)
        end_to_end = (
            selection_ok and args_ok_turn and schema_ok and seq_ok is not False and response_ok is not False
        ) and not forbidden
        return TurnVerdict(
            agent=turn.agent,
            trace_id=turn.trace_id,
            span_id=turn.span_id,
            input_text=turn.input_text,
            judged=True,
            turnless=False,
            rule=exp.id,
            alternative=best.alternative,
            calls=call_verdicts,
            missed=tuple(best.missed),
            expected_calls=alt.expected_calls,
            max_calls=alt.max_calls,
            selection_ok=selection_ok,
            args_ok=args_ok_turn,
            schema_ok=schema_ok,
            sequence_ok=seq_ok,
            sequence_score=seq_score,
            forbidden=forbidden,
            response_ok=response_ok,
            end_to_end=end_to_end,
            over_calling=alt.max_calls is not None and len(calls) > alt.max_calls,
            confusion=tuple(best.confusion),
            reason=reason(turn, exp, call_verdicts, best.missed, forbidden, seq_ok, response_ok, turnless=False),
            expected_by_tool=alt.expected_by_tool,
        )


class _Malformed:
    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def _parse(call: ToolCall) -> Any:
    if call.arguments is None:
        return _NOT_CAPTURED
    try:
        return json.loads(call.arguments)
    except (json.JSONDecodeError, RecursionError) as exc:
        pos = f" at {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        return _Malformed(f"arguments are not valid JSON: {msg}{pos}")


def _arguments(parsed: Any) -> Any:
    return None if parsed is _NOT_CAPTURED or isinstance(parsed, _Malformed) else parsed


def _forbidden(turn: Turn, names: Sequence[str], rules: Sequence[Forbid]) -> tuple[str, ...]:
    if not rules or not names:
        return ()
    called = set(names)
    out: list[str] = []
    for f in rules:
        if f.tool in called and f.tool not in out and (f.unless is None or not holds(f.unless, turn)):
            out.append(f.tool)
    return tuple(out)


def _response(exp: Expectation, output: str | None) -> bool | None:
    if not exp.respond or output is None:
        return None
    for r in exp.respond:
        if r.contains is not None and r.contains not in output:
            return False
        if r.regex is not None and r.regex.search(output) is None:
            return False
    return True


def definitions_schema(definition: Mapping[str, Any]) -> Any:
    """The `parameters` of a tool definition ({name, parameters} or OpenAI's {function: {...}})."""
    fn = definition.get("function")
    if isinstance(fn, Mapping):
        return fn.get("parameters")
    return definition.get("parameters")
