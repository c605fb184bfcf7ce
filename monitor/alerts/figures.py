"""Each METRICS.md figure as a ratio of Prometheus counters, and as PromQL over a window.

A figure is `numerator / denominator`, each term a counter summed over the series of one aggregation level, so the
ratio is right across replicas: Prometheus sums each term first and divides last.
A zero denominator gives no sample (METRICS.md: a ratio with a zero denominator is absent, never 0 or 1),
and a numerator series that was never created counts as 0, not as absent. Each term is one counter, never a
difference of two: Prometheus extrapolates each counter's increase on its own (less for one whose first sample in
the window is near 0), so a difference of two increasing counters is not 0 when nothing it counts happened (the
passing calls as checked - failing read about 1.7% over a 5m window in which every checked call failed).
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "toolwatch_"


@dataclass(slots=True, frozen=True)
class Counter:
    """One counter with fixed label matchers, e.g. `toolwatch_tool_calls_total{outcome="correct"}`."""

    metric: str
    matchers: str = ""

    def selector(self, extra: str = "") -> str:
        inner = ",".join(m for m in (self.matchers, extra) if m)
        return f"{self.metric}{{{inner}}}" if inner else self.metric


@dataclass(slots=True, frozen=True)
class Figure:
    key: str  # the Tally.ratios() key
    title: str
    good: bool | None  # True when higher is better (accuracy-like); False for rates of a failure; None: neither
    per_tool: bool  # the counters carry a `tool` label, so the figure has a per-tool breakdown
    unit: str  # what the denominator counts: "calls" or "turns"
    numerator: Counter
    denominator: Counter

    @property
    def record_name(self) -> str:
        """The metric part of the recording rule name: `toolwatch_<figure>`."""
        return PREFIX + self.key

    @property
    def denominator_text(self) -> str:
        """What `min_samples` counts for this figure, in words."""
        return _DENOMINATOR_TEXT.get(self.denominator, "samples")

    @property
    def denominator_name(self) -> str:
        """The metric part of the recorded denominator, e.g. `toolwatch_judged_calls`."""
        return _DENOMINATOR_NAMES.get(self.denominator, self.denominator.metric.removesuffix("_total"))


def _c(metric: str, matchers: str = "") -> Counter:
    return Counter(PREFIX + metric + "_total", matchers)


_JUDGED = _c("judged_calls")
_JUDGED_TURNS = _c("turns", 'judged="true"')
_SEQUENCE_CHECKED = _c("turn_checks", 'check="sequence"')
# Agent turns (METRICS.md "Turn": one agent invocation): every turn counted but the turnless ones (calls whose turn
# never came, judged alone). Their own counter, not turns - turnless_turns (see the module's docstring).
_AGENT_TURNS = _c("agent_turns")
_DENOMINATOR_TEXT = {
    _JUDGED: "judged calls",
    _JUDGED_TURNS: "judged turns",
    _SEQUENCE_CHECKED: "turns with ordering constraints",
    _c("tool_calls"): "calls",
    _c("expected_calls"): "expected calls",
    _c("argument_checked_calls"): "calls with argument checks",
    _c("schema_checked_calls"): "schema-checked calls",
    _c("response_checked_turns"): "turns with response checks",
    _AGENT_TURNS: "agent turns",
}
_DENOMINATOR_NAMES = {_JUDGED_TURNS: PREFIX + "judged_turns", _SEQUENCE_CHECKED: PREFIX + "sequence_checked_turns"}

FIGURES: dict[str, Figure] = {
    f.key: f
    for f in (
        Figure(
            "tool_call_accuracy",
            "Tool call accuracy",
            True,
            True,
            "calls",
            _c("tool_calls", 'outcome="correct"'),
            _JUDGED,
        ),
        Figure(
            "spurious_rate", "Spurious-call rate", False, True, "calls", _c("tool_calls", 'outcome="spurious"'), _JUDGED
        ),
        Figure(
            "wrong_tool_rate",
            "Wrong-tool rate",
            False,
            True,
            "calls",
            _c("tool_calls", 'outcome="wrong_tool"'),
            _JUDGED,
        ),
        Figure(
            "hallucinated_rate",
            "Hallucinated-tool rate",
            False,
            False,
            "calls",
            _c("tool_calls", 'outcome="hallucinated"'),
            _c("tool_calls"),
        ),
        Figure("missed_rate", "Missed-call rate", False, True, "calls", _c("missed_calls"), _c("expected_calls")),
        Figure(
            "selection_accuracy",
            "Selection accuracy",
            True,
            False,
            "turns",
            _c("turn_checks", 'check="selection",result="pass"'),
            _JUDGED_TURNS,
        ),
        Figure(
            "argument_correctness",
            "Argument correctness",
            True,
            True,
            "calls",
            _c("argument_ok_calls"),  # not argument_checked_calls - argument_mismatches (see the module's docstring)
            _c("argument_checked_calls"),
        ),
        Figure(
            "schema_adherence",
            "Schema adherence",
            True,
            True,
            "calls",
            _c("schema_valid_calls"),  # not schema_checked_calls - schema_invalid_calls
            _c("schema_checked_calls"),
        ),
        Figure(
            "end_to_end_accuracy",
            "End-to-end accuracy",
            True,
            False,
            "turns",
            _c("turn_checks", 'check="end_to_end",result="pass"'),
            _JUDGED_TURNS,
        ),
        Figure("sequence_accuracy", "Sequence accuracy", True, False, "turns", _c("sequence_score"), _SEQUENCE_CHECKED),
        Figure(
            "response_compliance",
            "Response format compliance",
            True,
            False,
            "turns",
            _c("turn_checks", 'check="response",result="pass"'),
            _c("response_checked_turns"),
        ),
        Figure(
            "tool_usage_rate",
            "Tool usage rate",
            None,
            False,
            "turns",
            _c("turns_with_calls"),  # agent turns with a call
            _AGENT_TURNS,
        ),
        Figure(
            "over_calling_rate",
            "Over-calling rate",
            False,
            False,
            "turns",
            _c("turn_checks", 'check="over_calling",result="fail"'),
            _JUDGED_TURNS,
        ),
    )
}


def level_of(by: tuple[str, ...]) -> str:
    """The `level` part of a recording rule name: the aggregation labels joined by `_`."""
    return "_".join(by)


def sum_rate(counter: Counter, by: tuple[str, ...], window: str, extra: str = "") -> str:
    return f"sum by ({', '.join(by)}) (rate({counter.selector(extra)}[{window}]))"


def ratio_expr(figure: Figure, by: tuple[str, ...], window: str) -> str:
    """PromQL for the figure over `window`, one sample per `by` group that had a non-zero denominator."""
    den = sum_rate(figure.denominator, by, window)
    num = f"({sum_rate(figure.numerator, by, window)} or 0 * {den})"
    return f"({num}) / ({den} > 0)"


def increase_expr(counter: Counter, by: tuple[str, ...], window: str) -> str:
    return f"sum by ({', '.join(by)}) (increase({counter.selector()}[{window}]))"
