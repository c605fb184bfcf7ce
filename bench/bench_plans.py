"""The judge stage in C (plans and dispatch) against the Python one, measured side by side in one run.

The bench_serve workload's turns (as bench_stages builds them: decode, normalize, assemble), judged by three
judges of the same rules: one whose judge() dispatch and plans are the C extension's (monitor/judge/_cplan.c), one
whose are the Python ones (built with the extension set aside), and one with the C plans and the Python judge().
The runs alternate; the best of `--repeat` CPU times of each is kept. Prints CPU µs per tool span of each, and
checks the verdicts are equal. With `--serve-gc` the collector is tuned as `toolwatch serve` tunes it (gc.freeze,
young generation collected every 200,000 allocations); without it the default thresholds make collections a
large part of every figure.

Run: .venv/bin/python bench/bench_plans.py [--batches N] [--repeat R]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_serve import RULES, base_batches, retraced  # noqa: E402

from monitor.assembly import TurnAssembler  # noqa: E402
from monitor.judge import Judge, _judge, _plan  # noqa: E402
from monitor.normalize import Normalizer  # noqa: E402
from monitor.otlp import parse_protobuf  # noqa: E402
from monitor.records import Turn  # noqa: E402
from monitor.rules import load_rules  # noqa: E402


def _turns(batches: int) -> list[Turn]:
    normalizer = Normalizer()
    asm = TurnAssembler(grace_s=0, max_pending=10**7)
    out: list[Turn] = []
    for req in base_batches(batches * 512):
        out.extend(asm.add_records(normalizer.split(parse_protobuf(retraced(req, 0)).spans)[0], 2**62))
    out.extend(asm.flush())
    return out


def _cpu(judge: Judge, turns: list[Turn], several: bool = True) -> tuple[float, list[Any]]:
    """CPU seconds to judge `turns`; without `several`, turns of several calls take the general path (as before
    their plans)."""
    saved = _judge.MAX_PLANNED_CALLS
    _judge.MAX_PLANNED_CALLS = saved if several else 1
    try:
        t0 = time.process_time()
        out = [judge.judge(t) for t in turns]
        return time.process_time() - t0, out
    finally:
        _judge.MAX_PLANNED_CALLS = saved


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--batches", type=int, default=20, help="distinct 512-span requests (default 20)")
    ap.add_argument("--repeat", type=int, default=7, help="runs of each; the best is kept (default 7)")
    ap.add_argument("--serve-gc", action="store_true", help="tune the collector as toolwatch serve does")
    args = ap.parse_args(argv)
    if _plan._C is None:
        print("bench_plans: the C plans are not loaded (not built, or TOOLWATCH_PURE_PYTHON=1)")
        return 1
    turns = _turns(args.batches)
    n_tool = sum(len(t.calls) for t in turns)
    rules = load_rules([RULES])
    c_module, _plan._C = _plan._C, None
    try:
        judges = {"python": Judge(rules)}  # its judge() and plans: the Python ones (plans are built on first use)
        ref = [judges["python"].judge(t) for t in turns]
    finally:
        _plan._C = c_module
    judges["c"] = Judge(rules)
    judges["c-plans"] = Judge(rules)  # C plans, the Python judge() (the class's, not the C dispatch)
    judges["c-plans"].__dict__.pop("judge", None)
    saved, _judge.MAX_PLANNED_CALLS = _judge.MAX_PLANNED_CALLS, 1
    try:
        judges["c-general"] = Judge(rules)  # the C dispatch and plans; turns of several calls take _general
    finally:
        _judge.MAX_PLANNED_CALLS = saved
    if any(_cpu(j, turns, k != "c-general")[1] != ref for k, j in judges.items() if k != "python"):
        print("bench_plans: the C plans' verdicts differ from the Python plans'")
        return 1
    if args.serve_gc:
        gc.freeze()
        gc.set_threshold(200_000, 100, 100)
    best = {k: float("inf") for k in judges}
    several = [t for t in turns if len(t.calls) > 1]
    plan_runs: list[float] = []
    general_runs: list[float] = []
    for _ in range(args.repeat):
        for k, judge in judges.items():
            best[k] = min(best[k], _cpu(judge, turns, k != "c-general")[0])
        for _ in range(20):  # the turns of several calls alone, by their plans and by the general path, alternating
            plan_runs.append(_cpu(judges["c"], several)[0])
            general_runs.append(_cpu(judges["c-general"], several, False)[0])
    gc_note = "serve's GC tuning" if args.serve_gc else "default GC"
    print(f"bench_plans: {len(turns)} turns, {n_tool} tool spans; judge stage, CPU µs per tool span")
    print(f"  (best of {args.repeat}, alternating; {gc_note}):")
    labels = {
        "python": "Python judge() and plans",
        "c-plans": "Python judge(), C plans",
        "c": "C judge() and plans",
        "c-general": "C, several calls: general",
    }
    for k in ("python", "c-plans", "c", "c-general"):
        print(f"  {labels[k]:26s} {best[k] / n_tool * 1e6:6.2f}")
    print(f"  {'saved':26s} {(best['python'] - best['c']) / n_tool * 1e6:6.2f} ({1 - best['c'] / best['python']:.0%})")
    if several:
        plan_us, general_us = (statistics.median(r) / len(several) * 1e6 for r in (plan_runs, general_runs))
        print(f"  turns of several calls ({len(several)}), CPU µs per turn, median of {len(plan_runs)} alternating:")
        print(f"    plans {plan_us:6.2f}  general path {general_us:6.2f}  ratio {plan_us / general_us:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
