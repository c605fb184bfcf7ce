"""The C Tally.add (monitor/judge/_ctally.c) when Python code runs in the middle of it.

A key of the tally's dicts that is not exactly a str (the Python reference counts verdicts the extension leaves it,
and puts their names there) is compared with the key the extension looks up by its own __eq__: code that may drop
the dict from the tally, empty it, or reassign the verdict's slots. The extension must then neither read freed
memory nor count into freed objects: it counts, or raises a Python exception. Each case runs in a child process with
Python's debug allocator, which overwrites freed memory, so that a read of a freed object crashes the child rather
than passing by luck.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("monitor.judge._ctally") is None,
                                reason="the C tally was not built")

# (where the str-subclass key sits, the statement its __eq__ runs the first time it is called)
CASES = [
    ("per_tool", "tally.per_tool = {}"),
    ("per_tool", "tally.per_tool.clear()"),
    ("per_tool", "del tally.per_tool"),
    ("per_tool", "v.calls = [object()]"),
    ("per_tool", "v.missed = 1"),
    ("per_tool", "call.violations = [1, 2]"),
    ("per_tool", "call.name = 10 ** 30"),
    ("per_tool", "del call.violations"),
    ("per_tool", "object.__setattr__(unit, 'tool', 'z' * 50)"),
    ("rule_failures", "tally.rule_failures = Counter()"),
    ("rule_failures", "v.rule = 'q' * 60"),
    ("rule_failures", "v.confusion = [1]"),
    ("confusion", "tally.confusion = Counter()"),
    ("confusion", "v.confusion = ()"),
    ("violations", "tally.violations = Counter()"),
]

CHILD = textwrap.dedent(
    """
    import sys
    from collections import Counter
    import monitor.judge._ctally as ctally
    from monitor.judge import Tally, ToolCounts
    from monitor.verdict import (CallVerdict, MissedUnit, Outcome, SchemaViolation, TurnVerdict,
                                 ViolationKind)

    ctally.init(Tally, ToolCounts, TurnVerdict, CallVerdict, MissedUnit, SchemaViolation, ViolationKind, Counter,
                (Outcome.CORRECT, Outcome.WRONG_TOOL, Outcome.SPURIOUS, Outcome.HALLUCINATED))
    where, statement = sys.argv[1], sys.argv[2]
    bad = (SchemaViolation(ViolationKind.TYPE, "$.x", "m"), SchemaViolation(ViolationKind.ENUM, "$.y", "m"))
    call = CallVerdict(0, "search", "c0", Outcome.CORRECT, True, 0, False, tuple(bad), True)
    unit = MissedUnit("read" * 3, 1)
    v = TurnVerdict("a", "t", "s", "in", True, False, "rule" * 5, 0, (call,), (unit,), 2, None, False, True,
                    False, True, 0.5, (), False, False, True, (("search", "read"),), "", (("read", 1),))
    tally = Tally()

    class Key(str):
        fired = False
        def __hash__(self):
            return str.__hash__(self)
        def __eq__(self, other):
            if not Key.fired:
                Key.fired = True
                exec(statement)
            return str.__eq__(self, other)

    if where == "per_tool":
        tally.per_tool[Key("search")] = ToolCounts()
    elif where == "rule_failures":
        tally.rule_failures[Key("rule" * 5)] = 1
    elif where == "confusion":
        tally.confusion[(Key("search"), "read")] = 1
    else:
        tally.violations[Key(ViolationKind.TYPE.value)] = 1
    churn = []
    try:
        for _ in range(3):
            ctally.add(tally, v)
            churn.append([object() for _ in range(200)])  # reuse what was freed
        print("counted", Key.fired, tally.turns)
    except Exception as e:
        print("raised", Key.fired, type(e).__name__)
    """
)


@pytest.mark.parametrize(("where", "statement"), CASES)
def test_code_run_by_a_key_comparison_never_crashes_the_add(where: str, statement: str) -> None:
    env = {**os.environ, "PYTHONMALLOC": "debug"}
    out = subprocess.run([sys.executable, "-c", CHILD, where, statement], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    outcome, fired, *rest = out.stdout.split()
    assert fired == "True"  # the comparison ran, in the middle of the add
    if outcome == "counted":
        assert int(rest[0]) >= 1
    else:
        assert outcome == "raised" and rest[0] in {"RuntimeError", "AttributeError", "TypeError"}
