"""`ToolSpec`: what toolwatch knows about one tool (name, description, argument schema, call shape)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from instrumentation import _attributes as A
from instrumentation._schema import JsonSchema

ToolKind = Literal["function", "coroutine", "generator", "async_generator"]

SPEC_ATTRIBUTE = "__toolwatch_tool__"


def kind_of(func: Callable[..., Any]) -> ToolKind:
    """The kind of call `func` makes; a callable object's is that of its class's `__call__`."""
    if not (inspect.isroutine(func) or isinstance(func, functools.partial)):
        func = getattr(type(func), "__call__", func)
    if inspect.isasyncgenfunction(func):
        return "async_generator"
    if inspect.iscoroutinefunction(func):
        return "coroutine"
    if inspect.isgeneratorfunction(func):
        return "generator"
    return "function"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as offered to a model and recorded on its spans."""

    name: str
    description: str
    parameters: JsonSchema
    kind: ToolKind = "function"
    param_names: tuple[str, ...] = ()
    """Names of the positional parameters after a leading `self` / `cls`, to name positional arguments."""
    skip_first: bool = False
    """The first positional argument is `self` / `cls`: it is not an argument of the tool call."""
    var_positional: str | None = None
    var_keyword: bool = False
    """The function takes `**kwargs`: its arguments' names are the caller's, of any length."""
    span_name: str = field(init=False)
    base_attributes: Mapping[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"a tool needs a non-empty string name, got {self.name!r}")
        object.__setattr__(self, "span_name", f"{A.OP_EXECUTE_TOOL} {self.name}")
        base: dict[str, Any] = {
            A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
            A.GEN_AI_TOOL_NAME: self.name,
            A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
        }
        if self.description:
            base[A.GEN_AI_TOOL_DESCRIPTION] = self.description
        object.__setattr__(self, "base_attributes", base)

    def definition(self) -> dict[str, Any]:
        """The tool as listed in `gen_ai.tool.definitions`: `{type, name, description, parameters}`."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }

    def openai_tool(self) -> dict[str, Any]:
        """The tool in the OpenAI chat-completions `tools=[...]` shape."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def get_tool_spec(obj: object) -> ToolSpec | None:
    """The `ToolSpec` of a `@tool`-decorated function or bound method, else None."""
    spec = getattr(obj, SPEC_ATTRIBUTE, None)
    return spec if isinstance(spec, ToolSpec) else None


def positional_names(func: Callable[..., Any]) -> tuple[tuple[str, ...], bool, str | None, bool]:
    """(names of positional parameters without self/cls, whether self/cls leads, name of *args or None, whether
    it takes **kwargs; True when the signature is unknown)."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return (), False, None, True
    skip = bool(params) and params[0].name in ("self", "cls")
    if skip:
        params = params[1:]
    names = tuple(
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    )
    var = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
    return names, skip, var, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
