"""The tools offered to the model on a model request span: one OfferedTools record per span that offers some.

- GenAI: `gen_ai.tool.definitions` of a model request span (`gen_ai.operation.name` chat / text_completion /
  generate_content; the conventions put it there, and many instrumentations only there), read as on a turn span
  (JSON text or the structured value; parsed once per text, then shared: _genai._tool_definitions).
- OpenInference LLM span: `llm.tools.{i}.tool.json_schema`, the JSON text of each tool (OpenAI's
  `{"type": "function", "function": {"name", "parameters"}}`, or a provider's own shape), kept as it is; Bedrock's
  Converse tool (openinference-instrumentation-bedrock), `{"toolSpec": {"name", "description", "inputSchema":
  {"json": ...}}}`, is its `toolSpec` (a shape the catalog reads); its other members (`cachePoint`) name no tool.
- OpenLLMetry chat span: `llm.request.functions.{i}.name` / `.description` / `.parameters` (JSON text), made a GenAI
  definition `{"type": "function", "name", "description", "parameters"}`.

The record sits under its span (span id: the span's id and `#tools`; parent: the span), holds the definitions and
none of the span's attributes (its messages are not kept while its turn is pending); turn assembly adds them to the
turn's `tool_definitions` at release (monitor.assembly._offered). A span offering nothing that names a tool gives
no record. The flattened forms are read in index order; a tool that cannot be read (a value that is not JSON text
of an object, a name that is no str, parameters that are not JSON text of an object) is ignored and counted under one
key per producer (`llm.tools`, `llm.request.functions`; an OpenLLMetry tool whose parameters cannot be read is still
offered, by name); an object that names no tool is left out, as in the GenAI attribute. An agent offers the same
tools on every span: the flattened values read are kept by value (bounded), so the spans share one parsed value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from monitor._json import loads_bounded
from monitor.normalize import (
    _genai,  # its attributes are read when called: _genai imports this module
)
from monitor.normalize._markers import OI_TOOLS, TL_FUNCTIONS
from monitor.normalize._requested import MODEL_REQUESTS, derived, flat_index
from monitor.otlp import Span
from monitor.records import OfferedTools, ToolCall, Turn, definition_name

Out = list[ToolCall | Turn | Span]
Definitions = tuple[Mapping[str, Any], ...]

_OI_PREFIX = OI_TOOLS + "."
_OI_SUFFIX = ".tool.json_schema"
_TL_PREFIX = TL_FUNCTIONS + "."
_TL_FIELDS = frozenset({"name", "description", "parameters"})
# The flattened tools read, by their raw values: (definitions, problems counted). Bounded in entries and text.
_CACHE: dict[tuple[Any, ...], tuple[Definitions, int]] = {}
_CACHE_MAX = 256
_CACHE_TEXT_MAX = 64 * 1024  # longer values are read every time, not kept


def add_offered(span: Span, op: str, out: Out) -> None:
    """The tools a GenAI model request span offers (nothing for any other operation)."""
    if op not in MODEL_REQUESTS:
        return
    raw = span.attributes.get(_genai.TOOL_DEFINITIONS)
    defs = _genai._tool_definitions(raw) if raw is not None else None  # parsed once per text, then shared
    if defs:
        out.append(new_offered(span, defs))


def add_openinference_tools(span: Span, out: Out, problems: list[str]) -> None:
    """The tools an OpenInference LLM span offers (`llm.tools.{i}.tool.json_schema`)."""
    items: list[tuple[int, Any]] = []
    for key, value in span.attributes.items():
        if key.startswith(_OI_PREFIX) and key.endswith(_OI_SUFFIX):
            i = flat_index(key[len(_OI_PREFIX) : -len(_OI_SUFFIX)])
            if i is None:
                problems.append(OI_TOOLS)
            else:
                items.append((i, value))
    if items:
        items.sort(key=lambda x: x[0])
        _add(span, tuple(v for _, v in items), _oi_tools, OI_TOOLS, out, problems)


def add_traceloop_tools(span: Span, out: Out, problems: list[str]) -> None:
    """The tools an OpenLLMetry chat span offers (`llm.request.functions.{i}.{name,description,parameters}`)."""
    slots: dict[int, dict[str, Any]] = {}
    n = len(_TL_PREFIX)
    for key, value in span.attributes.items():
        if not key.startswith(_TL_PREFIX):
            continue
        i_text, _, field = key[n:].partition(".")
        if field not in _TL_FIELDS:
            continue
        i = flat_index(i_text)
        if i is None:
            problems.append(TL_FUNCTIONS)
        else:
            slots.setdefault(i, {})[field] = value
    if slots:
        raw = tuple((s.get("name"), s.get("description"), s.get("parameters")) for _, s in sorted(slots.items()))
        _add(span, raw, _tl_functions, TL_FUNCTIONS, out, problems)


def new_offered(span: Span, definitions: Definitions) -> OfferedTools:
    """The record of the tools a model request span offers: under the span (its id and `#tools`), over its time, with
    no attributes."""
    r = derived(OfferedTools, span, "tools", "", span.start_ns)
    r.definitions = definitions
    return r



def _add(
    span: Span,
    raw: tuple[Any, ...],
    read: Callable[[tuple[Any, ...]], tuple[Definitions, int]],
    key: str,
    out: Out,
    problems: list[str],
) -> None:
    """The flattened tools `raw` (the values, in index order) read by `read` (once per value: see _CACHE)."""
    try:
        got = _CACHE.get(raw)
        keep = True
    except TypeError:  # a value that cannot be hashed (not one a decoder gives): read, not kept
        got, keep = None, False
    if got is None:
        got = read(raw)
        if keep and sum(len(v) if isinstance(v, str) else 8 for v in _flat(raw)) <= _CACHE_TEXT_MAX:
            if len(_CACHE) >= _CACHE_MAX:
                _CACHE.pop(next(iter(_CACHE)))
            _CACHE[raw] = got
    defs, bad = got
    problems.extend([key] * bad)
    if defs:
        out.append(new_offered(span, defs))


def _flat(raw: tuple[Any, ...]) -> list[Any]:
    return [x for v in raw for x in (v if isinstance(v, tuple) else (v,))]


def _object(text: Any) -> dict[str, Any] | None:
    """JSON text of an object, parsed; None for anything else."""
    if not isinstance(text, str):
        return None
    try:
        value = loads_bounded(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _oi_tools(raw: tuple[Any, ...]) -> tuple[Definitions, int]:
    defs: list[dict[str, Any]] = []
    bad = 0
    for text in raw:
        tool = _object(text)
        if tool is None:
            bad += 1
            continue
        spec = tool.get("toolSpec")
        if isinstance(spec, dict) and len(tool) == 1:
            tool = spec  # Bedrock's Converse tool: the union's one member
        if definition_name(tool) is not None:
            defs.append(tool)
    return tuple(defs), bad


def _tl_functions(raw: tuple[Any, ...]) -> tuple[Definitions, int]:
    defs: list[dict[str, Any]] = []
    bad = 0
    for name, description, parameters in raw:
        if name is None:
            continue  # names no tool
        if not isinstance(name, str) or not name:
            bad += 1
            continue
        tool: dict[str, Any] = {"type": "function", "name": name}
        if isinstance(description, str):
            tool["description"] = description
        elif description is not None:
            bad += 1
        if parameters is not None:
            schema = _object(parameters)
            if schema is None:
                bad += 1
            else:
                tool["parameters"] = schema
        defs.append(tool)
    return tuple(defs), bad
