"""YAML loading that rejects duplicate keys and remembers where every key and value sits.

Only the safe constructors are used: plain data, never Python objects.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import yaml

from monitor._gc import in_batch_gc
from monitor.rules._errors import RuleFileError

Path = tuple[str | int, ...]

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_FLOW_DEPTH = 64
"""Deepest `[`/`{` nesting a rule file may have. libyaml parses nesting recursively in C: about 50,000 levels
(a 100 KB file) crash the process, and far fewer exhaust Python's recursion when the document is built.
Brackets inside quoted regexes count too; they are balanced in any pattern a rule needs."""

MAX_DEPTH = 100
"""Deepest nesting of the parsed document, block style included: building, validating and compiling it recurse
in Python, and about 250 nested `not` conditions exhausted the recursion limit (a RecursionError, not a
RuleFileError)."""

MAX_ALIAS_VALUES = 1_000_000
"""Most values that aliases (`*name`) may add to a document, each use counting every value of its anchor again
(keys count). Parsing shares an anchor's data, but the rule-file validation walks every copy: nine levels of anchors
each used ten times by the next ("billion laughs", under 1 KB) expand to 10**9 values and kept `rules check`
running past 1 GB. A million admits 10,000 tools sharing one 100-value schema (a tool's schema is checked once per
object) or 100,000 cases sharing a 10-value `call` list; it is checked in one pass over the parse events that stops
at the alias going past it (a bomb is refused in milliseconds). Values written out in the file are bounded by the
file-size limit instead. Validation costs about 150 us per value in cases, aliased or not: 7,000 cases sharing one
125-value `call` (870,000 added values) take 84 s, as would the same cases written out (4 MB)."""

MAX_ALIAS_TEXT = 32 << 20
"""Most characters of scalar text (keys and values) that aliases may add to a document, as much again as a file
may hold (MAX_FILE_BYTES). Few aliases of one long string stay under MAX_ALIAS_VALUES, but what serializes the
data writes every copy: a tool schema using a 1 MiB description 2,000 times (a 1 MB file) took 36 s and 4 GB to
load, its JSON holding each copy. Counted in the same pass as the values."""


def format_path(path: Path) -> str:
    """`("expect", 2, "call")` -> `expect[2].call`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(slots=True)
class Marks:
    """1-based (line, column) of each value and each mapping key, by key path."""

    file: str
    values: dict[Path, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def at(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """The closest known position of `path` (its key if asked and known, else its value, else a parent)."""
        if key and path in self.keys:
            return self.keys[path]
        p = path
        while p:
            if p in self.values:
                return self.values[p]
            p = p[:-1]
        return self.values.get((), (1, 1))

    def error(self, path: Path, message: str, *, key: bool = False) -> RuleFileError:
        line, column = self.at(path, key=key)
        return RuleFileError(self.file, line, column, format_path(path), message)


_KEY_KINDS = {"int": "an integer", "float": "a number", "bool": "a boolean", "null": "null", "timestamp": "a date"}
_NOT_JSON = {
    "binary": "!!binary data is not a JSON value: write the text as a string",
    "set": "a !!set is not a JSON value: write a list",
    "omap": "an !!omap is not a JSON value: write a mapping (or a list of mappings)",
    "pairs": "!!pairs are not a JSON value: write a mapping (or a list of mappings)",
}
MAX_INT_DIGITS = 4300
"""Most digits of an integer in a rule file (Python's limit on converting text to int: past it, int() raises)."""


def _short_yaml_tag(tag: str | None) -> str:
    return (tag or "").removeprefix("tag:yaml.org,2002:")


def _value_error(node: yaml.Node, message: str) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, message, node.start_mark)


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """The safe loader, for JSON data written in YAML: a rule file is validated as JSON (its tool schemas are JSON
    Schemas, its argument checks compare JSON values), so what YAML has and JSON lacks is refused at its place with
    how to write it: a key that is not a string, a date, binary data, a set, ordered pairs, .nan and .inf. They
    loaded before, into tracebacks (sorting keys of mixed types, serializing a tool schema holding a date) or into
    rules the judge raised on (an exact check on a date) or that never held (a fuzzy threshold of .nan)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`, merged by the safe constructor
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise _value_error(key_node, _key_problem(key_node, key))
            if key in seen:
                first = seen[key].start_mark
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first defined at line {first.line + 1}, column {first.column + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise _value_error(node, f"an integer of {digits} digits: a rule file takes at most {MAX_INT_DIGITS}")
        return super().construct_yaml_int(node)  # type: ignore[no-any-return]

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise _value_error(node, f"{node.value} is not a finite number: JSON has no NaN or infinity (give a "
                                     "number, or leave the key out)")
        return float(value)

    def construct_yaml_timestamp(self, node: yaml.ScalarNode, values: Any = None) -> Any:
        raise _value_error(node, f"{node.value} is a date (a YAML timestamp), not a JSON value: quote it "
                                 f"('{node.value}') to mean the text")

    def construct_not_json(self, node: yaml.Node) -> Any:
        raise _value_error(node, _NOT_JSON[_short_yaml_tag(node.tag)])


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_yaml_timestamp)
for _tag in _NOT_JSON:
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _Loader.construct_not_json)


def _key_problem(node: yaml.Node, key: Any) -> str:
    """Why a mapping key that is not a string is refused, and how to write it."""
    if isinstance(node, yaml.ScalarNode):
        kind = _KEY_KINDS.get(_short_yaml_tag(node.tag), f"a {type(key).__name__}")
        return f"the key {node.value} is {kind}, not a string (JSON keys are strings): quote it ('{node.value}')"
    return "a key must be a string (JSON keys are strings), not a list or a mapping"


def _walk(node: yaml.Node, path: Path, marks: Marks, walked: set[int]) -> None:
    """Record where each value and key sits. A node met again through an alias is not walked again (each copy
    would add its own paths: the walk and `marks` would grow with the expansion); a path inside such a copy is
    placed at the closest recorded parent, the alias's anchor."""
    marks.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if id(node) in walked:
        return
    walked.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                child = (*path, key_node.value)
                marks.keys[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                _walk(value_node, child, marks, walked)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), marks, walked)


class _Anchor(NamedTuple):
    """What an alias of an anchor adds: its node's values, its height and the characters of its scalars."""

    values: int
    height: int
    text: int


class _Open:
    """A collection whose end event is still to come."""

    __slots__ = ("anchor", "height", "items", "mapping", "start", "text_start")

    def __init__(self, anchor: str | None, start: int, text_start: int, mapping: bool) -> None:
        self.anchor, self.height, self.start, self.mapping, self.items = anchor, 0, start, mapping, 0
        self.text_start = text_start


def _check_events(text: str, file: str) -> None:
    """Bound the document before it is built: its nesting depth (MAX_DEPTH) and the values and text its aliases add
    (MAX_ALIAS_VALUES, MAX_ALIAS_TEXT). Runs over libyaml's parse events, which keep their own stack (no recursion:
    building the document recurses in C, and 60,000 compact block levels, `- - - ... x` in 120 KB, crashed the
    process), in one pass: an anchor's size and height are known when its node ends, and each alias adds them
    without walking the anchor again."""
    anchors: dict[str, _Anchor] = {}
    stack: list[_Open] = []
    values = added = chars = added_chars = 0  # chars: of scalar text, keys included
    for event in yaml.parse(text, Loader=_BaseLoader):
        if isinstance(event, yaml.CollectionEndEvent):
            done = stack.pop()
            if done.anchor is not None:
                anchors[done.anchor] = _Anchor(values - done.start, done.height, chars - done.text_start)
            if stack:
                stack[-1].height = max(stack[-1].height, done.height + 1)
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        count, height, size = 1, 0, 0
        if isinstance(event, yaml.AliasEvent):
            count, height, size = _anchored(event, stack, anchors, file)
            added += count
            added_chars += size
            _check_added(event, file, added, added_chars, count, size)
        elif isinstance(event, yaml.ScalarEvent):
            size = len(event.value)
        depth = len(stack)
        if stack:
            parent = stack[-1]
            depth -= parent.mapping and parent.items % 2 == 0  # a key: at the depth of its value, as in Marks
            parent.items += 1
        if depth + height > MAX_DEPTH:
            raise _error(file, event, f"YAML: nested deeper than {MAX_DEPTH} levels")
        values += count
        chars += size
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append(_Open(event.anchor, values - 1, chars, isinstance(event, yaml.MappingStartEvent)))
        else:
            if event.anchor is not None and not isinstance(event, yaml.AliasEvent):
                anchors[event.anchor] = _Anchor(1, 0, size)
            if stack:
                stack[-1].height = max(stack[-1].height, height + 1)


def _check_added(event: yaml.AliasEvent, file: str, added: int, added_chars: int, count: int, size: int) -> None:
    """Refuse the alias that takes the values or the text added by aliases past their bound."""
    if added > MAX_ALIAS_VALUES:
        raise _error(file, event, f"YAML: aliases add more than {MAX_ALIAS_VALUES:,} values to this document (each "
                                  f"*alias repeats every value of its anchor; this *{event.anchor} adds {count:,}); "
                                  "use fewer aliases of big anchors")
    if added_chars > MAX_ALIAS_TEXT:
        raise _error(file, event, f"YAML: aliases add more than {MAX_ALIAS_TEXT:,} characters of text to this "
                                  f"document (each *alias repeats all the text of its anchor; this *{event.anchor} "
                                  f"adds {size:,}); use fewer aliases of big anchors")


def _anchored(event: yaml.AliasEvent, stack: list[_Open], anchors: dict[str, _Anchor], file: str) -> _Anchor:
    """(values, height, text) of the node an alias repeats (an undefined one is left to the composer to report)."""
    if any(o.anchor == event.anchor for o in stack):
        raise _error(file, event, f"YAML: alias *{event.anchor} is inside its own anchor &{event.anchor} (the value "
                                  "would contain itself without end)")
    return anchors.get(event.anchor or "", _Anchor(1, 0, 0))


def _error(file: str, event: yaml.Event, message: str) -> RuleFileError:
    mark = event.start_mark
    return RuleFileError(file, mark.line + 1 if mark else 0, mark.column + 1 if mark else 0, "", message)


def _check_depth(text: str, file: str) -> None:
    depth = line = 0
    for line, row in enumerate(text.splitlines(), 1):
        for column, ch in enumerate(row, 1):
            if ch in "[{":
                depth += 1
                if depth > MAX_FLOW_DEPTH:
                    raise RuleFileError(file, line, column, "", f"YAML: nested deeper than {MAX_FLOW_DEPTH} levels")
            elif ch in "]}":
                depth = max(0, depth - 1)


@in_batch_gc
def load_yaml(text: str, file: str) -> tuple[Any, Marks]:
    """Parse one YAML document; raise RuleFileError with the position of any syntax error or duplicate key."""
    _check_depth(text, file)
    marks = Marks(file)
    loader = _Loader(text)
    try:
        _check_events(text, file)
        node = loader.get_single_node()
        if node is None:
            return None, marks
        _walk(node, (), marks, set())
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        problem = exc.problem or "invalid YAML"
        key = _key_at(marks, line, column) if isinstance(exc, yaml.constructor.ConstructorError) else ""
        raise RuleFileError(file, line, column, key, f"YAML: {problem}{_stray_bom(text, line)}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow: its place, not libyaml's byte offset
        line, column = _place_of_byte(text, exc.position)
        raise RuleFileError(file, line, column, "", f"YAML: {_unacceptable(exc)}") from None
    except yaml.YAMLError as exc:
        raise RuleFileError(file, 0, 0, "", f"YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, marks


def _key_at(marks: Marks, line: int, column: int) -> str:
    """The key path of what sits at (line, column): the key there, else the innermost value (a scalar)."""
    for path, pos in marks.keys.items():
        if pos == (line, column):
            return format_path(path)
    best: Path | None = None
    for path, pos in marks.values.items():
        if pos == (line, column) and (best is None or path[: len(best)] == best):
            best = path
    return format_path(best) if best is not None else ""


def _stray_bom(text: str, line: int) -> str:
    """What to add to a YAML error at `line` when a byte order mark stands on it past the start of the file (files
    joined with `cat`): YAML reads it as text, and the error points past a character no editor shows."""
    rows = text.splitlines()
    row = rows[line - 1] if 0 < line <= len(rows) else ""
    column = row.find("\ufeff") + 1
    if column <= 0 or (line == 1 and column == 1):
        return ""
    return f" (a byte order mark (U+FEFF) at line {line}, column {column}: remove it)"


def _unacceptable(exc: yaml.reader.ReaderError) -> str:
    """What is wrong with a character the YAML reader refused, and how to write it."""
    code = exc.character if isinstance(exc.character, int) else None
    if code is None:
        return f"a character is not allowed here ({exc.reason})"
    escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    return (f"character #x{code:04x} is not allowed here ({exc.reason}): remove it, or write it as the escape "
            f"{escape} in a double-quoted string")


def _place_of_byte(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of the character at a UTF-8 byte offset of `text` (libyaml's reader counts bytes),
    lines broken as YAML breaks them (\\n, \\r, \\r\\n, NEL, LS, PS; no other control character comes before it)."""
    head = text.encode("utf-8", "surrogatepass")[:offset].decode("utf-8", "replace")
    rows = (head + "x").splitlines()
    return len(rows), len(rows[-1])
