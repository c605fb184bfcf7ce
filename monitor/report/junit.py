"""The report as JUnit XML: one testsuite, one testcase per turn, case or scenario step."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from monitor.report.model import Report

# XML 1.0 forbids most control characters; model output may hold them.
_BAD = {c: None for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)}


def _clean(text: str) -> str:
    return text.translate(_BAD)


def render_junit(report: Report) -> str:
    cases = report.cases
    failures = sum(c.status == "failed" for c in cases)
    errors = sum(c.status == "error" for c in cases)
    skipped = sum(c.status == "skipped" for c in cases)
    total_time = sum(c.time_s for c in cases)
    suites = ET.Element("testsuites", name="toolwatch")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=_clean(f"toolwatch {report.command}"),
        tests=str(len(cases)),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{total_time:.3f}",
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="accuracy", value=_clean(report.accuracy_line))
    for key, value in report.figures.items():
        ET.SubElement(props, "property", name=key, value="absent" if value is None else f"{value:.6f}")
    if report.cases_dropped:
        ET.SubElement(props, "property", name="cases_dropped", value=str(report.cases_dropped))
    for case in cases:
        el = ET.SubElement(
            suite, "testcase", name=_clean(case.name), classname=_clean(case.group), time=f"{case.time_s:.3f}"
        )
        if case.status in ("failed", "error"):
            child = ET.SubElement(el, "failure" if case.status == "failed" else "error", message=_clean(case.message))
            child.text = _clean(case.detail)
        elif case.status == "skipped":
            ET.SubElement(el, "skipped", message=_clean(case.message or "no expectation"))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
