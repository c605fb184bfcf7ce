"""Rule files that used to load into a traceback, a judge that raises, or an error without a place (found by
mutating the shipped rule files): each is now a RuleFileError at file:line:column saying what to fix, or loads into
rules the judge, explain and the alerts take without raising."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.rules import RuleFileError, load_rules

HEAD = "catalog:\n  tools:\n    - name: t\n"  # three lines
CALL = "expect:\n  - call: [{tool: t}]\n"  # a rule, for files whose point is elsewhere

# (name, file text, line, column, key, words in the message)
BAD = [
    (
        "an integer key in a tool schema",
        "catalog:\n  tools:\n    - name: t\n      schema: {type: object, properties: {1: {}, a: {}}}\n",
        4,
        43,
        "catalog.tools[0].schema.properties.1",
        ["key 1 is an integer", "quote it", "'1'"],
    ),
    (
        "a boolean key beside string keys",
        HEAD + "expect:\n  - call: [{tool: t}]\n    yes: 1\n",
        6,
        5,
        "expect[0].yes",
        ["key yes is a boolean", "quote it"],
    ),
    (
        "a null key",
        HEAD + CALL + "~: x\n",
        6,
        1,
        "~",
        ["key ~ is null", "quote it"],
    ),
    (
        "a date where a JSON value goes",
        HEAD + "expect:\n  - call: [{tool: t, args: {day: {exact: 2001-12-14}}}]\n",
        5,
        42,
        "expect[0].call[0].args.day.exact",
        ["2001-12-14 is a date", "quote it"],
    ),
    (
        "binary data in a tool schema",
        "catalog:\n  tools:\n    - name: t\n      schema: {const: !!binary aGVsbG8=}\n",
        4,
        23,
        "catalog.tools[0].schema.const",
        ["!!binary", "not a JSON value"],
    ),
    (
        "a YAML set",
        HEAD + "expect:\n  - call: [{tool: t, args: {x: {exact: !!set {a, b}}}}]\n",
        5,
        40,
        "expect[0].call[0].args.x.exact",
        ["!!set", "not a JSON value", "list"],
    ),
    (
        "a fuzzy threshold that is not a number",
        HEAD + "expect:\n  - call: [{tool: t, args: {x: {fuzzy: a, threshold: .nan}}}]\n",
        5,
        54,
        "expect[0].call[0].args.x.threshold",
        [".nan is not a finite number"],
    ),
    (
        "an infinite number",
        HEAD + "expect:\n  - call: [{tool: t, args: {x: {numeric: -.inf}}}]\n",
        5,
        42,
        "expect[0].call[0].args.x.numeric",
        ["-.inf is not a finite number"],
    ),
    (
        "a number too large for a float",
        HEAD + "expect:\n  - call: [{tool: t, args: {x: {numeric: 1.0e+400}}}]\n",
        5,
        42,
        "expect[0].call[0].args.x.numeric",
        ["1.0e+400 is not a finite number"],
    ),
    (
        "an integer of 5,000 digits",
        HEAD + "expect:\n  - call: [{tool: t, args: {x: {numeric: " + "1" * 5000 + "}}}]\n",
        5,
        42,
        "expect[0].call[0].args.x.numeric",
        ["integer of 5000 digits", "at most 4300"],
    ),
    (
        "an alert threshold that is not a number",
        HEAD + CALL + "alerts:\n  - {name: Low, figure: tool_call_accuracy, below: .nan}\n",
        7,
        52,
        "alerts[0].below",
        [".nan is not a finite number"],
    ),
    (
        "a control character",
        HEAD + CALL + 'description: "ok\x07"\n',
        6,
        17,
        "",
        ["control character", "#x0007"],
    ),
    (
        "a control character after multi-byte characters and a NEL line break",
        HEAD + CALL + 'description: "é\u0085é\x1b"\n',
        7,
        2,
        "",
        ["control character", "#x001b"],
    ),
]


@pytest.mark.parametrize(("what", "text", "line", "column", "key", "words"), BAD, ids=[b[0] for b in BAD])
def test_bad_rule_file(
    tmp_path: Path, what: str, text: str, line: int, column: int, key: str, words: list[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RuleFileError) as info:
        load_rules([path])
    err = info.value
    assert (err.file, err.line, err.column, err.key) == (str(path), line, column, key), str(err)
    assert "\n" not in str(err), str(err)  # one line per error
    for w in words:
        assert w in str(err), str(err)


def test_a_merge_key_merges_as_yaml_says(tmp_path: Path) -> None:
    """`<<: *anchor` merges the anchor's keys, those written beside it winning; it was refused with "could not
    determine a constructor for the tag 'tag:yaml.org,2002:merge'" (the duplicate-key check built the `<<` key)."""
    path = tmp_path / "merge.yaml"
    path.write_text(
        HEAD
        + "    - name: u\n"
        + "expect:\n  - call:\n      - &base {tool: t, exactly: 2}\n      - {<<: *base, tool: u}\n"
    )
    rs = load_rules([path])
    slots = rs.expectations[0].alternatives[0].slots
    assert [(s.tool, s.min, s.max) for s in slots] == [("t", 2, 2), ("u", 2, 2)]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("NaN", ["NaN is not a JSON value"]),
        ("-Infinity", ["-Infinity is not a JSON value"]),
        ("1e400", ["1e400 is too large", "infinity"]),
        ("1" * 5000, ["integer of 5000 digits", "at most 4300"]),
    ],
    ids=["NaN", "-Infinity", "1e400", "5000 digits"],
)
def test_a_cases_file_in_json_lines_holds_json_values_only(tmp_path: Path, value: str, words: list[str]) -> None:
    """Python's json reads NaN and Infinity, and 1e400 as infinity: they loaded (a numeric check that never holds),
    and an integer of 5,000 digits raised ValueError out of `rules check`. Each is an error at its line and column
    (not at the same text inside a string before it)."""
    (tmp_path / "rules.yaml").write_text(HEAD + "cases: cases.jsonl\n")
    line = '{"input": "NaN 1e400 -Infinity", "call": [{"tool": "t", "args": {"x": {"numeric": ' + value + "}}}]}"
    (tmp_path / "cases.jsonl").write_text('{"input": "a", "none": true}\n' + line + "\n")
    with pytest.raises(RuleFileError) as info:
        load_rules([tmp_path / "rules.yaml"])
    err = info.value
    assert (err.file, err.line, err.column) == (str(tmp_path / "cases.jsonl"), 2, line.rindex(value) + 1), str(err)
    for w in words:
        assert w in str(err), str(err)
