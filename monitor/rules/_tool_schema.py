"""What the judge cannot check safely in a tool's JSON Schema (rule files reject it; offered schemas go unused)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from monitor.rules._regex import compile_regex
from monitor.rules._yaml import Path, format_path


def _any_regex(instance: object) -> bool:
    return True  # schema_problem compiles every `pattern` and `patternProperties` key in RE2, with RE2's message


# The metaschema's formats, but `regex`: the judge runs schema regexes in RE2, and the default check compiled them
# with Python's `re`, which refused RE2's `\\pL` ("'^\\pL+$' is not a 'regex'").
_FORMATS = jsonschema.FormatChecker()
_FORMATS.checkers = {**jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers, "regex": (_any_regex, ())}


def check_schema(schema: Any) -> None:
    """Draft 2020-12's metaschema check of a tool's schema (raises jsonschema.SchemaError), regexes left to
    `schema_problem`."""
    jsonschema.Draft202012Validator.check_schema(schema, format_checker=_FORMATS)


# Keywords whose values are data, not schemas (a "$ref" or "pattern" key there is not one).
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


@dataclass(slots=True)
class SchemaProblem:
    """A part of a JSON Schema the judge cannot check safely: where (a key path within the schema; `at_key`: the
    mapping key there is the culprit) and what is wrong."""

    path: Path
    message: str
    at_key: bool = False


def schema_problem(schema: Any) -> SchemaProblem | None:
    """The first part of a JSON Schema the judge cannot check safely, or None: a `$ref` / `$dynamicRef` that is not
    local, or that points nowhere in the schema (validation would raise on reaching it), a regex
    (`pattern`, a `patternProperties` key) RE2 cannot run (the judge runs them in RE2: linear time on any argument),
    or `unevaluatedProperties` in a schema with `patternProperties` (which the judge does not run in RE2)."""
    if not isinstance(schema, Mapping):
        return None
    seen: dict[str, Path] = {}
    found = _problem(schema, Registry().resolver_with_root(DRAFT202012.create_resource(schema)), (), seen)
    if found is None and "unevaluatedProperties" in seen and "patternProperties" in seen:
        where = seen["unevaluatedProperties"]
        return SchemaProblem(where, f"unevaluatedProperties is not supported beside patternProperties (at "
                             f"{format_path(seen['patternProperties']) or 'the top'}); use additionalProperties")
    return found


def _problem(schema: Any, resolver: Any, path: Path, seen: dict[str, Path]) -> SchemaProblem | None:
    if isinstance(schema, list):
        items: Any = enumerate(schema)
    elif isinstance(schema, Mapping):
        if path and isinstance(schema.get("$id"), str):  # a new base URI for the references below
            resolver = resolver.in_subresource(DRAFT202012.create_resource(schema))
        items = schema.items()
    else:
        return None
    for k, v in items:
        at = (*path, k)
        if isinstance(schema, Mapping):
            found = _keyword_problem(k, v, at, resolver)
            if found:
                return found
            if k in ("unevaluatedProperties", "patternProperties"):
                seen.setdefault(k, at)
            if k in _DATA_KEYWORDS:
                continue
        found = _problem(v, resolver, at, seen)
        if found:
            return found
    return None


def _keyword_problem(k: str, v: Any, at: Path, resolver: Any) -> SchemaProblem | None:
    """What is wrong with one keyword of a schema (not looking below it), or None."""
    if k in ("$ref", "$dynamicRef") and isinstance(v, str):
        if not v.startswith("#"):
            return SchemaProblem(at, f"only local references ('#...') are allowed, got {v!r}")
        try:  # a $dynamicRef starts as a $ref: the judge raised on one that resolved to nothing
            resolver.lookup(v)
        except Unresolvable:
            return SchemaProblem(at, f"the reference {v!r} does not resolve to anything in this schema")
    elif k == "pattern" and isinstance(v, str):
        try:
            compile_regex(v)
        except ValueError as exc:
            return SchemaProblem(at, str(exc))
    elif k == "patternProperties" and isinstance(v, Mapping):
        for pattern in v:
            try:
                compile_regex(pattern)
            except ValueError as exc:
                return SchemaProblem((*at, pattern), str(exc), at_key=True)
    return None
