"""Reading the files of a load: bounded UTF-8 text, JSON lines, YAML; `Documents` reads and parses each file once."""

from __future__ import annotations

import json
import math
from pathlib import Path as FsPath
from typing import Any

from monitor.rules._errors import MAX_REPORTED, RuleFileError, raise_all
from monitor.rules._yaml import MAX_DEPTH, MAX_INT_DIGITS, Marks, load_yaml

MAX_FILE_BYTES = 32 << 20
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


def read_text(path: FsPath) -> str:
    """A rule, cases or dataset file as text: bounded (MAX_FILE_BYTES), UTF-8, any failure a located RuleFileError."""
    if "\0" in str(path):  # `cases: "c\\0.yaml"`: os.stat raised ValueError (embedded null byte)
        raise RuleFileError(str(path), 0, 0, "", "cannot read: the path holds a NUL character")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise RuleFileError(str(path), 0, 0, "", f"file too large ({size} bytes, limit {MAX_FILE_BYTES})")
        with path.open("rb") as f:  # at most the limit and a byte, whatever stat said (0 for /dev/zero, a pipe)
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise RuleFileError(str(path), 0, 0, "", f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise RuleFileError(str(path), 0, 0, "", f"file too large (more than {MAX_FILE_BYTES} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = data[: exc.start]
        line_start = head.rfind(b"\n") + 1
        column = len(head[line_start:].decode("utf-8")) + 1
        bad = data[exc.start : exc.end].hex(" ")
        message = f"not UTF-8: byte(s) 0x{bad} ({exc.reason}); save the file as UTF-8"
        raise RuleFileError(str(path), head.count(b"\n") + 1, column, "", message) from None


_TOO_DEEP = object()


class _NotJson(ValueError):
    """A number Python's json reads and JSON has not (NaN, Infinity, a float past the largest, a huge integer);
    `token` is its text, to find its column."""

    def __init__(self, token: str, message: str) -> None:
        super().__init__(message)
        self.token = token


def _constant(name: str) -> Any:
    raise _NotJson(name, f"{name} is not a JSON value (JSON has no NaN or infinity): give a finite number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotJson(text, f"{text} is too large for a number (it reads as infinity): give a finite number")
    return value


def _int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise _NotJson(text, f"an integer of {digits} digits: a cases file takes at most {MAX_INT_DIGITS}")
    return int(text)


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float, parse_int=_int)


def _column_of(line: str, token: str) -> int:
    """1-based column of the first `token` of `line` outside a JSON string (1 when not found)."""
    in_string = escaped = False
    for i, ch in enumerate(line):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif line.startswith(token, i):
            return i + 1
    return 1


def read_json_lines(text: str, file: str) -> tuple[list[Any], Marks]:
    """The values of a JSON-lines file (blank lines skipped), each placed at its line. A line nested deeper than
    MAX_DEPTH is a located error: about 1,000 levels raised RecursionError in the decoder (a traceback), and fewer
    would in the validation and compiling that recurse over the value. Every line that does not read is an error, in
    one RuleFileError (each line is a value of its own), up to MAX_REPORTED of them: the file is not read further."""
    marks = Marks(file)
    items: list[Any] = []
    errors: list[RuleFileError] = []  # every line that does not parse, each a case of its own, up to MAX_REPORTED
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(errors) >= MAX_REPORTED:
            break  # as many as an error shows: the rest of the file is not read
        marks.values[(len(items),)] = (n, 1)
        try:
            item = _DECODER.decode(line)
        except json.JSONDecodeError as exc:
            errors.append(RuleFileError(file, n, exc.colno, "", f"JSON: {exc.msg}"))
            continue
        except _NotJson as exc:
            errors.append(RuleFileError(file, n, _column_of(line, exc.token), "", f"JSON: {exc}"))
            continue
        except RecursionError:
            item = _TOO_DEEP
        if item is _TOO_DEEP or _depth_over(item, MAX_DEPTH - 1):  # the item sits one level down, in the list
            errors.append(RuleFileError(file, n, 1, "", f"JSON: nested deeper than {MAX_DEPTH} levels"))
            continue
        items.append(item)
    raise_all(errors)
    marks.values[()] = (1, 1)
    return items, marks


def _depth_over(value: Any, limit: int) -> bool:
    """Whether `value` nests more than `limit` lists or objects below itself (no recursion)."""
    level = [value]
    for _ in range(limit + 1):
        level = [c for v in level if isinstance(v, dict | list) for c in (v.values() if isinstance(v, dict) else v)]
        if not level:
            return False
    return True


class Documents:
    """The files of one load, each read and parsed once, however many parts of the load read it (a dataset: the
    dataset's own checks, the rule loader deciding how to load it, the compiler of its cases), as the same data and
    marks, or the same error. A file is known by its path as given: another spelling of it is read again (its errors
    then name it as spelled). The data is shared: what reads it does not change it."""

    __slots__ = ("_parsed",)

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, bool], tuple[Any, Marks] | RuleFileError] = {}

    def yaml(self, path: FsPath) -> tuple[Any, Marks]:
        """The file's YAML document (None for an empty one) and where its values sit."""
        return self._get(path, json_lines=False)

    def cases(self, path: FsPath) -> tuple[Any, Marks]:
        """A file of cases: JSON lines by its name (.jsonl, .ndjson: a list), else YAML."""
        return self._get(path, json_lines=path.suffix in JSON_LINES_SUFFIXES)

    def _get(self, path: FsPath, *, json_lines: bool) -> tuple[Any, Marks]:
        key = (str(path), json_lines)
        found = self._parsed.get(key)
        if found is None:
            try:
                text = read_text(path)
                found = read_json_lines(text, str(path)) if json_lines else load_yaml(text, str(path))
            except RuleFileError as exc:
                found = exc
            self._parsed[key] = found
        if isinstance(found, RuleFileError):
            raise found
        return found
