"""Where the serving time goes: each stage of the pipeline in process, in CPU µs per tool span.

The same workload as bench_serve (the instrumented incident-triage agent, requests of 512 spans), run through
decode -> normalize -> assemble -> judge -> metrics without HTTP, each stage timed on its own (best of
`--repeat` runs, CPU time). Prints each stage's cost, its share of the total, and the rate the total allows.

Run: .venv/bin/python bench/bench_stages.py [--batches N] [--repeat R] [--profile STAGE]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_serve import RULES, base_batches, retraced, tool_spans  # noqa: E402

from monitor.assembly import TurnAssembler  # noqa: E402
from monitor.judge import Judge  # noqa: E402
from monitor.metrics import ToolwatchMetrics  # noqa: E402
from monitor.normalize import Normalizer  # noqa: E402
from monitor.otlp import accelerated, parse_protobuf  # noqa: E402
from monitor.rules import load_rules  # noqa: E402
from monitor.serve._memory import tune_process  # noqa: E402

T = TypeVar("T")
STAGES = ("decode", "normalize", "assemble", "judge", "metrics")


def timed(fn: Callable[[], T], repeat: int) -> tuple[float, T]:
    best = float("inf")
    out: Any = None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--batches", type=int, default=20, help="distinct 512-span requests (default 20)")
    ap.add_argument("--reps", type=int, default=3, help="copies of them with fresh ids (default 3)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per stage; the best is kept (default 5)")
    ap.add_argument("--profile", choices=STAGES, help="print a cProfile of one stage afterwards")
    args = ap.parse_args(argv)
    base = base_batches(args.batches * 512)
    bodies = [retraced(r, rep) for rep in range(args.reps) for r in base]
    n_tool = sum(tool_spans(r) for r in base) * args.reps
    ruleset = load_rules([RULES])
    judge = Judge(ruleset)
    # The garbage collector and allocator as `toolwatch serve` sets them once started (TOOLWATCH_GC_TUNING=0: the
    # interpreter's defaults): at the defaults, full collections walking every record held landed in whichever stage
    # was running (the judge's, mostly), and the stages' shares said more of the collector than of the stage.
    tuned = tune_process()
    print(f"bench_stages: {len(bodies)} requests, {n_tool} tool spans; C decoders: {accelerated()}; "
          f"process tuned as serve: {tuned}")

    normalizer = Normalizer()

    def decode() -> list[Any]:
        return [parse_protobuf(b).spans for b in bodies]

    cost: dict[str, float] = {}
    cost["decode"], spans = timed(decode, args.repeat)

    def normalize() -> list[Any]:
        return [normalizer.split(s)[0] for s in spans]

    cost["normalize"], records = timed(normalize, args.repeat)

    def assemble() -> list[Any]:
        asm = TurnAssembler(grace_s=0, max_pending=10**7)
        out: list[Any] = []
        for r in records:
            out.extend(asm.add_records(r, 2**62))
        out.extend(asm.flush())
        return out

    cost["assemble"], turns = timed(assemble, args.repeat)

    def judge_all() -> list[Any]:
        return [judge.judge(t) for t in turns]

    cost["judge"], verdicts = timed(judge_all, args.repeat)

    def metrics() -> None:
        m = ToolwatchMetrics(tools=judge.catalog, agents=judge.agents)
        for i in range(0, len(verdicts), 256):
            m.observe(verdicts[i : i + 256])

    cost["metrics"], _ = timed(metrics, args.repeat)
    total = sum(cost.values())
    for name in STAGES:
        print(f"  {name:10s} {cost[name] / n_tool * 1e6:7.2f} µs per tool span  {cost[name] / total * 100:5.1f}%")
    rate = n_tool / total
    print(f"  {'total':10s} {total / n_tool * 1e6:7.2f} µs per tool span  -> {rate:,.0f} tool spans/s per core")
    print(f"  turns {len(turns)}, ratio decode / total {cost['decode'] / total:.2f}")
    if args.profile:
        fn = {"decode": decode, "normalize": normalize, "assemble": assemble, "judge": judge_all, "metrics": metrics}
        prof = cProfile.Profile()
        prof.runcall(fn[args.profile])
        pstats.Stats(prof).sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
