"""Per-call preparation: parse the argument JSON once, check it against the tool's schema."""

from __future__ import annotations

import json
from typing import Any

from monitor._json import refuse_if_costly
from monitor.judge._schema import SchemaValidator
from monitor.verdict import SchemaViolation, ViolationKind

NOT_CAPTURED: Any = object()  # content capture was off: unjudged for arguments and schema
MALFORMED_ACTUAL = "<malformed arguments>"  # the actual value an argument check shows for arguments not JSON


def _not_json(name: str) -> Any:
    """The decoder's parse_constant: NaN, Infinity and -Infinity are no JSON values (RFC 8259), though Python's json
    reads them. It runs only to refuse, so a scan that succeeds still runs no Python code (the C plans rely on it)."""
    raise ValueError(f"{name} is not a JSON value")


DECODER = json.JSONDecoder(parse_constant=_not_json)  # strict JSON: the judge's one parser of call arguments


def loads(text: str) -> Any:
    """json.loads (refusing a leading BOM as it does), without NaN, Infinity and -Infinity; a long text whose parse
    would build more than monitor._json's budget is refused as invalid JSON is (the arguments are then malformed)."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    refuse_if_costly(text)
    return DECODER.decode(text)


class Malformed:
    """Arguments that are not valid JSON."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def parse_arguments(text: str | None) -> Any:
    if text is None:
        return NOT_CAPTURED
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        return Malformed(f"arguments are not valid JSON: {exc.msg} at {exc.pos}")
    except ValueError as exc:  # NaN, Infinity or -Infinity (_not_json)
        return Malformed(f"arguments are not valid JSON: {exc}")
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
