"""Alert definitions from the rule file's `alerts` section, as plain validated values.

The rule loader (monitor.rules) validates the file against rules/schema.json; this module turns each entry
(a mapping, or an object with the same attribute names) into an `AlertSpec`, checking again what the
renderer and the in-process evaluator rely on, so a bad entry fails with a message that names it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from monitor.alerts.figures import FIGURES
from monitor.rules import duration_problem, objective_problem
from monitor.rules import parse_duration as parse_duration  # the alerts' name for it, re-exported

SEVERITIES = ("critical", "warning", "info")
_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_LABEL_VALUE_MAX = 200


class AlertSpecError(ValueError):
    """An `alerts` entry that cannot be rendered or evaluated; the message names the entry and the key."""


@dataclass(slots=True, frozen=True)
class AlertSpec:
    """One alert of the rule file. Exactly one of `below`, `above`, `objective` is set."""

    name: str
    figure: str
    agent: str | None = None
    tool: str | None = None
    below: float | None = None
    above: float | None = None
    objective: float | None = None
    window: str = "5m"
    for_: str = "1m"
    min_samples: int = 20
    severity: str = "warning"
    summary: str | None = None
    source: str = ""  # the rule file's name (no directory), for annotations

    @property
    def window_s(self) -> float:
        return parse_duration(self.window)

    @property
    def for_s(self) -> float:
        return parse_duration(self.for_)

    @property
    def is_slo(self) -> bool:
        return self.objective is not None

    @property
    def threshold(self) -> float:
        value = self.below if self.below is not None else self.above
        assert value is not None, "threshold alerts have below or above"
        return value

    @property
    def error_budget(self) -> float:
        assert self.objective is not None, "only objectives have an error budget"
        return 1.0 - self.objective


def _get(entry: Mapping[str, Any] | object, key: str) -> Any:
    if isinstance(entry, Mapping):
        return entry.get(key)
    return getattr(entry, key, None)


def _number(where: str, key: str, value: Any, *, lo: float, hi: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= float(value) <= hi:
        raise AlertSpecError(f"{where}: `{key}` must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def _label(where: str, key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > _LABEL_VALUE_MAX or "\n" in value:
        raise AlertSpecError(f"{where}: `{key}` must be a non-empty one-line string, got {value!r}")
    return value


def _duration(where: str, key: str, value: Any, default: str) -> str:
    if value is None:
        return default
    text = str(value)
    problem = duration_problem(key, text)
    if problem is not None:
        raise AlertSpecError(f"{where}: `{key}`: {problem}")
    return text


def spec_from_entry(entry: Mapping[str, Any] | object, index: int = 0) -> AlertSpec:
    """Validate one `alerts` entry (a mapping or an object with the same attribute names)."""
    name = _get(entry, "name")
    where = f"alerts[{index}]" + (f" ({name})" if isinstance(name, str) else "")
    if not isinstance(name, str) or not _NAME.match(name):
        raise AlertSpecError(f"{where}: `name` must be CamelCase letters and digits, got {name!r}")
    figure = _get(entry, "figure")
    if figure not in FIGURES:
        raise AlertSpecError(f"{where}: `figure` must be one of {', '.join(sorted(FIGURES))}, got {figure!r}")
    tool = _label(where, "tool", _get(entry, "tool"))
    if tool is not None and not FIGURES[figure].per_tool:
        raise AlertSpecError(f"{where}: figure {figure} has no per-tool breakdown, so `tool` cannot be set")
    below = _number(where, "below", _get(entry, "below"), lo=0.0, hi=1.0)
    above = _number(where, "above", _get(entry, "above"), lo=0.0, hi=1.0)
    objective = _number(where, "objective", _get(entry, "objective"), lo=0.0, hi=1.0)
    if sum(v is not None for v in (below, above, objective)) != 1:
        raise AlertSpecError(f"{where}: set exactly one of `below`, `above`, `objective`")
    if objective is not None and not 0.0 < objective < 1.0:
        raise AlertSpecError(f"{where}: `objective` must be strictly between 0 and 1, got {objective!r}")
    if objective is not None and FIGURES[figure].good is None:
        raise AlertSpecError(
            f"{where}: {figure} has no better direction, so an objective (a share of good events) means nothing "
            "for it: use `below` or `above`"
        )
    problem = None if objective is None else objective_problem(objective)
    if problem is not None:
        raise AlertSpecError(f"{where}: {problem}")
    for_value = _get(entry, "for_")
    if for_value is None:
        for_value = _get(entry, "for")
    min_samples = _get(entry, "min_samples")
    if min_samples is None:
        min_samples = 20
    if isinstance(min_samples, bool) or not isinstance(min_samples, int) or min_samples < 1:
        raise AlertSpecError(f"{where}: `min_samples` must be a positive integer, got {min_samples!r}")
    severity = _get(entry, "severity") or "warning"
    if severity not in SEVERITIES:
        raise AlertSpecError(f"{where}: `severity` must be one of {', '.join(SEVERITIES)}, got {severity!r}")
    summary = _get(entry, "summary")
    if summary is not None and not isinstance(summary, str):
        raise AlertSpecError(f"{where}: `summary` must be a string")
    return AlertSpec(
        name=name,
        figure=figure,
        agent=_label(where, "agent", _get(entry, "agent")),
        tool=tool,
        below=below,
        above=above,
        objective=objective,
        window=_duration(where, "window", _get(entry, "window"), "5m"),
        for_=_duration(where, "for", for_value, "1m"),
        min_samples=min_samples,
        severity=severity,
        summary=summary or None,
        source=PurePath(str(_get(entry, "source") or "")).name,
    )


def specs_from_entries(entries: Iterable[Mapping[str, Any] | object]) -> tuple[AlertSpec, ...]:
    specs = tuple(spec_from_entry(e, i) for i, e in enumerate(entries))
    seen: dict[tuple[str, str | None, str | None], int] = {}
    for i, s in enumerate(specs):
        key = (s.name, s.agent, s.tool)
        if key in seen:
            raise AlertSpecError(f"alerts[{i}] ({s.name}): defined twice for the same agent and tool")
        seen[key] = i
    return specs


def specs_from_ruleset(ruleset: object) -> tuple[AlertSpec, ...]:
    """The alerts of a loaded RuleSet (its `alerts` attribute; a mapping with an `alerts` key also works)."""
    entries = ruleset.get("alerts") if isinstance(ruleset, Mapping) else getattr(ruleset, "alerts", None)
    if entries is None:
        return ()
    if isinstance(entries, str | bytes) or not isinstance(entries, Iterable):
        raise AlertSpecError(f"`alerts` must be a list, got {type(entries).__name__}")
    return specs_from_entries(entries)
