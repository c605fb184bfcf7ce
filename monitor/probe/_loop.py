"""The probe loop: draw K candidates, pick one (FSCS-ART or random), run the agent on it, judge the turn."""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from monitor.evaluate._harness import AgentFn, Harness, Interrupted, format_traceback, thread_stack
from monitor.probe.fscs import FscsSelector
from monitor.records import Turn
from monitor.verdict import TurnVerdict

Generator = Callable[[random.Random], str]
STRATEGIES = ("art", "random")
MAX_POOL = 100_000  # candidates a step draws at most: each is kept and compared (about 1 s a step at this size)


class JudgeLike(Protocol):
    def judge(self, turn: Turn) -> TurnVerdict: ...


@dataclass(slots=True)
class Step:
    iteration: int  # 1-based: the number of runs so far
    input_text: str
    distance: int | None  # min Levenshtein distance of the chosen input to those tested before (art; first 1,000 chars)
    failed: bool
    verdict: TurnVerdict | None
    error: str | None = None
    duration_s: float = 0.0
    traceback: str | None = None  # the agent's, when it raised (its stack at the timeout when it hung)
    answer_type: str | None = None  # the type of what the agent returned when it is neither a str nor None


@dataclass(slots=True)
class ProbeResult:
    strategy: str
    seed: int
    pool: int
    steps: list[Step] = field(default_factory=list)
    strays: list[TurnVerdict] = field(default_factory=list)  # calls outside every run's turn, judged alone

    @property
    def first_failure(self) -> int | None:
        """The number of runs up to and including the first failing one (None: no failure found)."""
        return next((s.iteration for s in self.steps if s.failed), None)


class GeneratorError(ValueError):
    """The user's generator raised or returned something other than a string. `what` says which (`raised
    SystemExit: 3`); `partial` is the probe's result up to then (its runs done), set by `run_probe`."""

    def __init__(self, what: str, traceback: str | None = None) -> None:
        super().__init__(f"the generator {what}")
        self.what = what
        self.traceback = traceback
        self.partial: ProbeResult | None = None


def _one(generator: Generator, rng: random.Random) -> str:
    try:
        text = generator(rng)
    except BaseException as exc:  # noqa: BLE001 - the user's code: say what it did
        # SystemExit (sys.exit) and the other BaseExceptions end the probe as an error, as eval's harness records
        # them for an agent; only Ctrl-C is the user's
        if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
            raise
        raise GeneratorError(f"raised {type(exc).__name__}: {exc}", format_traceback(exc)) from exc
    if not isinstance(text, str):
        raise GeneratorError(f"must return str, got {type(text).__name__}")
    return text


def draw(generator: Generator, rng: random.Random, k: int, timeout_s: float | None = None) -> list[str]:
    """`k` inputs of the generator. With `timeout_s`, each call is bounded by it, as a run is: the calls run in a
    daemon thread (which cannot be stopped), and one that has not returned by then is a GeneratorError with the
    generator's stack at the timeout; the thread stops at its next call."""
    if timeout_s is None:
        return [_one(generator, rng) for _ in range(k)]
    results: queue.SimpleQueue[str | BaseException] = queue.SimpleQueue()
    stop = threading.Event()

    def work() -> None:
        for _ in range(k):
            if stop.is_set():
                return
            try:
                results.put(_one(generator, rng))
            except BaseException as exc:  # noqa: BLE001 - handed to the probe's thread, which raises it
                results.put(exc)
                return

    worker = threading.Thread(target=work, name="toolwatch-generator", daemon=True)
    worker.start()
    out = []
    try:
        for _ in range(k):
            try:
                got = results.get(timeout=timeout_s)
            except queue.Empty:
                raise GeneratorError(f"did not return within {timeout_s:g} s (--timeout)",
                                     thread_stack(worker, __file__, "Generator")) from None
            if isinstance(got, BaseException):
                raise got
            out.append(got)
    finally:
        stop.set()
    return out


def step_failed(verdict: TurnVerdict | None, error: str | None) -> bool:
    return verdict is None or error is not None or verdict.failed


def run_probe(
    *,
    generator: Generator,
    agent: AgentFn,
    judge: JudgeLike,
    harness: Harness,
    iterations: int,
    pool: int = 10,
    seed: int = 0,
    strategy: str = "art",
    timeout_s: float | None = None,
    stop_at_first_failure: bool = False,
    on_step: Callable[[Step], Any] | None = None,
) -> ProbeResult:
    """Run the agent `iterations` times on inputs chosen by `strategy`; `random` runs the first candidate. A
    GeneratorError carries the result of the runs done before it (`partial`), and so does the Interrupted that
    Ctrl-C or SIGTERM raises."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; one of {', '.join(STRATEGIES)}")
    if iterations < 1 or pool < 1:
        raise ValueError("iterations and pool must be >= 1")
    if pool > MAX_POOL:
        raise ValueError(f"pool must be <= {MAX_POOL:,}, got {pool:,}")
    if seed < 0:  # random.Random(-n) is random.Random(n): seed -3 would run seed 3's probe again
        raise ValueError(f"seed must be >= 0, got {seed}")
    result = ProbeResult(strategy, seed, pool)
    try:
        _probe(result, generator, agent, judge, harness, iterations, pool, timeout_s, stop_at_first_failure, on_step)
    except GeneratorError as exc:
        exc.partial = result
        raise
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: the steps done come back in Interrupted
        raise Interrupted(result, exc) from None
    return result


def _probe(result: ProbeResult, generator: Generator, agent: AgentFn, judge: JudgeLike, harness: Harness,
           iterations: int, pool: int, timeout_s: float | None, stop_at_first_failure: bool,
           on_step: Callable[[Step], Any] | None) -> None:
    """The steps of run_probe, into `result`."""
    rng = random.Random(result.seed)
    selector = FscsSelector(seed=result.seed)
    strategy = result.strategy
    for i in range(1, iterations + 1):
        candidates = draw(generator, rng, pool, timeout_s)
        if strategy == "art":
            choice = selector.select(candidates)
            text, distance = candidates[choice.index], choice.distance
        else:
            text, distance = candidates[0], None
        selector.add(text)
        started = time.perf_counter()
        run = harness.run_and_collect(agent, text, timeout_s=timeout_s)
        verdict = judge.judge(run.turns[0]) if run.turns else None
        error = run.error or (None if run.turns else "no turn was recorded")
        result.strays += [judge.judge(t) for t in run.strays]
        step = Step(i, text, distance, step_failed(verdict, error), verdict, error, time.perf_counter() - started,
                    run.traceback, run.answer_type)
        result.steps.append(step)
        if on_step is not None:
            on_step(step)
        if stop_at_first_failure and step.failed:
            break


def first_failures(
    *,
    generator: Generator,
    agent: AgentFn,
    judge: JudgeLike,
    harness: Harness,
    seeds: range | list[int],
    pool: int = 10,
    max_iterations: int = 500,
    strategies: tuple[str, ...] = STRATEGIES,
    timeout_s: float | None = None,
    on_seed: Callable[[str, int, int | None], Any] | None = None,
) -> dict[str, list[int | None]]:
    """Runs to the first failure per seed and strategy (the F-measure of ART studies); None: none found."""
    if any(seed < 0 for seed in seeds):
        raise ValueError(f"seeds must be >= 0 (random.Random(-n) is random.Random(n)), got {min(seeds)}")
    out: dict[str, list[int | None]] = {s: [] for s in strategies}
    for seed in seeds:
        for strategy in strategies:
            res = run_probe(generator=generator, agent=agent, judge=judge, harness=harness,
                            iterations=max_iterations, pool=pool, seed=seed, strategy=strategy,
                            timeout_s=timeout_s, stop_at_first_failure=True)
            out[strategy].append(res.first_failure)
            if on_seed is not None:
                on_seed(strategy, seed, res.first_failure)
    return out


def mean_first_failure(values: list[int | None], max_iterations: int) -> float:
    """Mean runs to the first failure; a seed without failure counts as max_iterations + 1 (censored)."""
    if not values:
        return float("nan")
    return sum(max_iterations + 1 if v is None else v for v in values) / len(values)
