"""load_rules: read, validate and compile rule files into one immutable RuleSet."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any

from monitor._gc import in_batch_gc
from monitor.rules._compile import FileCompiler, FileRules
from monitor.rules._errors import RuleFileError, raise_all
from monitor.rules._model import Expectation, RuleSet, Tool
from monitor.rules._read import Documents
from monitor.rules._validate import case_errors, document_errors, validate_document
from monitor.rules._yaml import Marks

_RULE_KEYS = ("expect", "forbid", "cases", "alerts")
_WHAT_TO_ADD = (
    "add the tools the agent may call (catalog.tools, or catalog.from_definitions: true) and what to check: "
    "expect rules, forbid rules, cases or alerts (`toolwatch rules schema` prints the format)"
)


@dataclass(slots=True)
class _Parsed:
    path: FsPath
    data: dict[str, Any]
    marks: Marks
    case_errors: list[RuleFileError]  # the schema errors of its inline cases (the rest of the file has none)
    bad_cases: frozenset[int]  # the indexes of those cases, not compiled


def _parse(path: FsPath, docs: Documents) -> _Parsed:
    """The file, validated; raises RuleFileError with every schema error of it. Its inline cases are validated one
    by one: a case of the wrong shape is in `case_errors` (the schema's `oneOf` of a list or a path reported one of
    them), and the file is still compiled, those cases left out, for what compiling the others finds to be reported
    with them."""
    data, marks = docs.yaml(path)
    if data is None:
        data = {}
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        validate_document(data, marks)
        _refuse_empty(data, marks)
        return _Parsed(path, data, marks, [], frozenset())
    errors, bad = case_errors(cases, marks, ("cases",))
    rest = document_errors({k: v for k, v in data.items() if k != "cases"}, marks)
    if rest:
        raise_all(_in_file_order([*rest, *errors]))
    _refuse_empty(data, marks)
    return _Parsed(path, data, marks, errors, bad)


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



def _load_cases_file(path: FsPath, docs: Documents) -> tuple[list[Any], Marks]:
    data, marks = docs.cases(path)
    if isinstance(data, dict) and "cases" in data:
        raise RuleFileError(str(path), 1, 1, "cases", "a cases file holds a list of cases, not a mapping")
    return (data if data is not None else []), marks


def _compile_file(parsed: _Parsed, tools: list[Tool], known: frozenset[str], open_: bool, docs: Documents
                  ) -> tuple[FileRules, list[RuleFileError]]:
    """The file's rules and the errors of its items (each item in error is left out, the others still checked); the
    shape errors of its cases (inline, or in the cases file it names) with what compiling finds, in file order."""
    path, data, marks = parsed.path, parsed.data, parsed.marks
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
        fr.cases_file = str(cpath)
        try:
            cases, cmarks = _load_cases_file(cpath, docs)
            shape, bad = case_errors(cases, cmarks, ())
        except RuleFileError as exc:
            if exc.line:
                return fr, [*errors, exc]
            # Not read at all (missing, unreadable): point at the rule file's `cases` key, which names the file.
            return fr, [*errors, marks.error(("cases",), f"cases file {cpath}: {exc.message}")]
        ccomp = FileCompiler(str(cpath), cpath.stem, cmarks, known, open_)
        fr.cases = ccomp.each(cases, (), lambda c, p: ccomp.case(c, agent, p), skip=bad)
        return fr, [*errors, *_in_file_order([*shape, *ccomp.errors])]
    fr.cases = comp.each(cases, ("cases",), lambda c, p: comp.case(c, agent, p), skip=parsed.bad_cases)
    return fr, _in_file_order([*parsed.case_errors, *comp.errors]) if parsed.case_errors else comp.errors


def _in_file_order(errors: list[RuleFileError]) -> list[RuleFileError]:
    """The errors of one file by place (stable: those of one place in the order found)."""
    return sorted(errors, key=lambda e: (e.line, e.column))


def _parse_all(paths: Sequence[FsPath], docs: Documents) -> list[_Parsed]:
    """Every file parsed and validated; the errors of all of them raised together (with the shape errors of the
    cases of the others)."""
    parsed: list[_Parsed] = []
    errors: list[RuleFileError] = []
    failed = False  # a file with schema errors besides its cases'
    for p in paths:
        try:
            parsed.append(_parse(p, docs))
        except RuleFileError as exc:
            errors.append(exc)
            failed = True
            continue
        errors += parsed[-1].case_errors
    if failed:
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


@in_batch_gc
def load_rules(paths: Sequence[str | FsPath], *, documents: Documents | None = None,
               catalogs: Sequence[str | FsPath] = ()) -> RuleSet:
    """Load, validate and merge rule files (in the order given; a file named twice is loaded once). Raises
    RuleFileError on a problem: a RuleFileErrors with every one found when there are several (each rule in error is
    reported, with its first problem; a file that does not match the schema is not compiled, but one whose only
    schema errors are in cases: those cases are left out, and the others compiled). `documents`: the files read
    already by the caller's load (each file is read and parsed once: a dataset that is a rule file, or names a cases
    file, is read by the caller too). `catalogs`: files loaded together with these elsewhere (`rules check` checks
    each file alone, then all together): the tools they declare (and their `from_definitions`) are known to the rules
    of `paths` as in the merged load, and nothing else of them is loaded; one that does not validate is passed over
    (its errors are its own)."""
    if isinstance(paths, str | FsPath):
        paths = [paths]
    docs = documents if documents is not None else Documents()
    parsed = _parse_all(distinct_files(paths), docs)  # a file named twice is one file, not a duplicate of itself
    tools: dict[str, Tool] = {}
    file_tools: list[list[Tool]] = []  # each file's catalog, compiled once
    errors: list[RuleFileError] = []
    for f in parsed:
        path, data, marks = f.path, f.data, f.marks
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
    context = _catalog_context(parsed, catalogs, docs)
    known = frozenset(t["name"] for f in (*parsed, *context) for t in f.data.get("catalog", {}).get("tools", []))
    open_ = any(f.data.get("catalog", {}).get("from_definitions", False) for f in (*parsed, *context))
    files = []
    for f, ft in zip(parsed, file_tools, strict=True):
        fr, file_errors = _compile_file(f, ft, known, open_, docs)
        files.append(fr)
        errors += file_errors
    raise_all(errors)
    return _merge(files, tools, parsed)


def _catalog_context(parsed: list[_Parsed], catalogs: Sequence[str | FsPath], docs: Documents) -> list[_Parsed]:
    """The files of `catalogs` that are not among `parsed` and validate, parsed (see load_rules)."""
    loaded = {f.path for f in parsed}
    out = []
    for path in distinct_files([*(f.path for f in parsed), *catalogs]):
        if path in loaded:
            continue
        try:
            out.append(_parse(path, docs))
        except RuleFileError:
            continue
    return out


def _merge(files: list[FileRules], tools: dict[str, Tool], parsed: list[_Parsed]) -> RuleSet:
    expectations: list[Expectation] = []
    ids: dict[str, str] = {}
    by_id: dict[str, Expectation] = {}
    by_input: dict[str, dict[str | None, Expectation]] = {}  # input -> agent scope -> its first case
    cases: list[tuple[str | None, str | None, Expectation]] = []
    alert_names: dict[str, str] = {}
    errors: list[RuleFileError] = []
    for fr, marks in zip(files, (f.marks for f in parsed), strict=True):
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
        cases_files=tuple(fr.cases_file for fr in files if fr.cases_file is not None),
    )
