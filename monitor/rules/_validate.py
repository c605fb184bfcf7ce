"""Validation of a parsed rule file against schema.json, with each error mapped to file:line:column: key."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError, best_match

from monitor._text import elide
from monitor.rules._errors import RuleFileError, raise_all
from monitor.rules._yaml import Marks, Path

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


@functools.cache
def rule_file_schema() -> dict[str, Any]:
    """The rule-file JSON Schema (the package copy of rules/schema.json)."""
    text = resources.files("monitor.rules").joinpath("schema.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    schema = rule_file_schema()
    return jsonschema.Draft202012Validator(schema)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _allowed_keys(schema: dict[str, Any]) -> list[str]:
    return sorted(schema.get("properties", {}))


def describe(error: ValidationError) -> tuple[Path, str, bool]:
    """(key path, message, whether the position is the key rather than the value) for one schema error."""
    path: Path = tuple(error.absolute_path)
    kw = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    if kw == "additionalProperties" and isinstance(error.instance, dict):
        extra = sorted(k for k in error.instance if k not in schema.get("properties", {}))
        if extra:
            allowed = ", ".join(_allowed_keys(schema))
            return (*path, extra[0]), f"unknown key {extra[0]!r} (allowed: {allowed})", True
    if kw == "required":
        return path, _required(error), False
    if kw == "type":
        want = error.validator_value
        want_s = " or ".join(want) if isinstance(want, list) else str(want)
        got = "null" if error.instance is None else f"{_type_name(error.instance)} {_short(error.instance)}"
        return path, f"expected {want_s}, got {got}", False
    if kw in ("enum", "const"):
        value: Any = error.validator_value
        choices = value if kw == "enum" else [value]
        return path, f"must be one of {', '.join(json.dumps(c) for c in choices)}, got {_short(error.instance)}", False
    if kw == "dependentRequired":
        return path, error_message(error).replace("is a dependency of", "is required with"), False
    if kw == "pattern":
        return path, f"{_short(error.instance)} does not match the pattern {error.validator_value}", False
    if kw == "not" and isinstance(error.validator_value, dict) and "const" in error.validator_value:
        why = error.validator_value.get("description", "")
        return path, f"{error.instance!r} is reserved" + (f": {why[0].lower()}{why[1:]}" if why else ""), False
    if kw in ("oneOf", "anyOf"):
        options = [_option_name(o) for o in schema.get(kw, [])]
        return (
            path,
            f"{_short(error.instance)} is not a valid {_def_name(error)} (expected {' or '.join(options)})",
            False,
        )
    return path, error_message(error), False


def _required(error: ValidationError) -> str:
    wanted: Any = error.validator_value
    missing = [k for k in wanted if isinstance(error.instance, dict) and k not in error.instance]
    return f"missing required key {missing[0]!r}" if missing else error_message(error)


def _option_name(option: Any) -> str:
    if not isinstance(option, dict):
        return "value"
    if "$ref" in option:
        return str(option["$ref"]).rsplit("/", 1)[-1].replace("_", " ")
    kind = option.get("type", "value")
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def _def_name(error: ValidationError) -> str:
    ref = [p for p in error.schema_path if isinstance(p, str) and p not in ("oneOf", "anyOf", "items", "$ref")]
    return ref[-1] if ref else "value"


def error_message(error: ValidationError | SchemaError) -> str:
    """jsonschema's message for `error`, the value it quotes cut to 60 characters: its messages repeat the whole
    value (a 300 KB name made a 300 KB error line)."""
    message = str(error.message)
    text = repr(error.instance)
    if len(text) > 60 and text in message:
        message = message.replace(text, elide(text, 60))
    return message


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return elide(text, 60)


def document_errors(data: Any, marks: Marks) -> list[RuleFileError]:
    """Every schema error of a rule file (in document order): all of them, so one run shows them all."""
    return _located(list(_validator().iter_errors(data)), marks, ())


def validate_document(data: Any, marks: Marks) -> None:
    """Raise RuleFileError for every schema error (in document order)."""
    raise_all(document_errors(data, marks))


def _fragment_errors(data: Any, definition: str) -> list[ValidationError]:
    schema = {"$ref": f"#/$defs/{definition}", "$defs": rule_file_schema()["$defs"]}
    return list(jsonschema.Draft202012Validator(schema).iter_errors(data))


def validate_fragment(data: Any, marks: Marks, definition: str, base: Path) -> None:
    """Validate one part (a cases file entry list) against `$defs/<definition>`."""
    raise_all(_located(_fragment_errors(data, definition), marks, base))


def case_errors(cases: Any, marks: Marks, base: Path) -> tuple[list[RuleFileError], frozenset[int]]:
    """The schema errors of a list of cases at `base` (every case's, in document order) and the indexes of the cases
    they are in, for the others to be compiled. Raises RuleFileError when `cases` is no list."""
    if not isinstance(cases, list):
        validate_fragment(cases, marks, "case_list", base)
    found = _fragment_errors(cases, "case_list")
    return _located(found, marks, base), frozenset(int(e.absolute_path[0]) for e in found if e.absolute_path)


def _located(errors: list[ValidationError], marks: Marks, base: Path) -> list[RuleFileError]:
    """The errors of `errors` (paths relative to `base`), each once, in file order."""
    ordered = sorted(errors, key=lambda e: (marks.at((*base, *e.absolute_path)), len(e.absolute_path)))
    out: list[RuleFileError] = []
    seen: set[str] = set()
    for error in ordered:
        chosen = best_match([error]) if error.context else error
        path, message, on_key = describe(chosen)
        located = marks.error((*base, *path), message, key=on_key)
        if str(located) not in seen:
            seen.add(str(located))
            out.append(located)
    return out
