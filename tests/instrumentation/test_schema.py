"""JSON Schemas derived from signatures and type hints."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Optional, TypedDict

import pytest

import instrumentation as tw
from instrumentation._schema import hint_schema


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(TypedDict):
    street: str
    zip: int


@dataclass
class Window:
    start: str
    minutes: int = 5
    tags: list[str] = field(default_factory=list)


if TYPE_CHECKING:  # as applications import what only their annotations name: absent when the code runs
    from decimal import Decimal


@dataclass
class Invoice:
    total: Decimal
    memo: str = ""


class Line(TypedDict):
    price: Decimal
    sku: str


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list, {"type": "array"}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (tuple[int, str], {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                           "minItems": 2, "maxItems": 2}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, "x"], {"enum": [1, "x"]}),
        (Color, {"type": "string", "enum": ["red", "blue"]}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - the spelling under test
        (int | str | None, {"type": ["integer", "string", "null"]}),
        (list[str] | None, {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}),
        (Address, {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "integer"}},
                   "required": ["street", "zip"]}),
        (Window, {"type": "object", "properties": {"start": {"type": "string"}, "minutes": {"type": "integer"},
                                                   "tags": {"type": "array", "items": {"type": "string"}}},
                  "required": ["start"]}),
    ],
)
def test_hint_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert hint_schema(hint) == schema


def test_function_schema_required_defaults_and_kwargs() -> None:
    def f(city: str, days: int = 3, *extra: str, unit: Literal["c", "f"] = "c", **more: Any) -> None:
        pass

    assert tw.function_schema(f) == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                       "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"],
        "additionalProperties": True,
    }


def test_unannotated_and_method_parameters() -> None:
    class Tools:
        def run(self, query, limit: int = 10):  # type: ignore[no-untyped-def]
            return query

    assert tw.function_schema(Tools.run) == {
        "type": "object", "properties": {"query": {}, "limit": {"type": "integer"}}, "required": ["query"],
        "additionalProperties": False,
    }


def test_given_schema_is_used_and_checked() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "minLength": 1}}, "required": ["q"]}

    @tw.tool(schema=schema)
    def find(q: str) -> str:
        return q

    spec = tw.get_tool_spec(find)
    assert spec is not None and spec.parameters is schema
    with pytest.raises(ValueError, match="type object"):
        tw.tool(schema={"type": "array"})(lambda q: q)


def test_a_field_hint_that_does_not_resolve_at_run_time_leaves_the_tool_usable() -> None:
    """A dataclass or TypedDict parameter whose field hint names what is imported only under TYPE_CHECKING made
    `@tool` raise NameError when the module was imported: the agent did not start. A parameter's own unresolvable hint
    was already taken as no constraint; a field's now is too, its name (and whether it is required) kept. A callable
    without a signature (a C function such as `max`) takes any arguments, where `@tool` raised ValueError."""

    def pay(invoice: Invoice, lines: list[Line]) -> str:
        return f"{invoice.memo}{len(lines)}"

    paid = tw.tool(pay)
    assert paid(Invoice(1, "m"), []) == "m0"  # type: ignore[arg-type]
    assert tw.get_tool_spec(paid).parameters == {  # type: ignore[union-attr]
        "type": "object",
        "properties": {
            "invoice": {"type": "object", "properties": {"total": {}, "memo": {}}, "required": ["total"]},
            "lines": {"type": "array", "items": {"type": "object", "properties": {"price": {}, "sku": {}},
                                                 "required": ["price", "sku"]}},
        },
        "required": ["invoice", "lines"],
        "additionalProperties": False,
    }
    largest = tw.tool(name="largest")(max)
    assert largest(2, 5) == 5
    assert tw.get_tool_spec(largest).parameters == {  # type: ignore[union-attr]
        "type": "object", "properties": {}, "additionalProperties": True,
    }
