"""The worker side of the service: queue -> turn assembly -> judge -> metrics and verdict log."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import cast

from monitor.assembly import TurnAssembler, records_bytes
from monitor.metrics import ToolwatchMetrics, VerdictBatch
from monitor.metrics._batch import SIG_AGENT
from monitor.normalize import REASON_NO_TOOL_NAME, REASON_NORMALIZE_ERROR, Normalizer
from monitor.otlp import REASON_BAD_ID, REASON_MALFORMED, Span
from monitor.records import ToolCall, Turn
from monitor.serve._agents import UnnamedAgents
from monitor.serve._rules import Rules
from monitor.serve._settings import Settings
from monitor.serve._verdict_log import VerdictLog
from monitor.verdict import TurnVerdict

logger = logging.getLogger(__name__)

Record = ToolCall | Turn | Span
VerdictHook = Callable[[Sequence[TurnVerdict]], None]

DROP_QUEUE_FULL = "queue_full"
DROP_LATE = "late_call"
DROP_LATE_TURN = "late_turn"
DROP_OVERSIZED = "turn_too_large"
DROP_TRACE_TOO_LARGE = "trace_too_large"
DROP_JUDGE_ERROR = "judge_error"
DROP_DUPLICATE = "duplicate"
DROP_REASONS = (DROP_QUEUE_FULL, DROP_LATE, DROP_LATE_TURN, DROP_OVERSIZED, DROP_TRACE_TOO_LARGE, DROP_JUDGE_ERROR,
                DROP_DUPLICATE)
REJECT_REASONS = (REASON_MALFORMED, REASON_BAD_ID, REASON_NO_TOOL_NAME, REASON_NORMALIZE_ERROR)

# The assembler's clock: arrival times, deadlines and timeouts, only ever compared with each other (never with the
# spans' own timestamps, which are the agents' wall clocks: the verdict lag is measured on the wall clock).
ASSEMBLY_CLOCK = time.monotonic_ns

_CHUNK = 8192  # records handled per step before yielding to the event loop


class Pipeline:
    """Owns the bounded queue, the assembler and the sinks. Runs on one event loop (not thread-safe)."""

    def __init__(
        self,
        settings: Settings,
        rules: Rules,
        metrics: ToolwatchMetrics,
        *,
        verdict_log: VerdictLog | None = None,
        on_verdicts: VerdictHook | None = None,
    ) -> None:
        self.settings = settings
        self.rules = rules
        self.metrics = metrics
        self.verdict_log = verdict_log
        self.hooks: list[VerdictHook] = [on_verdicts] if on_verdicts is not None else []
        self.normalizer = Normalizer()
        self.assembler = TurnAssembler(
            grace_s=settings.grace_s,
            turnless_timeout_s=settings.turnless_timeout_s,
            max_pending=settings.max_pending,
            max_pending_bytes=settings.max_pending_bytes,
            max_calls_per_trace=settings.max_calls_per_trace,
            normalizer=self.normalizer,
        )
        self._queue: deque[tuple[list[Record], int]] = deque()  # each request's records and what they weigh
        self.queued = 0  # records waiting
        self.queued_bytes = 0  # what they weigh (estimated as turn assembly weighs them)
        self.capacity = settings.queue_spans
        self.capacity_bytes = settings.queue_bytes
        self.turns_judged = 0
        self._wake = asyncio.Event()
        self._seen_stats = (0, 0, 0, 0, 0, 0)
        self.paused = False  # while True the worker leaves the queue alone (maintenance, tests)
        metrics.pending = self._pending
        metrics.pending_bytes = lambda: self.assembler.pending_bytes
        metrics.queue = lambda: (self.queued, self.queued_bytes)
        # Every reason's series from the start: rate() and increase() do not see a series' first value as growth.
        for table, reasons in ((metrics.ops.spans_dropped, DROP_REASONS), (metrics.ops.spans_rejected, REJECT_REASONS)):
            for reason in reasons:
                table.setdefault(reason, 0)
        metrics.ignored_attributes = lambda: self.normalizer.ignored_attributes
        self.unnamed_agents = UnnamedAgents()
        self.apply_labels()

    def __repr__(self) -> str:
        return (
            f"<Pipeline queued={self.queued} pending_turns={self.assembler.pending_turns} judged={self.turns_judged}>"
        )

    def _pending(self) -> dict[str, int]:
        a = self.assembler
        return {"turn": a.pending_turns, "turnless": a.pending_turnless}

    def apply_labels(self) -> None:
        """The metrics' label sets from the rules in force and the configuration; their series start at 0."""
        judge = self.rules.judge
        agent_tools, rule_agents = judge.scoping()  # no series at 0 for what no turn can count (metrics._initial)
        schema_tools, argument_tools = judge.checked_tools()
        agents = set(judge.agents) | set(self.settings.agents)
        ruleset = self.rules.current.ruleset
        expectations = ruleset.expectations
        self.metrics.set_labels(
            tools=judge.catalog,
            agents=agents,
            rules=[*(e.id for e in expectations), *(e.id for _, _, e in ruleset.cases)],  # cases: one label, "case"
            agent_tools=agent_tools,
            rule_agents=rule_agents,
            schema_tools=schema_tools,
            argument_tools=argument_tools,
        )
        self.unnamed_agents.configure(
            labels=agents, scoped=judge.agents, unscoped_rules=any(e.agent is None for e in expectations)
        )

    # ---- ingest side -------------------------------------------------------------------------------

    def full(self, extra: int = 0) -> bool:
        """Whether the queue is past its capacity in records (with `extra` more) or in bytes: a request is then
        refused on its head."""
        return self.queued + extra > self.capacity or self.queued_bytes > self.capacity_bytes

    def offer(self, records: list[Record]) -> bool:
        """Queue normalized records; False (nothing queued) when that would exceed the capacity in records or in
        bytes (an empty queue takes any request). They are weighed here, just made (and their weight handed to turn
        assembly with them): weighed there, after their wait in the queue, their values were rarely in cache."""
        n = len(records)
        if not n:
            return True
        weight = records_bytes(records)
        if self.queued > 0 and (
            self.queued + n > self.capacity or self.queued_bytes + weight > self.capacity_bytes
        ):
            return False
        self._queue.append((records, weight))
        self.queued += n
        self.queued_bytes += weight
        self._wake.set()
        return True

    # ---- worker side -------------------------------------------------------------------------------

    def step(self, now_ns: int | None = None, *, limit: int = _CHUNK) -> int:
        """Assemble queued records (up to about `limit`), judge what completed; returns records handled.

        `now_ns` is the assembler's clock, monotonic (ASSEMBLY_CLOCK): the grace period and the turnless timeout
        count from a span's arrival, and a step of the wall clock (NTP, a VM resumed) must neither hold pending turns
        for its length nor judge them before their calls arrive (the calls then dropped as late, the turn missed)."""
        now_ns = ASSEMBLY_CLOCK() if now_ns is None else now_ns
        handled = 0
        turns: list[Turn] = []
        add = self.assembler.add_records
        while self._queue and handled < limit and not self.paused:
            batch, weight = self._queue.popleft()
            self.queued -= len(batch)
            self.queued_bytes -= weight
            handled += len(batch)
            turns.extend(add(batch, now_ns, weight))
        if not handled:
            turns = self.assembler.poll(now_ns)
        if turns:
            self.judge(turns, now_ns)
        self._sync_stats()
        return handled

    def judge(self, turns: Sequence[Turn], now_ns: int) -> list[TurnVerdict]:
        judge = self.rules.judge.judge
        ops = self.metrics.ops
        verdicts: list[TurnVerdict] = []
        append = verdicts.append
        durations: list[float] = []  # each turn's own judge time, observed one by one below
        timed = durations.append
        errors = 0
        judged: list[Turn] = []  # the turns of `verdicts`
        clock = time.perf_counter
        for turn in turns:
            t0 = clock()
            try:
                v = judge(turn)
            except Exception:  # a judge bug must not stop the service: count it and log the turn
                logger.exception("judge failed on turn trace=%s span=%s", turn.trace_id, turn.span_id)
                errors += len(turn.calls) + (not turn.turnless)  # its calls, and its turn span when it has one
                continue
            timed(clock() - t0)
            append(v)
            judged.append(turn)
        ops.judge_duration.observe_each(durations)
        ops.dropped(DROP_JUDGE_ERROR, errors)
        batch = VerdictBatch(verdicts)  # every sink reads the same batch: its signatures are computed once
        self.metrics.observe(batch)
        self.unnamed_agents.check([cast(str, sig[SIG_AGENT]) for sig in batch.groups()])  # per group, not verdict
        done_ns = time.time_ns()
        # The turns with a verdict only (a turn the judge failed on is dropped above, and has no verdict to lag).
        ends = [turn.end_ns or max((c.end_ns for c in turn.calls), default=0) for turn in judged]
        ops.verdict_lag.observe_each([(done_ns - end) / 1e9 if end < done_ns else 0.0 for end in ends if end])
        self.turns_judged += len(verdicts)
        if self.verdict_log is not None:
            self.verdict_log.write(batch)
        for hook in self.hooks:
            try:
                hook(batch)
            except Exception:
                logger.exception("verdict hook %r failed", hook)
        return verdicts

    def _sync_stats(self) -> None:
        st = self.assembler.stats
        late, late_turns, oversized, evicted, dup, spans = self._seen_stats
        ops = self.metrics.ops
        ops.dropped(DROP_LATE, st.late_calls - late)
        ops.dropped(DROP_LATE_TURN, st.late_turns - late_turns)
        ops.dropped(DROP_OVERSIZED, st.oversized_calls - oversized)
        ops.dropped(DROP_DUPLICATE, st.duplicates - dup)
        ops.dropped(DROP_TRACE_TOO_LARGE, st.oversized_spans - spans)
        ops.turns_evicted += st.evicted - evicted
        self._seen_stats = (
            st.late_calls, st.late_turns, st.oversized_calls, st.evicted, st.duplicates, st.oversized_spans
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Drain the queue until `stop` is set; polls the assembler every `poll_interval_s`."""
        interval = self.settings.poll_interval_s
        last_tick = 0.0
        while not stop.is_set():
            if not self._queue or self.paused:
                self._wake.clear()
                timeout = interval
                due = self.assembler.next_deadline_ns()
                if due is not None:  # wake up when the next turn's grace period ends, not a poll later
                    timeout = min(interval, max(0.0, (due - ASSEMBLY_CLOCK()) / 1e9))
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=timeout)
                except TimeoutError:
                    pass
            try:
                self.step()
                now = time.monotonic()
                if now - last_tick >= 1.0:
                    self.metrics.tick()
                    if self.verdict_log is not None:
                        self.verdict_log.flush()
                    last_tick = now
            except Exception:  # keep serving; the error is logged with its traceback
                logger.exception("worker step failed")
            await asyncio.sleep(0)

    def finish(self) -> int:
        """Graceful shutdown: assemble everything queued, judge every pending turn. Returns turns judged."""
        before = self.turns_judged
        self.paused = False
        while self._queue:
            self.step()
        now_ns = ASSEMBLY_CLOCK()
        turns = self.assembler.flush()
        if turns:
            self.judge(turns, now_ns)
        self._sync_stats()
        self.metrics.tick()
        if self.verdict_log is not None:
            self.verdict_log.flush()
        return self.turns_judged - before
