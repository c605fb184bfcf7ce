"""The one-line human reason of a verdict."""

from __future__ import annotations

from collections.abc import Sequence

from monitor._text import elide
from monitor.judge._args import no_match_text
from monitor.records import RequestedCall, Turn
from monitor.rules import Expectation
from monitor.rules._describe import pattern_text
from monitor.verdict import ArgCheckResult, CallVerdict, MissedUnit, Outcome, TurnVerdict

MAX_REASON = 300


def reason(
    turn: Turn,
    exp: Expectation | None,
    calls: Sequence[CallVerdict],
    missed: Sequence[MissedUnit],
    forbidden: Sequence[str],
    sequence_ok: bool | None,
    response_ok: bool | None,
    *,
    turnless: bool,
    called: Sequence[str] | None = None,
) -> str:
    problems: list[str] = []
    wrong = [c.name for c in calls if c.outcome is Outcome.WRONG_TOOL]
    for k, unit in enumerate(missed):
        problems.append(f"called {wrong[k]} instead of {unit.tool}" if k < len(wrong) else f"missed {unit.tool}")
    for c in calls:
        if c.outcome is Outcome.SPURIOUS:
            problems.append(f"extra call {c.name}")
        elif c.outcome is Outcome.HALLUCINATED:
            problems.append(f"unknown tool {c.name!r}")
        if c.schema_valid is False:
            kinds = ",".join(sorted({v.kind.value for v in c.violations}))
            problems.append(f"{c.name} arguments invalid ({kinds})")
        for r in c.arg_results:
            if not r.ok:
                problems.append(f"{c.name}.{r.argument} {r.mode}: expected {_expected(r)}, got {r.actual!r}")
    problems.extend(f"forbidden tool {t} called" for t in forbidden)
    if sequence_ok is False:
        problems.append("call order not as expected")
    if response_ok is False:
        problems.append(_response_problem(exp))
    if turnless:
        head = f"turnless: {len(calls)} call(s), catalog and schema checks only"
    elif exp is None:
        head = f"unjudged: no rule matches ({len(calls)} call(s))"
    elif not problems:
        names = called if called is not None else [c.name for c in calls]
        return _cut(f"ok ({exp.id}): {', '.join(names) or 'no tool'}")
    else:
        head = f"failed ({exp.id})"
    return _cut(f"{head}: {'; '.join(problems)}" if problems else head)


def _expected(r: ArgCheckResult) -> str:
    """What a failed argument check expected: a pattern as written (repr would double its backslashes, which reads as
    a YAML mistake), a value as Python shows it."""
    if r.mode == "regex":
        return pattern_text(r.expected)
    if r.mode == "from_input" and no_match_text(r.expected):
        return r.expected
    return repr(r.expected)


def note_requested(turn: Turn, v: TurnVerdict) -> None:
    """Name in the reason of `v` the calls of `turn` the model requested that never ran (RequestedCall), when some
    call of the turn ran: without any, the agent's tools may not be instrumented, and "not run" would not be known."""
    requested = [c.name for c in turn.calls if isinstance(c, RequestedCall)]
    if requested and len(requested) < len(turn.calls):
        # The note ends the reason, within the bound: the reason before it is cut to make room (at most half of it).
        note = " ".join(f"; requested, not run: {', '.join(requested)}".split())
        if len(note) > MAX_REASON // 2:
            note = note[: MAX_REASON // 2 - 3] + "..."
        head = v.reason
        room = MAX_REASON - len(note)
        v.reason = (head if len(head) <= room else head[: room - 3] + "...") + note


def _response_problem(exp: Expectation | None) -> str:
    """Which response check failed, when the rule has one. With several, which ones fail depends on the output, and
    the reason of a plan is made before any output is seen: it says that one failed, of how many (the general path
    says the same, the plan differential tests compare them)."""
    checks = exp.respond if exp is not None else ()
    if len(checks) != 1:
        return f"a response check failed (of {len(checks)})" if checks else "response check failed"
    r = checks[0]
    if r.description:
        what = r.description
    elif r.contains is not None:
        what = f"contains {r.contains!r}"
    else:
        what = f"regex {pattern_text(r.regex.pattern)}" if r.regex is not None else "check"
    return f"response check failed: {what}"


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return elide(text, MAX_REASON)
