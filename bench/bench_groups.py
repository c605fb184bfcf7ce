"""VerdictBatch.groups in C against its Python reference, on bench_serve's verdicts: CPU µs per verdict.

The verdicts of bench_serve's workload (the instrumented incident-triage agent), in batches of `--batch`, grouped
by `VerdictBatch.groups` with the C extension (monitor/metrics/_cbatch.c) and with the Python reference (signatures,
then Counter), and counted by `ToolwatchMetrics.observe` with each (one ToolwatchMetrics each, kept across runs
as a server keeps it). The two are run interleaved, `--rounds` times
(each round the best of 3); medians are printed, with the spread, and the ratio C / Python.

Run: .venv/bin/python bench/bench_groups.py [--batches N] [--batch B] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_serve import RULES, base_batches, retraced  # noqa: E402

from monitor.assembly import TurnAssembler  # noqa: E402
from monitor.judge import Judge  # noqa: E402
from monitor.metrics import ToolwatchMetrics, VerdictBatch, _batch  # noqa: E402
from monitor.normalize import Normalizer  # noqa: E402
from monitor.otlp import parse_protobuf  # noqa: E402
from monitor.rules import load_rules  # noqa: E402


def verdicts(judge: Judge, n_spans: int) -> list[Any]:
    normalizer = Normalizer()
    asm = TurnAssembler(grace_s=0, max_pending=10**7)
    turns: list[Any] = []
    for req in base_batches(n_spans):
        turns.extend(asm.add_records(normalizer.split(parse_protobuf(retraced(req, 0)).spans)[0], 2**62))
    turns.extend(asm.flush())
    return [judge.judge(t) for t in turns]


def best_of_3(fn: Callable[[], None], n: int) -> float:
    """CPU µs per verdict of fn (n verdicts), the best of 3 runs."""
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best / n * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--batches", type=int, default=8, help="512-span requests of the workload (default 8)")
    ap.add_argument("--batch", type=int, default=256, help="verdicts per batch (default 256, as bench_stages)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    args = ap.parse_args(argv)
    c_groups = _batch._GROUPS_C
    if c_groups is None:
        print("bench_groups: the C extension is not loaded (not built, or TOOLWATCH_PURE_PYTHON=1)")
        return 1
    judge = Judge(load_rules([RULES]))
    vs = verdicts(judge, args.batches * 512)
    batches = [tuple(vs[i : i + args.batch]) for i in range(0, len(vs), args.batch)]
    n_groups = statistics.mean(len(VerdictBatch(b).groups()) for b in batches)
    print(f"bench_groups: {len(vs)} verdicts, {len(batches)} batches of <= {args.batch}, ~{n_groups:.0f} groups each")

    def groups(use_c: bool) -> Callable[[], None]:
        def run() -> None:
            _batch._GROUPS_C = c_groups if use_c else None
            for b in batches:
                VerdictBatch(b).groups()

        return run

    def observe(use_c: bool) -> Callable[[], None]:
        m = ToolwatchMetrics(tools=judge.catalog, agents=judge.agents)  # kept, as serve keeps it: plans made

        def run() -> None:
            _batch._GROUPS_C = c_groups if use_c else None
            for b in batches:
                m.observe(VerdictBatch(b))

        run()
        return run

    cases = {
        "groups python": groups(False),
        "groups C": groups(True),
        "observe python": observe(False),
        "observe C": observe(True),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for _ in range(args.rounds):
            for name, fn in cases.items():  # interleaved: the noise of a moment falls on both
                times[name].append(best_of_3(fn, len(vs)))
    finally:
        _batch._GROUPS_C = c_groups
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"  {name:15s} {med[name]:6.3f} µs per verdict (min {min(t):.3f}, max {max(t):.3f})")
    for what in ("groups", "observe"):
        print(f"  ratio {what} C / python: {med[what + ' C'] / med[what + ' python']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
