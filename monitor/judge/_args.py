"""Argument checks (METRICS.md "Argument correctness"): exact, normalized, one_of, fuzzy, numeric, regex,
from_input. Values are JSON values; a missing argument is `MISSING`."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from rapidfuzz import fuzz

from monitor.judge._parse import MALFORMED_ACTUAL, Malformed
from monitor.rules import ArgCheck
from monitor.rules._describe import pattern_text
from monitor.rules._model import thaw
from monitor.verdict import ArgCheckResult

MISSING: Any = object()
_RESULT = ArgCheckResult
_PUNCT = str.maketrans({c: None for c in " ,./-_*^"} | {"'": '"'})


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _text(value: Any) -> str:
    if value is MISSING:
        return "<missing>"
    if isinstance(value, str):
        return value
    return _json(value)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: a bool is never a number; an int equals the float of the same value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def normalize(value: Any) -> str:
    """Case, surrounding space and the punctuation ` ,./-_*^` ignored; `'` equals `"`."""
    return _text(value).strip().lower().translate(_PUNCT)


def normalized_equal(expected: Any, actual: Any) -> bool:
    if isinstance(expected, list | tuple) or isinstance(actual, list | tuple):
        seqs = isinstance(expected, list | tuple) and isinstance(actual, list | tuple)
        if not seqs or len(expected) != len(actual):
            return False
        return all(normalized_equal(e, a) for e, a in zip(expected, actual, strict=True))
    return normalize(expected) == normalize(actual)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            f = float(value.strip())
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def input_equal(captured: str, actual: Any) -> bool:
    """from_input: a string argument equals the captured text; a number argument equals the number it spells
    (`123` for a captured "123"; compared exactly, so a large id is not rounded through a float)."""
    if isinstance(actual, str):
        return actual == captured
    if isinstance(actual, bool) or not isinstance(actual, int | float):
        return False
    text = captured.strip()
    if not text or "_" in text:  # int() and float() take "1_000"; a JSON number has no "_"
        return False
    for parse in (int, float):
        try:
            return bool(actual == parse(text))
        except ValueError:
            continue
    return False


def capture(check: ArgCheck, input_text: str) -> str | None:
    """The value a from_input check captures from the turn input (None when the regex does not match)."""
    assert check.regex is not None
    try:
        m = check.regex.search(input_text)
    except UnicodeEncodeError:  # a lone surrogate: search the surrogate-passing bytes the regex checks read
        m = check.regex.search(_utf8(input_text))
    if m is None:
        return None
    value = m.group(check.group)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:  # part of a character: no argument (a str) can equal it
            return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def passes(check: ArgCheck, actual: Any, input_text: str) -> bool:
    mode = check.mode
    if mode == "one_of":
        if actual is MISSING:
            return any(x == "" for x in check.expected)
        return any(json_equal(x, actual) for x in check.expected)
    if actual is MISSING:
        return False
    if mode == "exact":
        return json_equal(check.expected, actual)
    if mode == "normalized":
        return normalized_equal(check.expected, actual)
    if mode == "regex":
        assert check.regex is not None
        return check.regex.test(_text(actual))
    if mode == "fuzzy":
        return bool(fuzz.ratio(str(check.expected), _text(actual)) >= check.threshold)
    if mode == "numeric":
        a, e = _number(actual), _number(check.expected)
        return a is not None and e is not None and abs(a - e) <= check.tolerance
    if mode == "from_input":
        want = capture(check, input_text)
        return want is not None and input_equal(want, actual)
    raise ValueError(f"unknown check mode {mode!r}")


def get_argument(args: Any, name: str) -> Any:
    if isinstance(args, dict):
        return args.get(name, MISSING)
    return MISSING


NO_MATCH = "<no match of "  # a from_input check's expected text when its regex finds nothing in the input


def no_match_text(expected: str) -> bool:
    """Whether a from_input check's expected text says its regex found nothing in the input (no captured value)."""
    return expected.startswith(NO_MATCH) and expected.endswith("/ in input>")


def expected_text(check: ArgCheck, input_text: str) -> str:
    if check.mode == "regex":
        return str(check.expected)
    if check.mode == "from_input":
        got = capture(check, input_text)
        return got if got is not None else f"{NO_MATCH}{pattern_text(str(check.expected))} in input>"
    if check.mode == "fuzzy":
        return f"{_text(check.expected)} (ratio >= {check.threshold:g})"
    if check.mode == "numeric":
        return f"{_text(check.expected)} +/- {check.tolerance:g}"
    return _text(check.expected)


def _lookalike(check: ArgCheck, actual: Any) -> bool:
    """A failed exact or one_of check whose actual value reads as the expected one (or one of the answers): the string
    "5" against the number 5, "true" against true."""
    if check.mode == "exact":
        return _text(check.expected) == _text(actual)
    return check.mode == "one_of" and any(_text(x) == _text(actual) for x in check.expected)


def _json(value: Any) -> str:
    return json.dumps(thaw(value), sort_keys=True, ensure_ascii=False)


def _result(check: ArgCheck, actual: Any, input_text: str) -> ArgCheckResult:
    """One check's result, with texts that show why it failed: both values as JSON (quotes on strings) when their
    plain texts would read the same."""
    if passes(check, actual, input_text):
        return _RESULT(check.argument, check.mode, expected_text(check, input_text), _text(actual), True)
    if actual is not MISSING and _lookalike(check, actual):
        return _RESULT(check.argument, check.mode, _json(check.expected), _json(actual), False)
    return _RESULT(check.argument, check.mode, expected_text(check, input_text), _text(actual), False)


def run_checks(checks: tuple[ArgCheck, ...], args: Any, input_text: str) -> tuple[ArgCheckResult, ...]:
    """Every check of a slot applied to parsed arguments (a non-object fails every check)."""
    if len(checks) == 1:
        c = checks[0]
        actual = args.get(c.argument, MISSING) if isinstance(args, dict) else MISSING
        if c.mode == "regex" and type(actual) is str:  # the common case, without the dispatch frames
            assert c.regex is not None
            return (_RESULT(c.argument, "regex", c.expected, actual, bool(c.regex.matcher(_utf8(actual)))),)
        return (_result(c, actual, input_text),)
    return tuple(_result(c, get_argument(args, c.argument), input_text) for c in checks)


def malformed_results(checks: tuple[ArgCheck, ...], input_text: str) -> tuple[ArgCheckResult, ...]:
    """The checks of a slot applied to arguments that are not JSON: every one fails, showing MALFORMED_ACTUAL."""
    return tuple(_RESULT(r.argument, r.mode, r.expected, MALFORMED_ACTUAL, False)
                 for r in run_checks(checks, None, input_text))  # fmt: skip


def slot_checks(checks: tuple[ArgCheck, ...], parsed: Any, input_text: str) -> tuple[tuple[ArgCheckResult, ...], bool]:
    """The checks of the slot a call fills, run on its parsed arguments (Malformed ones fail every check), and whether
    they all passed."""
    if type(parsed) is Malformed:
        results = malformed_results(checks, input_text)
    else:
        results = run_checks(checks, parsed, input_text)
    return results, (results[0].ok if len(results) == 1 else all(r.ok for r in results))


def score(checks: tuple[ArgCheck, ...], args: Any, input_text: str) -> int:
    """Number of checks that pass (the matching score numerator)."""
    return sum(1 for c in checks if passes(c, get_argument(args, c.argument), input_text))
