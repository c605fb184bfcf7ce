"""What the judge decides for one turn: the contract between the judge and every sink.

Field meanings follow ../shared/METRICS.md exactly. The judge (monitor.judge) produces these;
sinks (Prometheus metrics, verdict log, reports) only read them. The three built on the judge's hot path
(ArgCheckResult, CallVerdict, TurnVerdict) are plain slotted dataclasses, not frozen: a frozen dataclass's
`__init__` goes through `object.__setattr__` and costs about 5x as much. Treat them as read-only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

NONE_LABEL = "(none)"
UNKNOWN_LABEL = "(unknown)"


class Outcome(enum.StrEnum):
    """Exactly one outcome per call (METRICS.md, "Each call gets exactly one outcome")."""

    CORRECT = "correct"
    WRONG_TOOL = "wrong_tool"
    SPURIOUS = "spurious"
    HALLUCINATED = "hallucinated"
    UNJUDGED = "unjudged"


class ViolationKind(enum.StrEnum):
    MALFORMED = "malformed"
    TYPE = "type"
    REQUIRED = "required"
    ADDITIONAL = "additional"
    ENUM = "enum"
    OTHER = "other"


@dataclass(slots=True, frozen=True)
class SchemaViolation:
    kind: ViolationKind
    path: str
    message: str


@dataclass(slots=True)
class ArgCheckResult:
    """One argument check of a slot applied to a call: which argument, which mode, expected, actual."""

    argument: str
    mode: str
    expected: str
    actual: str
    ok: bool


@dataclass(slots=True)
class CallVerdict:
    index: int  # position of the call in the turn (start-time order)
    name: str  # the tool name as called
    call_id: str
    outcome: Outcome
    in_catalog: bool
    slot: int | None = None  # index of the expected slot the call filled (correct calls only)
    # Schema adherence: None when the tool declares no schema or the arguments were not captured.
    schema_valid: bool | None = None
    violations: tuple[SchemaViolation, ...] = ()
    # Argument correctness: None unless a correct call whose slot has argument checks and whose
    # arguments were captured.
    args_ok: bool | None = None
    arg_results: tuple[ArgCheckResult, ...] = ()
    arguments_captured: bool = True


@dataclass(slots=True, frozen=True)
class MissedUnit:
    """One missing call: a slot still short of its minimum after assignment."""

    tool: str
    slot: int


@dataclass(slots=True)
class TurnVerdict:
    agent: str
    trace_id: str
    span_id: str
    input_text: str
    judged: bool  # the turn has an expectation (a matching rule or a labelled case)
    turnless: bool
    rule: str | None  # id of the expectation used (rule id, or "case:<id>"), None when unjudged
    alternative: int | None  # index of the any_of alternative kept
    calls: tuple[CallVerdict, ...]
    missed: tuple[MissedUnit, ...]
    expected_calls: int  # sum of slot minimums (0 when unjudged)
    max_calls: int | None  # sum of slot maximums; None when unbounded or unjudged
    selection_ok: bool | None  # None when unjudged
    args_ok: bool  # every judged call passes its argument checks (vacuously true)
    schema_ok: bool  # every call with a schema validates (vacuously true)
    sequence_ok: bool | None  # None when the rule has no ordering constraints
    sequence_score: float | None
    forbidden: tuple[str, ...]  # forbidden tools that were called
    response_ok: bool | None  # None when the rule has no response checks
    end_to_end: bool | None  # None when unjudged
    over_calling: bool | None  # None when unjudged
    confusion: tuple[tuple[str, str], ...]  # (expected, actual) pairs; judged turns only
    reason: str  # one line a person can read
    # Sum of slot minimums per tool of the expectation used (judged turns only): per-tool missed-call rate.
    expected_by_tool: tuple[tuple[str, int], ...] = ()

    @property
    def failed(self) -> bool:
        """A turn worth logging: judged and not end-to-end correct, or any call hallucinated / invalid."""
        if self.end_to_end is False or self.forbidden:
            return True
        for c in self.calls:  # a loop, not any(<generator>): this runs once per verdict in every sink
            if c.outcome is Outcome.HALLUCINATED or c.schema_valid is False:
                return True
        return False
