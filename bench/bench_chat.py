"""What model-request (chat) spans cost the pipeline: the same turns with and without them, measured in one run.

An agent instrumented at the model layer too (an OpenAI or Anthropic instrumentation beside toolwatch's) exports,
in each turn, a `chat` span per model request: the first holds the tool calls the model asked for (`tool_call` parts
of `gen_ai.output.messages`, reconciled with the calls that ran), the second the final answer. This bench runs the
incident-triage agent both ways (the same seeds, so the same calls; their verdicts are checked equal) and times
decode -> normalize -> assemble -> judge in this process (CPU time, best of `--repeat` runs, interleaved), per
turn. It prints the cost of each workload, the cost a chat span adds, and the ratio of the two per-turn costs.

Run: .venv/bin/python bench/bench_chat.py [--turns N] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_serve import BATCH, RULES  # noqa: E402

from instrumentation import configure, shutdown  # noqa: E402
from instrumentation._calls import parse_tool_call  # noqa: E402
from monitor.assembly import TurnAssembler  # noqa: E402
from monitor.demo import LogLineGenerator, SimulatedTriageModel, TriageAgent  # noqa: E402
from monitor.demo._logs import LogLine  # noqa: E402
from monitor.demo._model import ModelResponse  # noqa: E402
from monitor.judge import Judge  # noqa: E402
from monitor.normalize import Normalizer  # noqa: E402
from monitor.otlp import accelerated, parse_protobuf  # noqa: E402
from monitor.rules import load_rules  # noqa: E402
from monitor.verdict import TurnVerdict  # noqa: E402

MODEL = "gpt-4o-mini"


class ChatSpans:
    """The simulated model, each request in a `chat` span as a model-layer instrumentation records it."""

    def __init__(self, model: SimulatedTriageModel, tracer: trace.Tracer) -> None:
        self.model = model
        self.tracer = tracer

    def _span(self, line: LogLine, parts: list[dict[str, Any]]) -> None:
        attrs: dict[str, str | int] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": MODEL,
            "gen_ai.response.model": MODEL,
            "gen_ai.usage.input_tokens": 180,
            "gen_ai.usage.output_tokens": 40,
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": line.text}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
        }
        with self.tracer.start_as_current_span(f"chat {MODEL}", kind=trace.SpanKind.CLIENT, attributes=attrs):
            pass

    def respond(self, line: LogLine) -> ModelResponse:
        response = self.model.respond(line)
        parts: list[dict[str, Any]] = []
        for call in response.tool_calls:
            try:
                req = parse_tool_call(call)
            except TypeError:
                continue
            parts.append({"type": "tool_call", "id": req.call_id, "name": req.name, "arguments": req.arguments})
        self._span(line, parts)
        return response

    def answer(self, line: LogLine, results: list[str], response: ModelResponse) -> str:
        text = self.model.answer(line, results, response)
        self._span(line, [{"type": "text", "content": text}])
        return text


def bodies(turns: int, chat: bool, seed: int = 0) -> list[bytes]:
    """The agent's spans for `turns` log lines, in requests of BATCH spans (with or without chat spans)."""
    provider = configure(service_name="bench", exporter="memory", set_global=False, capture_content=True)
    model: Any = SimulatedTriageModel(seed)
    if chat:
        model = ChatSpans(model, provider.get_tracer("bench-model"))
    agent = TriageAgent(model)
    lines = LogLineGenerator(seed)
    for _ in range(turns):
        agent.run(lines.line())
    shutdown(provider)
    exporter: Any = provider.exporter
    spans = list(exporter.get_finished_spans())
    return [bytes(encode_spans(spans[i : i + BATCH]).SerializeToString()) for i in range(0, len(spans), BATCH)]


def pipeline(
    judge: Judge, reqs: Sequence[bytes], sink: Callable[[TurnVerdict], object] | None = None
) -> Callable[[], int]:
    def run() -> int:
        normalizer = Normalizer()
        asm = TurnAssembler(grace_s=0, max_pending=10**7, normalizer=normalizer)
        n = 0
        for body in reqs:
            records, _ = normalizer.split(parse_protobuf(body).spans)
            for t in asm.add_records(records, 2**62):
                v = judge.judge(t)
                if sink is not None:
                    sink(v)
                n += 1
        for t in asm.flush():
            v = judge.judge(t)
            if sink is not None:
                sink(v)
            n += 1
        return n

    return run


def reasons(judge: Judge, reqs: Sequence[bytes]) -> Counter[tuple[str, str]]:
    """Each verdict's input and reason, counted: the two workloads must give the same (every requested call ran)."""
    out: Counter[tuple[str, str]] = Counter()
    pipeline(judge, reqs, lambda v: out.update([(v.input_text, v.reason)]))()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--turns", type=int, default=10_000, help="turns of each workload (default 10,000)")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved runs of each; the best is kept (default 5)")
    args = ap.parse_args(argv)
    judge = Judge(load_rules([RULES]))
    plain, chat = bodies(args.turns, chat=False), bodies(args.turns, chat=True)
    if reasons(judge, plain) != reasons(judge, chat):
        print("the two workloads' verdicts differ: the requested calls were not reconciled with the calls that ran")
        return 1
    runs = {"tool spans only": pipeline(judge, plain), "with chat spans": pipeline(judge, chat)}
    best = dict.fromkeys(runs, float("inf"))
    verdicts = dict.fromkeys(runs, 0)
    for _ in range(args.repeat):
        for name, fn in runs.items():
            t0 = time.process_time()
            verdicts[name] = fn()
            best[name] = min(best[name], time.process_time() - t0)
    print(f"bench_chat: {args.turns} turns each, the same verdicts; C extensions {accelerated()}")
    for name, body in (("tool spans only", plain), ("with chat spans", chat)):
        print(
            f"  {name:16s} {sum(map(len, body)) / 2**20:6.1f} MiB, {verdicts[name]} verdicts: "
            f"{best[name] / args.turns * 1e6:6.2f} µs per turn (decode, normalize, assemble, judge)"
        )
    extra = (best["with chat spans"] - best["tool spans only"]) / (2 * args.turns)
    print(f"  a chat span adds {extra * 1e6:.2f} µs (2 a turn)")
    print(f"  ratio with / without chat spans {best['with chat spans'] / best['tool spans only']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
