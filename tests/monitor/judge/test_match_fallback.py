"""METRICS.md "Matching": calls are assigned by an optimal assignment, "not greedy". Past MAX_STATES the per-tool
DP (monitor/judge/_match.py) hands over to the assignment-problem form (monitor/judge/_assignment.py), which a rule
of 14 slots of one tool (each with argument checks) and 14 calls reaches. A slot-order greedy fill, which this used
to be, leaves a call there in a slot whose checks it fails while the optimal one passes them, so argument
correctness and end-to-end accuracy miscounted (12 of 14 calls with correct arguments instead of 13).

The exact DP gives the optimal assignment when its bound is lifted (the first test); the judge with the shipped
bound gives the same one through the whole judge and tally (the second).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.judge import Judge, Tally, _match
from monitor.records import ToolCall, Turn
from tests.monitor.judge.helpers import judge_for

SLOTS = 14  # 2**14 * 15 states > MAX_STATES: the fallback

# Slot j expects {a: j, b: 0}. Call 0 ({a: 1}) passes every check of slot 1 and half of slot 0's; call 1 ({a: 99})
# passes half of any slot's; call k >= 2 passes every check of slot k. The optimal assignment (most summed argument
# score) is then unique: call 0 -> slot 1, call 1 -> slot 0, call k -> slot k: 13 of 14 calls pass their checks.
RULES = (
    "version: 1\ncatalog:\n  tools:\n    - name: get\nexpect:\n  - id: MANY\n    when: {prefix: '[MANY]'}\n"
    "    call:\n" + "".join(f"      - {{tool: get, args: {{a: {j}, b: 0}}}}\n" for j in range(SLOTS))
)
ARGS = [{"a": 1, "b": 0}, {"a": 99, "b": 0}, *({"a": k, "b": 0} for k in range(2, SLOTS))]
OPTIMAL_SLOTS = [1, 0, *range(2, SLOTS)]


def _turn() -> Turn:
    calls = tuple(ToolCall("get", call_id=f"c{i}", arguments=json.dumps(a)) for i, a in enumerate(ARGS))
    return Turn("[MANY] every region", calls=calls)


def _slot_scores() -> list[list[int]]:
    """Each call's score in each slot as the judge scales it: the passing share of the slot's 2 checks, in 4ths."""
    return [[sum(2 for k, want in (("a", j), ("b", 0)) if a[k] == want) for j in range(SLOTS)] for a in ARGS]


def _check(judge: Judge) -> None:
    v = judge.judge(_turn())
    assert [c.slot for c in v.calls] == OPTIMAL_SLOTS
    tally = Tally()
    tally.add(v)
    assert (tally.args_ok_calls, tally.args_checked_calls) == (SLOTS - 1, SLOTS)


def test_the_exact_assignment_of_the_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The case is what the text above says: the exact DP, its bound lifted, finds that assignment."""
    monkeypatch.setattr(_match, "MAX_STATES", 10**7)
    _check(judge_for(tmp_path, RULES))


def test_the_judge_assigns_optimally_past_the_dp_bound(tmp_path: Path) -> None:
    sizes = 2**SLOTS * (SLOTS + 1)
    assert sizes > _match.MAX_STATES  # the shipped bound sends the case past the DP
    greedy = _match._greedy(SLOTS, [1] * SLOTS, [1] * SLOTS, _slot_scores())
    assert greedy != OPTIMAL_SLOTS  # and there a greedy fill misses the optimum
    _check(judge_for(tmp_path, RULES))
