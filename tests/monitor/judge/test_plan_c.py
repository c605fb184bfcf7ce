"""The C plans (monitor/judge/_cplan.c) give the Python plans' verdicts, and the general path's.

Three judges per rule set: one whose plans are the C extension's, one whose plans are the Python closures (the
extension set aside while it builds them), and one asked only through `_general`. Their verdicts must be equal
field by field, and of the same types (True is not 1), on generated turns for the shipped rules and for rules that
take every branch of a plan. Each C plan is also compared with the closure it holds (`.run`), including the turns
it sends to the general path (None). The extension is imported directly, so these tests run even when
TOOLWATCH_PURE_PYTHON=1 keeps the judge on the Python plans; they are skipped only when it was not built.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import json
import sys
import tracemalloc
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor._json import PLAIN_CHARS
from monitor.judge import Judge, _args, _judge, _plan
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict
from tests.monitor.judge.helpers import BASE_RULES, RULES, write
from tests.monitor.judge.test_fastpath import _bench_turns


def _assert_no_leak(run: Callable[[int], None], shared: list[Any]) -> None:
    """`run(n)` (n rounds) after a warm-up leaves the reference counts of `shared` as they were and grows memory by
    less than 64 KiB over 300 rounds."""
    run(50)
    gc.collect()
    before = [sys.getrefcount(x) for x in shared]
    tracemalloc.start()
    run(20)
    gc.collect()
    first, _ = tracemalloc.get_traced_memory()
    run(300)
    gc.collect()
    last, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert [sys.getrefcount(x) for x in shared] == before
    assert last - first < 64 * 1024, (first, last)


def _import() -> ModuleType | None:
    try:
        mod = importlib.import_module("monitor.judge._cplan")
    except ImportError:
        return None
    mod.init(_plan.c_namespace())
    return mod


CPLAN = _import()
pytestmark = pytest.mark.skipif(CPLAN is None, reason="the C plans were not built")

# Rules taking every branch of a plan: one regex check of a one-character class and one response regex (the
# common case), a regex that is not a class, several response checks, contains-only response checks, checks
# other than one regex (exact, normalized, from_input, fuzzy, numeric, one_of; two at once), no response checks,
# forbidden tools (of the file and of the rule), an order constraint, no call expected, tools without schema.
BRANCH_RULES = r"""
version: 1
catalog:
  tools:
    - name: a
      schema: {type: object, properties: {x: {type: integer}, s: {type: string}}, additionalProperties: false}
    - name: b
      schema: {type: object}
    - name: c
    - name: z
      schema: {type: object, properties: {s: {type: string, minLength: 1}}, required: [s]}
    - name: n
      schema:
        type: object
        properties:
          k: {type: number, minimum: -1.5, maximum: 3}
          x: {type: integer, minimum: 0, maximum: 10, description: a count}
          s: {type: string, minLength: 1, maxLength: 3, enum: [a, é, abc, abcd]}
          u: {enum: [ok, x1]}
          b: {type: boolean}
        required: [s]
expect:
  - id: R1
    when: {prefix: "[R01]"}
    call: [{tool: a, args: {s: {regex: '\S'}}}]
    respond: [{regex: '(?m)^Result: \S.*$'}]
  - id: R2
    when: {prefix: "[R02]"}
    call: [{tool: a, args: {s: {regex: '^[a-zé]+$'}}}]
    respond: [{contains: "ok"}, {regex: 'ok\s'}]
  - id: R3
    when: {prefix: "[R03]"}
    call: [{tool: a, args: {x: 1, s: {normalized: "A b"}}}]
    forbid: [{tool: c}]
  - id: R4
    when: {prefix: "[R04]"}
    call: [{tool: b, args: {s: {from_input: 'id (\w+)'}}}]
    respond: [{contains: "done"}]
  - id: R5
    when: {prefix: "[R05]"}
    none: true
    respond: [{regex: '\d'}]
  - id: R6
    when: {prefix: "[R06]"}
    call: [{tool: c, args: {s: {fuzzy: "hello", threshold: 80}}}]
    respond: [{contains: "a"}, {contains: "b"}]
  - id: R7
    when: {prefix: "[R07]"}
    call: [{tool: z, args: {x: {numeric: 3, tolerance: 1}}}]
  - id: R8
    when: {prefix: "[R08]"}
    call: [{tool: z, args: {s: {one_of: ["", "y"]}}}]
    order: [{before: z, after: a}]
  - id: R9
    when: {prefix: "[R09]"}
    none: true
  - id: R10
    when: {prefix: "[R10]"}
    call: [{tool: a, args: {s: {regex: '\d'}}}, {tool: b, min: 0}]
    respond: [{contains: "x", regex: 'x\d'}]
  - id: R11
    when: {prefix: "[R11]"}
    call: [{tool: n}]
forbid:
  - tool: b
"""
PREFIXES = [f"[R{k:02d}]" for k in range(1, 12)] + ["[A]", "[ARG1]", "[NONE]", "[OPT]", "[ANY]", "", "nothing"]

VALUES = st.one_of(
    st.sampled_from(["", " ", "\t\n", "\x0b", " \x1c ", "a b", "A-b", "hello", "helo", "y", "é", "\ud800", "a\udfff"]),
    st.sampled_from(["x1", "12", "ok", "3", 3, 2.5, 4, 10**30, -(10**30), 1.5e300, True, False, None]),
    st.text(max_size=10),
    st.integers(-5, 5),
    st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(st.sampled_from(["s", "k"]), st.integers(0, 2), max_size=2),
)
OUTPUTS = [None, "", "Result: ok", "checked\nResult: escalate", "Result: ", "ok done", "ok\tab x1", "é\ud800 7", "ok"]


@st.composite
def _arguments(draw: Any) -> str | None:
    kind = draw(st.integers(0, 11))
    if kind == 0:
        return None  # not captured
    if kind == 1:
        bad: str = draw(st.sampled_from(["{", '{"x": 1', "nope", "", " {}", "{} ", "\t{}\n", "[]", "[1]", '"s"', "1"]))
        return bad  # not JSON, whitespace around JSON, JSON that is not an object
    if kind == 2:
        odd: str = draw(
            st.sampled_from(["null", "true", "1e999", '{"s": "\\ud800"}', '{"s": 1, "s": "x"}', "[" * 3000])
        )
        return odd
    names = st.sampled_from(["s", "x", "k", "u", "b", "log_excerpt", "window_minutes"])
    keys = draw(st.lists(names, max_size=3, unique=True))
    obj = {k: draw(VALUES) for k in keys}
    return json.dumps(obj, ensure_ascii=draw(st.booleans()))


@st.composite
def _turns(draw: Any, names: list[str], prefixes: list[str], agents: list[str]) -> Turn:
    head = draw(st.sampled_from(prefixes))
    text = draw(st.sampled_from(["", " "])) + head + draw(st.sampled_from(["", " id abc", " x", " é"]))
    n = draw(st.sampled_from([0, 1, 1, 1, 1, 1, 2]))
    calls = tuple(
        ToolCall(draw(st.sampled_from(names)), call_id=f"c{i}", arguments=draw(_arguments())) for i in range(n)
    )
    output = draw(st.one_of(st.sampled_from(OUTPUTS), st.text(max_size=12)))
    agent = draw(st.sampled_from(agents))
    defs = draw(st.sampled_from([None, None, None, (), ({"name": "c"},), ({"type": "function", "name": "q"},)]))
    turnless = draw(st.integers(0, 19)) == 0
    return Turn(
        text,
        calls,
        agent=agent,
        trace_id="t",
        span_id="s",
        output_text=output,
        tool_definitions=defs,
        turnless=turnless,
    )


@contextmanager
def _plans(module: ModuleType | None) -> Iterator[None]:
    """Plans built meanwhile are the C extension's (`module`) or the Python closures (None)."""
    saved, _plan._C = _plan._C, module
    try:
        yield
    finally:
        _plan._C = saved


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types, field by field, item by item."""
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (a != a and b != b)


def _fields(v: TurnVerdict | None) -> Any:
    return None if v is None else {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}


def _outcome(plan: Any, turn: Turn) -> tuple[str, Any]:
    """("ok", the verdict or None), or ("raised", the exception's type and text)."""
    try:
        return "ok", plan(turn)
    except Exception as exc:  # noqa: BLE001 - compared with the reference's
        return "raised", (type(exc), str(exc))


class Trio:
    """A judge with C plans, one with Python plans and one for the general path, of the same rules."""

    def __init__(self, paths: list[Path]) -> None:
        rules = load_rules(paths)
        with _plans(CPLAN):
            self.c = Judge(rules)  # judge() is the C Dispatch
        with _plans(None):
            self.py, self.general = Judge(rules), Judge(rules)
        assert CPLAN is not None and isinstance(self.c.judge, CPLAN.Dispatch)
        assert "judge" not in vars(self.py)
        self.names = sorted(self.c.catalog) + ["made_up_tool", ""]
        self.agents = ["", "someone-else", *sorted(self.c.agents)]

    def check(self, turn: Turn) -> None:
        with _plans(CPLAN):
            got = self.c.judge(turn)
        with _plans(None):
            want = self.py.judge(turn)
        general = self.general._general(turn)
        assert same(got, want), (_fields(got), _fields(want))
        assert same(got, general), (_fields(got), _fields(general))
        with _plans(CPLAN):
            reference = Judge.judge(self.c, turn)  # the Python judge() of the same judge, on the same C plans
        assert same(got, reference), (_fields(got), _fields(reference))
        for plan in self.c_plans():  # on any turn, also those it sends to the general path (None) or fails on
            c_out, py_out = _outcome(plan, turn), _outcome(plan.run, turn)
            assert same(c_out, py_out), (c_out, py_out)

    def c_plans(self) -> list[Any]:
        scopes = (self.c._all, self.c._other, *self.c._scopes.values())
        # The plans of several calls (keyed by the tuple of their names) are Python closures (_plan.several_calls).
        plans = [
            p
            for s in scopes
            for d in s.plans or ()
            for k, p in d.items()
            if p is not _plan.general and not (type(k) is tuple and k)
        ]
        assert all(type(p).__name__ == "Plan" for p in plans)
        return plans


_TRIOS: dict[str, Trio] = {}


def _trio(key: str, paths: Any) -> Trio:
    if key not in _TRIOS:
        _TRIOS[key] = Trio(paths())
    return _TRIOS[key]


def _branch_paths(tmp: Path, base: bool = False) -> list[Path]:
    """The branch rules (prefixes of one length: the dispatch finds the plans by prefix), with BASE_RULES when
    `base` (prefixes of several lengths: the dispatch hands every turn to the Python judge())."""
    paths = [write(tmp, BRANCH_RULES, "branches.yaml")]
    return [*paths, write(tmp, BASE_RULES, "base.yaml")] if base else paths


# Scoped files, one of them reading tool definitions from the turns: the dispatch's scopes and its reference path.
SCOPED_RULES = r"""
version: 1
agent: scoped
catalog: {from_definitions: true, tools: [{name: c}, {name: q}]}
expect:
  - id: S1
    when: {prefix: "[S1]"}
    call: [{tool: c, args: {s: {regex: '\S'}}}]
  - id: S2
    when: {regex: 'again'}
    call: [{tool: q}]
"""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_c_plans_agree_on_shipped_rules(data: st.DataObject) -> None:
    trio = _trio("triage", lambda: [RULES / "incident-triage.yaml"])
    prefixes = ["[AUTH]", "[BILL]", "[FULF]", "[RISK]", "[SUPP]", "[AUTH", "x"]
    trio.check(data.draw(_turns(trio.names + ["pull_auth_telemetry"] * 4, prefixes, trio.agents + ["incident-triage"])))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_c_plans_agree_on_every_branch(data: st.DataObject, tmp_path_factory: Any) -> None:
    trio = _trio("branches", lambda: _branch_paths(tmp_path_factory.mktemp("branches")))
    assert trio.c._all.prefix_n == 5
    trio.check(data.draw(_turns(trio.names, PREFIXES, trio.agents)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_c_plans_agree_without_a_prefix_table(data: st.DataObject, tmp_path_factory: Any) -> None:
    trio = _trio("mixed", lambda: _branch_paths(tmp_path_factory.mktemp("mixed"), base=True))
    assert trio.c._all.prefix_n == 0
    trio.check(data.draw(_turns(trio.names, PREFIXES, trio.agents)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_c_dispatch_agrees_on_scopes_and_definitions(data: st.DataObject, tmp_path_factory: Any) -> None:
    def paths() -> list[Path]:
        tmp = tmp_path_factory.mktemp("scoped")
        return [*_branch_paths(tmp), write(tmp, SCOPED_RULES, "scoped.yaml")]

    trio = _trio("scoped", paths)
    prefixes = [*PREFIXES, "[S1]", "[S2] again", "again"]
    trio.check(data.draw(_turns(trio.names + ["q"], prefixes, trio.agents + ["scoped", "scoped"])))


def test_c_plans_agree_on_the_bench_workload() -> None:
    trio = _trio("triage", lambda: [RULES / "incident-triage.yaml"])
    turns = _bench_turns()
    for t in turns[:1500]:
        trio.check(t) if t is turns[0] else _check_two(trio, t)
    assert len(trio.c_plans()) >= 5


def _python_judge_calls(judge: Judge, turns: list[Turn]) -> int:
    """How many times judge.judge(turn) over `turns` runs the Python Judge.judge (seen by a profile hook)."""
    code, seen = Judge.judge.__code__, [0]

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            seen[0] += 1

    sys.setprofile(hook)
    try:
        for t in turns:
            judge.judge(t)
    finally:
        sys.setprofile(None)
    return seen[0]


def test_the_dispatch_settles_planned_turns(tmp_path: Path) -> None:
    trio = Trio(_branch_paths(tmp_path))
    turns = [
        Turn(f"{t} x", (ToolCall("a", arguments='{"s": "x"}'),), output_text="Result: ok") for t in ("[R01]", "[R02]")
    ]
    turns += [Turn("[R05] q", (), output_text=o) for o in ("1", "x", None)]
    turns += [Turn("[R01] x", (ToolCall("a", arguments="{"),))]  # the plan answers None: _general
    turns += [Turn("\t\u2003 [R02]", (ToolCall("a", arguments="{}"),))]  # found after the leading whitespace
    with _plans(CPLAN):
        assert _python_judge_calls(trio.c, turns) == 3  # the first turn of each plan builds it
        assert _python_judge_calls(trio.c, turns) == 0
        assert _python_judge_calls(trio.c, [replace(t, turnless=True) for t in turns]) == len(turns)
        two = Turn("[R01] x", (ToolCall("a", arguments="{}"), ToolCall("a", arguments="{}")))
        assert _python_judge_calls(trio.c, [two, Turn("[R99] x"), Turn("[R01] x", (ToolCall("b"),))]) == 3
    for t in turns:
        trio.check(t)


def _check_two(trio: Trio, turn: Turn) -> None:
    with _plans(CPLAN):
        got = trio.c.judge(turn)
    assert same(got, trio.general._general(turn))


HAND_CASES = [
    ("[R01] q", "a", '{"s": " x "}', "Result: ok"),  # passes: ok reason
    ("[R01] q", "a", '{"s": "  "}', "Result: ok"),  # the class regex fails on an ASCII value: reason()
    ("[R01] q", "a", '{"s": "\\u00a0"}', "no"),  # non-ASCII value: RE2 answers; the response fails
    ("[R01] q", "a", '{"s": "\\ud800"}', None),  # a lone surrogate: encoded with surrogatepass
    ("[R01] q", "a", '{"s": 1}', "Result: x"),  # not a str: run_checks
    ("[R01] q", "a", '{"x": "no"}', "Result: x"),  # schema invalid (and the argument missing)
    ("[R01] q", "a", "[]", "Result: x"),  # JSON that is not an object
    ("[R01] q", "a", " {}", "Result: x"),  # whitespace before: the general path
    ("[R01] q", "a", "{} ", "Result: x"),  # whitespace after: the general path
    ("[R01] q", "a", "{", "Result: x"),  # not JSON
    ("[R01] q", "a", None, "Result: x"),  # not captured
    ("[R01] q", "made_up_tool", '{"s": "x"}', "Result: x"),  # unknown tool
    ("[R02] q", "a", '{"s": "abé"}', "ok x"),  # a regex that is not a class; several response checks
    ("[R02] q", "a", '{"s": "ab"}', "ok"),  # the second response check fails
    ("[R03] q", "a", '{"x": 1, "s": "a-B"}', None),  # two checks, no response check
    ("[R03] q", "c", "{}", None),  # a forbidden tool (wrong tool)
    ("[R04] id abc", "b", '{"s": "abc"}', "done"),  # from_input; a forbidden tool of the file
    ("[R05] q", None, None, "7"),  # no call: the response passes
    ("[R05] q", None, None, "seven"),  # no call: the response fails
    ("[R09] q", None, None, None),  # no call, no response check
    ("[R06] q", "c", '{"s": "helo"}', "ab"),  # no schema; fuzzy
    ("[R07] q", "z", '{"x": 3.5}', None),  # numeric, schema invalid (required s)
    ("[R08] q", "z", '{"s": "y"}', None),  # one_of, an order constraint
    ("[R10] q", "a", '{"s": "5"}', "x1"),  # a response check with contains and regex
]


@pytest.mark.parametrize("case", HAND_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}")
def test_c_plans_agree_on_each_branch(case: tuple[str, str | None, str | None, str | None], tmp_path: Path) -> None:
    text, name, args, output = case
    trio = Trio(_branch_paths(tmp_path))
    calls = (ToolCall(name, call_id="c0", arguments=args),) if name is not None else ()
    turn = Turn(text, calls, trace_id="t", span_id="s", output_text=output)
    trio.check(turn)
    trio.check(turn)  # from the kept plan
    assert trio.c_plans()


def test_without_the_fast_validator(tmp_path: Path) -> None:
    """A schema the compiled validator does not take (fast is None): schema_result answers every turn."""
    trio = Trio(_branch_paths(tmp_path))
    for j in (trio.c, trio.py, trio.general):
        for s in (j._all, j._other, *j._scopes.values()):
            validator = s.turn_tools.validators.get("a")
            if validator is not None:
                validator.fast = None
    for args in ['{"s": "x"}', '{"x": "no"}', "[]", '{"s": " "}']:
        trio.check(Turn("[R01] q", (ToolCall("a", arguments=args),), output_text="Result: x"))


class CountingFast:
    """A fast validator that counts the instances it is asked about."""

    def __init__(self, fast: Any) -> None:
        self.fast, self.asked = fast, 0

    def is_valid(self, instance: Any) -> bool:
        self.asked += 1
        return bool(self.fast.is_valid(instance))


@pytest.mark.parametrize(
    ("args", "in_c"),
    [
        ('{"s": "abc", "x": 10, "k": -1.5, "u": "ok", "b": false, "other": [1]}', True),  # every check passes
        ('{"s": "a"}', True),
        ('{"s": "abcd"}', False),  # in the enum, longer than maxLength: invalid
        ('{"s": "a", "x": 2.0}', False),  # an integral float: the fast validator and the reference decide
        ('{"s": "a", "x": 11}', False),
        ('{"s": "a", "k": 3.5}', False),
        ('{"s": "a", "b": 1}', False),
        ('{"s": "a", "u": "OK"}', False),
        ('{"x": 1}', False),  # required s missing
    ],
)
def test_flat_schemas_are_checked_in_c(args: str, in_c: bool, tmp_path: Path) -> None:
    """A schema of the usual shape (monitor.judge._schema.flat_form) is checked by the C plan itself: the fast
    validator is asked only about arguments that do not pass it, and the verdicts stay the Python plans'."""
    trio = Trio(_branch_paths(tmp_path))
    validator = trio.c._scopes.get("", trio.c._all).turn_tools.validators["n"]
    assert validator.flat is not None
    counting = validator.fast = CountingFast(validator.fast)
    turn = Turn("[R11] q", (ToolCall("n", call_id="c0", arguments=args),), trace_id="t", span_id="s")
    trio.check(turn)  # also runs the Python closures, which ask the fast validator
    counting.asked = 0
    trio.c.judge(turn)
    assert (counting.asked == 0) == in_c


class CountingJudge(Judge):
    """A subclass keeping judge(): it gets the C dispatch, which asks its own _general."""

    general_turns = 0

    def _general(self, turn: Turn) -> TurnVerdict:
        self.general_turns += 1
        return super()._general(turn)


class OwnJudge(Judge):
    """A subclass redefining judge(): it keeps it."""

    def judge(self, turn: Turn) -> TurnVerdict:
        return super().judge(turn)


def test_subclasses_and_the_dispatch(tmp_path: Path) -> None:
    rules = load_rules(_branch_paths(tmp_path))
    with _plans(CPLAN):
        counting, own = CountingJudge(rules), OwnJudge(rules)
        assert CPLAN is not None and isinstance(counting.judge, CPLAN.Dispatch)
        assert "judge" not in vars(own)
        t = Turn("[R01] q", (ToolCall("a", arguments=' {"s": "x"}'),), output_text="Result: x")  # plan: None
        assert same(counting.judge(t), own.judge(t))
        assert counting.general_turns == 1
        ok = Turn("[R01] q", (ToolCall("a", arguments='{"s": "x"}'),), output_text="Result: x")
        assert same(counting.judge(ok), own.judge(ok))
        bad = Turn("[R01] q", (ToolCall("a", arguments="{"),), output_text="Result: x")  # not JSON: the plan's
        assert same(counting.judge(bad), own.judge(bad))
        assert counting.general_turns == 1
        with pytest.raises(TypeError):
            counting.judge()


def test_a_judge_with_the_dispatch_is_collected(tmp_path: Path) -> None:
    rules = load_rules(_branch_paths(tmp_path))
    with _plans(CPLAN):
        judge = Judge(rules)
    judge.judge(Turn("[R01] q", (ToolCall("a", arguments='{"s": "x"}'),)))
    ref = weakref.ref(judge)
    del judge
    gc.collect()
    assert ref() is None  # the cycle judge -> dispatch -> judge is the collector's


class OddTurn(Turn):
    """A Turn subclass: the C plan hands it to the Python plan."""

    __slots__ = ()


def test_unusual_turns_take_the_python_plan(tmp_path: Path) -> None:
    trio = Trio(_branch_paths(tmp_path))
    trio.check(Turn("[R01] q", (ToolCall("a", arguments='{"s": "x"}'),), output_text="Result: x"))
    odd = OddTurn("[R01] q", (ToolCall("a", arguments='{"s": "x"}'),), output_text="Result: x")
    trio.check(odd)
    listed = Turn("[R01] q", [ToolCall("a", arguments='{"s": "x"}')], output_text="Result: x")  # type: ignore[arg-type]
    trio.check(listed)
    (plan,) = [p for p in trio.c_plans() if p.run.__qualname__.startswith("one_call")]
    for bad in (Turn("[R01] q", (ToolCall("a", arguments=b"{}"),)), Turn("[R01] q", ())):  # type: ignore[arg-type]
        with pytest.raises(Exception) as c_err:
            plan(bad)
        with pytest.raises(Exception) as py_err:
            plan.run(bad)
        assert type(c_err.value) is type(py_err.value)
    unset = Turn.__new__(Turn)
    with pytest.raises(AttributeError):
        plan(unset)
    with pytest.raises(TypeError):
        plan()
    with pytest.raises(TypeError):
        plan(unset, unset)


def test_references_and_memory_stay_flat(tmp_path: Path) -> None:
    """Many calls of every branch leave the shared objects' reference counts and the traced memory as they were."""
    trio = Trio(_branch_paths(tmp_path))
    turns = [
        Turn(t, (ToolCall(n, call_id="c", arguments=a),) if n else (), agent="", trace_id="t", output_text=o)
        for t, n, a, o in HAND_CASES
    ]
    for t in turns:
        trio.check(t)
    plans = trio.c_plans()
    shared = [True, False, None, (), _args.MISSING, *[x for t in turns for x in (t.input_text, t.output_text)]]
    shared += [x for p in plans for x in (p.run, *(p.run.__closure__ or ()))]
    shared += [c.cell_contents for p in plans for c in p.run.__closure__ or () if c.cell_contents is not None]

    def run(n: int) -> None:
        with _plans(CPLAN):
            for _ in range(n):
                for t in turns:
                    trio.c.judge(t)
                    for p in plans:
                        _outcome(p, t)  # also the failing ones (a one-call plan on a turn without calls)

    _assert_no_leak(run, shared)


def test_judge_reports_the_c_plans() -> None:
    from monitor.otlp import accelerated

    assert accelerated()["judge"] is (_plan._C is not None)
    assert CPLAN is not None
    assert CPLAN.init(_plan.c_namespace()) == dict.fromkeys(
        ["turn", "tool_call", "turn_verdict", "call_verdict", "arg_check_result"], True
    )  # every class is read or built slot by slot


@pytest.mark.skipif(_plan._C is None, reason="the C plans are not loaded")
def test_dispatch_with_a_prefix_length_past_a_c_size_judges_as_python() -> None:
    """A prefix length past what C can index went up as OverflowError from the C dispatch (Python slices it)."""
    judge = Judge(load_rules([RULES / "incident-triage.yaml"]))
    for s in (judge._all, judge._other, *judge._scopes.values()):
        s.prefix_n = 2**70
    for agent in ("", "incident-triage"):
        t = Turn("[AUTH] x", agent=agent, calls=(ToolCall("pull_auth_telemetry", arguments='{"log_excerpt": "x"}'),))
        assert judge.judge(t) == Judge.judge(judge, t)


@pytest.mark.skipif(_plan._C is None, reason="the C plans are not loaded")
def test_a_plan_takes_its_turn_as_the_closure_takes_it() -> None:
    judge = Judge(load_rules([RULES / "incident-triage.yaml"]))
    t = Turn(
        "[AUTH] x", agent="incident-triage", calls=(ToolCall("pull_auth_telemetry", arguments='{"log_excerpt": "x"}'),)
    )
    expected = judge.judge(t)
    (table,) = [tb for tb in judge._scopes["incident-triage"].by_prefix.values() if "pull_auth_telemetry" in tb]
    plan: Any = table["pull_auth_telemetry"]
    assert type(plan).__name__ == "Plan"
    assert plan(t) == plan(turn=t) == expected
    with pytest.raises(TypeError):
        plan()


class OddCall(ToolCall):
    """A ToolCall subclass: the dispatch hands its turn to the Python judge()."""

    __slots__ = ()


def test_the_dispatch_settles_turns_of_several_calls(tmp_path: Path) -> None:
    """Turns of two to MAX_PLANNED_CALLS calls find their plan (a Python closure) in C by the tuple of their names;
    more calls, names that are not exactly str and calls that are not exactly ToolCall go to the Python judge();
    every verdict is the general path's, and references and memory stay flat."""
    trio = Trio(_branch_paths(tmp_path))
    ok, blank = '{"s": "x"}', '{"s": " "}'
    turns = [
        Turn("[R01] q", (ToolCall("a", "c0", ok), ToolCall("a", "c1", blank)), output_text="Result: ok"),
        Turn("[R01] q", (ToolCall("a", "c0", blank), ToolCall("a", "c1", ok)), output_text="Result: ok"),
        Turn("[R10] q", (ToolCall("a", "c0", '{"s": "5"}'), ToolCall("b", "c1", "{"), ToolCall("c", "c2", None))),
        Turn("[R03] q", tuple(ToolCall("a", f"c{i}", '{"x": 1, "s": "a b"}') for i in range(_judge.MAX_PLANNED_CALLS))),
    ]
    with _plans(CPLAN):
        assert _python_judge_calls(trio.c, turns) == 3  # the first turn of each plan builds it
        assert _python_judge_calls(trio.c, turns) == 0
        many = Turn("[R01] q", tuple(ToolCall("a", f"c{i}", ok) for i in range(_judge.MAX_PLANNED_CALLS + 1)))
        odd_name = Turn("[R01] q", (ToolCall("a", "c0", ok), ToolCall(_Str("a"), "c1", ok)))
        odd_call = Turn("[R01] q", (ToolCall("a", "c0", ok), OddCall("a", "c1", ok)))
        odd = [many, odd_name, odd_call]
        assert _python_judge_calls(trio.c, odd) == 3
        assert _python_judge_calls(trio.c, odd) == 3
    for t in [*turns, many, odd_call]:
        trio.check(t)
    # A str subclass as a name finds the plan of the equal str names (in judge(), as for one call): the verdict is
    # the general path's, but for the type of the names it carries (e.g. in `confusion`).
    with _plans(CPLAN):
        got = trio.c.judge(odd_name)
    assert got == trio.general._general(odd_name) and same(got, Judge.judge(trio.c, odd_name))
    shared = [True, False, None, (), *[x for t in turns for x in (t.input_text, t.output_text, *t.calls)]]
    shared += [c.name for t in turns for c in t.calls]

    def run(n: int) -> None:
        with _plans(CPLAN):
            for _ in range(n):
                for t in turns + odd:
                    trio.c.judge(t)

    _assert_no_leak(run, shared)


class _Str(str):
    """A str subclass as a call name."""


def test_a_dispatch_made_without_several_call_plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With MAX_PLANNED_CALLS at 1 when the judge is made, its dispatch hands turns of several calls to judge()."""
    monkeypatch.setattr(_judge, "MAX_PLANNED_CALLS", 1)
    trio = Trio(_branch_paths(tmp_path))
    two = Turn("[R01] q", (ToolCall("a", "c0", '{"s": "x"}'), ToolCall("a", "c1", "{}")), output_text="Result: ok")
    with _plans(CPLAN):
        assert _python_judge_calls(trio.c, [two, two]) == 2
    trio.check(two)


def _sized(head: str, fill: str, tail: str, n: int) -> str:
    """head + fill repeated + tail, exactly `n` characters (fill one character)."""
    text = head + fill * (n - len(head) - len(tail)) + tail
    assert len(text) == n
    return text


@pytest.mark.parametrize("delta", [-1, 0, 1], ids=["under", "at", "past"])
@pytest.mark.parametrize(
    ("head", "tail"),
    [('{"s": "', '"}'), ('{"s": "', '"'), (' {"s": "', '"}'), ('{"x": 1, "s": "', '"}')],
    ids=["valid", "malformed", "whitespace", "schema-invalid"],
)
def test_c_plans_agree_at_the_json_budgets_plain_length(delta: int, head: str, tail: str, tmp_path: Path) -> None:
    """Arguments of PLAIN_CHARS characters (non-ASCII: more bytes than characters) are parsed in the C plan, one more
    is handed to the Python plan (parsed within the budget): the same verdicts either side, for valid JSON, JSON
    that is not, whitespace around it and a schema the arguments break."""
    trio = _trio("branches-plain", lambda: _branch_paths(tmp_path))
    text = _sized(head, "é", tail, PLAIN_CHARS + delta)
    assert len(text.encode()) > PLAIN_CHARS + 1
    for output in ("Result: ok", None):
        trio.check(Turn("[R01] q", (ToolCall("a", call_id="c0", arguments=text),), output_text=output))
        trio.check(Turn("[R02] q", (ToolCall("a", call_id="c0", arguments=text),), output_text="ok x"))
