"""Replay: decoded export requests -> the service's TurnAssembler -> the Judge -> a verdict sink.

This is the code path of live serving (same decoders, same assembler with the same grace period and
turnless timeout, same judge), driven by a clock made of the spans' own end times instead of the wall
clock (a span from a skewed clock left out: `request_clock`), and flushed at the end, so replaying what
`serve` received gives the verdicts `serve` gave.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from monitor._gc import batch_gc
from monitor.assembly import DEFAULT_MAX_PENDING_BYTES, TurnAssembler
from monitor.otlp import Decoded, Span
from monitor.records import Turn
from monitor.replay._sources import FORMATS, BadRecords, SourceError, is_stream, read_source
from monitor.verdict import TurnVerdict

SKEW_NS = 10 * 60 * 1_000_000_000
"""A span ending more than this after the median end time of its request's spans is from a skewed clock (a host years
ahead, a garbage timestamp): it does not move the replay clock (`request_clock`)."""


def request_clock(spans: Sequence[Span]) -> int:
    """When a request arrived, as replay estimates it: the latest end time of its spans, leaving out those more than
    SKEW_NS after the median one. One span from a clock years ahead carried the replay clock off with it: every turn
    pending was released before the rest of its request was added (its calls there late, judged missed), and every
    turn after it too. A request's spans end within an export interval of each other (seconds; a Collector's tail
    sampling holds a trace's spans for its decision wait): a wider spread holds an outlier. 0 for no span."""
    if not spans:
        return 0
    ends: list[int] = [s.end_ns for s in spans]
    latest = max(ends)
    if latest - min(ends) <= SKEW_NS:
        return latest
    ends.sort()
    bound = ends[(len(ends) - 1) // 2] + SKEW_NS
    return ends[bisect_right(ends, bound) - 1]


class JudgeLike(Protocol):
    def judge(self, turn: Turn) -> TurnVerdict: ...


@dataclass(slots=True)
class ReplayStats:
    requests: int = 0
    spans: int = 0
    rejected_spans: dict[str, int] = field(default_factory=dict)  # by the decoder, by reason
    # by the normalizer (a tool span naming no tool, a span it failed on), by reason, as serve counts them
    unusable_spans: dict[str, int] = field(default_factory=dict)
    turns: int = 0
    turnless: int = 0
    files: int = 0
    bad_records: BadRecords = field(default_factory=BadRecords)  # first 100 kept; .total counts all
    read_errors: list[str] = field(default_factory=list)  # files that could not be read to their end, and where


class Replayer:
    """Feed it Decoded requests in the order they were received; `finish()` releases what is pending."""

    def __init__(
        self,
        judge: JudgeLike,
        sink: Callable[[TurnVerdict], None],
        *,
        grace_s: float = 2.0,
        turnless_timeout_s: float = 30.0,
        max_pending: int = 100_000,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    ) -> None:
        self.judge = judge
        self.sink = sink
        self.assembler = TurnAssembler(grace_s=grace_s, turnless_timeout_s=turnless_timeout_s,
                                       max_pending=max_pending, max_pending_bytes=max_pending_bytes)
        self.stats = ReplayStats()
        self.clock_ns = 0

    def feed(self, decoded: Decoded) -> None:
        stats = self.stats
        stats.requests += 1
        stats.spans += len(decoded.spans)
        for reason, n in decoded.rejected.items():
            stats.rejected_spans[reason] = stats.rejected_spans.get(reason, 0) + n
        if decoded.spans:
            self.clock_ns = max(self.clock_ns, request_clock(decoded.spans))
        # As in serving, what was due before this request arrived is released before its spans are added.
        self._judge_all(self.assembler.poll(self.clock_ns))
        records, rejected = self.assembler.normalizer.split(decoded.spans)
        for reason, n in rejected.items():
            stats.unusable_spans[reason] = stats.unusable_spans.get(reason, 0) + n
        self._judge_all(self.assembler.add_records(records, self.clock_ns))

    def finish(self) -> None:
        self._judge_all(self.assembler.flush())

    def _judge_all(self, turns: Sequence[Turn]) -> None:
        stats, judge, sink = self.stats, self.judge.judge, self.sink
        for turn in turns:
            stats.turns += 1
            if turn.turnless:
                stats.turnless += 1
            sink(judge(turn))


def replay_files(
    replayer: Replayer,
    paths: Sequence[Path],
    *,
    fmt: str = "auto",
    on_progress: Callable[[int], None] | None = None,
) -> ReplayStats:
    """Replay every file in order; `on_progress(bytes)` gets the bytes advanced since the last call.

    A file that cannot be read to its end (unreadable, over a bound, a cut .gz or zstd file) does not stop the
    replay: what was read of it is replayed, the error (naming the file and where) goes to `stats.read_errors`,
    and the next file is read.
    """
    if fmt not in FORMATS:
        raise SourceError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    with batch_gc():
        _replay_paths(replayer, paths, fmt, on_progress)
    return replayer.stats


def _replay_paths(
    replayer: Replayer, paths: Sequence[Path], fmt: str, on_progress: Callable[[int], None] | None
) -> None:
    for p in paths:
        replayer.stats.files += 1
        done = 0
        stream = is_stream(p)  # no size, no position: progress is the turns replayed
        try:
            for decoded, pos in read_source(p, replayer.stats.bad_records, fmt):
                replayer.feed(decoded)
                if on_progress is not None and (pos > done or stream):
                    on_progress(pos - done)
                    done = pos
        except SourceError as exc:  # what was read before the error stays replayed
            replayer.stats.read_errors.append(str(exc))
        if on_progress is not None and not stream:
            try:
                size = p.stat().st_size
            except OSError:
                size = done
            if size > done:
                on_progress(size - done)
    replayer.finish()
