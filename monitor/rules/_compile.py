"""Semantic checks and compilation of one validated rule file into immutable model objects."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import jsonschema

from monitor.rules._burn import duration_problem, objective_problem
from monitor.rules._errors import RuleFileError
from monitor.rules._model import (
    Alert,
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
    Forbid,
    Not,
    Order,
    Prefix,
    Respond,
    Search,
    Slot,
    Tool,
    freeze,
)
from monitor.rules._regex import MAX_REGEX_SIZE, compile_regex
from monitor.rules._tool_schema import check_schema, schema_problem
from monitor.rules._validate import error_message
from monitor.rules._yaml import Marks, Path

T = TypeVar("T")

CHECK_MODES = ("exact", "normalized", "one_of", "fuzzy", "numeric", "regex", "from_input")
PER_TOOL_FIGURES = frozenset(
    {
        "tool_call_accuracy",
        "spurious_rate",
        "wrong_tool_rate",
        "missed_rate",
        "argument_correctness",
        "schema_adherence",
    }
)
# figures with no better direction: an alert on one needs an explicit bound (below or above), not an objective
UNDIRECTED_FIGURES = frozenset({"tool_usage_rate"})
MAX_CALLS = 1000
"""Most calls a rule may expect of one turn (the sum of its slots' minimums; each slot's exactly, min and max are at
most this too, in schema.json): the judge lists each missing call, and `min: 10**22` ran it out of memory."""


@dataclass(slots=True)
class FileRules:
    """What one file contributes, before merging."""

    file: str
    agent: str | None
    from_definitions: bool
    tools: list[Tool] = field(default_factory=list)
    expectations: list[Expectation] = field(default_factory=list)
    forbid: list[Forbid] = field(default_factory=list)
    cases: list[tuple[Expectation, str | None, str | None]] = field(default_factory=list)  # (exp, id, input)
    alerts: list[Alert] = field(default_factory=list)
    cases_file: str | None = None  # the cases file it names (`cases: PATH`), resolved


class FileCompiler:
    """Compiles one file. `known_tools` is the merged catalog of every file loaded together."""

    def __init__(self, file: str, stem: str, marks: Marks, known_tools: frozenset[str], open_catalog: bool) -> None:
        self.file = file
        self.stem = stem
        self.marks = marks
        self.known_tools = known_tools
        self.open_catalog = open_catalog  # from_definitions: tools may come from the spans
        # id of a schema object already checked -> (the object, its JSON): tools sharing a schema through a YAML alias
        # share the object, checked once (the metaschema check takes ~30 ms). The object is kept with its JSON, so
        # its id cannot be taken by another object while the compiler lives.
        self._schemas: dict[int, tuple[Any, str]] = {}
        self.errors: list[RuleFileError] = []  # of the items `each` skipped, in file order

    def err(self, path: Path, message: str, *, key: bool = False) -> RuleFileError:
        return self.marks.error(path, message, key=key)

    def each(self, items: Sequence[Any], base: Path, build: Callable[[Any, Path], T],
             skip: Collection[int] = frozenset()) -> list[T]:
        """`build(item, path)` of each item at `base` but those whose index is in `skip` (of the wrong shape, already
        reported); an item in error is left out and its error kept in `errors`, so that the other items are checked
        too (each item's first problem is reported)."""
        out: list[T] = []
        for i, item in enumerate(items):
            if i in skip:
                continue
            try:
                out.append(build(item, (*base, i)))
            except RuleFileError as exc:
                self.errors.append(exc)
        return out

    # ---- catalog ----

    def tools(self, data: Mapping[str, Any]) -> list[Tool]:
        seen: dict[str, int] = {}

        def one(t: Mapping[str, Any], path: Path) -> Tool:
            name = t["name"]
            if name in seen:
                first = f"catalog.tools[{seen[name]}]"
                raise self.err((*path, "name"), f"duplicate tool {name!r} (first declared at {first})")
            seen[name] = int(path[-1])
            schema_json = self.tool_schema(t["schema"], (*path, "schema")) if "schema" in t else None
            return Tool(name, t.get("description", ""), schema_json, self.file)

        return self.each(data.get("catalog", {}).get("tools", []), ("catalog", "tools"), one)

    def tool_schema(self, schema: Any, path: Path) -> str:
        done = self._schemas.get(id(schema))
        if done is not None:
            return done[1]
        try:
            check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise self.err((*path, *exc.absolute_path), f"invalid JSON Schema: {error_message(exc)}") from None
        bad = schema_problem(schema)
        if bad is not None:
            raise self.err((*path, *bad.path), bad.message, key=bad.at_key)
        out = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        self._schemas[id(schema)] = (schema, out)
        return out

    def check_tool(self, name: str, path: Path) -> None:
        if name not in self.known_tools and not self.open_catalog:
            known = ", ".join(sorted(self.known_tools)) or "none"
            raise self.err(path, f"unknown tool {name!r}: not in the catalog (known: {known})")

    # ---- conditions ----

    def regex(self, pattern: str, path: Path) -> Any:
        try:
            return compile_regex(pattern)
        except ValueError as exc:
            raise self.err(path, str(exc)) from None

    def condition(self, c: Mapping[str, Any], path: Path) -> Condition:
        parts: list[Condition] = []
        for key, value in c.items():
            p = (*path, key)
            if key == "prefix":
                parts.append(Prefix(value))
            elif key == "contains":
                if len(value) > MAX_REGEX_SIZE:  # routing finds it with RE2, as a literal
                    raise self.err(p, f"a text of {len(value)} characters, at most {MAX_REGEX_SIZE}: finding it "
                                      "would be slow on long inputs; give a shorter part of it")
                parts.append(Contains(value))
            elif key == "equals":
                parts.append(Equals(value))
            elif key == "regex":
                parts.append(Search(self.regex(value, p)))
            elif key == "attribute":
                parts.append(self.attribute(value, p))
            elif key == "all":
                parts.append(All(tuple(self.condition(x, (*p, i)) for i, x in enumerate(value))))
            elif key == "any":
                parts.append(AnyOf(tuple(self.condition(x, (*p, i)) for i, x in enumerate(value))))
            elif key == "not":
                parts.append(Not(self.condition(value, p)))
        return parts[0] if len(parts) == 1 else All(tuple(parts))

    def attribute(self, a: Mapping[str, Any], path: Path) -> Attribute:
        tests = [k for k in ("equals", "prefix", "regex", "exists") if k in a]
        if len(tests) > 1:
            raise self.err(path, f"use one of equals, prefix, regex, exists (got {', '.join(tests)})")
        regex = self.regex(a["regex"], (*path, "regex")) if "regex" in a else None
        exists = a.get("exists", True if not tests else None)
        return Attribute(a["key"], a.get("source") == "resource", a.get("equals"), a.get("prefix"), regex, exists)

    # ---- slots and checks ----

    def slot(self, s: Mapping[str, Any], index: int, path: Path) -> Slot:
        self.check_tool(s["tool"], (*path, "tool"))
        if "exactly" in s and ("min" in s or "max" in s):
            raise self.err((*path, "exactly"), "use either exactly or min/max, not both", key=True)
        lo: int
        hi: int | None
        if "exactly" in s:  # int(): JSON Schema takes 1.0 for an integer, and range() does not
            lo = hi = int(s["exactly"])
        elif "min" in s or "max" in s:
            lo, hi = int(s.get("min", 0)), (int(s["max"]) if "max" in s else None)
        else:
            lo = hi = 1
        if hi is not None and lo > hi:
            raise self.err((*path, "min"), f"min {lo} is greater than max {hi}")
        checks = tuple(self.check(arg, v, (*path, "args", arg)) for arg, v in s.get("args", {}).items())
        return Slot(index, s["tool"], lo, hi, checks)

    def check(self, argument: str, spec: Any, path: Path) -> ArgCheck:
        if not isinstance(spec, dict):
            return ArgCheck(argument, "exact", freeze(spec))
        modes = [m for m in CHECK_MODES if m in spec]
        if len(modes) != 1:
            got = ", ".join(modes) or "none"
            raise self.err(path, f"an argument check needs exactly one of {', '.join(CHECK_MODES)} (got {got})")
        mode = modes[0]
        value = freeze(spec[mode])
        if mode == "regex":
            return ArgCheck(argument, mode, value, regex=self.regex(value, (*path, mode)))
        if mode == "from_input":
            rx = self.regex(value, (*path, mode))
            group = spec.get("group", 1)
            group = int(group) if isinstance(group, float) else group  # 1.0, an integer to JSON Schema
            ngroups = rx.compiled.groups
            if isinstance(group, int) and group > ngroups:
                raise self.err((*path, mode), f"the regex has {ngroups} group(s), group {group} asked")
            if isinstance(group, str) and group not in rx.compiled.groupindex:
                raise self.err((*path, "group"), f"the regex has no group named {group!r}")
            return ArgCheck(argument, mode, value, regex=rx, group=group)
        if mode == "fuzzy":
            return ArgCheck(argument, mode, value, threshold=float(spec.get("threshold", 90)))
        if mode == "numeric":
            return ArgCheck(argument, mode, value, tolerance=float(spec.get("tolerance", 0)))
        return ArgCheck(argument, mode, value)

    def alternatives(self, r: Mapping[str, Any], path: Path) -> tuple[Alternative, ...]:
        present = [k for k in ("call", "none", "any_of") if k in r]
        if len(present) != 1:
            where = (*path, present[1]) if len(present) > 1 else path
            raise self.err(where, "needs exactly one of call, none, any_of", key=len(present) > 1)
        if "call" in r:
            return (self.alternative(r["call"], (*path, "call")),)
        if "none" in r:
            return (self.alternative([], (*path, "none")),)
        out = []
        for i, alt in enumerate(r["any_of"]):
            p = (*path, "any_of", i)
            if ("call" in alt) == ("none" in alt):
                raise self.err(p, "an any_of alternative needs exactly one of call, none")
            out.append(self.alternative(alt.get("call", []), (*p, "call")))
        return tuple(out)

    def alternative(self, slots: Sequence[Mapping[str, Any]], path: Path) -> Alternative:
        compiled = tuple(self.slot(s, i, (*path, i)) for i, s in enumerate(slots))
        calls = sum(s.min for s in compiled)
        if calls > MAX_CALLS:
            raise self.err(path, f"the slots' minimums expect {calls} calls in all: a rule expects at most "
                                 f"{MAX_CALLS} calls of a turn")
        by_tool: dict[str, list[int]] = {}
        for s in compiled:
            by_tool.setdefault(s.tool, []).append(s.index)
        hi = None if any(s.max is None for s in compiled) else sum(s.max or 0 for s in compiled)
        expected = tuple((t, sum(compiled[j].min for j in ix)) for t, ix in by_tool.items())
        return Alternative(
            compiled,
            calls,
            hi,
            tuple((t, tuple(ix)) for t, ix in by_tool.items()),
            tuple((t, n) for t, n in expected if n),
        )

    # ---- rules ----

    def forbid(self, f: Mapping[str, Any], path: Path) -> Forbid:
        self.check_tool(f["tool"], (*path, "tool"))
        unless = self.condition(f["unless"], (*path, "unless")) if "unless" in f else None
        return Forbid(f["tool"], unless)

    def order(self, o: Any, path: Path) -> Order:
        seq = tuple(o) if isinstance(o, list) else (o["before"], o["after"])
        for i, name in enumerate(seq):
            self.check_tool(name, (*path, i) if isinstance(o, list) else (*path, "before" if i == 0 else "after"))
        if not isinstance(o, list) and seq[0] == seq[1]:
            raise self.err(path, f"before and after name the same tool {seq[0]!r}")
        return Order(seq, pairwise=not isinstance(o, list))

    def respond(self, r: Mapping[str, Any], path: Path) -> Respond:
        regex = self.regex(r["regex"], (*path, "regex")) if "regex" in r else None
        if "contains" not in r and regex is None:
            raise self.err(path, "a respond check needs contains or regex")
        return Respond(r.get("contains"), regex, r.get("description", ""))

    def expectation(self, r: Mapping[str, Any], rid: str, agent: str | None, path: Path) -> Expectation:
        when = self.condition(r["when"], (*path, "when")) if "when" in r else Always()
        return Expectation(
            id=rid,
            alternatives=self.alternatives(r, path),
            when=when,
            forbid=tuple(self.forbid(f, (*path, "forbid", i)) for i, f in enumerate(r.get("forbid", []))),
            order=tuple(self.order(o, (*path, "order", i)) for i, o in enumerate(r.get("order", []))),
            respond=tuple(self.respond(x, (*path, "respond", i)) for i, x in enumerate(r.get("respond", []))),
            agent=agent,
            source=self.file,
            line=self.marks.at(path)[0],
            description=r.get("description", ""),
        )

    def expectations(self, data: Mapping[str, Any], agent: str | None) -> list[Expectation]:
        ids: dict[str, int] = {}

        def one(r: Mapping[str, Any], path: Path) -> Expectation:
            i = int(path[-1])
            rid = r.get("id", f"{self.stem}:{i + 1}")
            if rid in ids:
                raise self.err((*path, "id"), f"duplicate rule id {rid!r} (first at expect[{ids[rid]}])")
            ids[rid] = i
            return self.expectation(r, rid, agent, path)

        return self.each(data.get("expect", []), ("expect",), one)

    def case(self, c: Mapping[str, Any], agent: str | None, path: Path) -> tuple[Expectation, str | None, str | None]:
        if "id" not in c and "input" not in c:
            raise self.err(path, "a case needs an id or an input (or both)")
        # an id-less case is known by its place, counted from 1 as rules are (`<stem>:<n>`) and as eval's keys (`#n`)
        place = path[-1] if path and isinstance(path[-1], int) else 0
        label = c.get("id") or f"{self.stem}:{place + 1}"
        exp = self.expectation({k: v for k, v in c.items() if k not in ("id", "input")}, f"case:{label}", agent, path)
        return exp, c.get("id"), c.get("input")

    def alert(self, a: Mapping[str, Any], path: Path) -> Alert:
        kinds = [k for k in ("below", "above", "objective") if k in a]
        if len(kinds) != 1:
            got = ", ".join(kinds) or "none"
            raise self.err(path, f"an alert needs exactly one of below, above, objective (got {got})")
        if "tool" in a:
            if a["figure"] not in PER_TOOL_FIGURES:
                allowed = ", ".join(sorted(PER_TOOL_FIGURES))
                msg = f"figure {a['figure']!r} has no per-tool breakdown (per tool: {allowed})"
                raise self.err((*path, "tool"), msg)
            self.check_tool(a["tool"], (*path, "tool"))
        if "objective" in a and a["figure"] in UNDIRECTED_FIGURES:
            msg = (f"{a['figure']} has no better direction, so an objective (a share of good events) means nothing "
                   "for it: use below or above")
            raise self.err((*path, "objective"), msg)
        problem = objective_problem(a["objective"]) if "objective" in a else None
        if problem is not None:
            raise self.err((*path, "objective"), problem)
        for key in ("window", "for"):  # as Prometheus and the alert evaluator read them
            problem = duration_problem(key, a[key]) if key in a else None
            if problem is not None:
                raise self.err((*path, key), problem)
        return Alert(
            name=a["name"],
            figure=a["figure"],
            agent=a.get("agent"),
            tool=a.get("tool"),
            below=a.get("below"),
            above=a.get("above"),
            objective=a.get("objective"),
            window=a.get("window", "5m"),
            for_=a.get("for", "1m"),
            min_samples=int(a.get("min_samples", 20)),
            severity=a.get("severity", "warning"),
            summary=a.get("summary", ""),
            source=self.file,
            line=self.marks.at(path)[0],
        )
