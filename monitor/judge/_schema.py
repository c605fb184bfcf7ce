"""JSON Schema adherence of tool arguments.

`jsonschema` is the reference. A compiled `jsonschema_rs` validator answers the common (valid) case fast;
any instance it rejects, or cannot handle, goes to `jsonschema`, which also classifies the violations.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import jsonschema
import jsonschema_rs

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


def classify(error: jsonschema.ValidationError) -> ViolationKind:
    return _KINDS.get(str(error.validator), ViolationKind.OTHER)


class SchemaValidator:
    """One tool's compiled validators."""

    __slots__ = ("fast", "reference")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.reference = jsonschema.Draft202012Validator(schema)
        try:
            self.fast: Any = jsonschema_rs.Draft202012Validator(dict(schema))
        except Exception:  # noqa: BLE001 - schema the fast validator does not support: reference only
            logger.info("fast validator unavailable for schema; using jsonschema")
            self.fast = None

    def is_valid(self, instance: Any) -> bool:
        """Reference-equivalent answer: fast path when it accepts, reference otherwise."""
        if self.fast is not None:
            try:
                if self.fast.is_valid(instance):
                    return True
            except Exception:  # noqa: BLE001 - e.g. values jsonschema_rs cannot convert
                pass
        return bool(self.reference.is_valid(instance))

    def violations(self, instance: Any) -> tuple[SchemaViolation, ...]:
        """Empty when valid; otherwise the classified violations (at most MAX_VIOLATIONS)."""
        if self.is_valid(instance):
            return ()
        out = []
        for err in self.reference.iter_errors(instance):
            path = "/".join(str(p) for p in err.absolute_path)
            out.append(SchemaViolation(classify(err), path, err.message[:300]))
            if len(out) >= MAX_VIOLATIONS:
                break
        return tuple(out) or (SchemaViolation(ViolationKind.OTHER, "", "invalid"),)
