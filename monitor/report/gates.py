"""CI gates on a report's figures: absolute thresholds and regression against a baseline report.

`--fail-under accuracy=0.95` fails when the figure is below 0.95; `--fail-over spurious_rate=0.05` when
above; `--baseline old.json --max-drop 0.02` fails when a figure got worse than the baseline by more than
0.02 (worse = lower for figures where higher is better, higher for the rates where lower is better).
A gate on a figure that could not be computed (zero denominator, reported as absent) fails: a gate that
silently passes on no data is worse than none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from monitor.report.figures import HIGHER_IS_BETTER, LABELS, canonical_figure

EPSILON = 1e-12


@dataclass(slots=True, frozen=True)
class Threshold:
    figure: str
    value: float


@dataclass(slots=True, frozen=True)
class GateFailure:
    figure: str
    message: str


def parse_threshold(spec: str) -> Threshold:
    """`name=value`, value a ratio (0.95) or a percentage (95%); raises ValueError saying what to fix."""
    name, sep, raw = spec.partition("=")
    if not sep or not name.strip() or not raw.strip():
        raise ValueError(f"{spec!r}: expected FIGURE=VALUE, e.g. accuracy=0.95")
    try:
        figure = canonical_figure(name)
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from None
    text = raw.strip()
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"{spec!r}: {text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{spec!r}: {text} is outside [0, 1] (write 0.95 or 95%)")
    return Threshold(figure, value)


def _pct(value: float) -> str:
    return f"{value * 100:.2f}%"


def check_gates(
    figures: Mapping[str, float | None],
    *,
    fail_under: Sequence[Threshold] = (),
    fail_over: Sequence[Threshold] = (),
    baseline: Mapping[str, float | None] | None = None,
    max_drop: float = 0.0,
) -> list[GateFailure]:
    failures: list[GateFailure] = []
    for t in fail_under:
        value = figures.get(t.figure)
        label = LABELS.get(t.figure, t.figure)
        if value is None:
            failures.append(GateFailure(t.figure, f"{label} ({t.figure}) is absent (no data), gate < {_pct(t.value)}"))
        elif value + EPSILON < t.value:
            failures.append(GateFailure(t.figure, f"{label} ({t.figure}) {_pct(value)} < {_pct(t.value)}"))
    for t in fail_over:
        value = figures.get(t.figure)
        label = LABELS.get(t.figure, t.figure)
        if value is None:
            failures.append(GateFailure(t.figure, f"{label} ({t.figure}) is absent (no data), gate > {_pct(t.value)}"))
        elif value - EPSILON > t.value:
            failures.append(GateFailure(t.figure, f"{label} ({t.figure}) {_pct(value)} > {_pct(t.value)}"))
    if baseline is not None:
        failures += _regressions(figures, baseline, max_drop)
    return failures


def _regressions(
    figures: Mapping[str, float | None], baseline: Mapping[str, float | None], max_drop: float
) -> list[GateFailure]:
    out = []
    for key, before in baseline.items():
        if before is None or key not in HIGHER_IS_BETTER:
            continue
        now = figures.get(key)
        label = LABELS.get(key, key)
        if now is None:
            out.append(GateFailure(key, f"{label} ({key}) was {_pct(before)} in the baseline, now absent"))
            continue
        worse = before - now if HIGHER_IS_BETTER[key] else now - before
        if worse > max_drop + EPSILON:
            out.append(
                GateFailure(
                    key,
                    f"{label} ({key}) {_pct(before)} -> {_pct(now)}: worse by {_pct(worse)} "
                    f"(max drop {_pct(max_drop)})",
                )
            )
    return out
