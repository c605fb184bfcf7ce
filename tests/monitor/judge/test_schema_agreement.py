"""The compiled jsonschema_rs fast path agrees with jsonschema (the reference) on the shipped schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.judge._parse import schema_result
from monitor.judge._schema import SchemaValidator, flat_form
from monitor.rules import load_rules
from tests.monitor.judge.helpers import RULES, call, judge_for, turn

SHIPPED = load_rules(sorted(RULES.glob("*.yaml")))
SCHEMAS = {t.name: t.schema for t in SHIPPED.tools if t.schema is not None}
FAST = {n: jsonschema_rs.Draft202012Validator(s) for n, s in SCHEMAS.items()}
REFERENCE = {n: jsonschema.Draft202012Validator(s) for n, s in SCHEMAS.items()}
OURS = {n: SchemaValidator(s) for n, s in SCHEMAS.items()}
KEYS = sorted({k for s in SCHEMAS.values() for k in s.get("properties", {})} | {"extra"})

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["celsius", "fahrenheit", "AB-12345", "AB12345", "", "u42"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
# Objects shaped like tool arguments: the schemas' own property names with any JSON values.
shaped = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=4)
instances = st.one_of(shaped, json_values)


def test_every_shipped_tool_has_a_fast_validator() -> None:
    assert len(SCHEMAS) >= 9
    for name, schema in SCHEMAS.items():
        assert SchemaValidator(schema).fast is not None, name


@pytest.mark.parametrize("tool", sorted(SCHEMAS))
@settings(max_examples=120, deadline=None)
@given(instance=instances)
def test_fast_and_reference_validators_agree(tool: str, instance: Any) -> None:
    reference = REFERENCE[tool].is_valid(instance)
    assert FAST[tool].is_valid(instance) == reference
    assert OURS[tool].is_valid(instance) == reference


# A pattern Python's backtracking `re` takes exponential time on (about 11 s at 26 characters before RE2).
SLOW_PATTERN = "^(a+)+$"


def _slow(n: int) -> list[tuple[dict[str, Any], dict[str, Any], list[str]]]:
    """(schema, instance, violation kinds): the instances hold a text of n `a`s and a `!` the pattern fails on."""
    text = "a" * n + "!"
    return [
        ({"properties": {"s": {"pattern": SLOW_PATTERN}}}, {"s": text}, ["other"]),
        ({"properties": {"s": {"pattern": SLOW_PATTERN}}}, {"s": "aaa"}, []),
        ({"patternProperties": {SLOW_PATTERN: {"type": "integer"}}}, {text: 1, "aa": "x"}, ["type"]),
        ({"patternProperties": {SLOW_PATTERN: {}}, "additionalProperties": False}, {text: 1, "a": 2}, ["additional"]),
        ({"patternProperties": {"^x": {}}, "additionalProperties": {"type": "string"}}, {"x1": 1, "y": 2}, ["type"]),
    ]


@pytest.mark.parametrize("case", range(len(_slow(1))))
def test_schema_regexes_run_in_linear_time_with_the_reference_verdicts(case: int) -> None:
    schema, instance, kinds = _slow(64)[case]
    v = SchemaValidator(schema)
    v.fast = None  # the reference alone (it classifies every rejected call)
    assert [x.kind.value for x in v.violations(instance)] == kinds  # before: minutes of backtracking in `re`
    # On a text short enough for Python's re, jsonschema itself finds the same violations.
    schema, small, _ = _slow(4)[case]
    assert [x.kind.value for x in v.violations(small)] == kinds
    assert len(list(jsonschema.Draft202012Validator(schema).iter_errors(small))) == len(kinds)


_STR = {"type": "string"}


@pytest.mark.parametrize(
    ("schema", "flat"),
    [
        ({"type": "object"}, (False, (), {})),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "minLength": 1}},
                "required": ["a"],
                "additionalProperties": False,
                "description": "d",
            },
            (True, ("a",), {"a": (0, 1, -1, None, None, None)}),
        ),  # fmt: skip
        (
            {"type": "object", "properties": {"u": {"enum": ["x", "y"]}}},
            (False, (), {"u": (0, -1, -1, None, None, frozenset({"x", "y"}))}),
        ),
        (
            {"type": "object", "properties": {"n": {"type": "number", "minimum": 0.5}}},
            (False, (), {"n": (2, -1, -1, 0.5, None, None)}),
        ),
        ({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}, None),  # a type list
        ({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}, None),  # a regex
        ({"type": "object", "properties": {"a": {"type": "integer", "minimum": True}}}, None),
        ({"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}, None),
        ({"type": "object", "properties": {"a": {"type": "integer", "minLength": 1}}}, None),  # not its type's
        ({"type": "object", "properties": {"a": {"enum": ["x", 1]}}}, None),  # not only strings
        ({"type": "object", "properties": {"a": {"type": "object"}}}, None),  # nested
        ({"type": "object", "properties": {"a": _STR}, "additionalProperties": _STR}, None),
        ({"type": "object", "patternProperties": {"^x": _STR}}, None),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": _STR}}, None),
        ({"properties": {"a": _STR}}, None),  # any type
        ({"type": "object", "required": "a"}, None),
    ],
)
def test_flat_form_takes_the_usual_shape_only(schema: dict[str, Any], flat: Any) -> None:
    """The C plans check only the shapes flat_form takes, each with the reference's own checks."""
    assert flat_form(schema) == flat


class Counting:
    """A validator that counts the calls of each method."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def counted(*args: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(*args)

        return counted


@pytest.mark.parametrize(
    ("instance", "want"),
    [
        ({"log_excerpt": "x"}, (True, ())),
        ({"excerpt": "x"}, (False, ("additional", "required"))),
        ({"log_excerpt": "x", "window_minutes": 1.5}, (False, ("type",))),
        ([], (False, ("type",))),
    ],
)
def test_schema_result_runs_each_validator_once(instance: Any, want: tuple[bool, tuple[str, ...]]) -> None:
    """An instance the fast validator refuses costs one pass of the reference (it finds the violations), not an
    is_valid of each validator first and again before it (about 25 -> 10 us per invalid call)."""
    validator = SchemaValidator(SCHEMAS["pull_auth_telemetry"])
    fast, reference = Counting(validator.fast), Counting(validator.reference)
    validator.fast, validator.reference = fast, reference
    valid, violations = schema_result(validator, instance)
    assert (valid, tuple(v.kind.value for v in violations)) == want
    assert fast.calls == {"is_valid": 1}
    assert reference.calls == ({} if valid else {"iter_errors": 1})


COUNT_RULES = """
catalog:
  tools:
    - name: lookup
      schema: {type: object, properties: {n: {type: integer}}, required: [n]}
expect:
  - when: {prefix: "!"}
    call: [{tool: lookup, min: 1, max: 2}]
"""


@pytest.mark.parametrize("calls", [1, 2], ids=["one-call plan", "general path"])
def test_judging_a_schema_invalid_call_asks_the_fast_validator_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: int
) -> None:
    """The judge asks the fast validator itself (the common, valid case inline); when it refuses, the reference alone
    decides. schema_result asked the fast validator again before the reference: two fast passes per invalid call."""
    made: list[Counting] = []
    real = jsonschema_rs.Draft202012Validator

    def counting_validator(schema: Any) -> Counting:
        made.append(Counting(real(schema)))
        return made[-1]

    monkeypatch.setattr("monitor.judge._schema.jsonschema_rs.Draft202012Validator", counting_validator)
    judge = judge_for(tmp_path, COUNT_RULES)
    (fast,) = made
    v = judge.judge(turn("! go", *[call("lookup", {"n": "x"}, call_id=f"c{i}") for i in range(calls)]))
    assert [c.schema_valid for c in v.calls] == [False] * calls
    assert [x.kind.value for c in v.calls for x in c.violations] == ["type"] * calls
    assert fast.calls == {"is_valid": calls}
