"""The report as JUnit XML: one testsuite, one testcase per turn, case or scenario step.

A run stopped by Ctrl-C or SIGTERM has first a testcase `interrupted` (classname `toolwatch.<command>.run`), an
<error> saying how many of the planned runs were done, and a property `interrupted` (`2 of 4 runs`): a partial report
is never a green suite. Before the turns, a testcase per kind of problem with the input (classname
`toolwatch.<command>.input`, an <error> whose message has the count and the first problem, its body the problems
listed) and one per gate (`toolwatch.<command>.gates`, named after the gate: passed, its measured value in
<system-out>, or a <failure> saying it; the report's `gates`, which `emit_report` puts there), so a CI test view is
not all green over skipped input or a failed gate.

The attributes follow the common JUnit schema CI systems read: totals on <testsuites> and <testsuite>,
`timestamp` (local time, no zone, as the schema has it) and `hostname` on the suite, `message` and
`type` on every <failure> and <error>.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import datetime

from monitor.report._text import escape_bidi, printable
from monitor.report.model import InputProblem, Report

# XML 1.0 forbids most control characters and U+FFFE/U+FFFF; model output may hold them.
_BAD = {c: None for c in [*range(0x20), 0xFFFE, 0xFFFF] if c not in (0x09, 0x0A, 0x0D)}
# `type` of a failing verdict, and of a run that gave no verdict or broke (agent error, timeout).
FAILURE_TYPE = "toolwatch.TurnFailed"
ERROR_TYPE = "toolwatch.RunError"
INPUT_ERROR_TYPE = "toolwatch.InputError"  # a kind of input problem (records skipped, a file not read to its end)
GATE_FAILURE_TYPE = "toolwatch.GateFailed"
INTERRUPTED_TYPE = "toolwatch.Interrupted"  # a run stopped by Ctrl-C or SIGTERM: the report is partial


def _clean(text: str) -> str:
    """Text XML can hold: control characters dropped, lone surrogates written as `\\udXXX`; the bidirectional
    formatting characters, which reorder what a page shows, as `\\uNNNN` (`escape_bidi`)."""
    return escape_bidi(printable(text).translate(_BAD))


def render_junit(
    report: Report,
    *,
    problems: Sequence[InputProblem] = (),
    timestamp: datetime | None = None,
    hostname: str | None = None,
) -> str:
    """The XML; `problems` and the report's gates are testcases before the turns'. `timestamp` (when the report is
    written) defaults to now, `hostname` to this host's name."""
    cases = report.cases
    gates = report.gates or []
    stopped = report.interrupted
    totals = {
        "tests": str((stopped is not None) + len(problems) + len(gates) + len(cases)),
        "failures": str(sum(not g.passed for g in gates) + sum(c.status == "failed" for c in cases)),
        "errors": str((stopped is not None) + len(problems) + sum(c.status == "error" for c in cases)),
        "skipped": str(sum(c.status == "skipped" for c in cases)),
        "time": f"{sum(c.time_s for c in cases):.3f}",
    }
    when = timestamp or datetime.now()
    if when.tzinfo is not None:
        when = when.astimezone()  # local time
    stamp = when.replace(microsecond=0, tzinfo=None).isoformat()
    suites = ET.Element("testsuites", {"name": "toolwatch", **totals})
    suite = ET.SubElement(
        suites,
        "testsuite",
        {
            "name": _clean(f"toolwatch {report.command}"),
            **totals,
            "timestamp": stamp,
            "hostname": _clean(hostname if hostname is not None else socket.gethostname()),
        },
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="accuracy", value=_clean(report.accuracy_line))
    for key, value in report.figures.items():
        ET.SubElement(props, "property", name=key, value="absent" if value is None else f"{value:.6f}")
    if report.cases_dropped:
        ET.SubElement(props, "property", name="cases_dropped", value=str(report.cases_dropped))
    prefix = f"toolwatch.{report.command}"
    if stopped is not None:
        ET.SubElement(props, "property", name="interrupted", value=_clean(stopped.done))
        el = ET.SubElement(suite, "testcase", name="interrupted", classname=_clean(f"{prefix}.run"), time="0.000")
        ET.SubElement(el, "error", message=_clean(stopped.message), type=INTERRUPTED_TYPE).text = _clean(
            f"{stopped.message}. The runs going on at {stopped.by} and those not started are in no testcase.")
    for problem in problems:
        el = ET.SubElement(suite, "testcase", name=_clean(problem.name), classname=_clean(f"{prefix}.input"),
                           time="0.000")
        child = ET.SubElement(el, "error", message=_clean(problem.message), type=INPUT_ERROR_TYPE)
        child.text = _clean("\n".join(problem.lines))
    for gate in gates:
        el = ET.SubElement(suite, "testcase", name=_clean(gate.name), classname=_clean(f"{prefix}.gates"),
                           time="0.000")
        if gate.passed:
            ET.SubElement(el, "system-out").text = _clean(gate.message)
        else:
            ET.SubElement(el, "failure", message=_clean(gate.message), type=GATE_FAILURE_TYPE).text = _clean(
                gate.message)
    for case in cases:
        el = ET.SubElement(
            suite, "testcase", name=_clean(case.name), classname=_clean(case.group), time=f"{case.time_s:.3f}"
        )
        if case.status in ("failed", "error"):
            failed = case.status == "failed"
            child = ET.SubElement(
                el,
                "failure" if failed else "error",
                message=_clean(case.message),
                type=FAILURE_TYPE if failed else ERROR_TYPE,
            )
            child.text = _clean(case.detail)
        elif case.status == "skipped":
            ET.SubElement(el, "skipped", message=_clean(case.message or "no expectation"))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
