"""Benchmark of the `@tool` wrapper: in-call overhead, the not-sampled path, and CPU with real export.

Prints, measured side by side in one run:

1. in-call overhead per call of `@tool` (content capture on, a 3-key argument dict) divided by the
   overhead of a plain `tracer.start_as_current_span` wrapper setting the same attributes with
   `json.dumps`, both against the same no-op tool and the same provider (target <= 0.8); 1b: the same for an
   async tool, with its overhead when not sampled;
2. the overhead when the span is not sampled, beside the bare call (target <= 5 us);
3. the agent's total CPU per call including background export over OTLP/HTTP to a loopback receiver
   (a separate process, so its CPU is not counted), and the spans dropped at 5,000 calls/s for 10 s
   (target 0).

Run: `python bench/bench_wrapper.py` (about a minute) or `--quick` (a few seconds).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry import context, trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, TraceIdRatioBased
from opentelemetry.trace import SpanKind

import instrumentation as tw
from instrumentation._stats import STATS

ARGS: dict[str, Any] = {"city": "Paris", "unit": "c", "days": 3}


class CountingProcessor(SpanProcessor):
    """Counts ended spans: the in-call figures leave out the export thread (part 3 measures export)."""

    def __init__(self) -> None:
        self.ended = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1


def noop_tool(city: str, unit: str, days: int) -> str:
    """A tool that does nothing."""
    return "ok"


async def async_noop_tool(city: str, unit: str, days: int) -> str:
    """An async tool that does nothing."""
    return "ok"


def baseline_wrapper(tracer: trace.Tracer, func: Callable[..., Any], name: str, description: str) -> Callable[..., Any]:
    """The plain wrapper a user would write: start_as_current_span + set_attribute + json.dumps."""

    def wrapper(**kwargs: Any) -> Any:
        with tracer.start_as_current_span(f"execute_tool {name}", kind=SpanKind.INTERNAL) as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", name)
            span.set_attribute("gen_ai.tool.type", "function")
            span.set_attribute("gen_ai.tool.description", description)
            span.set_attribute("gen_ai.tool.call.id", uuid.uuid4().hex)
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps(kwargs))
            result = func(**kwargs)
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
            return result

    return wrapper


def async_baseline_wrapper(tracer: trace.Tracer, func: Callable[..., Any], name: str,
                           description: str) -> Callable[..., Any]:
    """`baseline_wrapper` for an async tool: the span covers the await."""

    async def wrapper(**kwargs: Any) -> Any:
        with tracer.start_as_current_span(f"execute_tool {name}", kind=SpanKind.INTERNAL) as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", name)
            span.set_attribute("gen_ai.tool.type", "function")
            span.set_attribute("gen_ai.tool.description", description)
            span.set_attribute("gen_ai.tool.call.id", uuid.uuid4().hex)
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps(kwargs))
            result = await func(**kwargs)
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
            return result

    return wrapper


def awaited(func: Callable[..., Any]) -> Callable[..., Any]:
    """A call of the async `func` run to its end with no event loop (the tools here never suspend)."""

    def run(**kwargs: Any) -> Any:
        try:
            func(**kwargs).send(None)
        except StopIteration as stop:
            return stop.value
        raise AssertionError("the benchmarked tools never suspend")

    return run


def per_call_ns(func: Callable[..., Any], calls: int) -> float:
    args = ARGS
    gc.disable()
    try:
        start = time.thread_time_ns()
        for _ in range(calls):
            func(**args)
        return (time.thread_time_ns() - start) / calls
    finally:
        gc.enable()


def best_of(funcs: dict[str, Callable[..., Any]], calls: int, rounds: int) -> dict[str, float]:
    """Minimum per-call CPU time (this thread) of each function over interleaved rounds.

    Thread CPU time, not wall time, and the minimum over rounds: robust to other processes on shared cores."""
    best = {name: float("inf") for name in funcs}
    for _ in range(rounds):
        for name, func in funcs.items():
            best[name] = min(best[name], per_call_ns(func, calls))
    return best


def _recording_provider() -> tuple[TracerProvider, CountingProcessor, Any]:
    """A provider in force that records every span (counted), content capture on, and a tracer of its own."""
    provider = TracerProvider()
    processor = CountingProcessor()
    provider.add_span_processor(processor)
    tw.set_tracer_provider(provider)
    tw.configure_content(capture_content=True)
    return provider, processor, provider.get_tracer("bench")


def bench_in_call(calls: int, rounds: int) -> None:
    provider, processor, tracer = _recording_provider()
    wrapped = tw.tool(noop_tool)
    baseline = baseline_wrapper(tracer, noop_tool, "noop_tool", "A tool that does nothing.")
    t = best_of({"bare": noop_tool, "baseline": baseline, "tool": wrapped}, calls, rounds)
    ours, theirs = t["tool"] - t["bare"], t["baseline"] - t["bare"]
    print("1) in-call overhead per call (content capture on, 3-key arguments, same provider)")
    print(f"   bare call                                 {t['bare'] / 1000:8.2f} us")
    print(f"   plain start_as_current_span wrapper       {theirs / 1000:8.2f} us overhead")
    print(f"   @tool                                     {ours / 1000:8.2f} us overhead")
    print(f"   ratio @tool / plain wrapper               {ours / theirs:8.2f}   (target <= 0.80)")
    assert processor.ended == 2 * calls * rounds, "both wrappers must have recorded every call"
    provider.shutdown()


def bench_async(calls: int, rounds: int) -> None:
    """Section 1 and 2 for an async tool (each call's coroutine run to its end by `awaited`)."""
    provider, processor, tracer = _recording_provider()
    funcs = {"bare": awaited(async_noop_tool), "tool": awaited(tw.tool(async_noop_tool)),
             "baseline": awaited(async_baseline_wrapper(tracer, async_noop_tool, "async_noop_tool",
                                                        "An async tool that does nothing."))}
    t = best_of(funcs, calls, rounds)
    assert processor.ended == 2 * calls * rounds, "both wrappers must have recorded every call"
    provider.shutdown()
    off = TracerProvider(sampler=ALWAYS_OFF)
    tw.set_tracer_provider(off)
    unsampled = best_of({"bare": awaited(async_noop_tool), "tool": awaited(tw.tool(async_noop_tool))}, calls, rounds)
    off.shutdown()
    ours, theirs = t["tool"] - t["bare"], t["baseline"] - t["bare"]
    print("1b) async tool (capture on, coroutine run to its end), same provider")
    print(f"   bare call                                 {t['bare'] / 1000:8.2f} us")
    print(f"   plain start_as_current_span wrapper       {theirs / 1000:8.2f} us overhead")
    print(f"   @tool                                     {ours / 1000:8.2f} us overhead")
    print(f"   ratio @tool / plain wrapper               {ours / theirs:8.2f}   (no target: the sync one is 0.80)")
    print(f"   not sampled (always_off)                  {(unsampled['tool'] - unsampled['bare']) / 1000:8.2f} us "
          "overhead   (target <= 5 us)")


def _not_sampled_case(sampler: Any, under_unsampled_parent: bool, calls: int, rounds: int) -> dict[str, float]:
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(CountingProcessor())
    tw.set_tracer_provider(provider)
    tw.configure_content(capture_content=True)
    wrapped = tw.tool(noop_tool)
    token = None
    if under_unsampled_parent:  # e.g. a turn the root sampler dropped
        parent = trace.NonRecordingSpan(trace.SpanContext(0x1234, 0x5678, is_remote=False,
                                                          trace_flags=trace.TraceFlags(0)))
        token = context.attach(trace.set_span_in_context(parent))
    tracer = provider.get_tracer("bench")

    def sdk_floor(**kwargs: Any) -> Any:  # what the SDK alone costs for one unsampled span
        tracer.start_span("execute_tool noop_tool").end()
        return noop_tool(**kwargs)

    try:
        return best_of({"bare": noop_tool, "tool": wrapped, "sdk": sdk_floor}, calls, rounds)
    finally:
        if token is not None:
            context.detach(token)
        provider.shutdown()


def bench_not_sampled(calls: int, rounds: int) -> None:
    print("2) not sampled (content capture on)")
    cases = [
        ("sampler always_off", ALWAYS_OFF, False),
        ("parent-based (default), unsampled parent", None, True),
        ("root traceidratio(0), no parent-based", TraceIdRatioBased(0.0), False),
    ]
    for label, sampler, under_parent in cases:
        t = _not_sampled_case(sampler, under_parent, calls, rounds)
        overhead = t["tool"] - t["bare"]
        print(f"   {label:41s} {overhead / 1000:8.2f} us overhead   (target <= 5 us; bare call "
              f"{t['bare'] / 1000:.2f} us; SDK start_span+end alone {(t['sdk'] - t['bare']) / 1000:.2f} us)")


class _Receiver(BaseHTTPRequestHandler):
    spans = 0
    requests = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).spans += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        type(self).requests += 1
        payload = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:  # noqa: N802
        payload = json.dumps({"spans": type(self).spans, "requests": type(self).requests}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def run_receiver() -> None:
    """The loopback OTLP/HTTP receiver, in its own process: prints its port, serves until stdin closes."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    print(server.server_address[1], flush=True)
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    server.shutdown()


def _paced(func: Callable[..., Any], rate: int, seconds: float) -> tuple[int, float, float]:
    """Call `func` at `rate` calls/s for `seconds`; returns (calls, process CPU s, wall s)."""
    interval = 1.0 / rate
    total = int(rate * seconds)
    args = ARGS
    cpu0, wall0 = time.process_time(), time.perf_counter()
    next_at = wall0
    for i in range(total):
        func(**args)
        next_at += interval
        if i % 50 == 49:
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
    return total, time.process_time() - cpu0, time.perf_counter() - wall0


def _receiver_count(port: int) -> int:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
        return int(json.loads(response.read())["spans"])


def bench_export(rate: int, seconds: float) -> None:
    receiver = subprocess.Popen([sys.executable, __file__, "--receiver"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        endpoint = f"http://127.0.0.1:{port}/v1/traces"
        short = min(seconds, 3.0)
        bare_calls, bare_cpu, _ = _paced(noop_tool, rate, short)
        # Baseline with the same export: the plain wrapper on the same kind of provider.
        provider = tw.configure(exporter="otlp-http", endpoint=endpoint, capture_content=True, set_global=False)
        plain = baseline_wrapper(provider.get_tracer("bench"), noop_tool, "noop_tool", "A tool that does nothing.")
        cpu0 = time.process_time()
        plain_calls, _, _ = _paced(plain, rate, short)
        provider.force_flush()
        plain_cpu = time.process_time() - cpu0
        provider.shutdown()
        STATS.reset()
        provider = tw.configure(exporter="otlp-http", endpoint=endpoint, capture_content=True, set_global=False)
        wrapped = tw.tool(noop_tool)
        cpu0 = time.process_time()
        calls, _, wall = _paced(wrapped, rate, seconds)
        provider.force_flush()
        cpu = time.process_time() - cpu0
        provider.shutdown()
        received = _receiver_count(port)
        stats = tw.telemetry_stats()
    finally:
        if receiver.stdin is not None:
            receiver.stdin.close()
        receiver.wait(timeout=10)
    per_call, bare, plain_per_call = cpu / calls * 1e6, bare_cpu / bare_calls * 1e6, plain_cpu / plain_calls * 1e6
    print(f"3) OTLP/HTTP export to a loopback receiver (another process), {rate} calls/s "
          f"({calls} calls of @tool in {wall:.1f} s wall; baselines {short:g} s each)")
    print(f"   agent CPU per call, bare paced loop       {bare:8.2f} us")
    print(f"   agent CPU per call, plain wrapper+export  {plain_per_call:8.2f} us")
    print(f"   agent CPU per call, @tool + export        {per_call:8.2f} us   "
          f"({per_call / plain_per_call:.2f}x the plain wrapper, {per_call / bare:.0f}x the bare loop)")
    print(f"   spans received by the receiver            {received - plain_calls:8d} of {calls}")
    print(f"   spans dropped at {rate} calls/s for {seconds:g} s  {stats.dropped_spans:8d}   "
          f"(queue full {stats.spans_dropped_queue_full}, failed export {stats.spans_export_failed}; target 0)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="short run (seconds, less precise)")
    parser.add_argument("--receiver", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.receiver:
        run_receiver()
        return
    calls, rounds, seconds = (5_000, 5, 2.0) if options.quick else (10_000, 15, 10.0)
    print(f"bench_wrapper: python {sys.version.split()[0]}, pid {os.getpid()}, {os.cpu_count()} cpus")
    bench_in_call(calls, rounds)
    bench_async(calls, rounds)
    bench_not_sampled(calls, rounds)
    bench_export(5000, seconds)


if __name__ == "__main__":
    main()
