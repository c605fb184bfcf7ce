"""The report as one self-contained HTML file: inline CSS, JS and SVG, no network resource.

The confusion matrix is a heatmap table (cells carry `data-expected`, `data-actual`, `data-count`);
the per-tool bars and the accuracy series are inline SVG; failing samples can be filtered. When gates were asked,
a Gates section comes before the figures: a verdict, a row per gate (failing rows marked), the comparisons skipped.
Scripts only enhance the page (hover highlight, row-percent toggle, filter): everything is readable without them.
"""

from __future__ import annotations

import json

from monitor.report._text import html_escape as escape
from monitor.report.figures import figure_rows, format_ratio, grade
from monitor.report.gates import GateResult, verdict
from monitor.report.model import PER_TOOL_COLUMNS, Report
from monitor.report.svg import line_chart, tool_bars

CSS = """
:root{--fg:#1f2937;--muted:#6b7280;--bg:#f8fafc;--card:#fff;--line:#e5e7eb}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
background:var(--bg);margin:0;padding:24px 32px}h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px}
.acc{font-size:18px;font-weight:600;margin:6px 0 18px}.muted{color:var(--muted)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(190px,1fr));gap:10px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.card .k{color:var(--muted);font-size:12px}.card .v{font-size:20px;font-weight:600}
.good{color:#15803d}.warn{color:#b45309}.bad{color:#b91c1c}.absent{color:var(--muted)}
table{border-collapse:collapse;background:var(--card)}th,td{border:1px solid var(--line);padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f1f5f9;font-weight:600}
#confusion td.cell{text-align:right;min-width:54px;font-variant-numeric:tabular-nums}
#confusion td.hl,#confusion th.hl{outline:2px solid #334155;outline-offset:-2px}
.chart .lbl{font-size:12px;fill:#1f2937}.chart .val{font-size:11px;fill:#374151}
.chart .axis{font-size:11px;fill:#6b7280}
.chart .grid{stroke:#e5e7eb;stroke-width:1}
input[type=search]{padding:5px 8px;border:1px solid var(--line);border-radius:6px;width:320px;margin-bottom:8px}
button{padding:4px 10px;border:1px solid var(--line);border-radius:6px;background:#fff;cursor:pointer;margin-bottom:8px}
.scroll{overflow-x:auto;max-width:100%}#confusion td.zero{color:#cbd5e1}
.interrupted{font-weight:600;font-size:16px}
.verdict{font-weight:600;margin:4px 0 10px}#gates tr.failed td{background:#fef2f2}#gates td.bad{font-weight:600}
#gates ul{margin:4px 0;padding-left:20px}
td.input{max-width:520px;word-break:break-word;font-family:ui-monospace,monospace;font-size:12px}
"""

JS = """
(function(){
  'use strict';
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var table = document.getElementById('confusion');
  if (table) {
    var cells = table.querySelectorAll('td.cell');
    var rowTotals = {};
    cells.forEach(function(td){
      var e = td.dataset.expected; rowTotals[e] = (rowTotals[e] || 0) + Number(td.dataset.count);
    });
    var asPercent = false;
    var toggle = document.getElementById('confusion-toggle');
    toggle.addEventListener('click', function(){
      asPercent = !asPercent;
      toggle.textContent = asPercent ? 'show counts' : 'show row %';
      cells.forEach(function(td){
        var n = Number(td.dataset.count), t = rowTotals[td.dataset.expected] || 0;
        td.textContent = asPercent ? (t ? (100 * n / t).toFixed(1) + '%' : '-') : String(n);
      });
    });
    cells.forEach(function(td){
      td.addEventListener('mouseenter', function(){
        table.querySelectorAll('[data-expected="' + CSS.escape(td.dataset.expected) + '"],[data-actual="' +
          CSS.escape(td.dataset.actual) + '"]').forEach(function(x){ x.classList.add('hl'); });
      });
      td.addEventListener('mouseleave', function(){
        table.querySelectorAll('.hl').forEach(function(x){ x.classList.remove('hl'); });
      });
    });
  }
  var filter = document.getElementById('worst-filter');
  if (filter) {
    filter.addEventListener('input', function(){
      var q = filter.value.toLowerCase();
      document.querySelectorAll('#worst tbody tr').forEach(function(tr){
        tr.style.display = tr.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
      });
    });
  }
  var total = data.confusion.reduce(function(s, c){ return s + c[2]; }, 0);
  var status = document.getElementById('js-status');
  status.dataset.ready = 'true';
  status.textContent = total + ' confusion pairs, ' + data.worst + ' failing samples shown';
})();
"""


# JSON escapes for the characters of markup in the inline JSON: `</script>` would end its element early, and
# `<!--<script>` (in a tool name the spans offered) makes the parser take its own `</script>` as text, so that no
# script of the page runs. JSON.parse reads the escapes back as the characters.
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def _cls(key: str, value: float | None) -> str:
    return "absent" if value is None else grade(key, value)


def _figure_cards(report: Report) -> str:
    cards = [
        f'<div class="card" data-figure="{escape(k)}"><div class="k">{escape(label)}</div>'
        f'<div class="v {_cls(k, value)}">{format_ratio(value)}</div></div>'
        for k, label, value in figure_rows(report.figures, report.k)
    ]
    return '<div class="cards">' + "".join(cards) + "</div>"


def _heat(expected: str, actual: str, n: int, peak: int) -> str:
    if not n:
        return "#ffffff"
    alpha = 0.15 + 0.75 * n / peak
    rgb = "22,163,74" if expected == actual else "220,38,38"
    return f"rgba({rgb},{alpha:.2f})"


def _breakable(label: str) -> str:
    """A tool name that may wrap after its underscores (narrow matrix columns)."""
    return escape(label).replace("_", "_<wbr>")


def _confusion(report: Report) -> str:
    if not report.confusion:
        return '<p class="muted">No judged turns.</p>'
    rows, cols = report.confusion_labels()
    peak = max(n for _, _, n in report.confusion)
    head = "".join(f'<th data-actual="{escape(c)}">{_breakable(c)}</th>' for c in cols)
    body = []
    for r in rows:
        tds = []
        for c in cols:
            n = report.confusion_cell(r, c)
            tds.append(
                f'<td class="cell{" zero" if not n else ""}" data-expected="{escape(r)}" '
                f'data-actual="{escape(c)}" data-count="{n}" '
                f'style="background:{_heat(r, c, n, peak)}" title="expected {escape(r)}, called {escape(c)}: {n}">'
                f"{n}</td>"
            )
        body.append(f'<tr><th data-expected="{escape(r)}">{escape(r)}</th>{"".join(tds)}</tr>')
    return (
        '<button id="confusion-toggle" type="button">show row %</button>'
        f'<div class="scroll"><table id="confusion"><thead><tr><th>expected \\ called</th>{head}</tr></thead>'
        f'<tbody>{"".join(body)}</tbody></table></div>'
    )


def _table(table_id: str, columns: list[str], rows: list[list[str]], input_col: int = -1) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f'<td{" class=input" if i == input_col else ""}>{escape(v)}</td>' for i, v in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _per_tool(report: Report) -> str:
    return tool_bars(report.per_tool) + _table("per-tool", PER_TOOL_COLUMNS, report.per_tool_rows())


def _worst(report: Report) -> str:
    if not report.worst:
        return '<p class="muted">No failing turns.</p>'
    rows = [[s.ident, s.input_text, "\n".join(s.calls) or "(no call)", ", ".join(s.missed), s.reason]
            for s in report.worst]
    return ('<input type="search" id="worst-filter" placeholder="filter failing samples">'
            + _table("worst", ["turn", "input", "calls", "missed", "reason"], rows, input_col=1))


def _gate_row(gate: GateResult) -> str:
    mark, result, tone = ("", "passed", "good") if gate.passed else (' class="failed"', "failed", "bad")
    return (f'<tr{mark}><td>{escape(gate.name)}</td><td class="{tone}">{result}</td>'
            f"<td>{escape(gate.message)}</td></tr>")


def _gates(report: Report) -> str:
    """The Gates section (failing rows marked `failed`), or nothing when no gate was asked."""
    if report.gates is None:
        return ""
    tone = "bad" if any(not g.passed for g in report.gates) else "good"
    out = f'<h2>Gates</h2><p class="verdict {tone}" id="gates-verdict">{escape(verdict(report.gates))}</p>'
    rows = "".join(_gate_row(g) for g in report.gates)
    out += f"<table><thead><tr><th>gate</th><th>result</th><th>value</th></tr></thead><tbody>{rows}</tbody></table>"
    if report.skipped_comparisons:
        items = "".join(f"<li>{escape(r)}</li>" for r in report.skipped_comparisons)
        out += f'<p class="muted">Not compared with the baseline:</p><ul class="muted">{items}</ul>'
    return f'<section id="gates">{out}</section>'


def _interrupted(report: Report) -> str:
    """The notice of a run stopped by Ctrl-C (a partial report), or nothing."""
    if report.interrupted is None:
        return ""
    return f'<p class="interrupted bad" id="interrupted">{escape(report.interrupted.message)}</p>'


def render_html(report: Report) -> str:
    data = json.dumps({"confusion": report.confusion, "worst": len(report.worst), "figures": report.figures})
    data = data.translate(_SCRIPT_SAFE)
    counts = " · ".join(f"{escape(k.replace('_', ' '))}: {v}" for k, v in report.counts.items())
    extra = "".join(
        f"<h2>{escape(t.title)}</h2>" + _table(f"extra-{i}", t.columns, t.rows) for i, t in enumerate(report.tables)
    )
    notes = "".join(f'<p class="muted">{escape(n)}</p>' for n in report.notes)
    series = f"<h2>Accuracy as iterations grow</h2>{line_chart(report.series)}" if report.series else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<title>{escape(report.title)}</title><style>{CSS}</style></head>
<body>
<h1>{escape(report.title)}</h1>
{_interrupted(report)}
<div class="acc" id="accuracy-line">{escape(report.accuracy_line)}</div>
<p class="muted">{counts}</p>
<p class="muted" id="js-status">scripts did not run</p>
{_gates(report)}
<h2>Figures</h2>{_figure_cards(report)}
<h2>Confusion matrix</h2><p class="muted">Rows: expected tool; columns: called tool.</p>{_confusion(report)}
<h2>Per tool</h2>{_per_tool(report)}
{series}{extra}
<h2>Failing samples</h2>{_worst(report)}
{notes}
<script type="application/json" id="report-data">{data}</script>
<script>{JS}</script>
</body></html>
"""
