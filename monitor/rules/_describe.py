"""Plain-text descriptions of compiled rules, for `toolwatch rules explain` and summaries."""

from __future__ import annotations

import json

from monitor.rules._model import (
    All,
    Alternative,
    Always,
    AnyOf,
    ArgCheck,
    Attribute,
    Condition,
    Contains,
    Equals,
    Expectation,
    Not,
    Prefix,
    Search,
    Slot,
    thaw,
)


def pattern_text(pattern: str) -> str:
    """A regular expression as written in the rule file, between slashes (`/\\S/`; Python's repr would double its
    backslashes, which reads as a YAML mistake), as explain and verdict reasons show it."""
    return f"/{pattern}/"


def condition_text(c: Condition) -> str:
    if isinstance(c, Prefix):
        return f"input starts with {c.text!r}"
    if isinstance(c, Search):
        return f"input matches {pattern_text(c.regex.pattern)}"
    if isinstance(c, Contains):
        return f"input contains {c.text!r}"
    if isinstance(c, Equals):
        return f"input equals {c.text!r}"
    if isinstance(c, Attribute):
        where = "resource" if c.resource else "span"
        if c.equals is not None:
            return f"{where} attribute {c.key} == {c.equals!r}"
        if c.prefix is not None:
            return f"{where} attribute {c.key} starts with {c.prefix!r}"
        if c.regex is not None:
            return f"{where} attribute {c.key} matches {pattern_text(c.regex.pattern)}"
        return f"{where} attribute {c.key} {'exists' if c.exists else 'is absent'}"
    if isinstance(c, All):
        return " and ".join(f"({condition_text(p)})" for p in c.parts)
    if isinstance(c, AnyOf):
        return " or ".join(f"({condition_text(p)})" for p in c.parts)
    if isinstance(c, Not):
        return f"not ({condition_text(c.part)})"
    if isinstance(c, Always):
        return "always"
    raise TypeError(f"unknown condition {c!r}")


def count_text(s: Slot) -> str:
    if s.max == s.min:
        return f"exactly {s.min}"
    if s.max is None:
        return f"at least {s.min}"
    return f"{s.min} to {s.max}"


def check_text(c: ArgCheck) -> str:
    extra = ""
    if c.mode == "fuzzy":
        extra = f" (ratio >= {c.threshold:g})"
    elif c.mode == "numeric":
        extra = f" (+/- {c.tolerance:g})"
    elif c.mode == "from_input":
        extra = f" (group {c.group})"
    if c.mode in ("regex", "from_input"):
        expected = pattern_text(str(c.expected))
    else:
        expected = json.dumps(thaw(c.expected), ensure_ascii=False)
    return f"{c.argument}: {c.mode} {expected}{extra}"


def alternative_lines(alt: Alternative) -> list[str]:
    if not alt.slots:
        return ["no tool call (none)"]
    out = []
    for s in alt.slots:
        out.append(f"{s.tool}: {count_text(s)} call(s)")
        out.extend(f"    {check_text(c)}" for c in s.checks)
    return out


def expectation_lines(exp: Expectation, when: str | None = None) -> list[str]:
    """`when`: what makes it apply, in place of its `when` condition (a labelled case has none: it applies by its id
    or its input)."""
    where = f"{exp.source}:{exp.line}" if exp.source else ""
    scope = f" [agent {exp.agent}]" if exp.agent else ""
    lines = [f"rule {exp.id}{scope} ({where})", f"  when: {when if when is not None else condition_text(exp.when)}"]
    if exp.description:
        lines.append(f"  description: {exp.description}")
    if len(exp.alternatives) == 1:
        lines.append("  expects:")
        lines.extend(f"    {x}" for x in alternative_lines(exp.alternatives[0]))
    else:
        lines.append("  expects one of:")
        for k, alt in enumerate(exp.alternatives):
            lines.append(f"    alternative {k}:")
            lines.extend(f"      {x}" for x in alternative_lines(alt))
    for f in exp.forbid:
        unless = f" unless {condition_text(f.unless)}" if f.unless is not None else ""
        lines.append(f"  forbids: {f.tool}{unless}")
    for o in exp.order:
        if o.pairwise:
            lines.append(f"  order: {o.names[1]} only after {o.names[0]}")
        else:
            lines.append(f"  order: {' -> '.join(o.names)}")
    for r in exp.respond:
        what = f"contains {r.contains!r}" if r.contains is not None else ""
        if r.regex is not None:
            what = (what + " and " if what else "") + f"matches {pattern_text(r.regex.pattern)}"
        lines.append(f"  response {what}" + (f" ({r.description})" if r.description else ""))
    return lines
