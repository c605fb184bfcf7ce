"""Inline SVG charts for the HTML report: per-tool bars and accuracy as iterations grow. No JS needed."""

from __future__ import annotations

from monitor.judge._percent import format_ratio
from monitor.report._text import html_escape as escape
from monitor.report.model import ToolStats

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")


def tool_bars(stats: list[ToolStats]) -> str:
    """Grouped horizontal bars: precision, recall, F1 per tool (absent values drawn as a hatched stub)."""
    if not stats:
        return '<p class="muted">No judged tool calls.</p>'
    label_w, bar_w, row_h, pad = 190, 360, 14, 10
    height = len(stats) * (3 * row_h + pad) + 30
    parts = [
        f'<svg class="chart" id="tool-bars" role="img" viewBox="0 0 {label_w + bar_w + 130} {height}" '
        f'width="{label_w + bar_w + 130}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    y = 4
    for t in stats:
        parts.append(f'<text x="0" y="{y + 1.8 * row_h:.0f}" class="lbl">{escape(t.tool)}</text>')
        for i, (name, value) in enumerate((("precision", t.precision), ("recall", t.recall), ("F1", t.f1))):
            yy = y + i * row_h
            width = 0.0 if value is None else max(value * bar_w, 1.0)
            text = format_ratio(value)
            parts.append(
                f'<rect x="{label_w}" y="{yy}" width="{width:.1f}" height="{row_h - 3}" fill="{PALETTE[i]}">'
                f"<title>{escape(t.tool)} {name}: {text}</title></rect>"
            )
            parts.append(f'<text x="{label_w + width + 4:.1f}" y="{yy + row_h - 4}" class="val">{name} {text}</text>')
        y += 3 * row_h + pad
    parts.append("</svg>")
    return "".join(parts)


def line_chart(series: dict[str, list[tuple[int, float | None]]], *, title: str = "accuracy") -> str:
    """One polyline per series; x = iteration, y = ratio in [0, 1]."""
    points = {k: [(x, y) for x, y in v if y is not None] for k, v in series.items()}
    points = {k: v for k, v in points.items() if v}
    if not points:
        return '<p class="muted">No series recorded.</p>'
    w, h, left, bottom, top = 640, 260, 46, 30, 12
    max_x = max(max(x for x, _ in v) for v in points.values()) or 1
    min_y = min(0.0, min(min(y for _, y in v) for v in points.values()))

    def sx(x: int) -> float:
        return left + (w - left - 10) * x / max_x

    def sy(y: float) -> float:
        return top + (h - top - bottom) * (1 - (y - min_y) / (1 - min_y or 1))

    parts = [
        f'<svg class="chart" id="series-chart" role="img" viewBox="0 0 {w} {h + 20 * len(points)}" width="{w}" '
        f'height="{h + 20 * len(points)}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
    ]
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        yv = min_y + (1 - min_y) * frac
        parts.append(f'<line x1="{left}" x2="{w - 10}" y1="{sy(yv):.1f}" y2="{sy(yv):.1f}" class="grid"/>')
        parts.append(f'<text x="{left - 6}" y="{sy(yv) + 4:.1f}" class="axis" text-anchor="end">{yv * 100:.0f}%</text>')
    parts.append(f'<text x="{w - 10}" y="{h - 8}" class="axis" text-anchor="end">iterations: {max_x}</text>')
    parts.append(f'<text x="{left}" y="{h - 8}" class="axis">0</text>')
    for i, (name, pts) in enumerate(points.items()):
        color = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}" data-series='
                     f'"{escape(name)}"><title>{escape(name)}</title></polyline>')
        ly = h + 14 + 20 * i
        last = pts[-1][1] * 100
        parts.append(f'<rect x="{left}" y="{ly - 9}" width="12" height="10" fill="{color}"/>')
        parts.append(f'<text x="{left + 18}" y="{ly}" class="lbl">{escape(name)} (last {last:.1f}%)</text>')
    parts.append("</svg>")
    return "".join(parts)
