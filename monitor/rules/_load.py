"""load_rules: read, validate and compile rule files into one immutable RuleSet."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path as FsPath
from typing import Any

from monitor.rules._compile import FileCompiler, FileRules
from monitor.rules._errors import RuleFileError, raise_all
from monitor.rules._model import Expectation, RuleSet, Tool
from monitor.rules._validate import validate_document, validate_fragment
from monitor.rules._yaml import MAX_DEPTH, Marks, load_yaml

MAX_FILE_BYTES = 32 << 20


def read_text(path: FsPath) -> str:
    """A rule, cases or dataset file as text: bounded (MAX_FILE_BYTES), UTF-8, any failure a located RuleFileError."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise RuleFileError(str(path), 0, 0, "", f"file too large ({size} bytes, limit {MAX_FILE_BYTES})")
        data = path.read_bytes()
    except OSError as exc:
        raise RuleFileError(str(path), 0, 0, "", f"cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = data[: exc.start]
        line_start = head.rfind(b"\n") + 1
        column = len(head[line_start:].decode("utf-8")) + 1
        bad = data[exc.start : exc.end].hex(" ")
        message = f"not UTF-8: byte(s) 0x{bad} ({exc.reason}); save the file as UTF-8"
        raise RuleFileError(str(path), head.count(b"\n") + 1, column, "", message) from None


_RULE_KEYS = ("expect", "forbid", "cases", "alerts")
_WHAT_TO_ADD = (
    "add the tools the agent may call (catalog.tools, or catalog.from_definitions: true) and what to check: "
    "expect rules, forbid rules, cases or alerts (`toolwatch rules schema` prints the format)"
)


def _parse(path: FsPath) -> tuple[dict[str, Any], Marks]:
    data, marks = load_yaml(read_text(path), str(path))
    if data is None:
        data = {}
    validate_document(data, marks)
    _refuse_empty(data, marks)
    return data, marks


def _refuse_empty(data: dict[str, Any], marks: Marks) -> None:
    """A file that declares no tool and no rule checks nothing: almost always the wrong file, or one not yet
    written. Every command refuses it rather than run (or serve) without a rule."""
    catalog = data.get("catalog", {})
    if catalog.get("tools") or catalog.get("from_definitions") or any(data.get(k) for k in _RULE_KEYS):
        return
    if not data:
        raise marks.error((), f"the file is empty: {_WHAT_TO_ADD}")
    raise marks.error((), f"no tools and no rules (catalog, expect, forbid, cases and alerts are empty or absent): "
                      f"{_WHAT_TO_ADD}")



_TOO_DEEP = object()


def read_json_lines(text: str, file: str) -> tuple[list[Any], Marks]:
    """The values of a JSON-lines file (blank lines skipped), each placed at its line. A line nested deeper than
    MAX_DEPTH is a located error: about 1,000 levels raised RecursionError in the decoder (a traceback), and fewer
    would in the validation and compiling that recurse over the value."""
    marks = Marks(file)
    items: list[Any] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        marks.values[(len(items),)] = (n, 1)
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RuleFileError(file, n, exc.colno, "", f"JSON: {exc.msg}") from None
        except RecursionError:
            item = _TOO_DEEP
        if item is _TOO_DEEP or _depth_over(item, MAX_DEPTH - 1):  # the item sits one level down, in the list
            raise RuleFileError(file, n, 1, "", f"JSON: nested deeper than {MAX_DEPTH} levels")
        items.append(item)
    marks.values[()] = (1, 1)
    return items, marks


def _depth_over(value: Any, limit: int) -> bool:
    """Whether `value` nests more than `limit` lists or objects below itself (no recursion)."""
    level = [value]
    for _ in range(limit + 1):
        level = [c for v in level if isinstance(v, dict | list) for c in (v.values() if isinstance(v, dict) else v)]
        if not level:
            return False
    return True


def _load_cases_file(path: FsPath) -> tuple[list[Any], Marks]:
    text = read_text(path)
    if path.suffix in (".jsonl", ".ndjson"):
        return read_json_lines(text, str(path))
    data, marks = load_yaml(text, str(path))
    if isinstance(data, dict) and "cases" in data:
        raise RuleFileError(str(path), 1, 1, "cases", "a cases file holds a list of cases, not a mapping")
    return (data if data is not None else []), marks


def _compile_file(
    path: FsPath, data: dict[str, Any], marks: Marks, tools: list[Tool], known: frozenset[str], open_: bool
) -> tuple[FileRules, list[RuleFileError]]:
    """The file's rules and the errors of its items (each item in error is left out, the others still checked)."""
    agent = data.get("agent")
    fd = bool(data.get("catalog", {}).get("from_definitions", False))
    comp = FileCompiler(str(path), path.stem, marks, known, open_)
    fr = FileRules(str(path), agent, fd, tools=tools)
    fr.expectations = comp.expectations(data, agent)
    fr.forbid = comp.each(data.get("forbid", []), ("forbid",), comp.forbid)
    fr.alerts = comp.each(data.get("alerts", []), ("alerts",), comp.alert)
    cases = data.get("cases", [])
    errors = comp.errors  # the cases of a cases file have a compiler (and errors) of their own
    if isinstance(cases, str):
        cpath = (path.parent / cases) if not FsPath(cases).is_absolute() else FsPath(cases)
        try:
            cases, cmarks = _load_cases_file(cpath)
            validate_fragment(cases, cmarks, "case_list", ())
        except RuleFileError as exc:
            if exc.line:
                return fr, [*errors, exc]
            # Not read at all (missing, unreadable): point at the rule file's `cases` key, which names the file.
            return fr, [*errors, marks.error(("cases",), f"cases file {cpath}: {exc.message}")]
        ccomp = FileCompiler(str(cpath), cpath.stem, cmarks, known, open_)
        fr.cases = ccomp.each(cases, (), lambda c, p: ccomp.case(c, agent, p))
        return fr, [*errors, *ccomp.errors]
    fr.cases = comp.each(cases, ("cases",), lambda c, p: comp.case(c, agent, p))
    return fr, comp.errors


def _parse_all(paths: Sequence[FsPath]) -> list[tuple[FsPath, dict[str, Any], Marks]]:
    """Every file parsed and validated; the errors of all of them raised together."""
    parsed = []
    errors: list[RuleFileError] = []
    for p in paths:
        try:
            parsed.append((p, *_parse(p)))
        except RuleFileError as exc:
            errors.append(exc)
    raise_all(errors)
    return parsed


def distinct_files(paths: Sequence[str | FsPath]) -> list[FsPath]:
    """The paths in order, each file once: a later path naming a file already given (the same path, another spelling
    of it, a link to it: overlapping shell globs) is left out. A path that cannot be read stays, for the loader to
    report."""
    seen: set[tuple[int, int]] = set()
    out: list[FsPath] = []
    for p in map(FsPath, paths):
        try:
            st = p.stat()
        except (OSError, ValueError):
            out.append(p)
            continue
        key = (st.st_dev, st.st_ino)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def load_rules(paths: Sequence[str | FsPath]) -> RuleSet:
    """Load, validate and merge rule files (in the order given; a file named twice is loaded once). Raises
    RuleFileError on a problem: a RuleFileErrors with every one found when there are several (each rule in error is
    reported, with its first problem; a file that does not match the schema is not compiled)."""
    if isinstance(paths, str | FsPath):
        paths = [paths]
    parsed = _parse_all(distinct_files(paths))  # a file named twice is one file, not a duplicate of itself
    tools: dict[str, Tool] = {}
    file_tools: list[list[Tool]] = []  # each file's catalog, compiled once
    errors: list[RuleFileError] = []
    for path, data, marks in parsed:
        comp = FileCompiler(str(path), path.stem, marks, frozenset(), True)
        file_tools.append(comp.tools(data))
        errors += comp.errors
        place: dict[str, int] = {}  # a tool's index in the file (those in error are not in file_tools)
        for i, t in enumerate(data.get("catalog", {}).get("tools", [])):
            place.setdefault(t["name"], i)
        for tool in file_tools[-1]:
            i = place[tool.name]
            prev = tools.get(tool.name)
            if prev is not None and prev.schema_json != tool.schema_json:
                errors.append(
                    marks.error(
                        ("catalog", "tools", i, "name"),
                        f"duplicate tool {tool.name!r} with a different schema (first declared in {prev.source})",
                    )
                )
            tools.setdefault(tool.name, tool)
    # every declared name, also of a tool in error: a rule naming it is not an unknown tool besides
    known = frozenset(t["name"] for _, d, _ in parsed for t in d.get("catalog", {}).get("tools", []))
    open_ = any(d.get("catalog", {}).get("from_definitions", False) for _, d, _ in parsed)
    files = []
    for (path, data, marks), ft in zip(parsed, file_tools, strict=True):
        fr, file_errors = _compile_file(path, data, marks, ft, known, open_)
        files.append(fr)
        errors += file_errors
    raise_all(errors)
    return _merge(files, tools, parsed)


def _merge(files: list[FileRules], tools: dict[str, Tool], parsed: list[tuple[FsPath, Any, Marks]]) -> RuleSet:
    expectations: list[Expectation] = []
    ids: dict[str, str] = {}
    by_id: dict[str, Expectation] = {}
    by_input: dict[str, dict[str | None, Expectation]] = {}  # input -> agent scope -> its first case
    cases: list[tuple[str | None, str | None, Expectation]] = []
    alert_names: dict[str, str] = {}
    errors: list[RuleFileError] = []
    for fr, (_, _, marks) in zip(files, parsed, strict=True):
        for i, e in enumerate(fr.expectations):
            if e.id in ids:
                errors.append(marks.error(("expect", i, "id"), f"duplicate rule id {e.id!r} (also in {ids[e.id]})"))
                continue
            ids[e.id] = fr.file
            expectations.append(e)
        for exp, cid, cinput in fr.cases:
            if cid is not None:
                if cid in by_id:
                    errors.append(RuleFileError(exp.source, exp.line, 1, "id", f"duplicate case id {cid!r}"))
                    continue
                by_id[cid] = exp
            if cinput is not None:
                by_input.setdefault(cinput, {}).setdefault(exp.agent, exp)
            cases.append((cid, cinput, exp))
        for i, a in enumerate(fr.alerts):
            if a.name in alert_names:
                msg = f"duplicate alert name {a.name!r} (also in {alert_names[a.name]})"
                errors.append(marks.error(("alerts", i, "name"), msg))
                continue
            alert_names[a.name] = fr.file
    raise_all(errors)
    agents = frozenset(fr.agent for fr in files if fr.agent)
    unscoped = frozenset(t.name for fr in files if not fr.agent for t in fr.tools)
    scoped = tuple(
        (a, unscoped | frozenset(t.name for fr in files if fr.agent == a for t in fr.tools)) for a in sorted(agents)
    )
    return RuleSet(
        tools=tuple(tools.values()),
        expectations=tuple(expectations),
        forbid=tuple((fr.agent, f) for fr in files for f in fr.forbid),
        cases_by_id=tuple(by_id.items()),
        cases_by_input=tuple((text, tuple(first.values())) for text, first in by_input.items()),
        cases=tuple(cases),
        alerts=tuple(a for fr in files for a in fr.alerts),
        from_definitions=any(fr.from_definitions for fr in files),
        agents=agents,
        scoped_tools=scoped,
        unscoped_tools=unscoped,
        files=tuple(fr.file for fr in files),
    )
