"""A JSON Schema for a tool's arguments, derived from its signature and type hints.

Supported hints: str, int, float, bool, None, list[X] / tuple[X, ...] / set[X], dict[str, X], Literal[...],
Enum subclasses, X | None / Optional[X], unions, TypedDict and dataclasses (nested objects), Any (no
constraint). Parameters with a default are not required. `self` / `cls` as the first parameter, `*args`
and `**kwargs` are left out (`**kwargs` allows additional properties).
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

JsonSchema = dict[str, Any]

_SIMPLE: dict[Any, JsonSchema] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    bytes: {"type": "string"},
}

_MAX_DEPTH = 8


def _literal(values: tuple[Any, ...]) -> JsonSchema:
    schema: JsonSchema = {"enum": list(values)}
    kinds = {type(v) for v in values}
    if len(kinds) == 1:
        sub = _SIMPLE.get(kinds.pop())
        if sub is not None:
            schema = {**sub, **schema}
    return schema


def _union(args: tuple[Any, ...], depth: int) -> JsonSchema:
    parts = [hint_schema(a, depth + 1) for a in args]
    types_only = [p["type"] for p in parts if set(p) == {"type"} and isinstance(p["type"], str)]
    if len(types_only) == len(parts):
        return {"type": types_only}
    return {"anyOf": parts}


def _field_hints(cls: type) -> dict[str, Any]:
    """The type hints of a TypedDict's or dataclass's fields; when they do not resolve (a name imported only under
    TYPE_CHECKING), each field without a constraint, as for a parameter's own hint."""
    try:
        return get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an unresolvable forward reference must not stop `@tool` at import
        if is_typeddict(cls):  # its annotations hold the keys of its bases too
            return dict.fromkeys(getattr(cls, "__annotations__", {}), Any)
        return dict.fromkeys((f.name for f in dataclasses.fields(cls)), Any)


def _object(cls: type, depth: int) -> JsonSchema:
    hints = _field_hints(cls)
    properties = {name: hint_schema(h, depth + 1) for name, h in hints.items()}
    if is_typeddict(cls):
        required = sorted(getattr(cls, "__required_keys__", hints.keys()))
    else:
        required = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
    schema: JsonSchema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _sequence(args: tuple[Any, ...], origin: Any, depth: int) -> JsonSchema:
    schema: JsonSchema = {"type": "array"}
    if origin is tuple and args and args[-1] is not Ellipsis:
        schema["prefixItems"] = [hint_schema(a, depth + 1) for a in args]
        schema["minItems"] = schema["maxItems"] = len(args)
    elif args:
        schema["items"] = hint_schema(args[0], depth + 1)
    return schema


def hint_schema(hint: Any, depth: int = 0) -> JsonSchema:  # noqa: C901 - one branch per kind of hint
    """The JSON Schema of one type hint; unknown hints give `{}` (anything)."""
    if depth > _MAX_DEPTH or hint is Any or hint is inspect.Parameter.empty:
        return {}
    simple = _SIMPLE.get(hint)
    if simple is not None:
        return dict(simple)
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is typing.Annotated:
        return hint_schema(args[0], depth + 1)
    if origin is Literal:
        return _literal(args)
    if origin is Union or origin is types.UnionType:
        return _union(args, depth)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _literal(tuple(m.value for m in hint))
    if origin in (list, tuple, set, frozenset, Sequence) or hint in (list, tuple, set, frozenset):
        return _sequence(args, origin, depth)
    if origin in (dict, Mapping) or hint is dict:
        schema: JsonSchema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = hint_schema(args[1], depth + 1)
        return schema
    if isinstance(hint, type) and (is_typeddict(hint) or dataclasses.is_dataclass(hint)):
        return _object(hint, depth)
    return {}


def function_schema(func: Callable[..., Any]) -> JsonSchema:
    """The argument schema of `func`: an object with one property per named parameter (any object when `func` has no
    signature to read, as some C functions have none)."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return {"type": "object", "properties": {}, "additionalProperties": True}
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable forward references: fall back to no constraint
        hints = {}
    properties: dict[str, JsonSchema] = {}
    required: list[str] = []
    additional = False
    for index, param in enumerate(signature.parameters.values()):
        if index == 0 and param.name in ("self", "cls"):
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            additional = True
            continue
        properties[param.name] = hint_schema(hints.get(param.name, inspect.Parameter.empty))
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    schema: JsonSchema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = additional
    return schema
