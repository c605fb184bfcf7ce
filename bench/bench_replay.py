"""Replay throughput and FSCS-ART step cost, each printed beside a baseline measured in the same run.

1. Replayed spans per second from an OTLP JSON lines file (decode + turn assembly + judge + report
   sink, as `toolwatch replay` runs), beside the judge alone on the same turns already decoded and
   assembled; target: replay >= 0.5 of the judge alone.
2. The FSCS-ART step cost with a pool of 10 candidates against 10,000 tested inputs of the triage
   generator; target <= 50 ms per step; beside a plain scan (`extractOne` per candidate, no pruning).

Run: .venv/bin/python bench/bench_replay.py [--turns N]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monitor.assembly import TurnAssembler  # noqa: E402
from monitor.evaluate import Harness, load_callable, load_judge  # noqa: E402
from monitor.otlp import decode_json, parse_json, request_to_json  # noqa: E402
from monitor.probe import FscsSelector  # noqa: E402
from monitor.records import Turn  # noqa: E402
from monitor.replay import Replayer, replay_files  # noqa: E402
from monitor.report import ReportBuilder  # noqa: E402

RULES = Path(__file__).resolve().parents[1] / "rules" / "incident-triage.yaml"
triage = load_callable("examples.triage.agent:triage")
generate = load_callable("examples.triage.generator:generate")
BATCH_SPANS = 512


def write_capture(path: Path, turns: int) -> int:
    """Run the triage agent `turns` times and write its spans as OTLP JSON lines of ~512 spans each."""
    rng = random.Random(1)
    written = 0
    pending = []
    with Harness(agent_name="incident-triage") as h, path.open("w", encoding="utf-8") as fh:
        for _ in range(turns):
            h.run(triage, generate(rng))
            pending += h.exporter.drain()
            if len(pending) >= BATCH_SPANS:
                fh.write(request_to_json(encode_spans(pending)) + "\n")
                written += len(pending)
                pending = []
        if pending:
            fh.write(request_to_json(encode_spans(pending)) + "\n")
            written += len(pending)
    return written


def bench_replay(turns: int) -> None:
    judge = load_judge([RULES])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.jsonl"
        spans = write_capture(path, turns)
        size = os.path.getsize(path)
        # The turns, decoded and assembled beforehand, for the judge-alone baseline.
        asm = TurnAssembler()
        decoded: list[Turn] = []
        for line in path.read_bytes().splitlines():
            decoded += asm.add(decode_json(line), 0)
        decoded += asm.flush()
        best_replay = best_judge = float("inf")
        for _ in range(3):
            builder = ReportBuilder(keep_cases=False)  # as `toolwatch replay` without --junit
            replayer = Replayer(judge, builder.add)
            t0 = time.perf_counter()
            replay_files(replayer, [path])
            best_replay = min(best_replay, time.perf_counter() - t0)
            assert replayer.stats.turns == len(decoded) == turns
            t0 = time.perf_counter()
            for t in decoded:
                judge.judge(t)
            best_judge = min(best_judge, time.perf_counter() - t0)
        lines = path.read_bytes().splitlines()
        t0 = time.perf_counter()
        requests = [parse_json(line) for line in lines]
        t_decode = time.perf_counter() - t0
        asm = TurnAssembler()
        t0 = time.perf_counter()
        for req in requests:
            asm.add(req.spans, 0)
        asm.flush()
        t_assemble = time.perf_counter() - t0
    replay_rate = spans / best_replay
    judge_rate = spans / best_judge
    print(f"capture: {turns} turns, {spans} spans, {size / 1e6:.1f} MB of OTLP JSON lines")
    print(f"replay (decode + assemble + judge + report): {replay_rate:,.0f} spans/s "
          f"({turns / best_replay:,.0f} turns/s)")
    print(f"judge alone on pre-decoded turns:            {judge_rate:,.0f} spans/s "
          f"({turns / best_judge:,.0f} turns/s)")
    print(f"where replay time goes: decode {t_decode / best_replay:.0%}, normalize + assemble "
          f"{t_assemble / best_replay:.0%}, judge {best_judge / best_replay:.0%}, rest (file reading, report sink) "
          f"{max(0.0, 1 - (t_decode + t_assemble + best_judge) / best_replay):.0%}")
    ratio = replay_rate / judge_rate
    print(f"ratio replay / judge alone: {ratio:.2f} (target >= 0.5) {'OK' if ratio >= 0.5 else 'BELOW TARGET'}")


def bench_fscs(tested_n: int = 10_000, pool: int = 10, steps: int = 40) -> None:
    rng = random.Random(2)
    sel = FscsSelector(seed=2)
    for _ in range(tested_n):
        sel.add(generate(rng))
    pools = [[generate(rng) for _ in range(pool)] for _ in range(steps)]
    fast, plain = [], []
    for cands in pools:
        t0 = time.perf_counter()
        choice = sel.select(cands)
        fast.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        mins = [int(process.extractOne(c, sel.tested, scorer=Levenshtein.distance)[1]) for c in cands]
        plain.append(time.perf_counter() - t0)
        assert choice.distance == max(mins) and choice.index == mins.index(max(mins))
    f_ms, p_ms = statistics.median(fast) * 1e3, statistics.median(plain) * 1e3
    print(f"FSCS step, pool {pool} vs {tested_n} tested inputs: {f_ms:.2f} ms median "
          f"(p90 {sorted(fast)[int(0.9 * steps)] * 1e3:.2f} ms; target <= 50 ms) "
          f"{'OK' if f_ms <= 50 else 'ABOVE TARGET'}")
    print(f"plain scan (extractOne per candidate):       {p_ms:.2f} ms median; ratio pruned / plain {f_ms / p_ms:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=10_000)
    args = ap.parse_args()
    bench_replay(args.turns)
    bench_fscs()


if __name__ == "__main__":
    main()
