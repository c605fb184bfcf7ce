"""Turn assembly as the server runs it: Python add_records / poll against the C ones, in CPU µs per tool span.

The bench_serve workload (the instrumented incident-triage agent, requests of 512 spans, one turn and its tool call
per trace), normalized once and copied with fresh trace ids before each request, fed to a TurnAssembler with a
grace period of 2 s of virtual time and the server's collector and malloc settings: requests come `--step-ms`
apart (5 ms: about 100,000 traces pending, as in the server near its target rate), each add_records releasing the
turns whose grace period has passed. After a warm-up that fills the pending set, add_records of the next
`--measure` requests is timed (CPU time), Python and C alternately, best of `--repeat`.

Then turns of one trace due together (a long session recorded as one trace, a replay of one): the poll that releases
`--due-turns` turns of one trace whose grace periods end together (each with a call under its chat span and one right
under it), against the same number of turns in traces of `--due-base` turns each, in CPU µs per turn released; the
ratio is near 1 when a trace's release costs in proportion to its turns (it grew with them when each turn's release
looked at every call of the trace). `--due-only` runs this part alone.

Run: .venv/bin/python bench/bench_assembly.py [--batches N] [--measure M] [--repeat R] [--due-turns N] [--due-base B]
"""

from __future__ import annotations

import argparse
import copy
import gc
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_serve import GRACE_S, base_batches, retraced  # noqa: E402

from monitor.assembly import TurnAssembler, _assembler  # noqa: E402
from monitor.assembly._assembler import records_bytes  # noqa: E402
from monitor.normalize import Normalizer  # noqa: E402
from monitor.otlp import Span, parse_protobuf  # noqa: E402
from monitor.records import ToolCall, Turn  # noqa: E402
from monitor.serve._memory import tune_process  # noqa: E402


class PythonAssembler(TurnAssembler):
    """The Python reference methods (a subclass: the C functions hand it to them anyway), around them what
    TurnAssembler.add_records and poll do around the C ones (the weighing against the bound of pending bytes, the
    calls of released turns remembered): the same work, so the same turns released and the same time outside them."""

    def add_records(
        self, records: Iterable[ToolCall | Turn | Span], now_ns: int, weight: int | None = None
    ) -> list[Turn]:
        records = list(records)
        self._bytes += records_bytes(records) if weight is None else weight
        return self._weigh(self._add_records_py(records, now_ns))

    def poll(self, now_ns: int) -> list[Turn]:
        out = self._poll_py(now_ns)
        self._take_off(out)
        return out


# The pending set of this workload (about 100,000 traces of a turn and a call) weighs about 580 MiB as turn assembly
# estimates it (_budget: an upper bound), over serve's default --max-pending-bytes (512 MiB): held whole here, so that
# what is timed is assembly, not the early release of traces at that bound (which would take most of the time).
PENDING_BYTES = 2 << 30


def normalized(batches: int) -> list[list[Any]]:
    """The normalized records of `batches` requests."""
    normalizer = Normalizer()
    return [normalizer.split(parse_protobuf(retraced(r, 0)).spans)[0] for r in base_batches(batches * 512)]


def fresh(recs: list[Any], rep: int) -> list[Any]:
    """New copies of the records with the trace ids of repetition `rep` (made just before they are added, as the
    server's decoder and normalizer make them: fresh objects, in the cache)."""
    tag = f"{rep:08x}"
    out = []
    for r in recs:
        c = copy.copy(r)
        c.trace_id = r.trace_id[:-8] + tag
        out.append(c)
    return out


def run(cls: type[TurnAssembler], base: list[list[Any]], n: int, warm: int, step_ns: int) -> tuple[float, int, int]:
    """CPU seconds of add_records for the requests after `warm` (of n), the traces pending when timing started,
    turns released."""
    asm = cls(grace_s=GRACE_S, max_pending=10**7, max_pending_bytes=PENDING_BYTES)
    now = 10**18
    released = 0
    cpu = 0.0
    pending = 0
    clock = time.process_time
    for i in range(n):
        recs = fresh(base[i % len(base)], i // len(base))
        now += step_ns
        if i < warm:
            released += len(asm.add_records(recs, now))
            pending = asm.pending_traces
            continue
        t0 = clock()
        out = asm.add_records(recs, now)
        cpu += clock() - t0
        released += len(out)
        del out  # the turns are freed here, untimed (in the server, once judged)
    return cpu, pending, released


def session(tid: str, turns: int) -> list[ToolCall | Turn | Span]:
    """One trace of `turns` turns, each a chat span with a tool call under it and a tool call right under the turn."""
    out: list[ToolCall | Turn | Span] = []
    for i in range(turns):
        t, m, at = f"t{i:015x}", f"m{i:015x}", 10 * i
        out += [
            ToolCall("lookup", trace_id=tid, span_id=f"c{i:015x}", parent_span_id=m, start_ns=at + 2, end_ns=at + 3),
            Span(tid, m, t, "chat", 3, at + 1, at + 4),
            ToolCall("search", trace_id=tid, span_id=f"d{i:015x}", parent_span_id=t, start_ns=at + 5, end_ns=at + 6),
            Turn("hi", trace_id=tid, span_id=t, start_ns=at, end_ns=at + 9),
        ]
    return out


def due_together(cls: type[TurnAssembler], total: int, per_trace: int, repeat: int) -> float:
    """Best CPU seconds, of `repeat`, of the poll releasing `total` turns due together, `per_trace` a trace."""
    best = float("inf")
    for _ in range(repeat):
        asm = cls(grace_s=1, max_calls_per_trace=4 * per_trace)
        asm.add_records([r for k in range(total // per_trace) for r in session(f"{k:032x}", per_trace)], 0)
        t0 = time.process_time()
        out = asm.poll(10**9)
        best = min(best, time.process_time() - t0)
        if len(out) != total or asm.pending_traces:
            raise AssertionError(f"{len(out)} turns released of {total}, {asm.pending_traces} traces left")
    return best


def main_due(turns: int, base: int, repeat: int) -> None:
    """The per-turn cost of releasing `turns` turns of one trace due together, against traces of `base` turns."""
    print(f"bench_assembly: {turns} turns due together, in one trace and in traces of {base}, best of {repeat}")
    for name, cls in (("python", PythonAssembler), ("c", TurnAssembler)):
        one = due_together(cls, turns, turns, repeat)
        many = due_together(cls, turns, base, repeat)
        print(
            f"  release, {name:6s} one trace of {turns} {one / turns * 1e6:7.2f} µs per turn, traces of {base} "
            f"{many / turns * 1e6:6.2f}; ratio {one / many:.2f}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--batches", type=int, default=20, help="distinct 512-span requests (default 20)")
    ap.add_argument("--measure", type=int, default=400, help="requests timed after the warm-up (default 400)")
    ap.add_argument("--step-ms", type=float, default=5.0, help="virtual time between requests (default 5 ms)")
    ap.add_argument("--repeat", type=int, default=3, help="runs each, alternating; the best is kept (default 3)")
    ap.add_argument("--due-turns", type=int, default=1000, help="turns of one trace due together (default 1000)")
    ap.add_argument("--due-base", type=int, default=10, help="turns a trace in the baseline (default 10)")
    ap.add_argument("--due-only", action="store_true", help="only the turns due together")
    args = ap.parse_args(argv)
    if _assembler._ADD_C is None:
        print("bench_assembly: the C assembler is not loaded (not built, or TOOLWATCH_PURE_PYTHON=1)")
        return 1
    if args.due_only:
        main_due(args.due_turns, args.due_base, args.repeat)
        return 0
    step_ns = int(args.step_ms * 1e6)
    warm = int(GRACE_S * 1e9 / step_ns) + 1  # a full grace period of requests: the pending set at its size
    n = warm + args.measure
    base = normalized(args.batches)
    n_tool = sum(isinstance(r, ToolCall) for i in range(warm, n) for r in base[i % len(base)])
    n_turn = sum(isinstance(r, Turn) for i in range(warm, n) for r in base[i % len(base)])
    # As `toolwatch serve` runs: the start-up objects frozen, collections rarer, malloc thresholds pinned, freed
    # arenas kept.
    gc.collect()
    tune_process()
    best = {"python": float("inf"), "c": float("inf")}
    seen: dict[str, tuple[int, int]] = {}
    for _ in range(args.repeat):
        for name, cls in (("python", PythonAssembler), ("c", TurnAssembler)):
            cpu, pending, released = run(cls, base, n, warm, step_ns)
            best[name] = min(best[name], cpu)
            seen[name] = (pending, released)
    if seen["python"] != seen["c"]:
        print(f"bench_assembly: Python and C differ: {seen}")
        return 1
    pending, released = seen["c"]
    print(
        f"bench_assembly: {args.measure} requests timed after {warm} ({n_tool} tool spans, {n_turn} turns), "
        f"{pending:,} traces pending, grace {GRACE_S} s, a request every {args.step_ms} ms"
    )
    for name in ("python", "c"):
        print(f"  assemble, 100k pending  {name:6s} {best[name] / n_tool * 1e6:6.2f} µs per tool span")
    print(f"  ratio python / c {best['python'] / best['c']:.2f}")
    main_due(args.due_turns, args.due_base, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
