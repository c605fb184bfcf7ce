"""An independent oracle of METRICS.md: turns -> per-call outcomes and per-turn checks -> every figure.

Written from METRICS.md alone (it imports nothing of the judge, the tally or the metrics): the assignment is
found by trying every assignment of calls to slots (turns here are small), schemas are checked with `jsonschema`
directly. Where METRICS.md leaves a point open, the reading taken is said where it is used.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from tests.monitor.oracle.spec import Rule, Slot, Spec

NONE = "(none)"
UNKNOWN = "(unknown)"
OTHER = "__other__"
NOT_CAPTURED = object()
MALFORMED = object()


@dataclass(frozen=True)
class OCall:
    name: str
    arguments: str | None  # JSON text as captured; None: content capture off


@dataclass(frozen=True)
class OTurn:
    agent: str
    input_text: str
    calls: tuple[OCall, ...] = ()
    output: str | None = None
    offered: tuple[str, ...] = ()  # gen_ai.tool.definitions names
    turnless: bool = False


@dataclass
class CallResult:
    name: str
    outcome: str
    in_catalog: bool
    schema_valid: bool | None
    kinds: frozenset[str]
    args_ok: bool | None = None


@dataclass
class TurnResult:
    agent: str
    judged: bool
    turnless: bool
    calls: list[CallResult]
    rule: str | None = None
    missed: list[str] = field(default_factory=list)  # tool of each missing unit
    expected_by_tool: Counter[str] = field(default_factory=Counter)
    max_calls: int | None = None
    selection_ok: bool | None = None
    args_ok: bool = True
    schema_ok: bool = True
    seq_ok: bool | None = None
    seq_score: float | None = None
    forbidden: frozenset[str] = frozenset()
    response_ok: bool | None = None
    end_to_end: bool | None = None
    over_calling: bool | None = None
    confusion: list[tuple[str, str]] = field(default_factory=list)


def _parse(text: str | None) -> Any:
    if text is None:
        return NOT_CAPTURED
    try:
        return json.loads(text)
    except ValueError:
        return MALFORMED


_KIND = {"type": "type", "required": "required", "additionalProperties": "additional", "enum": "enum"}


def _schema(schema: dict[str, Any] | None, value: Any) -> tuple[bool | None, frozenset[str]]:
    """Schema adherence of one call. Reading: a call whose arguments were not captured is not checked (METRICS.md
    says so for argument checks only; the schema cannot be checked without the arguments either)."""
    if schema is None or value is NOT_CAPTURED:
        return None, frozenset()
    if value is MALFORMED:
        return False, frozenset({"malformed"})
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
    return (not errors), frozenset(_KIND.get(str(e.validator), "other") for e in errors)


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def _arg_share(slot: Slot, value: Any) -> float:
    """The share of the slot's checks that pass. Reading (METRICS.md gives no score to uncaptured arguments): an
    uncaptured call ranks just below one passing every check, above any failure."""
    if not slot.args:
        return 1.0
    n = len(slot.args)
    if value is NOT_CAPTURED:
        return (n - 0.5) / n
    if not isinstance(value, dict):
        return 0.0
    return sum(1 for k, v in slot.args if k in value and value[k] == v) / n


@dataclass
class _Alt:
    index: int
    assign: list[int | None]
    missed: list[int]  # slot index of each missing unit, slots in file order
    outcomes: list[str]
    confusion: list[tuple[str, str]]
    correct: int
    errors: int


def _best_assignment(
    slots: Sequence[Slot], names: Sequence[str], known: Sequence[bool], values: Sequence[Any]
) -> list[int | None]:
    """Every assignment tried; kept: the most assigned calls, then slot minimums met, then argument score, then the
    earlier call in the earlier slot."""
    choices = [
        [None, *(j for j, s in enumerate(slots) if s.tool == name)] if k else [None]
        for name, k in zip(names, known, strict=True)
    ]
    best: tuple[Any, ...] | None = None
    kept: list[int | None] = [None] * len(names)
    for combo in itertools.product(*choices):
        fill = Counter(j for j in combo if j is not None)
        if any(s.max is not None and fill[j] > s.max for j, s in enumerate(slots)):
            continue
        assigned = sum(fill.values())
        mins_met = sum(1 for j, s in enumerate(slots) if fill[j] >= s.min)
        score = sum(_arg_share(slots[j], values[i]) for i, j in enumerate(combo) if j is not None)
        order = tuple(len(slots) if j is None else j for j in combo)
        key = (assigned, mins_met, round(score, 9), tuple(-x for x in order))
        if best is None or key > best:
            best, kept = key, list(combo)
    return kept


def _alternative(
    index: int, slots: Sequence[Slot], names: Sequence[str], known: Sequence[bool], values: Sequence[Any]
) -> _Alt:
    assign = _best_assignment(slots, names, known, values)
    fill = Counter(j for j in assign if j is not None)
    missed = [j for j, s in enumerate(slots) for _ in range(max(0, s.min - fill[j]))]
    outcomes: list[str] = []
    confusion: list[tuple[str, str]] = []
    unit = 0
    for i, name in enumerate(names):
        if not known[i]:
            outcomes.append("hallucinated")
        elif assign[i] is not None:
            outcomes.append("correct")
            confusion.append((name, name))
        elif unit < len(missed):
            outcomes.append("wrong_tool")
            confusion.append((slots[missed[unit]].tool, name))
            unit += 1
        else:
            outcomes.append("spurious")
            confusion.append((NONE, name))
    for i in range(len(names)):
        if not known[i]:
            if unit < len(missed):
                confusion.append((slots[missed[unit]].tool, UNKNOWN))
                unit += 1
            else:
                confusion.append((NONE, UNKNOWN))
    confusion.extend((slots[j].tool, NONE) for j in missed[unit:])
    if not slots and not names:
        confusion.append((NONE, NONE))
    correct = outcomes.count("correct")
    return _Alt(index, assign, missed, outcomes, confusion, correct, len(outcomes) - correct + len(missed))


def _route(spec: Spec, turn: OTurn) -> Rule | None:
    for r in spec.rules_for(turn.agent):
        if turn.input_text.lstrip().startswith(r.prefix):
            return r
    return None


def judge(spec: Spec, turn: OTurn) -> TurnResult:
    catalog = set(spec.tools) | (set(turn.offered) if spec.from_definitions else set())
    names = [c.name for c in turn.calls]
    known = [n in catalog for n in names]
    values = [_parse(c.arguments) for c in turn.calls]
    calls = []
    for c, k, v in zip(turn.calls, known, values, strict=True):
        valid, kinds = _schema(spec.tools.get(c.name) if k else None, v)
        calls.append(CallResult(c.name, "unjudged" if k else "hallucinated", k, valid, kinds))
    rule = None if turn.turnless else _route(spec, turn)
    out = TurnResult(turn.agent, rule is not None, turn.turnless, calls)
    out.schema_ok = all(c.schema_valid is not False for c in calls)
    if not turn.turnless:
        out.forbidden = frozenset(
            f.tool for f in spec.forbid
            if f.tool in names and not (f.unless_contains and f.unless_contains in turn.input_text)
        )
    if rule is None:
        return out
    alts = [_alternative(i, slots, names, known, values) for i, slots in enumerate(rule.alternatives)]
    best = min(alts, key=lambda a: (-a.correct, a.errors, a.index))
    slots = rule.alternatives[best.index]
    out.rule = rule.id
    out.missed = [slots[j].tool for j in best.missed]
    for s in slots:
        out.expected_by_tool[s.tool] += s.min
    maxes = [s.max for s in slots]
    out.max_calls = None if any(m is None for m in maxes) else sum(m for m in maxes if m is not None)
    for cr, outcome, j, v in zip(calls, best.outcomes, best.assign, values, strict=True):
        cr.outcome = outcome
        if j is not None and slots[j].args and v is not NOT_CAPTURED:
            cr.args_ok = isinstance(v, dict) and all(k in v and v[k] == x for k, x in slots[j].args)
    out.confusion = best.confusion
    out.selection_ok = best.errors == 0
    out.args_ok = all(c.args_ok is not False for c in calls)
    if rule.orders:
        held = [_lcs(names, o) == len(o) for o in rule.orders]
        out.seq_ok = all(held)
        out.seq_score = sum(_lcs(names, o) / len(o) for o in rule.orders) / len(rule.orders)
    if rule.respond_contains is not None and turn.output is not None:
        # Reading: no output text captured (content capture off) leaves the response unchecked, as arguments.
        out.response_ok = rule.respond_contains in turn.output
    out.end_to_end = bool(
        out.selection_ok and out.args_ok and out.schema_ok and out.seq_ok is not False
        and out.response_ok is not False and not out.forbidden
    )
    out.over_calling = out.max_calls is not None and len(names) > out.max_calls
    return out


# ---- aggregates -----------------------------------------------------------------------------------------------


def _ratio(num: float, den: float) -> float | None:
    return None if den == 0 else num / den


def figures(results: Iterable[TurnResult]) -> dict[str, float | None]:
    """METRICS.md, "Aggregates"."""
    rs = list(results)
    judged = [r for r in rs if r.judged]
    judged_calls = [c for r in judged for c in r.calls]
    all_calls = [c for r in rs for c in r.calls]
    outcome = Counter(c.outcome for c in judged_calls)
    args_checked = [c for c in all_calls if c.args_ok is not None]
    schema_checked = [c for c in all_calls if c.schema_valid is not None]
    seq = [r.seq_score for r in judged if r.seq_score is not None]
    resp = [r for r in judged if r.response_ok is not None]
    return {
        "tool_call_accuracy": _ratio(outcome["correct"], len(judged_calls)),
        "spurious_rate": _ratio(outcome["spurious"], len(judged_calls)),
        "wrong_tool_rate": _ratio(outcome["wrong_tool"], len(judged_calls)),
        "hallucinated_rate": _ratio(sum(c.outcome == "hallucinated" for c in all_calls), len(all_calls)),
        "missed_rate": _ratio(sum(len(r.missed) for r in judged), sum(r.expected_by_tool.total() for r in judged)),
        "selection_accuracy": _ratio(sum(bool(r.selection_ok) for r in judged), len(judged)),
        "argument_correctness": _ratio(sum(bool(c.args_ok) for c in args_checked), len(args_checked)),
        "schema_adherence": _ratio(sum(bool(c.schema_valid) for c in schema_checked), len(schema_checked)),
        "end_to_end_accuracy": _ratio(sum(bool(r.end_to_end) for r in judged), len(judged)),
        "sequence_accuracy": _ratio(sum(seq), len(seq)),
        "response_compliance": _ratio(sum(bool(r.response_ok) for r in resp), len(resp)),
        # over agent turns: a turnless group (calls whose turn never came) is no turn, in neither term
        "tool_usage_rate": _ratio(sum(1 for r in rs if r.calls and not r.turnless), sum(not r.turnless for r in rs)),
        "over_calling_rate": _ratio(sum(bool(r.over_calling) for r in judged), len(judged)),
    }


def confusion(results: Iterable[TurnResult]) -> Counter[tuple[str, str]]:
    return Counter(p for r in results if r.judged for p in r.confusion)


def precision_recall_f1(matrix: Counter[tuple[str, str]]) -> dict[str, tuple[float | None, float | None, float | None]]:
    """Per tool of the matrix: precision = (A, A) / column A, recall = (A, A) / row A, F1 their harmonic mean."""
    out = {}
    for tool in sorted({x for pair in matrix for x in pair} - {NONE, UNKNOWN}):
        hit = matrix[(tool, tool)]
        p = _ratio(hit, sum(n for (_, a), n in matrix.items() if a == tool))
        r = _ratio(hit, sum(n for (e, _), n in matrix.items() if e == tool))
        f1 = None if p is None or r is None else (0.0 if p + r == 0 else 2 * p * r / (p + r))
        out[tool] = (p, r, f1)
    return out
