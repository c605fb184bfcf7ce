"""Multi-step scenario files (YAML): conversations whose every step says which tool calls to expect.

```yaml
agent: customer-support              # gen_ai.agent.name of the turns (optional)
rules: [../rules/customer-support.yaml]   # catalog / schemas, relative to this file (optional)
scenarios:                           # or a single scenario at the top level (name + steps)
  - name: where-is-my-order
    steps:
      - user: "Where is order 1234?"
        expect:
          calls:                     # expected tool calls (any order); [] or `none: true` for no call
            - tool: get_order_status
              args: {order_id: "1234"}        # argument checks, exactly as in rule files
            - tool: get_shipping_eta
              optional: true                  # may be called or not (or exactly: 2, min: 1, max: 3; default
                                              # exactly 1); a call the step must not make is left out
          response:
            contains: ["1234"]                # strings the answer must contain
            regex: ['(?i)shipped|on its way']  # RE2 patterns the answer must match
          tool_calls: {min: 1, max: 2}        # bounds on the number of calls in the step
        reference: "Order 1234 shipped on Monday."   # the assistant reply step-wise mode feeds forward
```

A step without `calls` (and without `none: true`) says nothing about which tools are called: any tool the rule
files declare may be called any number of times (a made-up tool or invalid arguments still fail the step), and its
`tool_calls` bounds and response checks decide. With `catalog.from_definitions`, a tool known only from the
turn's offered tools (`Turn.tool_definitions`: its own and its chat spans' `gen_ai.tool.definitions`) counts
as an extra call there.
`tool_calls` bounds that no run can meet with the step's `calls` (a max under the sum of their minimums, a min over
the sum of their maximums: a call past those is extra and fails the step) are errors, as `none: true` with a min is.
Errors name the file, line and column, the scenario and the step; every step in error is reported at once (with
its first problem; an unknown tool or a bad check of the steps that load too: `load_and_build`). Unknown keys, and
values of the wrong type, are errors at every level; a key given as null is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from monitor._gc import in_batch_gc
from monitor.rules import RuleFileError, read_text
from monitor.rules._errors import MAX_REPORTED, place
from monitor.rules._yaml import Marks, load_yaml

_T = TypeVar("_T")
FILE_KEYS = frozenset({"agent", "rules", "scenarios"})
SCENARIO_KEYS = frozenset({"name", "steps"})
STEP_KEYS = frozenset({"user", "expect", "reference"})
EXPECT_KEYS = frozenset({"calls", "none", "response", "tool_calls"})
CALL_KEYS = frozenset({"tool", "args", "optional", "min", "max", "exactly"})
RESPONSE_KEYS = frozenset({"contains", "regex"})

YamlPath = tuple[str | int, ...]


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the place, `hint` what to do."""

    def __init__(self, message: str, hint: str = "", errors: Sequence[ScenarioError] = (), *,
                 at: tuple[int, int] = (0, 0)) -> None:
        super().__init__(message)
        self.hint = hint
        self.errors: tuple[ScenarioError, ...] = tuple(errors) or (self,)  # every problem found (this one alone)
        self.at = at  # (line, column) of the problem in the scenario file ((0, 0): none)
        # load_scenarios: the file with the steps that loaded (the others left out), whose catalog is still to check
        self.partial: ScenarioFile | None = None

    @classmethod
    def of(cls, errors: Sequence[ScenarioError]) -> ScenarioError:
        """One error for several (found in one pass, so that a user fixes them all in one go): their messages a line
        each, at most MAX_REPORTED, and their hints, each once."""
        found = [e for error in errors for e in error.errors]
        if len(found) == 1:
            return found[0]
        shown = [str(e) for e in found[:MAX_REPORTED]]
        if len(found) > MAX_REPORTED:
            shown.append(f"... and {len(found) - MAX_REPORTED} more")
        hints = dict.fromkeys(e.hint for e in found if e.hint)
        return cls("\n".join(shown), "\n".join(hints), found)


@dataclass(slots=True, frozen=True)
class Step:
    index: int  # 1-based
    user: str
    slots: tuple[dict[str, Any], ...]  # slots in the rule-file `call` format
    expects_none: bool  # `none: true` or `calls: []`
    contains: tuple[str, ...] = ()
    regex: tuple[str, ...] = ()
    min_calls: int | None = None
    max_calls: int | None = None
    reference: str | None = None
    line: int = 0  # of the step in its file (0: unknown)
    path: YamlPath = ()  # of the step in its file, e.g. ("scenarios", 0, "steps", 2)

    @property
    def any_calls(self) -> bool:
        """No expectation on which tools are called (no `calls`, no `none`)."""
        return not self.slots and not self.expects_none


@dataclass(slots=True, frozen=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]


@dataclass(slots=True)
class ScenarioFile:
    path: Path
    agent: str | None
    rules: list[Path]
    scenarios: list[Scenario] = field(default_factory=list)
    marks: Marks | None = None  # positions of the file's keys and values
    rules_at: tuple[YamlPath, ...] = ()  # where each of `rules` is named in the file: ("rules",) or ("rules", i)


@dataclass(slots=True)
class _Where:
    """Formats errors as `file:line:column: scenario, step n[, ...]: message`."""

    marks: Marks
    label: str = ""

    def at(self, label: str) -> _Where:
        return _Where(self.marks, f"{self.label}, {label}" if self.label else label)

    def error(self, path: YamlPath, message: str, *, key: bool = False, hint: str = "") -> ScenarioError:
        line, column = self.marks.at(path, key=key)
        where = place(self.marks.file, line, column)
        return ScenarioError(f"{where}: {self.label}: {message}" if self.label else f"{where}: {message}", hint,
                             at=(line, column))


def _strings(value: Any, where: _Where, path: YamlPath, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) and v for v in items):
        raise where.error(path, f"{what}: expected a string or a list of non-empty strings")
    return tuple(items)


def _unknown(obj: dict[str, Any], allowed: frozenset[str], where: _Where, path: YamlPath) -> None:
    extra = sorted(set(obj) - allowed, key=str)
    if extra:
        raise where.error((*path, extra[0]), f"unknown key {extra[0]!r} (allowed: {', '.join(sorted(allowed))})",
                          key=True)


def _bound(obj: dict[str, Any], name: str, where: _Where, path: YamlPath, what: str) -> int | None:
    v = obj.get(name)
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
        raise where.error((*path, name), f"{what} `{name}` is a non-negative integer, got {v!r}")
    return v


def _slot(call: Any, where: _Where, path: YamlPath) -> dict[str, Any]:
    if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
        raise where.error(path, "a call is a mapping with a `tool` name")
    _unknown(call, CALL_KEYS, where, path)
    lo, hi, exactly = (_bound(call, k, where, path, "a call's") for k in ("min", "max", "exactly"))
    if exactly is not None and (lo is not None or hi is not None):
        raise where.error((*path, "exactly"), "use either exactly or min/max, not both", key=True)
    if lo is not None and hi is not None and lo > hi:
        raise where.error((*path, "min"), f"min {lo} is greater than max {hi}")
    optional = call.get("optional", False)
    if not isinstance(optional, bool):
        raise where.error((*path, "optional"), f"`optional` is true or false, got {optional!r}")
    for key, v in (("exactly", exactly), ("max", hi)):
        if v == 0:
            raise where.error((*path, key), f"`{key}: 0` expects no call of {call['tool']}: leave it out of `calls` "
                                            "(a call not listed there fails the step)", key=True)
    least = exactly if exactly is not None else lo
    if optional and least:
        key = "exactly" if exactly is not None else "min"
        raise where.error((*path, "optional"), f"an optional call has no minimum, and `{key}: {least}` asks for at "
                                               f"least {least} call{'s' if least > 1 else ''}", key=True)
    slot: dict[str, Any] = {"tool": call["tool"]}
    if "args" in call:
        slot["args"] = call["args"]
    if optional:
        slot["min"], slot["max"] = 0, 1 if hi is None else hi
    elif exactly is not None:
        slot["exactly"] = exactly
    elif lo is not None or hi is not None:
        slot.update({k: v for k, v in (("min", lo), ("max", hi)) if v is not None})
    else:
        slot["exactly"] = 1
    return slot


def _count(value: Any, where: _Where, path: YamlPath) -> tuple[int | None, int | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict) or set(value) - {"min", "max"}:
        raise where.error(path, "tool_calls is a mapping with `min` and/or `max`")
    lo, hi = (_bound(value, k, where, path, "tool_calls") for k in ("min", "max"))
    if lo is not None and hi is not None and lo > hi:
        raise where.error((*path, "min"), f"tool_calls min {lo} is greater than max {hi}")
    return lo, hi


def _calls_text(n: int) -> str:
    return f"{n} call" if n == 1 else f"{n} calls"


def _check_count(slots: tuple[dict[str, Any], ...], lo: int | None, hi: int | None, where: _Where, path: YamlPath
                 ) -> None:
    """A step whose `calls` need more calls than its tool_calls max, or allow fewer than its min, can never pass (a
    call past every slot's maximum is extra and fails the step): an error at the bound."""
    if not slots:
        return
    need = sum(s.get("exactly", s.get("min", 0)) for s in slots)
    if hi is not None and need > hi:
        raise where.error((*path, "max"), f"the step's calls need at least {_calls_text(need)}, and tool_calls max is "
                                          f"{hi}")
    highs = [s.get("exactly", s.get("max")) for s in slots]
    if lo is not None and None not in highs:
        most = sum(h for h in highs if h is not None)
        if lo > most:
            raise where.error((*path, "min"), f"the step's calls allow at most {_calls_text(most)}, and tool_calls min "
                                              f"is {lo}")


def _expects_none(expect: dict[str, Any], calls: list[Any], where: _Where, path: YamlPath) -> bool:
    none = expect.get("none")
    if none is not None and not isinstance(none, bool):
        raise where.error((*path, "none"), f"`none` is true or false, got {none!r}")
    if none and calls:
        raise where.error((*path, "none"), "`none: true` expects no call, and `calls` lists some: give one of them",
                          key=True)
    empty = isinstance(expect.get("calls"), list) and not calls  # `calls: []`
    if none is False and empty:
        raise where.error((*path, "none"), "`calls: []` expects no call, and `none: false` says otherwise",
                          key=True)
    return bool(none) or empty


def _or_default(value: Any, kind: type, where: _Where, path: YamlPath, what: str) -> Any:
    """value, an empty `kind` when null or left out; of another type (a falsy one too), an error at its place."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise where.error(path, f"{what}, got {value!r}")
    return value


def _step(raw: Any, n: int, where: _Where, path: YamlPath) -> Step:
    where = where.at(f"step {n}")
    if not isinstance(raw, dict) or raw.get("user") is None:
        raise where.error(path, "a step is a mapping with a `user` message")
    if not isinstance(raw["user"], str):
        raise where.error((*path, "user"), f"user: expected a string, got {raw['user']!r}")
    _unknown(raw, STEP_KEYS, where, path)
    expect = _or_default(raw.get("expect"), dict, where, (*path, "expect"), "`expect` is a mapping")
    epath = (*path, "expect")
    _unknown(expect, EXPECT_KEYS, where, epath)
    calls = _or_default(expect.get("calls"), list, where, (*epath, "calls"), "`expect.calls` is a list")
    rpath = (*epath, "response")
    response = _or_default(expect.get("response"), dict, where, rpath, "`expect.response` is a mapping")
    _unknown(response, RESPONSE_KEYS, where, rpath)
    lo, hi = _count(expect.get("tool_calls"), where, (*epath, "tool_calls"))
    none = _expects_none(expect, calls, where, epath)
    if none and lo:
        raise where.error((*epath, "tool_calls", "min"), f"the step expects no call, and tool_calls min is {lo}")
    reference = raw.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise where.error((*path, "reference"), "`reference` is the assistant reply text")
    slots = tuple(_slot(c, where.at(f"call {i}"), (*epath, "calls", i - 1)) for i, c in enumerate(calls, 1))
    _check_count(slots, lo, hi, where, (*epath, "tool_calls"))
    return Step(n, raw["user"], slots, none,
                _strings(response.get("contains"), where, (*rpath, "contains"), "response.contains"),
                _strings(response.get("regex"), where, (*rpath, "regex"), "response.regex"), lo, hi, reference,
                where.marks.at(path)[0], path)


def _scenario(raw: Any, n: int, where: _Where, path: YamlPath, errors: list[ScenarioError]) -> Scenario:
    """Scenario n (raw, at path): an entry of `scenarios`, or the file itself (path (); the caller checks its keys),
    with the steps that load: the errors of the others go to `errors`."""
    here = where.at(f"scenario {n}")
    if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list) or not raw["steps"]:
        raise here.error(path, "needs a non-empty `steps` list")
    if path:
        _unknown(raw, SCENARIO_KEYS, here, path)
    name = raw.get("name")
    if name is None:
        name = f"scenario-{n}"
    elif not isinstance(name, str) or not name:
        raise here.error((*path, "name"), f"`name` is a non-empty string, got {name!r}")
    where = where.at(name)
    steps = []
    for i, s in enumerate(raw["steps"], 1):  # each step in error is reported (with its first problem)
        try:
            steps.append(_step(s, i, where, (*path, "steps", i - 1)))
        except ScenarioError as exc:
            errors.append(exc)
    return Scenario(name, tuple(steps))


def _agent(agent: Any, where: _Where) -> str | None:
    """The file's `agent` (None when left out or null); another type, or "", is an error at its place."""
    if agent is not None and (not isinstance(agent, str) or not agent):
        raise where.error(("agent",), "`agent` is the turns' agent name (gen_ai.agent.name), a non-empty string, "
                                      f"got {agent!r}")
    return agent


def _rules(rules: Any, p: Path, where: _Where) -> list[tuple[Path, YamlPath]]:
    """The file's `rules` as paths, each with where the file names it ([] when left out or null): a path or a list of
    non-empty paths, else an error at the value (or the list item) that is not one."""
    if rules is None:
        return []
    items, at = ([rules], ("rules",)) if isinstance(rules, str) else (rules, None)
    if not isinstance(items, list):
        raise where.error(("rules",), f"`rules` is a path or a list of paths (relative to this file), got {rules!r}")
    for i, r in enumerate(items):
        if not isinstance(r, str) or not r:
            raise where.error(at or ("rules", i), "`rules` is a path or a list of paths (relative to this file), "
                                                  f"got {r!r}")
    return [(p.parent / r, at or ("rules", i)) for i, r in enumerate(items)]


@in_batch_gc
def load_scenarios(path: str | Path) -> ScenarioFile:
    """The scenario file at `path`; a ScenarioError with every problem found, whose `partial` (when the file's own
    keys loaded) holds the steps without one (their catalog is checked by `build_judge`: monitor.scenario._runner
    `load_and_build` reports those problems with these)."""
    p = Path(path)
    try:  # read as rule and dataset files are: bounded, UTF-8
        data, marks = load_yaml(read_text(p), str(p))
    except RuleFileError as exc:  # unreadable, too large, not UTF-8, YAML syntax, duplicate keys, nesting, aliases
        raise ScenarioError(str(exc)) from None
    where = _Where(marks)
    if not isinstance(data, dict):
        raise where.error((), "a scenario file is a mapping (with `scenarios`, or `name` and `steps`)")
    errors: list[ScenarioError] = []  # every problem, the file's own keys' too (not only the first)

    def check(fn: Callable[..., _T], *args: Any) -> _T | None:
        try:
            return fn(*args)
        except ScenarioError as exc:
            errors.extend(exc.errors)
            return None

    base: YamlPath = ()
    if "scenarios" in data:
        raw_list, base = data["scenarios"], ("scenarios",)
        for key in sorted(SCENARIO_KEYS & data.keys()):
            errors.append(where.error((key,), f"`{key}` beside `scenarios`: give the scenarios in `scenarios: [...]`, "
                                              "or one scenario's `name` and `steps` at the top level", key=True))
        others = {k: v for k, v in data.items() if k not in SCENARIO_KEYS}  # those beside `scenarios`: said above
        check(_unknown, others, FILE_KEYS, where, ())
    else:
        check(_unknown, data, (FILE_KEYS - {"scenarios"}) | SCENARIO_KEYS, where, ())
        raw_list = [data] if "steps" in data else None
    agent, rules = check(_agent, data.get("agent"), where), check(_rules, data.get("rules"), p, where) or []
    if not isinstance(raw_list, list) or not raw_list:
        errors.append(where.error(base, "no scenario (give `scenarios: [...]` or `steps: [...]`)"))
        raise ScenarioError.of(_in_file_order(errors))
    out = ScenarioFile(p, agent, [r for r, _ in rules], marks=marks, rules_at=tuple(at for _, at in rules))
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_list):
        try:
            scenario = _scenario(raw, i + 1, where, (*base, i) if base else (), errors)
        except ScenarioError as exc:
            errors += exc.errors
            continue
        if scenario.name in seen:
            at = (*base, i, "name") if base else ("name",)
            errors.append(where.error(at, f"duplicate scenario name {scenario.name!r} (first at scenario "
                                          f"{seen[scenario.name] + 1})"))
            continue
        seen[scenario.name] = i
        if scenario.steps:  # none when every step is in error
            out.scenarios.append(scenario)
    if errors:
        error = ScenarioError.of(_in_file_order(errors))
        error.partial = out
        raise error
    return out


def _in_file_order(errors: list[ScenarioError]) -> list[ScenarioError]:
    """By place in the file (stable: those of one place, or of none, keep the order they were found in)."""
    return sorted(errors, key=lambda e: e.at)
