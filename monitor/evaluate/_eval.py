"""`eval`: run the agent on every labelled case K times, judge each turn against its case, score trials.

A trial passes when its turn is judged end-to-end correct (METRICS.md) and the run neither raised nor
timed out. A run that raised or timed out is still a judged turn of its case (a timed-out one: the calls
that had ended by the timeout, no output), so its missed and wrong calls count in every figure.
With K trials per case: pass rate = passing trials / all trials; pass^k (Yao et al., tau-bench) = the mean
over cases of C(c, k) / C(n, k), the chance that k trials drawn from a case's n all pass.
Calls that ran outside every run's turn (in a thread without the OpenTelemetry context) belong to no trial: they are
judged alone, as serve judges them (`EvalResult.strays`), and count in the figures, not in any trial.
"""

from __future__ import annotations

import itertools
import math
import queue
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from monitor.evaluate._dataset import Case
from monitor.evaluate._harness import AgentFn, Harness, Interrupted, RunResult, run_turn
from monitor.records import Turn
from monitor.verdict import TurnVerdict

COLLECT_EVERY = 64
_NO_EXPECTATION = "no expectation matched the case (check its id or input against the dataset)"


def run_on_threads(fn: Callable[[int], RunResult], n: int, threads: int
                   ) -> Generator[tuple[int, RunResult], None, None]:
    """(i, fn(i)) for i in range(n), as each ends, from `threads` daemon threads taking the next i as they are free.
    An exception of fn is raised here. When the caller stops (Ctrl-C, a failing callback), no further i is started,
    and the runs going on are not waited for: daemon threads, which the interpreter does not join at its exit (a
    ThreadPoolExecutor's are joined: Ctrl-C during a hung run waited out its --timeout)."""
    results: queue.SimpleQueue[tuple[int, RunResult | BaseException]] = queue.SimpleQueue()
    counter = itertools.count()
    take = threading.Lock()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            with take:
                i = next(counter)
            if i >= n:
                return
            try:
                results.put((i, fn(i)))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
                results.put((i, exc))
                return

    for _ in range(min(threads, n)):
        threading.Thread(target=worker, name="toolwatch-eval", daemon=True).start()
    try:
        for _ in range(n):
            i, out = results.get()
            if isinstance(out, BaseException):
                raise out
            yield i, out
    finally:
        stop.set()


class JudgeLike(Protocol):
    def judge(self, turn: Turn) -> TurnVerdict: ...


@dataclass(slots=True)
class Trial:
    case: Case
    trial: int  # 1-based
    run: RunResult
    verdict: TurnVerdict | None = None

    @property
    def passed(self) -> bool:
        v = self.verdict
        return (v is not None and self.run.error is None and v.judged and v.end_to_end is True
                and not v.failed)

    @property
    def reason(self) -> str:
        v = self.verdict
        if v is None:
            return self.run.error or "no turn was recorded for this run"
        why = v.reason if v.judged else _NO_EXPECTATION
        if self.run.timed_out:  # what the calls made by then show, after the timeout, unless they were all right
            bad = not v.judged or v.failed or v.end_to_end is not True
            return f"{self.run.error}; {why}" if bad else str(self.run.error)
        if self.run.error:
            return f"agent raised {self.run.error}; {why}"
        return why


@dataclass(slots=True)
class EvalResult:
    k: int
    trials: list[Trial] = field(default_factory=list)
    strays: list[TurnVerdict] = field(default_factory=list)  # turnless turns of no run's trace, judged alone

    def by_case(self) -> dict[str, list[Trial]]:
        """The trials of each case, by the case's key (unique in a dataset)."""
        out: dict[str, list[Trial]] = {}
        for t in self.trials:
            out.setdefault(t.case.key, []).append(t)
        return out

    @property
    def pass_rate(self) -> float | None:
        return sum(t.passed for t in self.trials) / len(self.trials) if self.trials else None

    def pass_hat(self, k: int) -> float | None:
        """pass^k over cases with at least k trials (None when there is none)."""
        scores = []
        for trials in self.by_case().values():
            n, c = len(trials), sum(t.passed for t in trials)
            if n >= k:
                scores.append(math.comb(c, k) / math.comb(n, k))
        return sum(scores) / len(scores) if scores else None


def run_eval(
    cases: Sequence[Case],
    agent: AgentFn,
    judge: JudgeLike,
    harness: Harness,
    *,
    trials: int = 1,
    concurrency: int = 1,
    timeout_s: float | None = None,
    on_trial: Callable[[Trial], Any] | None = None,
    on_run: Callable[[RunResult], Any] | None = None,
) -> EvalResult:
    """Run every case `trials` times on `concurrency` threads; trials come back in case order. Ctrl-C (a
    KeyboardInterrupt; SIGTERM's Terminated too) raises Interrupted with the result of the runs done by then."""
    if trials < 1 or concurrency < 1:
        raise ValueError("trials and concurrency must be >= 1")
    work = [(case, t) for case in cases for t in range(1, trials + 1)]
    runs: dict[int, RunResult] = {}
    turns: dict[str, list[Turn]] = {}  # trace id -> its turns (turnless ones too: a timed-out run's calls)

    def gather(final: bool) -> None:
        for turn in harness.collect(final=final):
            turns.setdefault(turn.trace_id, []).append(turn)

    def run_one(i: int) -> RunResult:
        case = work[i][0]
        return harness.run(agent, case.input_text, case_id=case.key, timeout_s=timeout_s)

    ended = run_on_threads(run_one, len(work), concurrency)
    interrupted: KeyboardInterrupt | None = None
    try:
        for n, (i, run) in enumerate(ended, 1):
            runs[i] = run
            if on_run is not None:
                on_run(run)
            if n % COLLECT_EVERY == 0:
                gather(final=False)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: the runs done are judged, and come back in Interrupted
        interrupted = exc
    finally:
        ended.close()  # no further run starts; those going on are not waited for
    gather(final=True)
    result = EvalResult(trials)
    for i, (case, t) in enumerate(work):
        if i not in runs:  # not started, or going on at Ctrl-C
            continue
        run = runs[i]
        turn = run_turn(run, turns.get(run.trace_id, []) if run.trace_id else [], harness.agent_name)
        trial = Trial(case, t, run, judge.judge(turn) if turn is not None else None)
        result.trials.append(trial)
        if on_trial is not None:
            on_trial(trial)
    result.strays = [judge.judge(t) for t in harness.stray_turns(t for ts in turns.values() for t in ts)]
    if interrupted is not None:
        raise Interrupted(result, interrupted)
    return result
