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
              optional: true                  # may be called or not
          response:
            contains: ["1234"]                # strings the answer must contain
            regex: ['(?i)shipped|on its way']  # RE2 patterns the answer must match
          tool_calls: {min: 1, max: 2}        # bounds on the number of calls in the step
        reference: "Order 1234 shipped on Monday."   # the assistant reply step-wise mode feeds forward
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

STEP_KEYS = frozenset({"user", "expect", "reference"})
EXPECT_KEYS = frozenset({"calls", "none", "response", "tool_calls"})
CALL_KEYS = frozenset({"tool", "args", "optional", "min", "max", "exactly"})
RESPONSE_KEYS = frozenset({"contains", "regex"})


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the place."""


@dataclass(slots=True, frozen=True)
class Step:
    index: int  # 1-based
    user: str
    slots: tuple[dict[str, Any], ...]  # slots in the rule-file `call` format
    expects_none: bool
    contains: tuple[str, ...] = ()
    regex: tuple[str, ...] = ()
    min_calls: int | None = None
    max_calls: int | None = None
    reference: str | None = None


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


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) and v for v in items):
        raise ScenarioError(f"{where}: expected a string or a list of non-empty strings")
    return tuple(items)


def _unknown(obj: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise ScenarioError(f"{where}: unknown key {extra[0]!r} (allowed: {', '.join(sorted(allowed))})")


def _slot(call: Any, where: str) -> dict[str, Any]:
    if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
        raise ScenarioError(f"{where}: a call is a mapping with a `tool` name")
    _unknown(call, CALL_KEYS, where)
    slot: dict[str, Any] = {"tool": call["tool"]}
    if "args" in call:
        slot["args"] = call["args"]
    if call.get("optional"):
        slot["min"], slot["max"] = 0, int(call.get("max", 1))
    elif "exactly" in call:
        slot["exactly"] = call["exactly"]
    elif "min" in call or "max" in call:
        slot.update({k: call[k] for k in ("min", "max") if k in call})
    else:
        slot["exactly"] = 1
    return slot


def _count(value: Any, where: str) -> tuple[int | None, int | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict) or set(value) - {"min", "max"}:
        raise ScenarioError(f"{where}: tool_calls is a mapping with `min` and/or `max`")
    lo, hi = value.get("min"), value.get("max")
    for v in (lo, hi):
        if v is not None and (not isinstance(v, int) or v < 0):
            raise ScenarioError(f"{where}: tool_calls bounds are non-negative integers")
    return lo, hi


def _step(raw: Any, n: int, where: str) -> Step:
    where = f"{where}, step {n}"
    if not isinstance(raw, dict) or not isinstance(raw.get("user"), str):
        raise ScenarioError(f"{where}: a step is a mapping with a `user` message")
    _unknown(raw, STEP_KEYS, where)
    expect = raw.get("expect") or {}
    if not isinstance(expect, dict):
        raise ScenarioError(f"{where}: `expect` is a mapping")
    _unknown(expect, EXPECT_KEYS, f"{where}, expect")
    calls = expect.get("calls") or []
    if not isinstance(calls, list):
        raise ScenarioError(f"{where}: `expect.calls` is a list")
    response = expect.get("response") or {}
    if not isinstance(response, dict):
        raise ScenarioError(f"{where}: `expect.response` is a mapping")
    _unknown(response, RESPONSE_KEYS, f"{where}, expect.response")
    lo, hi = _count(expect.get("tool_calls"), where)
    reference = raw.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise ScenarioError(f"{where}: `reference` is the assistant reply text")
    slots = tuple(_slot(c, f"{where}, call {i}") for i, c in enumerate(calls, 1))
    return Step(n, raw["user"], slots, bool(expect.get("none")) or not slots,
                _strings(response.get("contains"), f"{where}: response.contains"),
                _strings(response.get("regex"), f"{where}: response.regex"), lo, hi, reference)


def _scenario(raw: Any, n: int, path: Path) -> Scenario:
    if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list) or not raw["steps"]:
        raise ScenarioError(f"{path}: scenario {n}: needs a non-empty `steps` list")
    name = raw.get("name") or f"scenario-{n}"
    if not isinstance(name, str):
        raise ScenarioError(f"{path}: scenario {n}: `name` is a string")
    return Scenario(name, tuple(_step(s, i, f"{path}: {name}") for i, s in enumerate(raw["steps"], 1)))


def load_scenarios(path: str | Path) -> ScenarioFile:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ScenarioError(f"{p}{at}: YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{p}: a scenario file is a mapping (with `scenarios`, or `name` and `steps`)")
    raw_list = data.get("scenarios", [data] if "steps" in data else None)
    if not isinstance(raw_list, list) or not raw_list:
        raise ScenarioError(f"{p}: no scenario (give `scenarios: [...]` or `steps: [...]`)")
    rules = data.get("rules") or []
    rules = [rules] if isinstance(rules, str) else rules
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        raise ScenarioError(f"{p}: `rules` is a path or a list of paths")
    agent = data.get("agent")
    out = ScenarioFile(p, agent if isinstance(agent, str) else None, [p.parent / r for r in rules])
    out.scenarios = [_scenario(s, i, p) for i, s in enumerate(raw_list, 1)]
    names = [s.name for s in out.scenarios]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ScenarioError(f"{p}: duplicate scenario name {dup!r}")
    return out
