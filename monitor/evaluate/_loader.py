"""Loading what the user names on the command line: `module:function` callables and rule sets."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class LoadError(ValueError):
    """A `module:function` that cannot be imported, is not callable, or cannot take the call the command makes."""


@dataclass(frozen=True, slots=True)
class Call:
    """How a command calls what --agent or --generator names: `shape` and `why` for the message, and arguments of
    that shape (their values do not matter) to bind to the callable's signature before any run."""

    shape: str
    why: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


CASE_CALL = Call("fn(input)", "a case calls it", ("",))
STEP_CALL = Call("fn(input, history=[...])", "a scenario step calls it (history: the conversation's earlier messages)",
                 ("",), {"history": []})
PROBE_AGENT_CALL = Call("fn(input)", "the probe calls it", ("",))
GENERATOR_CALL = Call("fn(rng)", "the probe calls it (rng: a random.Random)", (None,))


def call_problem(fn: Callable[..., Any], spec: str, call: Call) -> str | None:
    """Why `fn` cannot take `call` (an agent without `history` in a scenario raised TypeError in every step, which
    showed only as runs that raised); None when it can, or when its signature cannot be read."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*call.args, **call.kwargs)
    except TypeError as exc:
        return f"{spec!r} cannot be called as {call.shape}, as {call.why}: {exc}"
    return None


def load_callable(spec: str, call: Call | None = None) -> Callable[..., Any]:
    """`package.module:function` (the current directory is importable) or `path/to/file.py:function`; with `call`,
    one that can take that call (LoadError saying why not)."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise LoadError(f"{spec!r}: expected MODULE:FUNCTION, e.g. examples.triage.agent:triage")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise LoadError(f"{spec!r}: no such file {path}")
            mod_spec = importlib.util.spec_from_file_location(path.stem, path)
            if mod_spec is None or mod_spec.loader is None:
                raise LoadError(f"{spec!r}: cannot load {path}")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[path.stem] = module
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except LoadError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure is the user's to fix; say which
        # A module may guard its set-up with `sys.exit("set OPENAI_API_KEY")`: an input error (exit 2) too, not
        # an exit of toolwatch with the module's code (1 is a failed gate's).
        what = exc.code if isinstance(exc, SystemExit) else exc
        raise LoadError(f"{spec!r}: cannot import {module_name}: {type(exc).__name__}: {what}"
                        f"{_where(exc, module_name)}") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise LoadError(f"{spec!r}: {module_name} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise LoadError(f"{spec!r}: {attr} is not callable")
    problem = call_problem(target, spec, call) if call is not None else None
    if problem is not None:
        raise LoadError(problem)
    return target  # type: ignore[no-any-return]


def _where(exc: BaseException, module_name: str) -> str:
    """Where modules are imported from, when the package named is not found at all (run from another folder)."""
    top = module_name.partition(".")[0]
    if not isinstance(exc, ModuleNotFoundError) or exc.name != top:
        return ""
    return (f" (modules are imported from the current folder and PYTHONPATH: run toolwatch from the folder that holds "
            f"{top}/ or {top}.py, or add that folder to PYTHONPATH)")


def default_agent_name(agents: Sequence[str] | frozenset[str], given: str | None) -> str:
    """The agent name for `agent_turn`: the one given, else the rules' only agent, else "agent"."""
    if given:
        return given
    names = sorted(agents)
    return names[0] if len(names) == 1 else "agent"


def agent_name_problem(judge: Any, name: str, remedy: str = "give --agent-name") -> str | None:
    """Why no rule of the files applies to the turns of agent `name` (a missing or misspelt --agent-name): every
    rule is scoped to other agents (a dataset's cases scoped to `name` then meet none of their tools either). None
    when a rule applies to them, or no other agent is named."""
    others = sorted(a for a in judge.agents if a != name)
    if not others or any(e.agent is None or e.agent == name for e in judge.ruleset.expectations):
        return None
    return (f"the rule files are scoped to agent(s) {', '.join(others)} and none to {name!r}, the agent name of these "
            f"turns: no rule applies to them; {remedy}")


def load_judge(paths: Sequence[str | Path]) -> Any:
    """A Judge over the rule files (raises monitor.rules.RuleFileError with the location of a problem)."""
    from monitor.judge import Judge
    from monitor.rules import load_rules

    return Judge(load_rules(list(paths)))
