"""YAML loading that rejects duplicate keys and remembers where every key and value sits.

Only the safe constructors are used: plain data, never Python objects.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import yaml

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


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, Hashable) and key in seen:
                first = seen[key].start_mark
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first defined at line {first.line + 1}, column {first.column + 1})",
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _walk(node: yaml.Node, path: Path, marks: Marks) -> None:
    marks.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if len(path) > MAX_DEPTH:
        line, column = marks.values[path]
        raise RuleFileError(marks.file, line, column, "", f"YAML: nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                child = (*path, key_node.value)
                marks.keys[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                _walk(value_node, child, marks)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), marks)


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


def load_yaml(text: str, file: str) -> tuple[Any, Marks]:
    """Parse one YAML document; raise RuleFileError with the position of any syntax error or duplicate key."""
    _check_depth(text, file)
    marks = Marks(file)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, marks
        _walk(node, (), marks)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        problem = exc.problem or "invalid YAML"
        key = _key_at(marks, line, column) if "duplicate key" in problem else ""
        raise RuleFileError(file, line, column, key, f"YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise RuleFileError(file, 0, 0, "", f"YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, marks


def _key_at(marks: Marks, line: int, column: int) -> str:
    for path, pos in marks.keys.items():
        if pos == (line, column):
            return format_path(path)
    return ""
