"""Reading the /metrics text and comparing every verdict figure on it with the oracle's."""

from __future__ import annotations

from collections import defaultdict

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.monitor.oracle import published
from tests.monitor.oracle.published import Key, Phases

# Label names of each verdict family, as README "Metrics" lists them.
COUNTER_LABELS: dict[str, tuple[str, ...]] = {
    "toolwatch_tool_calls": ("agent", "tool", "outcome"),
    "toolwatch_judged_calls": ("agent", "tool"),
    "toolwatch_expected_calls": ("agent", "tool"),
    "toolwatch_missed_calls": ("agent", "tool"),
    "toolwatch_turns": ("agent", "judged"),
    "toolwatch_turn_checks": ("agent", "check", "result"),
    "toolwatch_schema_checked_calls": ("agent", "tool"),
    "toolwatch_schema_invalid_calls": ("agent", "tool"),
    "toolwatch_schema_valid_calls": ("agent", "tool"),
    "toolwatch_schema_violations": ("agent", "tool", "kind"),
    "toolwatch_argument_checked_calls": ("agent", "tool"),
    "toolwatch_argument_mismatches": ("agent", "tool"),
    "toolwatch_argument_ok_calls": ("agent", "tool"),
    "toolwatch_forbidden_calls": ("agent", "tool"),
    "toolwatch_order_violations": ("agent",),
    "toolwatch_confusion": ("agent", "expected", "actual"),
    "toolwatch_rule_failures": ("agent", "rule"),
    "toolwatch_turns_with_calls": ("agent",),
    "toolwatch_turnless_turns": ("agent",),
    "toolwatch_agent_turns": ("agent",),
    "toolwatch_response_checked_turns": ("agent",),
}
AGENT_GAUGES = (
    "toolwatch_tool_call_accuracy_ratio",
    "toolwatch_spurious_call_ratio",
    "toolwatch_missed_call_ratio",
    "toolwatch_selection_accuracy_ratio",
    "toolwatch_end_to_end_accuracy_ratio",
)
TOOL_GAUGES = (
    "toolwatch_tool_accuracy_ratio",
    "toolwatch_tool_spurious_call_ratio",
    "toolwatch_tool_missed_call_ratio",
)

Page = dict[str, dict[Key, float]]  # sample name -> {label values in the family's order (gauges: window last)}


def parse(text: str) -> Page:
    out: Page = defaultdict(dict)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            base = s.name.removesuffix("_total")
            if base in COUNTER_LABELS:
                key = tuple(s.labels[x] for x in COUNTER_LABELS[base])
            elif s.name in AGENT_GAUGES:
                key = (s.labels["agent"], s.labels["window"])
            elif s.name in TOOL_GAUGES:
                key = (s.labels["agent"], s.labels["tool"], s.labels["window"])
            elif s.name == "toolwatch_sequence_score_total":
                key = (s.labels["agent"],)
            else:
                continue
            assert key not in out[base], f"{s.name}{s.labels} twice"
            out[base][key] = s.value
    return out


def assert_counters(page: Page, phases: Phases) -> None:
    """Every published verdict counter equals the oracle's count (0 where no turn counted it)."""
    phases = [(list(rs), labels) for rs, labels in phases]
    want = published.counters(phases)
    for name in COUNTER_LABELS:
        got = {k: v for k, v in page.get(name, {}).items() if v}
        assert got == dict(want.get(name, {})), name
    seq = {k: v for k, v in page.get("toolwatch_sequence_score", {}).items() if v}
    assert seq == pytest.approx({(a,): v for a, v in published.sequence_scores(phases).items() if v})


def gauges_of(page: Page, window: str) -> dict[str, dict[Key, float]]:
    names = AGENT_GAUGES + TOOL_GAUGES
    return {name: {k[:-1]: v for k, v in page.get(name, {}).items() if k[-1] == window} for name in names}


def assert_gauges(page: Page, phases: Phases, window: str) -> None:
    """The window's ratios equal the oracle's over these verdicts, present exactly where the denominator is not 0."""
    want = published.gauges(phases)
    got = gauges_of(page, window)
    for name in AGENT_GAUGES + TOOL_GAUGES:
        assert got[name].keys() == want.get(name, {}).keys(), name
        assert got[name] == pytest.approx(want.get(name, {})), name
