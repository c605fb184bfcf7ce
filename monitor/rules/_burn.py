"""The burn-rate alerts an `objective` alert stands for, and whether they can fire at all.

An objective's error ratio is at most 1, so a burn-rate condition "above factor x (1 - objective)" whose threshold
is 1 or more can never hold. The rule compiler refuses an objective none of whose conditions can fire; `rules
check` warns about each one that cannot when another can.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

_DURATION = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")
_UNIT_S = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration such as `5m`, `1h30m`, `90s` (an alert's `window` and `for`); raises
    ValueError when malformed. Prometheus takes the units largest first, each once: `5m1h` and `1s1s` are not
    durations, though the rule-file schema's pattern takes them."""
    m = _DURATION.match(text.strip()) if isinstance(text, str) else None
    if m is None or not any(m.groups()):
        raise ValueError(f"not a Prometheus duration: {text!r} (a number and a unit, y w d h m s or ms, the units "
                         "largest first and each once: e.g. 30s, 5m, 1h5m)")
    return float(sum(int(g) * unit for g, unit in zip(m.groups(), _UNIT_S, strict=True) if g))


def duration_problem(key: str, text: str) -> str | None:
    """What is wrong with an alert's `window` or `for` (`key`) as Prometheus and the alert evaluator read it, or None:
    not a duration, or a window of 0s, which holds no turn."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        return str(exc)
    if key == "window" and seconds <= 0:
        return f"a window of {text} holds no turn: give one longer than 0s"
    return None


@dataclass(slots=True, frozen=True)
class BurnWindow:
    """One multi-window burn-rate condition: both windows burn faster than `factor` x the error budget."""

    long: str
    short: str
    factor: float
    severity: str

    def can_fire(self, objective: float) -> bool:
        """Whether an error ratio (at most 1) can exceed `factor` x the budget `1 - objective`."""
        return self.factor * (1.0 - objective) < 1.0

    def describe(self, objective: float) -> str:
        return (f"the {self.severity} alert (error ratio above {self.factor:g}x the budget over {self.long} and "
                f"{self.short}, i.e. above {self.factor * (1.0 - objective):.4g})")


# The SRE workbook's pairs: a page for 2% of a 30-day budget spent in an hour, a ticket for 5% in six hours.
DEFAULT_BURN_WINDOWS = (BurnWindow("1h", "5m", 14.4, "critical"), BurnWindow("6h", "30m", 6.0, "warning"))


def least_objective(burn: BurnWindow) -> float:
    """The least objective with four decimals at which `burn` can fire: its bound 1 - 1/factor rounded up (shown
    rounded down, 0.8333 for 1 - 1/6, an objective 'above' it such as 0.83331 still could not fire)."""
    value = math.ceil((1.0 - 1.0 / burn.factor) * 10_000) / 10_000
    return value if burn.can_fire(value) else round(value + 0.0001, 4)


def objective_problem(objective: float, burn_windows: Sequence[BurnWindow] = DEFAULT_BURN_WINDOWS) -> str | None:
    """Why no burn-rate alert of `objective` could ever fire (its error ratio is at most 1), or None."""
    if not burn_windows or any(b.can_fire(objective) for b in burn_windows):
        return None
    least = min(least_objective(b) for b in burn_windows)
    return (f"objective {objective:g} leaves an error budget of {1.0 - objective:.4g}, so none of its burn-rate "
            f"alerts could ever fire: {'; '.join(b.describe(objective) for b in burn_windows)}, and an error ratio "
            f"is at most 1. Use an objective of at least {least:.4f}, or a threshold alert (`below`/`above`)")


def objective_warnings(objective: float, burn_windows: Sequence[BurnWindow] = DEFAULT_BURN_WINDOWS) -> list[str]:
    """One line per burn-rate alert of `objective` that can never fire (when another one can)."""
    if objective_problem(objective, burn_windows) is not None:
        return []
    return [f"{b.describe(objective)} can never fire at objective {objective:g} (it can from "
            f"{least_objective(b):.4f} on)" for b in burn_windows if not b.can_fire(objective)]
