"""The METRICS.md figures a report shows and gates on: keys, readable labels, direction, aliases.

A figure's direction is True when higher is better, False when lower is better, None when neither is: the tool
usage rate (fewer calls is better on cases that expect none, more on cases that need them; those failures are the
missed, spurious and over-calling rates'). Such a figure is in NEUTRAL, not in HIGHER_IS_BETTER: gates take it
either way, a baseline does not compare it, reports do not colour it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from monitor.judge._percent import format_ratio as format_ratio  # re-exported: the one reading of a ratio

# (key, label, higher_is_better or None: no better direction) in the order of METRICS.md, "Aggregates".
FIGURES: Final[tuple[tuple[str, str, bool | None], ...]] = (
    ("tool_call_accuracy", "Tool call accuracy", True),
    ("spurious_rate", "Spurious-call rate", False),
    ("wrong_tool_rate", "Wrong-tool rate", False),
    ("hallucinated_rate", "Hallucinated-tool rate", False),
    ("missed_rate", "Missed-call rate", False),
    ("selection_accuracy", "Selection accuracy", True),
    ("argument_correctness", "Argument correctness", True),
    ("schema_adherence", "Schema adherence", True),
    ("end_to_end_accuracy", "End-to-end accuracy", True),
    ("sequence_accuracy", "Sequence accuracy", True),
    ("response_compliance", "Response format compliance", True),
    ("tool_usage_rate", "Tool usage rate", None),
    ("over_calling_rate", "Over-calling rate", False),
)

# Figures some commands add beside the METRICS.md ones (eval with trials, probe).
EXTRA_FIGURES: Final[tuple[tuple[str, str, bool | None], ...]] = (
    ("pass_rate", "Pass rate (all trials)", True),
    ("pass_hat_k", "pass^k (chance that k trials of a case all pass)", True),
    ("scenario_pass_rate", "Scenario step pass rate", True),
)

# What each figure counts over: with none of it in a run, its denominator is 0 and the figure is not computed.
NEEDS: Final[dict[str, str]] = {
    "tool_call_accuracy": "no judged call (a call in a turn a rule or case matched)",
    "spurious_rate": "no judged call (a call in a turn a rule or case matched)",
    "wrong_tool_rate": "no judged call (a call in a turn a rule or case matched)",
    "hallucinated_rate": "no tool call",
    "missed_rate": "no expected call (a judged turn whose rule expects a call)",
    "selection_accuracy": "no judged turn (a turn a rule or case matched)",
    "argument_correctness": "no correct call with argument checks",
    "schema_adherence": "no call of a catalog tool that declares a schema",
    "end_to_end_accuracy": "no judged turn (a turn a rule or case matched)",
    "sequence_accuracy": "no turn with ordering constraints",
    "response_compliance": "no turn with response checks",
    "tool_usage_rate": "no agent turn (calls whose turn never came are none)",
    "over_calling_rate": "no judged turn (a turn a rule or case matched)",
    "pass_rate": "no case run",
    "pass_hat_k": "no case run",
    "scenario_pass_rate": "no scenario step run",
}

# The figures only some runs compute, and which: a gate or a baseline naming one says so when this run has none.
COMPUTED_BY: Final[dict[str, str]] = {
    "pass_rate": "eval --dataset computes it",
    "pass_hat_k": "eval --dataset computes it with --trials 2 or more",
    "scenario_pass_rate": "eval --scenario computes it",
}

FIGURE_KEYS: Final[frozenset[str]] = frozenset(k for k, _, _ in FIGURES + EXTRA_FIGURES)
LABELS: Final[dict[str, str]] = {k: label for k, label, _ in FIGURES + EXTRA_FIGURES}
# the figures with a better direction; NEUTRAL the others
HIGHER_IS_BETTER: Final[dict[str, bool]] = {k: up for k, _, up in FIGURES + EXTRA_FIGURES if up is not None}
NEUTRAL: Final[frozenset[str]] = frozenset(k for k, _, up in FIGURES + EXTRA_FIGURES if up is None)

ALIASES: Final[dict[str, str]] = {
    "accuracy": "tool_call_accuracy",
    "tool_accuracy": "tool_call_accuracy",
    "spurious": "spurious_rate",
    "wrong_tool": "wrong_tool_rate",
    "hallucinated": "hallucinated_rate",
    "missed": "missed_rate",
    "selection": "selection_accuracy",
    "arguments": "argument_correctness",
    "schema": "schema_adherence",
    "end_to_end": "end_to_end_accuracy",
    "e2e": "end_to_end_accuracy",
    "sequence": "sequence_accuracy",
    "response": "response_compliance",
    "response_format_compliance": "response_compliance",
    "tool_usage": "tool_usage_rate",
    "over_calling": "over_calling_rate",
    "pass^k": "pass_hat_k",
}


def canonical_figure(name: str) -> str:
    """The figure key for a name or alias; raises KeyError naming the known keys when unknown."""
    key = name.strip().lower().replace("-", "_")
    key = ALIASES.get(key, key)
    if key not in FIGURE_KEYS:
        known = ", ".join(sorted(FIGURE_KEYS | ALIASES.keys()))
        raise KeyError(f"unknown figure {name!r}; known: {known}")
    return key


def figure_rows(figures: Mapping[str, float | None], k: int | None = None) -> list[tuple[str, str, float | None]]:
    """(key, label, value) of every METRICS.md figure in its order (absent ones too), then the report's others;
    pass^k's label names its `k` when known (pass^3)."""
    known = {key for key, _, _ in FIGURES}
    rows = [(key, label, figures.get(key)) for key, label, _ in FIGURES]
    return rows + [(key, _label(key, k), value) for key, value in figures.items() if key not in known]


def _label(key: str, k: int | None) -> str:
    if key == "pass_hat_k" and k is not None:
        return f"pass^{k} (chance that {k} trials of a case all pass)"
    return LABELS.get(key, key)


def grade(key: str, value: float) -> str:
    """`good` (>= 95%), `warn` (>= 80%) or `bad`, measured on the good side (1 - value for failure rates);
    `neutral` for a figure with no better direction."""
    if key in NEUTRAL:
        return "neutral"
    good = value if HIGHER_IS_BETTER.get(key, True) else 1.0 - value
    return "good" if good >= 0.95 else "warn" if good >= 0.8 else "bad"
