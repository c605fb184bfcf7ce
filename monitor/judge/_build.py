"""Fast construction of the frozen, slotted verdict dataclasses on the hot path.

A frozen dataclass's `__init__` sets each field through `object.__setattr__`, the generic (slow) path.
`Builder` instead fills a plain "mirror" class with the same `__slots__` (ordinary, specialized attribute
stores) and then switches the instance's `__class__` to the dataclass, which Python allows because the
two layouts are identical. Should that ever be refused, it falls back to setting the slots through their
member descriptors. Either way the straight-line code is generated from the dataclass's own field list,
as `dataclasses` itself generates `__init__` (only field names and indexes go into the generated text,
never data). Fields it is not given take their declared defaults, so fields added later to the contract
keep working. The result is an ordinary instance of the class, equal to one its constructor builds, and as
frozen (tests check this); about 4x faster than the constructor for TurnVerdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Builder(Generic[T]):
    """`Builder(cls, names).build(*values)` == `cls(**dict(zip(names, values)))`, faster."""

    __slots__ = ("cls", "names", "rest", "build")

    def __init__(self, cls: type[T], names: Sequence[str]) -> None:
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = [n for n in names if n not in fields]
        if unknown:
            raise TypeError(f"{cls.__name__} has no field(s) {unknown}")
        self.cls = cls
        self.names = tuple(names)
        rest: list[tuple[str, Any, bool]] = []
        for name, f in fields.items():
            if name in names:
                continue
            if f.default is not dataclasses.MISSING:
                rest.append((name, f.default, False))
            elif f.default_factory is not dataclasses.MISSING:
                rest.append((name, f.default_factory, True))
            else:
                raise TypeError(f"{cls.__name__}.{name} has no default and is not given")
        self.rest = tuple(rest)
        self.build: Callable[..., T] = self._mirror() or self._descriptors()

    def _lines(self, target: Callable[[str, str], str]) -> tuple[list[str], dict[str, Any]]:
        env: dict[str, Any] = {}
        lines = [target(name, f"v{i}") for i, name in enumerate(self.names)]
        for i, (name, default, factory) in enumerate(self.rest):
            env[f"d{i}"] = default
            lines.append(target(name, f"d{i}()" if factory else f"d{i}"))
        return lines, env

    def _mirror(self) -> Callable[..., T] | None:
        slots = getattr(self.cls, "__slots__", None)
        if not isinstance(slots, tuple) or set(slots) != set(self.names) | {n for n, _, _ in self.rest}:
            return None
        mirror = type(f"_{self.cls.__name__}Mirror", (object,), {"__slots__": slots})
        lines, env = self._lines(lambda name, value: f"    self.{name} = {value}")
        env["_cls"] = self.cls
        params = ", ".join(f"v{i}" for i in range(len(self.names)))
        exec("\n".join([f"def __init__(self, {params}):", *lines, "    self.__class__ = _cls"]), env)  # noqa: S102
        mirror.__init__ = env["__init__"]  # type: ignore[misc]
        build: Callable[..., T] = mirror
        try:  # the layouts must match for the class switch; prove it once
            probe = build(*(None for _ in self.names))
        except TypeError:
            return None
        return build if type(probe) is self.cls else None

    def _descriptors(self) -> Callable[..., T]:
        cls = self.cls
        lines, env = self._lines(lambda name, value: f"    s_{name}(o, {value})")
        for name in (*self.names, *(n for n, _, _ in self.rest)):
            env[f"s_{name}"] = cls.__dict__[name].__set__
        env["_new"], env["_cls"] = object.__new__, cls
        params = ", ".join(f"v{i}" for i in range(len(self.names)))
        exec("\n".join([f"def build({params}):", "    o = _new(_cls)", *lines, "    return o"]), env)  # noqa: S102
        build: Callable[..., T] = env["build"]
        return build
