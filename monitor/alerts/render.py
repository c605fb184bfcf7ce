"""Render the rule file's alerts as a Prometheus rule file (recording rules + alerting rules).

Recording rules follow the `level:metric:operations` convention: `agent:toolwatch_tool_call_accuracy:ratio_rate5m`
is the tool call accuracy per agent over 5 minutes, each counter summed across replicas before dividing;
`agent:toolwatch_judged_calls:increase5m` is the figure's denominator, used to keep alerts silent when too
few calls or turns were judged. Accuracy objectives get multi-window, multi-burn-rate alerts (SRE workbook):
the error ratio over 1h and over 5m both above 14.4x the error budget pages (critical); over 6h and 30m both
above 6x warns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from monitor.alerts.figures import FIGURES, Figure, increase_expr, level_of, ratio_expr
from monitor.alerts.spec import AlertSpec, parse_duration, specs_from_ruleset
from monitor.rules import DEFAULT_BURN_WINDOWS, BurnWindow

DASHBOARD_WINDOW = "5m"
AGENT: tuple[str, ...] = ("agent",)
AGENT_TOOL: tuple[str, ...] = ("agent", "tool")


def num(value: float) -> str:
    """A threshold as PromQL and label text: shortest exact-looking form (0.72, not 0.7200000000000001)."""
    return format(value, ".10g")


def ratio_record(figure: Figure, by: tuple[str, ...], window: str) -> str:
    return f"{level_of(by)}:{figure.record_name}:ratio_rate{window}"


def increase_record(figure: Figure, by: tuple[str, ...], window: str) -> str:
    return f"{level_of(by)}:{figure.denominator_name}:increase{window}"


def literal(text: str) -> str:
    """`text` as a Go template (what Prometheus makes of labels and annotations) that expands to `text` itself: a
    rule file's summary is plain text, shown as written, as the in-process alerts send it."""
    return text.replace("{{", '{{ "{{" }}')


def _selector(spec: AlertSpec) -> str:
    pairs = [("agent", spec.agent), ("tool", spec.tool)]
    inner = ",".join(f"{k}={json.dumps(v)}" for k, v in pairs if v is not None)
    return f"{{{inner}}}" if inner else ""


def _by(spec: AlertSpec) -> tuple[str, ...]:
    return AGENT_TOOL if spec.tool is not None else AGENT


def _scope_text(spec: AlertSpec) -> str:
    tool = ", tool {{ $labels.tool }}" if spec.tool is not None else ""
    return "agent {{ $labels.agent }}" + tool


def _failing_rule_text(window: str) -> str:
    """Go template naming the oracle rule that failed most for the alert's agent over the window."""
    query = f"topk(1, sum by (rule) (increase(toolwatch_rule_failures_total{{agent=%q}}[{window}])) > 0)"
    return f'{{{{ range printf "{query}" $labels.agent | query }}}}{{{{ .Labels.rule }}}}{{{{ end }}}}'


def _threshold_rule(spec: AlertSpec) -> dict[str, Any]:
    figure, by, sel = FIGURES[spec.figure], _by(spec), _selector(spec)
    op, word = ("<", "below") if spec.below is not None else (">", "above")
    on = ", ".join(by)
    expr = (
        f"{ratio_record(figure, by, spec.window)}{sel} {op} {num(spec.threshold)}\n"
        f"and on ({on}) {increase_record(figure, by, spec.window)}{sel} >= {spec.min_samples}"
    )
    summary = (
        literal(spec.summary)
        if spec.summary
        else f"{figure.title} {word} {num(spec.threshold * 100)}% for {_scope_text(spec)}"
    )
    description = (
        f"{figure.title} of {_scope_text(spec)} is {{{{ $value | humanizePercentage }}}} over the last "
        f"{spec.window} (alert {spec.name}: {word} {num(spec.threshold * 100)}% with at least "
        f"{spec.min_samples} {figure.denominator_text})."
    )
    return _alert(spec, expr, spec.severity, {}, summary, description, spec.window)


def _error(figure: Figure, by: tuple[str, ...], sel: str, window: str) -> str:
    """The error ratio of the figure: 1 - ratio for accuracy-like figures, the ratio itself for failure rates."""
    assert figure.good is not None, "objectives are refused for figures with no better direction"
    ratio = f"{ratio_record(figure, by, window)}{sel}"
    return f"(1 - {ratio})" if figure.good else ratio


def _slo_rules(spec: AlertSpec, burn_windows: Sequence[BurnWindow]) -> list[dict[str, Any]]:
    figure, by, sel = FIGURES[spec.figure], _by(spec), _selector(spec)
    on = ", ".join(by)
    assert spec.objective is not None, "burn-rate alerts are for objectives"
    rules = []
    for bw in burn_windows:
        limit = num(bw.factor * spec.error_budget)
        expr = (
            f"{_error(figure, by, sel, bw.long)} > {limit}\n"
            f"and on ({on}) {_error(figure, by, sel, bw.short)} > {limit}\n"
            f"and on ({on}) {increase_record(figure, by, bw.long)}{sel} >= {spec.min_samples}"
        )
        target = num(spec.objective * 100)
        summary = (
            literal(spec.summary)
            if spec.summary
            else f"{figure.title} objective {target}% at risk for {_scope_text(spec)}"
        )
        description = (
            f"{figure.title} of {_scope_text(spec)}: error ratio {{{{ $value | humanizePercentage }}}} over "
            f"{bw.long}, and over {bw.short} too, burns the {num(spec.error_budget * 100)}% error budget of the "
            f"{target}% objective faster than {num(bw.factor)}x (alert {spec.name})."
        )
        labels = {
            "objective": num(spec.objective),
            "long_window": bw.long,
            "short_window": bw.short,
            "burn_rate": num(bw.factor),
        }
        rules.append(_alert(spec, expr, bw.severity, labels, summary, description, bw.short))
    return rules


def _alert(
    spec: AlertSpec, expr: str, severity: str, extra: dict[str, str], summary: str, description: str, window: str
) -> dict[str, Any]:
    labels = {"severity": severity, "figure": spec.figure, **extra}
    if spec.agent is not None:
        labels["agent"] = spec.agent
    if spec.tool is not None:
        labels["tool"] = spec.tool
    return {
        "alert": spec.name,
        "expr": expr,
        "for": spec.for_,
        "labels": labels,
        "annotations": {
            "summary": summary,
            "description": description,
            "value": "{{ $value | humanizePercentage }}",
            "failing_rule": _failing_rule_text(window),
            **({"rule_file": literal(spec.source)} if spec.source else {}),
        },
    }


def _needed(specs: Iterable[AlertSpec], burn_windows: Sequence[BurnWindow]) -> tuple[set[Any], set[Any]]:
    ratios: set[tuple[str, tuple[str, ...], str]] = set()
    increases: set[tuple[str, tuple[str, ...], str]] = set()
    for figure in FIGURES.values():
        for by in (AGENT, AGENT_TOOL) if figure.per_tool else (AGENT,):
            ratios.add((figure.key, by, DASHBOARD_WINDOW))
            increases.add((figure.key, by, DASHBOARD_WINDOW))
    for spec in specs:
        by = _by(spec)
        if spec.is_slo:
            for bw in burn_windows:
                ratios.update({(spec.figure, by, bw.long), (spec.figure, by, bw.short)})
                increases.add((spec.figure, by, bw.long))
        else:
            ratios.add((spec.figure, by, spec.window))
            increases.add((spec.figure, by, spec.window))
    return ratios, increases


def rule_groups(specs: Sequence[AlertSpec], burn_windows: Sequence[BurnWindow] = DEFAULT_BURN_WINDOWS) -> list[Any]:
    """The rule groups: one recording group per window (shortest first), then one group of alerts."""
    ratios, increases = _needed(specs, burn_windows)
    windows = sorted({w for _, _, w in ratios | increases}, key=parse_duration)
    order = list(FIGURES)

    def ordered(items: set[tuple[str, tuple[str, ...], str]], window: str) -> list[tuple[str, tuple[str, ...]]]:
        return sorted(((k, by) for k, by, w in items if w == window), key=lambda r: (len(r[1]), order.index(r[0])))

    groups: list[Any] = []
    for window in windows:
        rules: list[dict[str, str]] = []
        done: set[str] = set()
        for key, by in ordered(increases, window):
            figure = FIGURES[key]
            name = increase_record(figure, by, window)
            if name not in done:
                done.add(name)
                rules.append({"record": name, "expr": increase_expr(figure.denominator, by, window)})
        for key, by in ordered(ratios, window):
            figure = FIGURES[key]
            rules.append({"record": ratio_record(figure, by, window), "expr": ratio_expr(figure, by, window)})
        groups.append({"name": f"toolwatch-recording-{window}", "rules": rules})
    alerts: list[dict[str, Any]] = []
    for spec in specs:
        alerts.extend(_slo_rules(spec, burn_windows) if spec.is_slo else [_threshold_rule(spec)])
    if alerts:
        groups.append({"name": "toolwatch-alerts", "rules": alerts})
    return groups


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render_specs(
    specs: Sequence[AlertSpec],
    *,
    burn_windows: Sequence[BurnWindow] = DEFAULT_BURN_WINDOWS,
    sources: Sequence[str] = (),
) -> str:
    """The Prometheus rule file text for these alerts (stable: same input, same bytes)."""
    head = "# Generated by `toolwatch alerts render"
    head += (" " + " ".join(sources) if sources else "") + "`. Do not edit: change the rule file and render again.\n"
    body = yaml.dump({"groups": rule_groups(specs, burn_windows)}, Dumper=_Dumper, sort_keys=False, width=1000)
    return head + body


def render(
    ruleset: object, *, burn_windows: Sequence[BurnWindow] = DEFAULT_BURN_WINDOWS, sources: Sequence[str] = ()
) -> str:
    """Render the alerts of a loaded RuleSet (or of a mapping with an `alerts` list)."""
    return render_specs(specs_from_ruleset(ruleset), burn_windows=burn_windows, sources=sources)
