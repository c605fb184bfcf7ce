"""Replay's clock, made of the spans' end times, is not carried off by one span from a skewed clock.

`serve` releases a turn its grace period after the turn span arrives, by the wall clock; replay has no arrival times
and takes the latest end time seen. One span whose end time is far off (a host clock years ahead, a garbage
timestamp) carried that clock off with it: every turn pending was released before the rest of its request was
added, its calls there became late calls and the turn was judged with them missed, and every later turn too."""

from __future__ import annotations

import json

from monitor.evaluate import load_judge
from monitor.otlp import Decoded, Span
from monitor.replay import Replayer
from monitor.verdict import TurnVerdict
from tests.monitor.service.conftest import RULES

T0 = 1_790_000_000 * 10**9
S = 10**9
YEAR_2100 = 4_102_444_800 * 10**9


def _turn(trace: str, end: int) -> Span:
    messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "[AUTH] login failures"}]}])
    return Span(trace, "a" * 16, "", "invoke_agent incident-triage", start_ns=end - S // 2, end_ns=end,
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "incident-triage",
                            "gen_ai.input.messages": messages})


def _call(trace: str, end: int) -> Span:
    return Span(trace, "c" * 16, "a" * 16, "execute_tool pull_auth_telemetry", start_ns=end - S // 10, end_ns=end,
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pull_auth_telemetry",
                            "gen_ai.tool.call.id": "call_1",
                            "gen_ai.tool.call.arguments": json.dumps({"log_excerpt": "login failures"})})


def _other(trace: str, i: int, end: int) -> Span:
    return Span(trace, f"{i:016x}", "", "GET /health", start_ns=end - S // 10, end_ns=end)


def _replay(requests: list[list[Span]]) -> tuple[list[TurnVerdict], Replayer]:
    verdicts: list[TurnVerdict] = []
    replayer = Replayer(load_judge([RULES]), verdicts.append)
    for spans in requests:
        replayer.feed(Decoded(spans))
    replayer.finish()
    return verdicts, replayer


def test_one_span_from_a_skewed_clock_does_not_release_the_turns_waiting_for_their_calls() -> None:
    # The turn span is exported first (its call's span in the next batch, within the grace period); that batch also
    # holds a span from a host whose clock is years ahead, beside spans of sane hosts.
    first = [_turn("1" * 32, T0), *(_other("9" * 32, i, T0) for i in range(3))]
    second = [_call("1" * 32, T0 - S // 4), _other("8" * 32, 1, YEAR_2100),
              *(_other("7" * 32, i, T0) for i in range(3))]
    third = [_turn("2" * 32, T0 + S), _call("2" * 32, T0 + S - S // 4)]
    verdicts, replayer = _replay([first, second, third])
    assert [(v.trace_id, [c.outcome.value for c in v.calls], v.missed) for v in verdicts] == [
        ("1" * 32, ["correct"], ()), ("2" * 32, ["correct"], ())]
    assert replayer.assembler.stats.late_calls == 0


def test_the_clock_still_follows_the_spans_of_a_capture_that_resumes_later() -> None:
    # A capture with a gap (nothing for a day): the clock moves on with the spans after it, turns are released by it.
    day = 86_400 * S
    first = [_turn("1" * 32, T0), _call("1" * 32, T0 - S // 4)]
    later = [_turn("2" * 32, T0 + day), _call("2" * 32, T0 + day - S // 4)]
    verdicts, replayer = _replay([first, later])
    assert [v.trace_id for v in verdicts] == ["1" * 32, "2" * 32]
    assert replayer.clock_ns == T0 + day
