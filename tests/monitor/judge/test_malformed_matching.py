"""Arguments that are not JSON fail every argument check (METRICS.md "Per call checks"), in the matching score too:
an argument `one_of` that lists "" (may be omitted) passed for them there, as if the argument were omitted, while the
call's own verdict failed it, so the assignment (and the missed count) followed a check the call did not pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.judge import Judge
from tests.monitor.judge.helpers import call, judge_for, turn

RULES = """
version: 1
catalog:
  tools: [{name: a}]
expect:
  - id: OMIT
    when: {prefix: "[OMIT]"}
    call:
      - {tool: a, args: {u: {one_of: ["x", ""]}}}
      - {tool: a, args: {v: 1}}
  - id: MISSED
    when: {prefix: "[MISSED]"}
    call:
      - {tool: a, min: 1, max: 2, args: {x: 1}}
      - {tool: a, min: 2, args: {y: {one_of: [1, ""]}}}
"""


def _paths(judge: Judge) -> list[tuple[str, object]]:
    return [("as judged", judge.judge), ("general", judge._general)]


@pytest.mark.parametrize("path", ["as judged", "general"])
def test_a_malformed_call_scores_nothing_in_a_slot_whose_argument_may_be_omitted(tmp_path: Path, path: str) -> None:
    judge = judge_for(tmp_path, RULES)
    judge_turn = dict(_paths(judge))[path]
    # {"v": 2} omits u (passes slot 0) and fails slot 1; the malformed call passes nothing: it takes slot 1.
    v = judge_turn(turn("[OMIT] x", call("a", "{not json"), call("a", {"v": 2})))  # type: ignore[operator]
    assert [c.slot for c in v.calls] == [1, 0]
    assert [c.args_ok for c in v.calls] == [False, True]
    # Both calls score the same in either slot (the malformed one nothing, {"x": 1} its x): one minimum is met
    # whichever way, so the original order puts both in slot 0, short of slot 1's two calls.
    v = judge_turn(turn("[MISSED] q", call("a", "{bad"), call("a", {"x": 1})))  # type: ignore[operator]
    assert [c.slot for c in v.calls] == [0, 0]
    assert len(v.missed) == 2
