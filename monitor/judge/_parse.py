"""Per-call preparation: parse the argument JSON once, check it against the tool's schema."""

from __future__ import annotations

import json
from typing import Any

from monitor.judge._schema import SchemaValidator
from monitor.verdict import SchemaViolation, ViolationKind

NOT_CAPTURED: Any = object()  # content capture was off: unjudged for arguments and schema
MALFORMED_ACTUAL = "<malformed arguments>"  # the actual value an argument check shows for arguments not JSON


class Malformed:
    """Arguments that are not valid JSON."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def parse_arguments(text: str | None) -> Any:
    if text is None:
        return NOT_CAPTURED
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        return Malformed(f"arguments are not valid JSON: {exc.msg} at {exc.pos}")
    except RecursionError:
        return Malformed("arguments are not valid JSON: nested too deeply")


def arguments_of(parsed: Any) -> Any:
    """The parsed arguments, or None when not captured or malformed (every check then fails)."""
    return None if parsed is NOT_CAPTURED or isinstance(parsed, Malformed) else parsed


def schema_result(
    validator: SchemaValidator | None, parsed: Any, fast_asked: bool = False
) -> tuple[bool | None, tuple[SchemaViolation, ...]]:
    """(schema_valid, violations); (None, ()) when there is no schema or nothing was captured. `fast_asked`: the
    caller asked the validator's fast path inline and it did not accept (the judge's paths do, for the common case)."""
    if validator is None or parsed is NOT_CAPTURED:
        return None, ()
    if isinstance(parsed, Malformed):
        return False, (SchemaViolation(ViolationKind.MALFORMED, "", parsed.message),)
    violations = validator.violations(parsed, fast_asked=fast_asked)
    return (False, violations) if violations else (True, ())
