"""Arguments nested past what the reference validator can walk fail the schema with one violation, whatever the
depth of the stack the judge runs on.

The reference validator recurses per level of the arguments; where it runs out of stack decides which code sees the
RecursionError. Mostly jsonschema's own, and the judge records the violation `other` (nested too deeply); at some
stack depths it is the lookup of a type checker in the Rust map jsonschema keeps them in (rpds), which panics on the
error, and the panic (pyo3's PanicException, a BaseException) went out of Judge.judge. Each path is asked at a range
of stack depths, so the error lands at each point of a level's walk: the C plans, the Python plans and the general
path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monitor.judge import Judge, _plan
from monitor.records import Turn
from monitor.verdict import TurnVerdict

from .helpers import call, judge_for

_OBJECT = {"type": "object", "properties": {"x": {"$ref": "#"}}, "additionalProperties": False}
SCHEMAS = {"ref": _OBJECT, "if-then": {"if": {"type": "object"}, "then": _OBJECT}}


def _at_depth(extra: int, f: Callable[[Turn], TurnVerdict | None], t: Turn) -> TurnVerdict | None:
    return f(t) if extra <= 0 else _at_depth(extra - 1, f, t)


def _judge(tmp_path: Path, schema: dict[str, Any]) -> Judge:
    return judge_for(tmp_path, f"""
catalog: {{tools: [{{name: get_weather, schema: {json.dumps(schema)}}}]}}
expect:
  - when: {{prefix: "w"}}
    call: [{{tool: get_weather}}]
""")


@pytest.mark.parametrize("plans", ["c", "python"])
@pytest.mark.parametrize("schema", SCHEMAS)
def test_schema_valid_false_always_comes_with_a_violation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schema: str, plans: str
) -> None:
    if plans == "c" and _plan._C is None:
        pytest.skip("the C plans are not loaded")
    if plans == "python":
        monkeypatch.setattr(_plan, "_C", None)
    judge = _judge(tmp_path, SCHEMAS[schema])
    t = Turn("w oslo", (call("get_weather", '{"x":' * 300 + '{"y":1}' + "}" * 300),))
    for extra in range(16):
        for path in (judge.judge, judge._general):
            v = _at_depth(extra, path, t)
            assert v is not None
            c = v.calls[0]
            assert c.schema_valid is False
            assert [x.kind.value for x in c.violations] == ["other"], (extra, path)
