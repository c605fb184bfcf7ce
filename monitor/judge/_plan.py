"""Plans: the judge's straight-line path for the common turn (no call, one call, or a few calls).

Everything about a turn that does not depend on its argument values or texts follows from its scope, its
expectation and its call names: the slot and outcome of each call, what is missed, the confusion pairs, the
sequence check, the forbidden tools, the checks to run and the reasons of the usual verdicts. A plan holds
all that, worked out once by the general path's own functions, in a closure (constants in cells are cheaper
to read than attributes). Run on a turn it parses and checks what is left and builds the verdict (arguments that
are not JSON included), or returns None when the turn needs the general path (arguments not captured, or JSON with
whitespace around it).

When the C extension monitor.judge._cplan is loaded (see monitor.otlp._accel.load_extension), `no_call` and
`one_call` return its Plan: the same closure's values and the closure itself, which it calls for anything
unusual; the closures stay the reference and the fallback (no C compiler, TOOLWATCH_PURE_PYTHON=1).

Plans of no call and one call are built only when the assignment does not depend on argument scores; plans of
several calls (`several_calls`, Python only) also when it does: they keep the assignment per argument scores. All
need the forbidden tools not to depend on the turn (no `unless` among the forbid rules of the called tools);
otherwise the plan is `general`, which sends every turn to the general path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from monitor._json import PLAIN_CHARS
from monitor.judge._args import MISSING, malformed_results, run_checks, slot_checks
from monitor.judge._args import score as score_checks
from monitor.judge._outcomes import AltResult
from monitor.judge._parse import Malformed, parse_arguments, schema_result
from monitor.judge._reason import reason
from monitor.judge._schema import SchemaValidator
from monitor.otlp._accel import load_extension
from monitor.records import ToolCall, Turn
from monitor.rules import Expectation
from monitor.rules._model import ArgCheck, Regex, Respond
from monitor.verdict import ArgCheckResult, CallVerdict, MissedUnit, TurnVerdict

Plan = Callable[[Turn], TurnVerdict | None]
_CALL = CallVerdict  # positional, in field order
_TURN = TurnVerdict  # positional, in field order
_RESULT = ArgCheckResult


# Patterns that match exactly one character (RE2's Perl classes): an unanchored search finds one iff some
# character of the text is in the class.
_CLASSES = frozenset({r"\d", r"\D", r"\s", r"\S", r"\w", r"\W"})


def ascii_misses(regex: Regex) -> str | None:
    """For a one-character class pattern, the ASCII characters RE2 finds no match in (asked of RE2 itself,
    once): an ASCII text then matches iff `text.strip(misses)` is not empty. None for any other pattern."""
    if regex.pattern not in _CLASSES:
        return None
    return "".join(chr(b) for b in range(128) if not regex.matcher(bytes((b,))))


def c_namespace() -> dict[str, object]:
    """What _cplan.init() takes: the Python helpers it calls and the record classes it builds."""
    helpers = {"MISSING": MISSING, "schema_result": schema_result, "run_checks": run_checks, "reason": reason,
               "JSON_PLAIN_CHARS": PLAIN_CHARS}  # longer arguments: the Python plan (parsed within a budget)
    classes = {"Turn": Turn, "ToolCall": ToolCall, "TurnVerdict": TurnVerdict, "CallVerdict": CallVerdict}
    return helpers | classes | {"ArgCheckResult": ArgCheckResult}


def _load_c() -> Any:
    """The C plans' module (monitor/judge/_cplan.c), or None when it is not loaded (see load_extension)."""
    return load_extension("monitor.judge._cplan", c_namespace())


_C = _load_c()


def general(turn: Turn) -> None:
    """The plan of turns that always take the general path."""
    return None


def _respond_check(respond: tuple[Respond, ...]) -> Callable[[str], bool]:
    """Whether an output passes every response check (as the general path: in order, first failure stops)."""
    checks = tuple((r.contains, r.regex.matcher if r.regex is not None else None) for r in respond)

    def passes(output: str) -> bool:
        data = None
        for contains, matcher in checks:
            if contains is not None and contains not in output:
                return False
            if matcher is not None:
                if data is None:
                    data = output.encode("utf-8", "surrogatepass")
                if not matcher(data):
                    return False
        return True

    return passes


def _single_regex(respond: tuple[Respond, ...]) -> Any:
    """The matcher of the one response check when it is a lone regex, else None."""
    if len(respond) == 1 and respond[0].contains is None and respond[0].regex is not None:
        return respond[0].regex.matcher
    return None


_Cells = tuple[
    str,  # rule
    int,  # alternative
    tuple[MissedUnit, ...],  # missed
    int,  # expected_calls
    int | None,  # max_calls
    bool,  # selection_ok
    bool | None,  # seq_ok
    float | None,  # seq_score
    bool,  # over_calling
    tuple[tuple[str, str], ...],  # confusion
    tuple[tuple[str, int], ...],  # expected_by_tool
    bool,  # e2e (of the names: selection, sequence, forbidden)
    tuple[Respond, ...],  # respond
    Any,  # resp_one: the lone response regex's matcher, or None
    Callable[[str], bool],  # resp_all
]


class _Fixed:
    """What a plan's verdicts share (TurnVerdict fields that do not depend on the turn's values)."""

    def __init__(
        self,
        exp: Expectation,
        best: AltResult,
        names: tuple[str, ...],
        forbidden: tuple[str, ...],
        seq: tuple[bool | None, float | None],
        ok_reason: str,
    ) -> None:
        alt = exp.alternatives[best.alternative]
        self.rule = exp.id
        self.alternative = best.alternative
        self.missed = best.missed
        self.expected_calls = alt.expected_calls
        self.max_calls = alt.max_calls
        self.selection_ok = best.errors == 0
        self.seq_ok, self.seq_score = seq
        self.forbidden = forbidden
        self.over_calling = alt.max_calls is not None and len(names) > alt.max_calls
        self.confusion = best.confusion
        self.expected_by_tool = alt.expected_by_tool
        self.e2e = self.selection_ok and self.seq_ok is not False and not forbidden
        self.ok_reason = ok_reason
        self.respond = exp.respond
        self.resp_one = _single_regex(exp.respond)
        self.resp_all = _respond_check(exp.respond)

    def cells(self) -> _Cells:
        """The fields a plan's closure reads, in the order plans unpack them into locals (cells read faster than
        attributes)."""
        # fmt: off
        return (
            self.rule, self.alternative, self.missed, self.expected_calls, self.max_calls, self.selection_ok,
            self.seq_ok, self.seq_score, self.over_calling, self.confusion, self.expected_by_tool, self.e2e,
            self.respond, self.resp_one, self.resp_all,
        )
        # fmt: on


def _reasons(exp: Expectation, fixed: _Fixed, calls: tuple[CallVerdict, ...], ok_reason: str) -> tuple[str, str]:
    """(reason when the response checks pass or do not apply, reason when they fail), for turns whose
    arguments pass their schema and checks: the reason then depends on the names alone."""
    missed, forbidden, seq_ok = fixed.missed, fixed.forbidden, fixed.seq_ok
    if fixed.e2e:
        passed = ok_reason
    else:
        passed = reason(Turn(""), exp, calls, missed, forbidden, seq_ok, True, turnless=False)
    failed = reason(Turn(""), exp, calls, missed, forbidden, seq_ok, False, turnless=False)
    return passed, failed


def no_call(exp: Expectation, best: AltResult, forbidden: tuple[str, ...], seq: Any, ok_reason: str) -> Plan:
    """The plan of turns without tool calls."""
    f = _Fixed(exp, best, (), forbidden, seq, ok_reason)
    why_passed, why_failed = _reasons(exp, f, (), ok_reason)
    # fmt: off
    (rule, alternative, missed, expected_calls, max_calls, selection_ok, seq_ok, seq_score, over_calling, confusion,
     expected_by_tool, e2e_names, respond, resp_one, resp_all) = f.cells()
    # fmt: on

    def run(turn: Turn) -> TurnVerdict:
        output = turn.output_text
        response_ok: bool | None = None
        e2e, why = e2e_names, why_passed
        if respond and output is not None:
            if resp_one is not None:
                response_ok = True if resp_one(output.encode("utf-8", "surrogatepass")) else False  # noqa: SIM210
            else:
                response_ok = resp_all(output)
            if not response_ok:
                e2e, why = False, why_failed
        # fmt: off
        return _TURN(
            turn.agent, turn.trace_id, turn.span_id, turn.input_text, True, False, rule, alternative, (), missed,
            expected_calls, max_calls, selection_ok, True, True, seq_ok, seq_score, forbidden, response_ok, e2e,
            over_calling, confusion, why, expected_by_tool,
        )
        # fmt: on

    if _C is None:
        return run
    # fmt: off
    fixed = (
        exp, rule, alternative, missed, expected_calls, max_calls, selection_ok, seq_ok, seq_score, forbidden,
        over_calling, confusion, expected_by_tool, e2e_names, why_passed, why_failed, respond, resp_one, resp_all,
    )
    # fmt: on
    return cast(Plan, _C.Plan(run, fixed))


def one_call(  # noqa: C901 - the closure's straight line is the point
    exp: Expectation,
    best: AltResult,
    name: str,
    known: bool,
    validator: SchemaValidator | None,
    checks: tuple[ArgCheck, ...],
    forbidden: tuple[str, ...],
    seq: Any,
    ok_reason: str,
    scan: Any,
) -> Plan:
    """The plan of turns with one tool call `name` (`checks`: those of the slot it fills, if any)."""
    f = _Fixed(exp, best, (name,), forbidden, seq, ok_reason)
    outcome = best.outcomes[0]
    slot = best.slots[0]
    if slot is None:
        checks = ()
    named = (_CALL(0, name, "", outcome, known, slot, None, (), None, (), True),)  # what the reasons read
    why_passed, why_failed = _reasons(exp, f, named, ok_reason)
    fast = validator.fast if validator is not None else None
    regex1 = len(checks) == 1 and checks[0].mode == "regex" and checks[0].regex is not None
    arg = checks[0].argument if checks else ""
    expected: Any = checks[0].expected if checks else None  # a regex check's pattern text
    arg_regex = checks[0].regex if regex1 else None
    arg_matcher = arg_regex.matcher if arg_regex is not None else None
    misses = ascii_misses(arg_regex) if arg_regex is not None else None
    # fmt: off
    (rule, alternative, missed, expected_calls, max_calls, selection_ok, seq_ok, seq_score, over_calling, confusion,
     expected_by_tool, e2e_names, respond, resp_one, resp_all) = f.cells()
    # fmt: on

    def run(turn: Turn) -> TurnVerdict | None:  # noqa: C901 - one flat pass: calls cost more than checks
        c = turn.calls[0]
        text = c.arguments
        if text is None:
            return None  # not captured: the general path
        try:  # a text past PLAIN_CHARS: parse_arguments parses it within its budget
            p, end = scan(text, 0) if len(text) <= PLAIN_CHARS else (None, -1)
        except (StopIteration, ValueError, RecursionError):
            end = -1
        bad = end != len(text)  # not JSON (judged here, as the general path judges it), or whitespace around it
        if bad:
            p = parse_arguments(text)
            if type(p) is not Malformed:
                return None  # JSON after all: the general path
        valid: bool | None = None
        violations: Any = ()
        if bad:
            valid, violations = schema_result(validator, p)  # (None, ()) without a schema
        elif validator is not None:
            try:
                accepted = fast is not None and type(p) is dict and fast.is_valid(p)
            except Exception:  # noqa: BLE001 - values the fast validator cannot convert: ask the reference
                accepted = False
            if accepted:
                valid = True
            else:
                valid, violations = schema_result(validator, p, True)
        args_ok: bool | None = None
        results: Any = ()
        if checks and bad:
            results = malformed_results(checks, turn.input_text)
            args_ok = False
        elif checks:
            actual = p.get(arg, MISSING) if type(p) is dict else MISSING
            if arg_matcher is not None and type(actual) is str:
                if misses is not None and actual.isascii():
                    args_ok = actual.strip(misses) != ""
                else:
                    args_ok = True if arg_matcher(actual.encode("utf-8", "surrogatepass")) else False  # noqa: SIM210
                results = (_RESULT(arg, "regex", expected, actual, args_ok),)
            else:
                results = run_checks(checks, p, turn.input_text)
                args_ok = results[0].ok if len(results) == 1 else all(r.ok for r in results)
        output = turn.output_text
        response_ok: bool | None = None
        if respond and output is not None:
            if resp_one is not None:
                response_ok = True if resp_one(output.encode("utf-8", "surrogatepass")) else False  # noqa: SIM210
            else:
                response_ok = resp_all(output)
        cvs = (_CALL(0, c.name, c.call_id, outcome, known, slot, valid, violations, args_ok, results, True),)
        if args_ok is not False and valid is not False:
            if response_ok is False:
                e2e, why = False, why_failed
            else:
                e2e, why = e2e_names, why_passed
        else:
            e2e = False
            why = reason(turn, exp, cvs, missed, forbidden, seq_ok, response_ok, turnless=False)
        # fmt: off
        return _TURN(
            turn.agent, turn.trace_id, turn.span_id, turn.input_text, True, False, rule, alternative, cvs, missed,
            expected_calls, max_calls, selection_ok, args_ok is not False, valid is not False, seq_ok, seq_score,
            forbidden, response_ok, e2e, over_calling, confusion, why, expected_by_tool,
        )
        # fmt: on

    if _C is None:
        return run
    # fmt: off
    fixed = (
        exp, rule, alternative, missed, expected_calls, max_calls, selection_ok, seq_ok, seq_score, forbidden,
        over_calling, confusion, expected_by_tool, e2e_names, why_passed, why_failed, respond, resp_one, resp_all,
    )
    flat = validator.flat if validator is not None else None
    call = (outcome, known, slot, validator, fast, flat, checks, arg, expected, arg_matcher, misses, scan)
    # fmt: on
    return cast(Plan, _C.Plan(run, fixed, call))


_Variant = tuple[
    AltResult,  # best: the assignment the rest follows from
    _Cells,
    tuple[tuple[Any, int | None, tuple[ArgCheck, ...], Any], ...],  # per call: (outcome, slot, checks, one regex)
    str,  # why_passed
    str,  # why_failed
]
# One regex check on an argument, answered without run_checks: (argument, pattern text, matcher, ascii_misses)
_OneRegex = tuple[str, Any, Any, str | None]


def _one_regex(checks: tuple[ArgCheck, ...]) -> _OneRegex | None:
    """For a slot's checks that are one regex check, what answers it on a str value (else None)."""
    if len(checks) != 1 or checks[0].mode != "regex" or checks[0].regex is None:
        return None
    c = checks[0]
    assert c.regex is not None
    return c.argument, c.expected, c.regex.matcher, ascii_misses(c.regex)


def _variant(
    exp: Expectation,
    best: AltResult,
    names: tuple[str, ...],
    in_catalog: tuple[bool, ...],
    forbidden: tuple[str, ...],
    seq: Any,
    ok_reason: str,
) -> _Variant:
    """What a several-call plan's verdicts share for one assignment `best`."""
    f = _Fixed(exp, best, names, forbidden, seq, ok_reason)
    alt = exp.alternatives[best.alternative]
    per_call = []
    for i, slot in enumerate(best.slots):
        checks = alt.slots[slot].checks if slot is not None else ()
        per_call.append((best.outcomes[i], slot, checks, _one_regex(checks)))
    # fmt: off
    named = tuple(
        _CALL(i, name, "", call[0], known, call[1], None, (), None, (), True)
        for i, (name, known, call) in enumerate(zip(names, in_catalog, per_call, strict=True))
    )  # what the reasons read
    # fmt: on
    why_passed, why_failed = _reasons(exp, f, named, ok_reason)
    return best, f.cells(), tuple(per_call), why_passed, why_failed


MAX_VARIANTS = 64  # assignments a score-dependent plan keeps (as Judge keeps per scores read: _Scored.MAX_RESULTS)
Asks = tuple[tuple[int, int, int], ...]  # (alternative, call, slot): the scores Judge._best reads, in order


def several_calls(  # noqa: C901 - the closure's straight line is the point
    exp: Expectation,
    names: tuple[str, ...],
    in_catalog: tuple[bool, ...],
    validators: tuple[SchemaValidator | None, ...],
    best: AltResult | None,
    best_of: Callable[[list[Any], str], AltResult],
    asks_of: Callable[[], Asks | None],
    kept: Callable[[], None],
    forbidden: tuple[str, ...],
    seq: Any,
    ok_reason: str,
    parse_call: Callable[[str | None, SchemaValidator | None], tuple[Any, Any]],
    not_captured: Any,
) -> Plan:
    """The plan of turns with the tool calls `names` (two or more), in that order.

    `best` is the assignment when it does not depend on the arguments. When it does (None), it depends on the
    argument scores Judge._best reads: always the same ones for these names (`asks_of()`, known once `best_of` has
    kept them). The plan computes those scores as Judge._best does and keeps what follows from the assignment per
    scores; scores it has not seen, or asks not kept, go to `best_of(parsed, text)` (Judge._best itself). `kept()`
    is told of each assignment kept (at most MAX_VARIANTS per plan; the judge bounds them in all).
    Each call's arguments are parsed and checked against its tool's schema by `parse_call` (the general path's);
    the checks of the slot it fills run on them."""
    fixed = _variant(exp, best, names, in_catalog, forbidden, seq, ok_reason) if best is not None else None
    by_id: dict[int, _Variant] = {}  # id(assignment) -> what follows from it (the assignment held in it)
    by_scores: dict[tuple[int, ...], _Variant] = {}  # the scores read -> what follows from the assignment
    # The asks, each with its call, its checks and their one regex (if so), once known (a list: set on first use).
    asked: list[tuple[tuple[int, tuple[ArgCheck, ...], _OneRegex | None], ...]] = []
    # Set when Judge._best keeps no asks for these names (it reads more scores than it keeps; always so for them):
    # no assignment can be reused, so every turn goes to the general path (a new one per turn would be counted by
    # `kept()` each time, and drop every plan of the judge every MAX_CACHE turns).
    unkept: list[bool] = []
    missing = MISSING

    def variant_of(got: AltResult) -> _Variant:
        held = by_id.get(id(got))
        if held is not None and held[0] is got:
            return held
        v = _variant(exp, got, names, in_catalog, forbidden, seq, ok_reason)
        if len(by_id) >= MAX_VARIANTS:
            by_id.clear()
        by_id[id(got)] = v
        kept()
        return v

    def score(i: int, checks: tuple[ArgCheck, ...], one: _OneRegex | None, p: Any, text: str) -> int:
        """Judge._best's score of call i (parsed `p`) in a slot with `checks`."""
        if p is not_captured:
            return 2 * len(checks) - 1
        if type(p) is Malformed:  # every check fails (as slot_checks says), "" in a one_of too
            return 0
        if one is not None and type(p) is dict:
            actual = p.get(one[0], missing)
            if type(actual) is str:
                misses = one[3]
                if misses is not None and actual.isascii():
                    return 2 if actual.strip(misses) != "" else 0
                return 2 if one[2](actual.encode("utf-8", "surrogatepass")) else 0
        return 2 * score_checks(checks, p, text)

    def run(turn: Turn) -> TurnVerdict | None:  # noqa: C901 - one flat pass: calls cost more than checks
        if unkept:
            return None
        calls = turn.calls
        text = turn.input_text
        parsed: list[Any] = []
        schema: list[Any] = []
        for c, validator in zip(calls, validators, strict=True):
            p, checked = parse_call(c.arguments, validator)
            parsed.append(p)
            schema.append(checked)
        if fixed is not None:
            v = fixed
        elif asked:
            scores = tuple([score(i, checks, one, parsed[i], text) for i, checks, one in asked[0]])
            got_v = by_scores.get(scores)
            if got_v is None:
                got_v = variant_of(best_of(parsed, text))
                if len(by_scores) >= MAX_VARIANTS:
                    by_scores.clear()
                by_scores[scores] = got_v
                kept()
            v = got_v
        else:
            v = variant_of(best_of(parsed, text))
            asks = asks_of()
            if asks is not None:
                slots = [(i, exp.alternatives[k].slots[j].checks) for k, i, j in asks]
                asked.append(tuple((i, checks, _one_regex(checks)) for i, checks in slots))
            else:
                unkept.append(True)
        _, cells, per_call, why_passed, why_failed = v
        # fmt: off
        (rule, alternative, missed, expected_calls, max_calls, selection_ok, seq_ok, seq_score, over_calling, confusion,
         expected_by_tool, e2e_names, respond, resp_one, resp_all) = cells
        # fmt: on
        cvs = []
        args_ok_turn = schema_ok = True
        for i, c in enumerate(calls):
            outcome, slot, checks, one = per_call[i]
            p = parsed[i]
            args_ok: bool | None = None
            results: Any = ()
            if checks and p is not not_captured:
                actual = p.get(one[0], missing) if one is not None and type(p) is dict else missing
                if type(actual) is str:
                    assert one is not None
                    misses = one[3]
                    if misses is not None and actual.isascii():
                        args_ok = actual.strip(misses) != ""
                    else:
                        args_ok = True if one[2](actual.encode("utf-8", "surrogatepass")) else False  # noqa: SIM210
                    results = (_RESULT(one[0], "regex", one[1], actual, args_ok),)
                else:
                    results, args_ok = slot_checks(checks, p, text)
                if not args_ok:
                    args_ok_turn = False
            valid, violations = schema[i]
            if valid is False:
                schema_ok = False
            cvs.append(
                _CALL(i, c.name, c.call_id, outcome, in_catalog[i], slot, valid, violations, args_ok, results,
                      p is not not_captured)
            )  # fmt: skip
        call_verdicts = tuple(cvs)
        output = turn.output_text
        response_ok: bool | None = None
        if respond and output is not None:
            if resp_one is not None:
                response_ok = True if resp_one(output.encode("utf-8", "surrogatepass")) else False  # noqa: SIM210
            else:
                response_ok = resp_all(output)
        if args_ok_turn and schema_ok:
            if response_ok is False:
                e2e, why = False, why_failed
            else:
                e2e, why = e2e_names, why_passed
        else:
            e2e = False
            why = reason(turn, exp, call_verdicts, missed, forbidden, seq_ok, response_ok, turnless=False)
        # fmt: off
        return _TURN(
            turn.agent, turn.trace_id, turn.span_id, text, True, False, rule, alternative, call_verdicts, missed,
            expected_calls, max_calls, selection_ok, args_ok_turn, schema_ok, seq_ok, seq_score, forbidden,
            response_ok, e2e, over_calling, confusion, why, expected_by_tool,
        )
        # fmt: on

    return run
