"""A wrapper `inspect` reads as the original function: the kind of a tool stays what it was.

Generator, async-generator and coroutine tools are wrapped in a plain call (so a bad call raises at the call, as
it did unwrapped) that returns an object driving the original. Frameworks choose how to drive a tool by
`inspect.isgeneratorfunction` / `isasyncgenfunction` / `iscoroutinefunction` (and `asyncio.iscoroutinefunction`);
inspect reads those flags from the `__code__` of any function-like callable (one with `__code__`, `__defaults__`,
`__kwdefaults__`, `__name__`, `__annotations__`), here the original's code, which is never run through it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType, MethodType
from typing import Any


class FunctionLike:
    """A plain call shown to inspect with the original's code (each wrapper is of a subclass whose `__call__` is the
    call: see `function_like`). It binds as a method as a function does, and pickles by reference as a function
    does."""

    __code__: CodeType
    __name__: str
    __defaults__: tuple[Any, ...] | None
    __kwdefaults__: dict[str, Any] | None

    def __init__(self, code: CodeType, func: Callable[..., Any]) -> None:
        self.__code__ = code
        self.__name__ = getattr(func, "__name__", code.co_name)  # a partial has none: inspect needs one
        self.__defaults__ = getattr(func, "__defaults__", None)
        self.__kwdefaults__ = getattr(func, "__kwdefaults__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - each tool's subclass has its own
        raise NotImplementedError

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        return self if obj is None else MethodType(self, obj)

    def __repr__(self) -> str:  # as a function's: logs and error messages name the tool as before
        return f"<function {getattr(self, '__qualname__', self.__name__)} at {id(self):#x}>"

    def __reduce__(self) -> str:
        return str(getattr(self, "__qualname__", ""))


def code_of(func: Callable[..., Any]) -> CodeType | None:
    """The code object of `func`, of the function a bound method or a partial calls; None for other callables."""
    inner: Any = func
    while inner is not None and not isinstance(getattr(inner, "__code__", None), CodeType):
        inner = getattr(inner, "__func__", None) or getattr(inner, "func", None)  # a bound method, a partial
    return None if inner is None else inner.__code__


def function_like(call: Callable[..., Any], func: Callable[..., Any]) -> Callable[..., Any] | None:
    """`call` shown to inspect with the code of `func`; None when `func` has no code to show (a callable object)."""
    code = code_of(func)
    if code is None:
        return None
    # The call as the class's own `__call__` (a static method): calling the wrapper runs `call` with no frame of
    # its own in between (a delegating `__call__` doubled the wrapper's cost when the span is not sampled).
    namespace = {"__call__": staticmethod(call), "__module__": __name__}
    kind: type[FunctionLike] = type("FunctionLike", (FunctionLike,), namespace)
    return kind(code, func)
