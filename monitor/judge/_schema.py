"""JSON Schema adherence of tool arguments.

`jsonschema` is the reference. A compiled `jsonschema_rs` validator answers the common (valid) case fast;
any instance it rejects, or cannot handle, goes to `jsonschema`, which also classifies the violations. The C plans
(monitor/judge/_cplan.c) answer before both for schemas of the usual shape of tool arguments (see `flat_form`).

The reference runs the schema's regexes (`pattern`, `patternProperties`, and through them `additionalProperties`)
in RE2, not in Python's backtracking `re`: linear time on any argument. Schemas are checked before they get here
(monitor.rules._tool_schema.schema_problem): every regex compiles in RE2, and no `unevaluatedProperties` sits beside
`patternProperties`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any, cast

import jsonschema
import jsonschema_rs
from jsonschema import ValidationError

from monitor.rules._model import Regex
from monitor.rules._regex import compile_regex
from monitor.verdict import SchemaViolation, ViolationKind

logger = logging.getLogger(__name__)

_KINDS: dict[str, ViolationKind] = {
    "type": ViolationKind.TYPE,
    "required": ViolationKind.REQUIRED,
    "additionalProperties": ViolationKind.ADDITIONAL,
    "unevaluatedProperties": ViolationKind.ADDITIONAL,
    "enum": ViolationKind.ENUM,
    "const": ViolationKind.ENUM,
}
MAX_VIOLATIONS = 8
# Arguments the reference validator cannot walk (it recurses per level; a recursive schema admits any depth) and the
# fast validator did not accept: they fail the schema, with this violation, rather than raise out of the judge.
TOO_DEEP = SchemaViolation(ViolationKind.OTHER, "", "the arguments are nested too deeply to check against the schema")
# Arguments holding a number past the largest float (JSON allows 1e400; Python reads it as infinity) that a keyword
# cannot check: jsonschema's multipleOf raised OverflowError out of the judge. They fail the schema with this.
TOO_LARGE = SchemaViolation(
    ViolationKind.OTHER, "", "a number in the arguments is too large to check against the schema"
)


def _too_deep(exc: BaseException) -> bool:
    """Whether exc is the reference validator running out of stack: a RecursionError, or what code it calls made of
    one (rpds, the Rust map jsonschema keeps its type checkers in, panics when its __eq__ raises it: pyo3's
    PanicException, a BaseException, naming the RecursionError)."""
    if isinstance(exc, RecursionError):
        return True
    return type(exc).__name__ == "PanicException" and "RecursionError" in str(exc)


@lru_cache(maxsize=4096)
def _regex(pattern: str) -> Regex:
    return compile_regex(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _regex(pattern).test(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = _regex(pattern)
        for k, v in instance.items():
            if regex.test(k):
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    regexes = [_regex(p) for p in schema.get("patternProperties", {})]
    extras = sorted(k for k in instance if k not in properties and not any(r.test(k) for r in regexes))
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        joined = ", ".join(repr(each) for each in extras)
        if regexes:
            verb = "does" if len(extras) == 1 else "do"
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({joined} {verb} unexpected)")


# Draft 2020-12 with the keywords that run regexes in RE2.
_Reference = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator,
    {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties},
)


# What flat_form accepts: keywords that only annotate, and the checks of a property by its type.
_NOTES = frozenset({"description", "title", "default", "examples"})
_FLAT_TOP = _NOTES | {"type", "properties", "required", "additionalProperties"}
_FLAT_KINDS = {"string": 0, "integer": 1, "number": 2, "boolean": 3}
_FLAT_KEYS = {
    "string": _NOTES | {"type", "minLength", "maxLength", "enum"},
    "integer": _NOTES | {"type", "minimum", "maximum"},
    "number": _NOTES | {"type", "minimum", "maximum"},
    "boolean": _NOTES | {"type"},
}
_FlatProperty = tuple[int, int, int, Any, Any, frozenset[str] | None]
FlatForm = tuple[bool, tuple[str, ...], dict[str, _FlatProperty]]


def _flat_property(schema: Any) -> _FlatProperty | None:
    """(kind, minLength or -1, maxLength or -1, minimum, maximum, enum) of a property's schema, or None."""
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type", "string" if "enum" in schema else None)  # an enum of strings alone: a string in it
    if not isinstance(kind, str) or kind not in _FLAT_KINDS or not set(schema) <= _FLAT_KEYS[kind]:
        return None
    if any(
        k in schema and not (type(schema[k]) is int and 0 <= schema[k] <= sys.maxsize)
        for k in ("minLength", "maxLength")
    ):
        return None
    if any(k in schema and type(schema[k]) not in (int, float) for k in ("minimum", "maximum")):
        return None
    enum = schema.get("enum")
    if "enum" in schema and not (isinstance(enum, list) and all(type(e) is str for e in enum)):
        return None
    low, high = schema.get("minimum"), schema.get("maximum")
    lengths = schema.get("minLength", -1), schema.get("maxLength", -1)
    return _FLAT_KINDS[kind], *lengths, low, high, None if enum is None else frozenset(enum)


def flat_form(schema: Mapping[str, Any]) -> FlatForm | None:
    """The usual schema of tool arguments in a form the C plans check without converting the arguments: an object
    whose properties are strings (minLength, maxLength, enum; or an enum of strings alone), integers or numbers
    (minimum, maximum) or booleans, with `required` and `additionalProperties` true or false: (closed, required,
    properties). None for any other schema (a keyword more, a type list, a `$ref`, ...).

    An instance that passes these checks is valid for the reference (each check is the reference's own: the type
    of exactly str / int / int or float / bool, len(), <, >, ==), so the C plans take that answer; any other
    instance goes to the fast validator and the reference as before."""
    if schema.get("type") != "object" or not set(schema) <= _FLAT_TOP:
        return None
    properties, required = schema.get("properties", {}), schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or type(additional) is not bool:
        return None
    if not isinstance(required, list) or not all(type(r) is str for r in required):
        return None
    flat = {name: _flat_property(sub) for name, sub in properties.items()}
    if not all(type(name) is str for name in flat) or None in flat.values():
        return None
    return not additional, tuple(required), cast(dict[str, _FlatProperty], flat)


def classify(error: jsonschema.ValidationError) -> ViolationKind:
    return _KINDS.get(str(error.validator), ViolationKind.OTHER)


class SchemaValidator:
    """One tool's compiled validators."""

    __slots__ = ("fast", "reference", "flat")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.reference = _Reference(schema)
        self.flat = flat_form(schema)
        try:
            self.fast: Any = jsonschema_rs.Draft202012Validator(dict(schema))
        except Exception:  # noqa: BLE001 - schema the fast validator does not support: reference only
            logger.info("fast validator unavailable for schema; using jsonschema")
            self.fast = None

    def _fast_accepts(self, instance: Any) -> bool:
        if self.fast is not None:
            try:
                return bool(self.fast.is_valid(instance))
            except Exception:  # noqa: BLE001 - e.g. values jsonschema_rs cannot convert
                pass
        return False

    def is_valid(self, instance: Any) -> bool:
        """Reference-equivalent answer: fast path when it accepts, reference otherwise."""
        if self._fast_accepts(instance):
            return True
        try:
            return bool(self.reference.is_valid(instance))
        except OverflowError:  # as in violations: TOO_LARGE
            return False
        except BaseException as exc:  # as in violations: TOO_DEEP
            if not _too_deep(exc):
                raise
            return False

    def violations(self, instance: Any, *, fast_asked: bool = False) -> tuple[SchemaViolation, ...]:
        """Empty when valid (as is_valid answers); otherwise the classified violations (at most MAX_VIOLATIONS).
        Each validator runs once: the reference's errors are its answer (it is valid iff it finds none); with
        `fast_asked` the caller already asked the fast validator (it did not accept), so only the reference runs."""
        if not fast_asked and self._fast_accepts(instance):
            return ()
        out = []
        try:
            for err in self.reference.iter_errors(instance):
                path = "/".join(str(p) for p in err.absolute_path)
                out.append(SchemaViolation(classify(err), path, err.message[:300]))
                if len(out) >= MAX_VIOLATIONS:
                    break
        except OverflowError:  # multipleOf of an infinite number
            return (*out, TOO_LARGE)[:MAX_VIOLATIONS]
        except BaseException as exc:  # the reference recurses per level: arguments ~250 deep, a recursive schema
            if not _too_deep(exc):
                raise
            return (TOO_DEEP,)
        return tuple(out)
