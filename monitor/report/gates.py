"""CI gates on a report's figures: absolute thresholds and regression against a baseline report.

`--fail-under accuracy=0.95` fails when a figure where higher is better is below 0.95; `--fail-over
spurious_rate=0.05` when a rate where lower is better is above 0.05 (each gate takes only the figures of its
direction: `--fail-under spurious_rate=...` would fail on a good run). `--baseline old.json --max-drop 0.02`
fails when a figure got worse than the baseline by more than 0.02 (worse = lower for figures where higher is
better, higher for the rates where lower is better). A figure with no better direction (the tool usage rate) is
taken by both `--fail-under` and `--fail-over`, and not compared with a baseline, with a line saying so.
A gate on a figure that could not be computed (zero denominator, reported as absent) fails, its line saying
the figure was not computed and what it needs (`figures.NEEDS`): a gate that
silently passes on no data is worse than none. A baseline figure the current command does not compute at all
(the pass rate of `eval` beside a `replay`), or pass^k of another k, is not compared and said so; so is a figure of
this report that the baseline lacks or has absent (nothing to regress from), and a baseline key that is no figure.
A baseline none of whose figures could be compared fails (`NOTHING_COMPARED`), for the same reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from monitor.judge._percent import percent
from monitor.report.figures import (
    COMPUTED_BY,
    FIGURE_KEYS,
    HIGHER_IS_BETTER,
    LABELS,
    NEEDS,
    NEUTRAL,
    canonical_figure,
)

EPSILON = 1e-12
PASS_HAT_K = "pass_hat_k"
MAX_UNKNOWN_LISTED = 10
NOTHING_COMPARED = (
    "No figure of the baseline could be compared with this run (each is listed under 'Not compared with the "
    "baseline'): a regression gate that compares nothing would pass on nothing; give --baseline a report that "
    "the same command wrote with --json"
)


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


def parse_gate(spec: str, *, over: bool) -> Threshold:
    """A `--fail-over` (over=True) or `--fail-under` threshold; ValueError when the figure's direction is the other.

    `--fail-under` takes the figures where higher is better, `--fail-over` the rates where lower is better:
    `--fail-under spurious_rate=0.5` would fail every run whose spurious rate is below 50%. A figure with no better
    direction (NEUTRAL) is taken by both.
    """
    t = parse_threshold(spec)
    if t.figure in NEUTRAL:
        return t
    higher_is_better = HIGHER_IS_BETTER[t.figure]
    if over == higher_is_better:
        value = spec.partition("=")[2].strip()
        if higher_is_better:
            raise ValueError(
                f"{t.figure} is higher-is-better: use --fail-under {t.figure}={value} "
                f"(exit 1 when it is below {value}); --fail-over takes the rates where lower is better"
            )
        raise ValueError(
            f"{t.figure} is lower-is-better: use --fail-over {t.figure}={value} "
            f"(exit 1 when it is above {value}); --fail-under takes the figures where higher is better"
        )
    return t


def _pct(value: float) -> str:
    return percent(value, 2)


MAX_DECIMALS = 14  # a gap just past EPSILON (1e-12 of a ratio) shows at 11 decimals of a percentage


def _pcts(a: float, b: float) -> tuple[str, str]:
    """`a` and `b` as percentages with two decimals, or as many more as tell them apart (94.999% failed a gate at
    95% as `95.00% < 95.00%`); equal values (within EPSILON) keep two."""
    decimals = 2
    while abs(a - b) > EPSILON and decimals < MAX_DECIMALS and percent(a, decimals) == percent(b, decimals):
        decimals += 1
    return percent(a, decimals), percent(b, decimals)


def _not_computed(key: str) -> str:
    """A figure this run has no value of at all: which runs compute it (`eval` without --trials has no pass^k)."""
    by = COMPUTED_BY.get(key)
    return f"not computed by this run ({by})" if by else "not computed by this command"


def _absent(figures: Mapping[str, float | None], key: str, gate: str) -> str:
    """Why a gated figure has no value: the command does not compute it, or this run gave it nothing to count."""
    label = LABELS.get(key, key)
    if key not in figures:
        return f"{label} ({key}) is {_not_computed(key)}, {gate}"
    return (f"{label} ({key}) is absent, not computed: {NEEDS.get(key, 'no data')} in this run (a zero "
            f"denominator); a gate on a figure without data fails ({gate})")


@dataclass(slots=True, frozen=True)
class GateResult:
    """One gate's outcome: `name` says the gate (`tool_call_accuracy >= 95.00%`), `message` the measured value."""

    figure: str
    name: str
    passed: bool
    message: str


def gate_results(
    figures: Mapping[str, float | None],
    *,
    fail_under: Sequence[Threshold] = (),
    fail_over: Sequence[Threshold] = (),
    baseline: Mapping[str, float | None] | None = None,
    max_drop: float = 0.0,
    k: int | None = None,
    baseline_k: int | None = None,
) -> list[GateResult]:
    """Every gate, passed or not: each threshold, then each baseline figure compared (`skipped_comparisons` says
    which are not). `k` and `baseline_k` are the k of each report's pass_hat_k (None: not recorded)."""
    out: list[GateResult] = []
    for thresholds, op, worse_op in ((fail_under, ">=", "<"), (fail_over, "<=", ">")):
        for t in thresholds:
            value = figures.get(t.figure)
            label = LABELS.get(t.figure, t.figure)
            name = f"{t.figure} {op} {_pct(t.value)}"
            if value is None:
                out.append(GateResult(t.figure, name, False,
                                      _absent(figures, t.figure, f"gate {worse_op} {_pct(t.value)}")))
                continue
            failed = value + EPSILON < t.value if op == ">=" else value - EPSILON > t.value
            measured, threshold = _pcts(value, t.value)
            shown = f"{label} ({t.figure}) {measured} {worse_op if failed else op} {threshold}"
            out.append(GateResult(t.figure, name, not failed, shown))
    if baseline is not None:
        out += _regressions(figures, baseline, max_drop, k, baseline_k)
    return out


def verdict(results: Sequence[GateResult]) -> str:
    """One line on the gates asked: how many failed of how many, or that all passed (a baseline that compared nothing
    is a failed gate, `NOTHING_COMPARED`: a gate asked always has a result)."""
    n = len(results)
    gates = "gate" if n == 1 else "gates"
    failed = sum(not r.passed for r in results)
    return f"{failed} of {n} {gates} failed." if failed else f"All {n} {gates} passed."


def failures_of(results: Sequence[GateResult]) -> list[GateFailure]:
    """The gates of `results` that failed, in their order."""
    return [GateFailure(r.figure, r.message) for r in results if not r.passed]


def _compared(baseline: Mapping[str, float | None]) -> list[tuple[str, float]]:
    """The baseline figures a regression gate looks at: known ones with a value."""
    return [(key, before) for key, before in baseline.items() if before is not None and key in HIGHER_IS_BETTER]


def _not_compared(key: str, figures: Mapping[str, float | None], k: int | None, baseline_k: int | None) -> str | None:
    """Why a baseline figure is not compared with this report (None: it is)."""
    label = LABELS.get(key, key)
    if key not in figures:
        return f"{label} ({key}) is in the baseline but {_not_computed(key)}"
    if key == PASS_HAT_K and figures[key] is not None:
        if baseline_k is None or k is None:
            which = "the baseline" if baseline_k is None else "this report"
            return f"{label} ({key}): {which} does not record its k (it could be pass^k of another k)"
        if baseline_k != k:
            return f"{label} ({key}): pass^{baseline_k} in the baseline, pass^{k} now: different k are not comparable"
    return None


def skipped_comparisons(
    figures: Mapping[str, float | None],
    baseline: Mapping[str, float | None],
    *,
    k: int | None = None,
    baseline_k: int | None = None,
) -> list[str]:
    """One line per figure that `gate_results` does not compare, saying why: a baseline figure this report does not
    have (or of another k), a figure with no better direction, then a figure this report has a value of that the
    baseline lacks or has absent."""
    unknown = [key for key in baseline if key not in FIGURE_KEYS]
    out = [f"{key!r} in the baseline is not a figure toolwatch reports: not compared"
           for key in unknown[:MAX_UNKNOWN_LISTED]]
    if len(unknown) > MAX_UNKNOWN_LISTED:
        out.append(f"{len(unknown) - MAX_UNKNOWN_LISTED:,} more keys in the baseline are not figures toolwatch "
                   "reports: not compared")
    reasons = (_not_compared(key, figures, k, baseline_k) for key, _ in _compared(baseline))
    out += [r for r in reasons if r is not None]
    for key in sorted(NEUTRAL & (figures.keys() | baseline.keys())):
        out.append(f"{LABELS.get(key, key)} ({key}) has no better direction and is not compared with the baseline "
                   "(gate it with --fail-under or --fail-over)")
    for key, now in figures.items():
        if now is None or key not in HIGHER_IS_BETTER or baseline.get(key) is not None:
            continue
        label = LABELS.get(key, key)
        out.append(f"{label} ({key}) is absent (no data) in the baseline" if key in baseline
                   else f"{label} ({key}) is not in the baseline")
    return out


def _regressions(
    figures: Mapping[str, float | None],
    baseline: Mapping[str, float | None],
    max_drop: float,
    k: int | None,
    baseline_k: int | None,
) -> list[GateResult]:
    out = []
    for key, before in _compared(baseline):
        if _not_compared(key, figures, k, baseline_k) is not None:
            continue
        now = figures[key]
        label = LABELS.get(key, key)
        name = f"{key}: at most {_pct(max_drop)} worse than the baseline"
        if now is None:
            out.append(GateResult(key, name, False, f"{label} ({key}) was {_pct(before)} in the baseline, now absent"))
            continue
        worse = before - now if HIGHER_IS_BETTER[key] else now - before
        was, is_now = _pcts(before, now)
        shown = f"{label} ({key}) {was} -> {is_now}"
        if worse > max_drop + EPSILON:
            by, allowed = _pcts(worse, max_drop)
            out.append(GateResult(key, name, False, f"{shown}: worse by {by} (max drop {allowed})"))
        else:
            out.append(GateResult(key, name, True, f"{shown} (max drop {_pct(max_drop)})"))
    if not out:
        out.append(GateResult("baseline", "at least one figure compared with the baseline", False, NOTHING_COMPARED))
    return out
