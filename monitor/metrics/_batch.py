"""Verdict batches grouped by what they count: the fast path of every counting sink.

A verdict's *signature* holds everything that decides how it is counted (agent, judged, the calls' names,
outcomes and checks, missed and expected tools, the turn checks, ...) and nothing else (ids, texts, reasons).
Verdicts of a serving workload repeat a few signatures, so a sink counts each signature once per batch
(`groups()`: signature -> number of verdicts, in order of first appearance) and applies the counts of one
representative verdict that many times. Counts are integers, so that is exact; the one float (the sequence
score) is summed verdict by verdict, in order, by each sink.

`VerdictBatch` is an immutable batch that computes its groups once, however many sinks read it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, cast

from monitor.otlp._accel import load_extension
from monitor.verdict import CallVerdict, MissedUnit, Outcome, SchemaViolation, TurnVerdict, ViolationKind

Sig = tuple[object, ...]

# Positions in a signature that the sinks read directly.
SIG_AGENT = 0
SIG_RULE = 3
SIG_CALLS = 4
SIG_SCORED = 13  # sequence_score is not None

# Signatures kept by a sink's cache: bounded in number and, since names are free-form, in characters; and in
# calls, since a signature holds a tuple per call and a turn can have up to max_calls_per_trace calls.
MAX_CACHED = 2048
MAX_CACHED_CHARS = 2048
MAX_CACHED_CALLS = 16


def _call_sig(c: CallVerdict) -> tuple[object, ...]:
    return (
        c.name,
        c.outcome,
        c.in_catalog,
        c.schema_valid,
        c.args_ok,
        c.violations and frozenset([x.kind for x in c.violations]),
    )


def signatures(verdicts: Iterable[TurnVerdict]) -> list[Sig]:
    """One signature per verdict: equal signatures are counted identically by every sink."""
    out: list[Sig] = []
    append = out.append
    for v in verdicts:
        calls = v.calls
        if len(calls) == 1:  # the usual turn: its call's tuple itself (never equal to a tuple of call tuples)
            c = calls[0]  # _call_sig(c) written out: signatures() ~4% faster on the bench workload's verdicts
            cs: object = (
                c.name,
                c.outcome,
                c.in_catalog,
                c.schema_valid,
                c.args_ok,
                c.violations and frozenset([x.kind for x in c.violations]),
            )
        else:
            cs = tuple(map(_call_sig, calls))
        missed = v.missed
        append(
            (
                v.agent,  # SIG_AGENT
                v.judged,
                v.turnless,
                v.rule,  # SIG_RULE
                cs,  # SIG_CALLS
                missed and tuple([m.tool for m in missed]),
                v.expected_calls,
                v.expected_by_tool,
                v.confusion,
                v.selection_ok,
                v.args_ok,
                v.schema_ok,
                v.sequence_ok,
                v.sequence_score is not None,  # SIG_SCORED
                v.response_ok,
                v.end_to_end,
                v.over_calling,
                v.forbidden,
            )
        )
    return out


def cacheable(sig: Sig) -> bool:
    """Small enough to keep: at most MAX_CACHED_CALLS calls (the calls and the confusion pairs are the parts of a
    signature whose length the client chooses) whose client-chosen names (agent, rule, tools called) add up to at
    most MAX_CACHED_CHARS characters (the other names come from the rules; the confusion pairs repeat the calls')."""
    calls = cast(tuple[Any, ...], sig[SIG_CALLS])
    one = bool(calls) and isinstance(calls[0], str)  # one call: its own tuple (see `signatures`)
    if not one and len(calls) > MAX_CACHED_CALLS:
        return False
    names = [calls[0]] if one else [c[0] for c in calls]
    return (
        len(cast(str, sig[SIG_AGENT])) + len(cast(str, sig[SIG_RULE] or "")) + sum(map(len, names)) <= MAX_CACHED_CHARS
    )


def _load_c() -> Callable[[tuple[TurnVerdict, ...]], tuple[Counter[Sig], tuple[int, ...]] | None] | None:
    """groups of the C extension (_cbatch.c): the groups and each group's last index, or None to leave the batch
    to Python; None when it is not loaded (see load_extension)."""
    mod = load_extension(
        "monitor.metrics._cbatch",
        TurnVerdict,
        CallVerdict,
        MissedUnit,
        SchemaViolation,
        tuple(Outcome),
        tuple(ViolationKind),
        Counter,
    )
    if mod is None:
        return None
    return cast(Callable[[tuple[TurnVerdict, ...]], tuple[Counter[Sig], tuple[int, ...]] | None], mod.groups)


_GROUPS_C = _load_c()


class VerdictBatch(tuple[TurnVerdict, ...]):
    """A tuple of verdicts whose signatures and groups are computed once, by the first sink that asks."""

    _sigs: list[Sig] | None = None
    _groups: Counter[Sig] | None = None
    _last: tuple[int, ...] | None = None  # from the C groups: each group's last index, in the groups' order
    _where: dict[Sig, int] | None = None

    @classmethod
    def of(cls, verdicts: Iterable[TurnVerdict]) -> VerdictBatch:
        return verdicts if isinstance(verdicts, VerdictBatch) else cls(verdicts)

    def groups(self) -> Counter[Sig]:
        """Signature -> number of verdicts, in order of first appearance."""
        groups = self._groups
        if groups is None:
            done = _GROUPS_C(self) if _GROUPS_C is not None else None
            if done is not None:
                groups, self._last = done
            else:
                self._sigs = signatures(self)
                groups = Counter(self._sigs)
            self._groups = groups
        return groups

    def example(self, sig: Sig) -> TurnVerdict:
        """A verdict with this signature (one of `groups()`): they all count alike."""
        where = self._where
        if where is None:  # built on the first call (a signature new to a sink): then one look-up each
            if self._last is not None and self._groups is not None:  # the C groups: the last verdict of each
                where = self._where = dict(zip(self._groups, self._last, strict=True))
            else:
                sigs = self._sigs if self._sigs is not None else signatures(self)
                where = self._where = dict(zip(sigs, range(len(sigs)), strict=True))
        return self[where[sig]]
