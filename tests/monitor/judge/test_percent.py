"""Percentages as toolwatch shows every figure: a ratio strictly between 0 and 1 never reads as 0% or 100%."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from monitor.judge import Tally
from monitor.judge._percent import percent
from monitor.report.gates import Threshold, gate_results


@given(st.floats(min_value=0, max_value=1, exclude_min=True, exclude_max=True), st.integers(0, 3))
def test_a_ratio_inside_never_reads_as_an_end(value: float, decimals: int) -> None:
    text = percent(value, decimals)
    shown = float(text.rstrip("%"))
    assert 0 < shown < 100, text
    assert abs(shown - value * 100) <= 10.0**-decimals + 1e-9  # within one unit of the last decimal
    if 10.0**-decimals <= round(value * 100, decimals) <= 100 - 10.0**-decimals:
        assert text == f"{value * 100:.{decimals}f}%"  # elsewhere, plain rounding


def test_the_ends_and_the_width() -> None:
    assert [percent(v) for v in (0.0, 1.0, 0.925, 1.5)] == ["0.0%", "100.0%", "92.5%", "150.0%"]
    assert percent(0.99999, width=6) == "  99.9%"
    assert percent(0.00001, 2) == "0.01%"


def test_an_accuracy_line_with_a_failing_call_does_not_read_perfect() -> None:
    # It read `Tool call accuracy: 19999/20000 (100.0%)`.
    t = Tally(correct=19_999, judged_calls=20_000)
    assert t.format_accuracy() == "Tool call accuracy: 19999/20000 (99.9%)"
    assert Tally(correct=1, judged_calls=20_000).format_accuracy() == "Tool call accuracy: 1/20000 (0.1%)"


def test_a_gate_failing_by_a_hair_does_not_read_100_below_100() -> None:
    # It read `Tool call accuracy (tool_call_accuracy) 100.00% < 100.00%`.
    (gate,) = gate_results({"tool_call_accuracy": 0.99999}, fail_under=[Threshold("tool_call_accuracy", 1.0)])
    assert not gate.passed
    assert gate.message.endswith("99.99% < 100.00%"), gate.message
