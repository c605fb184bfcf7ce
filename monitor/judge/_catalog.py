"""The tools a turn may call, and their compiled argument validators.

Declared tools come from the rule files. With `from_definitions: true` the tools offered to the model in the turn
(`Turn.tool_definitions`: the turn span's `gen_ai.tool.definitions` and those of its model request spans, joined by
turn assembly) join the catalog for that turn (but for `(none)` and `(unknown)`, the confusion matrix's
own labels), their `parameters` (in the provider's format: see `_schema_of`) serving as schema when the rule files
declare none. Validators for offered schemas are cached (bounded).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import jsonschema

from monitor.judge._schema import SchemaValidator
from monitor.records import Turn, definition_name
from monitor.rules import RuleSet
from monitor.rules._tool_schema import check_schema, schema_problem
from monitor.verdict import NONE_LABEL, UNKNOWN_LABEL

# An agent offers the same tools on every turn: their validators are kept for all of them, or each turn builds every
# one again (a 256-entry LRU cache, used in order by an agent offering 257 tools, missed every time: 324 ms a turn).
MAX_CACHED_DEFINITION_SCHEMAS = 4096
MAX_CACHED_DEFINITION_BYTES = 16 << 20  # of the schemas' JSON; a schema past it alone is used, not kept


# The confusion matrix's cells for "no call" and "a made-up name": an offered tool of either name (rule files cannot
# declare one) joins no catalog, or its calls would be counted in those cells; a call of it is a made-up name.
_RESERVED = frozenset({NONE_LABEL, UNKNOWN_LABEL})


class TurnTools:
    """The catalog of one turn."""

    __slots__ = ("names", "validators")

    def __init__(
        self, names: frozenset[str], validators: Mapping[str, SchemaValidator], extra: Mapping[str, SchemaValidator]
    ) -> None:
        self.names = names
        # Declared schemas win over offered ones.
        self.validators: Mapping[str, SchemaValidator] = {**extra, **validators} if extra else validators


class Catalog:
    def __init__(self, ruleset: RuleSet) -> None:
        self.from_definitions = ruleset.from_definitions
        self.validators: dict[str, SchemaValidator] = {}
        for tool in ruleset.tools:
            schema = tool.schema
            if schema is not None:
                self.validators[tool.name] = SchemaValidator(schema)
        self._cache: OrderedDict[str, SchemaValidator | None] = OrderedDict()  # schema JSON -> its validator
        self._cache_bytes = 0  # the length of the cache's keys
        self._lock = threading.Lock()
        self._plain: dict[frozenset[str], TurnTools] = {}

    def for_turn(self, turn: Turn, scope_tools: frozenset[str]) -> TurnTools:
        if self.from_definitions and turn.tool_definitions:
            return self._with_definitions(turn, scope_tools)
        got = self._plain.get(scope_tools)
        if got is None:
            got = TurnTools(scope_tools, self.validators, {})
            self._plain[scope_tools] = got
        return got

    def _with_definitions(self, turn: Turn, scope_tools: frozenset[str]) -> TurnTools:
        names = set(scope_tools)
        extra: dict[str, SchemaValidator] = {}
        offered: set[str] = set()
        for d in turn.tool_definitions or ():
            name = definition_name(d)
            if name is None or name in _RESERVED or name in offered:
                continue  # of two definitions of a name the first wins (with or without its schema)
            offered.add(name)
            fn = d.get("function")
            names.add(name)
            if name not in self.validators:
                v = self._definition_validator(fn.get("parameters") if isinstance(fn, Mapping) else _schema_of(d))
                if v is not None:
                    extra[name] = v
        return TurnTools(frozenset(names), self.validators, extra)

    def _definition_validator(self, params: Any) -> SchemaValidator | None:
        if not isinstance(params, Mapping):
            return None
        try:
            key = json.dumps(params, sort_keys=True)
        except (TypeError, ValueError, RecursionError):  # RecursionError: nested ~800 levels deep
            return None
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        validator: SchemaValidator | None
        try:
            check_schema(params)
            validator = None if schema_problem(params) is not None else SchemaValidator(params)
        except (jsonschema.SchemaError, RecursionError):  # RecursionError: the checks recurse, ~100 levels
            validator = None
        if len(key) > MAX_CACHED_DEFINITION_BYTES:
            return validator
        with self._lock:
            if key not in self._cache:
                self._cache[key] = validator
                self._cache_bytes += len(key)
            while len(self._cache) > MAX_CACHED_DEFINITION_SCHEMAS or self._cache_bytes > MAX_CACHED_DEFINITION_BYTES:
                self._cache_bytes -= len(self._cache.popitem(last=False)[0])
        return validator


_SCHEMA_KEYS = ("parameters", "input_schema", "inputSchema")  # GenAI / OpenAI, Anthropic, MCP / Bedrock


def _schema_of(definition: Mapping[str, Any]) -> Any:
    """The arguments' schema of an offered tool, in the provider's own format (`gen_ai.tool.definitions` holds it as
    the model was given it): `parameters`, Anthropic's `input_schema`, MCP's `inputSchema`, Bedrock's (and Strands')
    `inputSchema: {json: ...}`."""
    for key in _SCHEMA_KEYS:
        schema = definition.get(key)
        if schema is not None:
            if key == "inputSchema" and isinstance(schema, Mapping) and len(schema) == 1:
                inner = schema.get("json")
                if isinstance(inner, Mapping):
                    return inner
            return schema
    return None
