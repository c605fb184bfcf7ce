"""One bad rule file per kind of mistake: one clear error naming file, line, column and key."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monitor.rules import RuleFileError, load_rules

GOOD_HEAD = """catalog:
  tools:
    - name: search
      schema: {type: object, properties: {q: {type: string}}}
    - name: fetch
"""

# (name, file text, line, column, key, words in the message)
BAD = [
    (
        "unknown key",
        GOOD_HEAD + "expect:\n  - when: {prefix: x}\n    cal: [{tool: search}]\n",
        8,
        5,
        "expect[0].cal",
        ["unknown key 'cal'", "allowed:"],
    ),
    (
        "unknown top-level key",
        "catalogue: {}\n",
        1,
        1,
        "catalogue",
        ["unknown key 'catalogue'"],
    ),
    (
        "wrong type",
        GOOD_HEAD + "expect:\n  - when: {prefix: x}\n    call: [{tool: search, exactly: two}]\n",
        8,
        36,
        "expect[0].call[0].exactly",
        ["expected integer", '"two"'],
    ),
    (
        "bad regex",
        GOOD_HEAD + "expect:\n  - when: {regex: '(?<=a)b'}\n    none: true\n",
        7,
        19,
        "expect[0].when.regex",
        ["invalid regular expression", "RE2"],
    ),
    (
        "unknown tool in a slot",
        GOOD_HEAD + "expect:\n  - when: {prefix: x}\n    call:\n      - tool: serch\n",
        9,
        15,
        "expect[0].call[0].tool",
        ["unknown tool 'serch'", "search"],
    ),
    (
        "YAML syntax error",
        GOOD_HEAD + "expect:\n  - when: {prefix: x\n    none: true\n",
        8,
        9,
        "",
        ["YAML"],
    ),
    (
        "duplicate tool",
        GOOD_HEAD + "    - name: search\n",
        6,
        13,
        "catalog.tools[2].name",
        ["duplicate tool 'search'", "catalog.tools[0]"],
    ),
    (
        "duplicate key",
        GOOD_HEAD + "expect:\n  - when: {prefix: x}\n    none: true\n    when: {prefix: y}\n",
        9,
        5,
        "expect[0].when",
        ["duplicate key 'when'", "line 7"],
    ),
    (
        "invalid tool JSON Schema",
        "catalog:\n  tools:\n    - name: t\n      schema: {type: objekt}\n",
        4,
        22,
        "catalog.tools[0].schema.type",
        ["invalid JSON Schema"],
    ),
    (
        "remote $ref in a tool schema",
        "catalog:\n  tools:\n    - name: t\n      schema: {$ref: 'https://example.com/s.json'}\n",
        4,
        22,
        "catalog.tools[0].schema.$ref",
        ["only local references"],
    ),
    (
        "local $ref to nowhere in a tool schema",
        "catalog:\n  tools:\n    - name: t\n      schema:\n        type: object\n"
        "        properties: {a: {$ref: '#/$defs/gone'}}\n        $defs: {there: {type: string}}\n",
        6,
        32,
        "catalog.tools[0].schema.properties.a.$ref",
        ["'#/$defs/gone'", "does not resolve"],
    ),
    (
        "tool schema pattern RE2 cannot run",
        "catalog:\n  tools:\n    - name: t\n      schema:\n        properties:\n"
        "          s: {pattern: '^(?!x)'}\n",
        6,
        24,
        "catalog.tools[0].schema.properties.s.pattern",
        ["'^(?!x)'", "RE2"],
    ),
    (
        "tool schema patternProperties key RE2 cannot run",
        "catalog:\n  tools:\n    - name: t\n      schema:\n        patternProperties:\n"
        "          '(a)\\1': {}\n",
        6,
        11,
        "catalog.tools[0].schema.patternProperties.(a)\\1",
        ["'(a)\\\\1'", "RE2"],
    ),
    (
        "tool schema with unevaluatedProperties beside patternProperties",
        "catalog:\n  tools:\n    - name: t\n      schema:\n        patternProperties: {'^x': {}}\n"
        "        unevaluatedProperties: false\n",
        6,
        32,
        "catalog.tools[0].schema.unevaluatedProperties",
        ["patternProperties"],
    ),
    (
        "call and none together",
        GOOD_HEAD + "expect:\n  - when: {prefix: x}\n    call: [{tool: search}]\n    none: true\n",
        9,
        5,
        "expect[0].none",
        ["exactly one of call, none, any_of"],
    ),
    (
        "exactly with min",
        GOOD_HEAD + "expect:\n  - call: [{tool: search, exactly: 1, min: 1}]\n",
        7,
        27,
        "expect[0].call[0].exactly",
        ["either exactly or min/max"],
    ),
    (
        "min greater than max",
        GOOD_HEAD + "expect:\n  - call: [{tool: search, min: 3, max: 2}]\n",
        7,
        32,
        "expect[0].call[0].min",
        ["min 3 is greater than max 2"],
    ),
    (
        "two check modes",
        GOOD_HEAD + "expect:\n  - call: [{tool: search, args: {q: {exact: a, regex: b}}}]\n",
        7,
        37,
        "expect[0].call[0].args.q",
        ["exactly one of exact"],
    ),
    (
        "threshold without fuzzy",
        GOOD_HEAD + "expect:\n  - call: [{tool: search, args: {q: {exact: a, threshold: 3}}}]\n",
        7,
        37,
        "expect[0].call[0].args.q",
        ["fuzzy", "threshold"],
    ),
    (
        "from_input group out of range",
        GOOD_HEAD + "expect:\n  - call: [{tool: search, args: {q: {from_input: 'a(b)', group: 2}}}]\n",
        7,
        50,
        "expect[0].call[0].args.q.from_input",
        ["1 group(s), group 2"],
    ),
    (
        "duplicate rule id",
        GOOD_HEAD + "expect:\n  - {id: r, none: true}\n  - {id: r, none: true}\n",
        8,
        10,
        "expect[1].id",
        ["duplicate rule id 'r'"],
    ),
    (
        "alert with below and above",
        "alerts:\n  - {name: Low, figure: tool_call_accuracy, below: 0.9, above: 0.1}\n",
        2,
        5,
        "alerts[0]",
        ["exactly one of below, above, objective"],
    ),
    (
        "alert objective none of whose burn-rate alerts can fire",
        "alerts:\n  - {name: Low, figure: tool_call_accuracy, objective: 0.8}\n",
        2,
        56,
        "alerts[0].objective",
        ["none of its burn-rate alerts could ever fire", "above 2.88", "above 1.2", "at least 0.8334"],
    ),
    (
        "alert objective on a figure with no better direction",
        "alerts:\n  - {name: Low, figure: tool_usage_rate, objective: 0.95}\n",
        2,
        53,
        "alerts[0].objective",
        ["tool_usage_rate has no better direction", "use below or above"],
    ),
    (
        "alert tool on a figure without per-tool breakdown",
        GOOD_HEAD + "alerts:\n  - {name: Low, figure: selection_accuracy, tool: search, below: 0.9}\n",
        7,
        51,
        "alerts[0].tool",
        ["no per-tool breakdown"],
    ),
    (
        "alert figure unknown",
        "alerts:\n  - {name: Low, figure: accuracy, below: 0.9}\n",
        2,
        25,
        "alerts[0].figure",
        ["must be one of", "tool_call_accuracy"],
    ),
    (
        "alert name not CamelCase",
        "alerts:\n  - {name: low-acc, figure: tool_call_accuracy, below: 0.9}\n",
        2,
        12,
        "alerts[0].name",
        ["does not match"],
    ),
    (
        "alert window not a duration",
        "alerts:\n  - {name: Low, figure: tool_call_accuracy, below: 0.9, window: 5 minutes}\n",
        2,
        65,
        "alerts[0].window",
        ["does not match"],
    ),
    (
        "not a mapping",
        "- just\n- a list\n",
        1,
        1,
        "",
        ["expected object"],
    ),
    (
        "cases neither a list nor a path",
        "cases: 5\n",
        1,
        8,
        "cases",
        ["expected case list or string"],
    ),
    (
        "case without id or input",
        GOOD_HEAD + "cases:\n  - {none: true}\n",
        7,
        5,
        "cases[0]",
        ["needs an id or an input"],
    ),
    (
        "a tool named as the label of names outside the catalog",
        "catalog:\n  tools:\n    - name: __other__\n",
        3,
        13,
        "catalog.tools[0].name",
        ["'__other__' is reserved", "outside the catalog"],
    ),
    (
        "an agent named as the label of names outside the catalog",
        "agent: __other__\n" + GOOD_HEAD,
        1,
        8,
        "agent",
        ["'__other__' is reserved"],
    ),
]


@pytest.mark.parametrize(("what", "text", "line", "column", "key", "words"), BAD, ids=[b[0] for b in BAD])
def test_bad_rule_file(
    tmp_path: Path, what: str, text: str, line: int, column: int, key: str, words: list[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(RuleFileError) as info:
        load_rules([path])
    err = info.value
    assert (err.file, err.line, err.column, err.key) == (str(path), line, column, key), str(err)
    text_err = str(err)
    assert text_err.startswith(f"{path}:{line}:{column}: " + (f"{key}: " if key else ""))
    for w in words:
        assert w in text_err


@pytest.mark.parametrize("objective", [0.8, 0.8333, 0.83331, 0.83333])
def test_a_refused_objective_names_one_that_loads(tmp_path: Path, objective: float) -> None:
    """The advice is an objective that loads: 1 - 1/6 shown rounded down (0.8333) advised 0.83331, refused too."""
    path = tmp_path / "slo.yaml"
    path.write_text(f"alerts:\n  - {{name: Low, figure: tool_call_accuracy, objective: {objective}}}\n")
    with pytest.raises(RuleFileError) as info:
        load_rules([path])
    advised = re.search(r"objective of at least (0\.\d+)", str(info.value))
    assert advised is not None, str(info.value)
    path.write_text(f"alerts:\n  - {{name: Low, figure: tool_call_accuracy, objective: {advised[1]}}}\n")
    assert load_rules([path]).alerts[0].objective == float(advised[1])


def test_duplicate_tool_with_a_different_schema_across_files(tmp_path: Path) -> None:
    one = tmp_path / "one.yaml"
    two = tmp_path / "two.yaml"
    one.write_text("catalog: {tools: [{name: t, schema: {type: object}}]}\n")
    two.write_text("catalog:\n  tools:\n    - name: t\n      schema: {type: array}\n")
    with pytest.raises(RuleFileError) as info:
        load_rules([one, two])
    assert (info.value.file, info.value.line, info.value.column) == (str(two), 3, 13)
    assert "different schema" in str(info.value) and str(one) in str(info.value)
    same = tmp_path / "same.yaml"
    same.write_text("catalog: {tools: [{name: t, schema: {type: object}}]}\n")
    assert load_rules([one, same]).catalog == frozenset({"t"})


def test_bad_line_in_a_cases_file(tmp_path: Path) -> None:
    (tmp_path / "cases.jsonl").write_text(json.dumps({"id": "a", "none": True}) + "\n" + '{"id": "b", "cal": []}\n')
    path = tmp_path / "r.yaml"
    path.write_text("cases: cases.jsonl\n")
    with pytest.raises(RuleFileError) as info:
        load_rules([path])
    assert info.value.file == str(tmp_path / "cases.jsonl") and info.value.line == 2
    assert "unknown key 'cal'" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RuleFileError, match="cannot read"):
        load_rules([tmp_path / "nope.yaml"])


def test_missing_cases_file_is_located_at_the_cases_key_of_the_rule_file(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("catalog: {tools: [{name: t}]}\ncases: datasets/nope.jsonl\n")
    with pytest.raises(RuleFileError) as info:
        load_rules([path])
    err = info.value
    assert (err.file, err.line, err.column, err.key) == (str(path), 2, 8, "cases"), str(err)
    assert str(tmp_path / "datasets" / "nope.jsonl") in err.message and "No such file" in err.message


def test_a_file_not_in_utf8_names_the_line_and_column_of_the_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_bytes(b'catalog: {tools: [{name: t}]}\nexpect:\n  - {when: {contains: "caf\xe9"}, none: true}\n')
    with pytest.raises(RuleFileError) as info:
        load_rules([path])
    err = info.value
    assert (err.file, err.line, err.column) == (str(path), 3, 27), str(err)
    assert "UTF-8" in err.message and "0xe9" in err.message


def test_nothing_in_a_rule_file_is_executed(tmp_path: Path) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text("catalog: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(RuleFileError) as info:
        load_rules([path])
    assert info.value.line == 1 and "YAML" in str(info.value)


def test_rule_file_error_pickles_and_reads_well() -> None:
    import pickle

    err = RuleFileError("r.yaml", 3, 7, "expect[0].call", "bad")
    again = pickle.loads(pickle.dumps(err))
    assert (again.file, again.line, again.column, again.key, again.message) == ("r.yaml", 3, 7, "expect[0].call", "bad")
    assert str(again) == "r.yaml:3:7: expect[0].call: bad"
    assert str(RuleFileError("r.yaml", 1, 1, "", "YAML: oops")) == "r.yaml:1:1: YAML: oops"


@pytest.mark.parametrize("levels", [65, 500, 50_000])
def test_deeply_nested_rule_file_is_a_clear_error_not_a_crash(tmp_path: Path, levels: int) -> None:
    """libyaml recurses in C: 50,000 nested flow sequences used to kill the process (and with it `serve`)."""
    import subprocess
    import sys

    path = tmp_path / "deep.yaml"
    path.write_text("catalog: {tools: [{name: a}]}\nexpect:\n  - when: " + "[" * levels + "]" * levels + "\n")
    code = "import sys\nfrom monitor.rules import RuleFileError, load_rules\ntry:\n    load_rules([sys.argv[1]])\n" \
           "except RuleFileError as e:\n    print(e)\n"
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"{path}:3:{11 + 64}: YAML: nested deeper than 64 levels"  # the 65th bracket


@pytest.mark.parametrize("levels", [101, 1_500])
def test_deep_block_nesting_is_a_located_error_not_a_recursion_error(tmp_path: Path, levels: int) -> None:
    """Block style escapes the bracket count: about 250 nested `not` used to raise RecursionError."""
    path = tmp_path / "deep.yaml"
    nots = "".join("  " * (i + 3) + "not:\n" for i in range(levels)) + "  " * (levels + 3) + "prefix: x\n"
    path.write_text("catalog:\n  tools:\n    - name: t\nexpect:\n  - none: true\n    when:\n" + nots)
    with pytest.raises(RuleFileError) as info:
        load_rules([path])
    # ("expect", 0, "when", 98 x "not") is 101 deep: the 98th `not`'s value, the mapping of the 99th `not:` line
    assert str(info.value) == f"{path}:{6 + 99}:{2 * (98 + 3) + 1}: YAML: nested deeper than 100 levels"


def _laughs(levels: int, width: int = 10) -> str:
    """Nine levels of "billion laughs": each anchor lists the previous one `width` times (10**9 values in 1 KB)."""
    rows = ["&a0 [" + ", ".join(["lol"] * width) + "]"]
    rows += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "[" + ", ".join(rows) + "]"


def _load_in_child(path: Path) -> subprocess.CompletedProcess[str]:
    """load_rules in a child process capped at 1 GB of address space and 60 s: a runaway load fails the test
    instead of taking the test run (or the machine) with it."""
    code = ("import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from monitor.rules import RuleFileError, load_rules\ntry:\n    load_rules([sys.argv[1]])\n"
            "except RuleFileError as e:\n    print(e)\n")
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)


def test_yaml_alias_bomb_is_a_located_error_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """9 levels of anchors, each used 10 times by the next, ran `rules check` past 1 GB and never ended: the
    position walk (and validation after it) went through every one of the 10**9 expanded values."""
    path = tmp_path / "laughs.yaml"
    path.write_text(f"version: 1\ncatalog:\n  tools:\n    - name: t\n      schema:\n        examples: {_laughs(9)}\n")
    started = time.monotonic()
    done = _load_in_child(path)
    assert done.returncode == 0, done.stderr[-2000:]
    # a1..a4 add 123,440 values; a4 holds 111,111: its 8th use in a5's list takes the sum past 1,000,000
    column = 1 + len("        examples: ") + _laughs(9).index("*a4") + 7 * len("*a4, ")
    assert done.stdout.strip() == (
        f"{path}:6:{column}: YAML: aliases add more than 1,000,000 values to this document (each *alias repeats "
        "every value of its anchor; this *a4 adds 111,111); use fewer aliases of big anchors")
    assert time.monotonic() - started < 30


def test_aliases_up_to_the_bound_load_and_share_their_anchor(tmp_path: Path) -> None:
    """The bound counts the values aliases add, not those written out: 1,000 uses of a 1,000-value anchor are
    exactly 1,000,000 added values and load; one use more is refused."""
    from monitor.rules._yaml import MAX_ALIAS_VALUES, load_yaml

    anchor = "&big [" + ", ".join(["x"] * 999) + "]"  # the list and its 999 items: 1,000 values
    data, marks = load_yaml(f"a: {anchor}\nb: [{', '.join(['*big'] * 1000)}]\n", "f.yaml")
    assert MAX_ALIAS_VALUES == 1_000_000
    assert len(data["b"]) == 1000 and all(item is data["a"] for item in data["b"])
    assert marks.at(("b", 999, 5)) == (1, 4)  # inside an alias: placed at its anchor
    with pytest.raises(RuleFileError, match=r"^f\.yaml:2:\d+: YAML: aliases add more than 1,000,000 values"):
        load_yaml(f"a: {anchor}\nb: [{', '.join(['*big'] * 1001)}]\n", "f.yaml")


def test_aliases_of_a_long_string_are_bounded_by_the_text_they_add(tmp_path: Path) -> None:
    """The value bound let few aliases of one long string through: a 1 MB rule file whose tool schema used a 1 MiB
    description 2,000 times (2,000 values) took 36 s and 4 GB in `rules check`, the schema's JSON holding every
    copy; 20,000 uses would need 40 GB. The text that aliases add is bounded too."""
    from monitor.rules._yaml import MAX_ALIAS_TEXT, load_yaml

    big = "x" * (1 << 20)
    props = [f'          p0: {{type: string, description: &d "{big}"}}\n']
    props += [f"          p{i}: {{type: string, description: *d}}\n" for i in range(1, 2000)]
    path = tmp_path / "long.yaml"
    path.write_text("version: 1\ncatalog:\n  tools:\n    - name: t\n      schema:\n        type: object\n"
                    "        properties:\n" + "".join(props))
    started = time.monotonic()
    done = _load_in_child(path)
    assert done.returncode == 0, done.stderr[-2000:]
    # 32 aliases add exactly 32 MiB; the 33rd (p33, on line 8 + 33) goes past it
    assert MAX_ALIAS_TEXT == 32 << 20
    assert re.fullmatch(rf"{re.escape(str(path))}:41:\d+: YAML: aliases add more than 33,554,432 characters of "
                        r"text to this document \(each \*alias repeats all the text of its anchor; this \*d adds "
                        r"1,048,576\); use fewer aliases of big anchors", done.stdout.strip()), done.stdout
    assert time.monotonic() - started < 30
    # up to the bound it loads, the copies sharing their anchor's string; keys count as text too
    text = f"a: &s {'y' * 1000}\nb: [{', '.join(['*s'] * (MAX_ALIAS_TEXT // 1000))}]\n"
    data, _ = load_yaml(text, "f.yaml")
    assert len(data["b"]) == MAX_ALIAS_TEXT // 1000 and all(s is data["a"] for s in data["b"])
    keyed = f"a: &m {{{'k' * 1000}: 1}}\nb: [{', '.join(['*m'] * (MAX_ALIAS_TEXT // 1000))}]\n"
    with pytest.raises(RuleFileError, match=r"^f\.yaml:2:\d+: YAML: aliases add more than 33,554,432 characters"):
        load_yaml(keyed, "f.yaml")


@pytest.mark.parametrize("text, column", [("x: &a [1, *a]\n", 11), ("x: &a {k: [*a]}\n", 12)])
def test_an_alias_inside_its_own_anchor_is_a_located_error(tmp_path: Path, text: str, column: int) -> None:
    path = tmp_path / "cycle.yaml"
    path.write_text("version: 1\n" + text)
    with pytest.raises(RuleFileError) as info:
        load_rules([path])
    assert str(info.value) == (f"{path}:2:{column}: YAML: alias *a is inside its own anchor &a (the value would "
                               "contain itself without end)")


def test_aliased_nesting_counts_towards_the_depth_bound(tmp_path: Path) -> None:
    """An alias puts its anchor's whole depth where it is used: 60 levels used 60 levels deep are 120."""
    from monitor.rules._yaml import load_yaml

    deep = "[" * 60 + "]" * 60
    text = "a: &d " + deep + "\nb: " + "[" * 60 + "*d" + "]" * 60 + "\n"
    with pytest.raises(RuleFileError, match=r"^f\.yaml:2:64: YAML: nested deeper than 100 levels$"):
        load_yaml(text, "f.yaml")


def test_compact_block_nesting_is_a_located_error_not_a_crash(tmp_path: Path) -> None:
    """`- - - ... x` nests without brackets or indentation: 60,000 levels (120 KB) killed the process with a
    segmentation fault while libyaml built the document (what `serve` does on a reload)."""
    path = tmp_path / "compact.yaml"
    path.write_text("version: 1\nx:\n  " + "- " * 60_000 + "a\n")
    done = _load_in_child(path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"{path}:3:{3 + 2 * 100}: YAML: nested deeper than 100 levels"


def test_tools_sharing_an_aliased_schema_check_it_once(tmp_path: Path) -> None:
    """Checking a schema against the 2020-12 metaschema takes about 30 ms: 1,000 tools sharing one schema through
    an alias took 20 s to load (20,000: 220 s), checking the same object once per tool."""
    schema = "{type: object, properties: {q: {type: string, maxLength: 100}}, required: [q]}"
    tools = [f"    - name: t0\n      schema: &args {schema}\n"]
    tools += [f"    - name: t{i}\n      schema: *args\n" for i in range(1, 2000)]
    path = tmp_path / "many.yaml"
    path.write_text("version: 1\ncatalog:\n  tools:\n" + "".join(tools))
    started = time.monotonic()
    ruleset = load_rules([path])
    assert time.monotonic() - started < 5
    assert len(ruleset.tools) == 2000 and len({t.schema_json for t in ruleset.tools}) == 1
    bad = path.read_text().replace("maxLength: 100", "maxLength: -1")  # still checked, and located at the anchor
    path.write_text(bad)
    with pytest.raises(RuleFileError, match=r":5:\d+: catalog\.tools\[0\]\.schema\.properties\.q\.maxLength: invalid"):
        load_rules([path])


@pytest.mark.parametrize("levels", [150, 5000])
def test_a_deeply_nested_line_of_a_cases_file_is_a_located_error(tmp_path: Path, levels: int) -> None:
    """The YAML depth bound did not reach JSON-lines cases files: 5,000 levels raised RecursionError in the decoder
    (a traceback); 150 were let through to validation, which named the key, not the depth."""
    (tmp_path / "c.jsonl").write_text('{"input": "a", "none": true}\n\n{"input": "b", "x": '
                                      + "[" * levels + "]" * levels + "}\n")
    (tmp_path / "r.yaml").write_text("version: 1\ncatalog: {tools: [{name: t}]}\ncases: c.jsonl\n")
    with pytest.raises(RuleFileError) as info:
        load_rules([tmp_path / "r.yaml"])
    assert str(info.value) == f"{tmp_path / 'c.jsonl'}:3:1: JSON: nested deeper than 100 levels"


def test_several_rule_file_errors_pickle_and_keep_the_first_as_the_location() -> None:
    import pickle

    from monitor.rules._errors import RuleFileErrors

    first, second = RuleFileError("r.yaml", 3, 7, "expect[0]", "bad"), RuleFileError("r.yaml", 9, 1, "", "worse")
    err = RuleFileErrors([first, second])
    again = pickle.loads(pickle.dumps(err))
    assert (again.file, again.line, again.column, again.key) == ("r.yaml", 3, 7, "expect[0]")
    assert str(again) == "r.yaml:3:7: expect[0]: bad\nr.yaml:9:1: worse"
    assert [e.line for e in again.errors] == [3, 9]


def test_a_file_given_twice_is_loaded_once(tmp_path: Path) -> None:
    one = tmp_path / "one.yaml"
    one.write_text("catalog: {tools: [{name: t}]}\nexpect:\n  - {id: r, when: {prefix: x}, call: [{tool: t}]}\n")
    assert [r.id for r in load_rules([one, one, tmp_path / "." / "one.yaml"]).expectations] == ["r"]


BAD_CASES = """catalog: {tools: [{name: t}]}
expect:
  - {id: r, when: {regex: '('}, call: [{tool: t}]}
cases:
  - {id: a, input: x, call: [{tool: nope}]}
  - {id: b, input: 5}
  - {id: c, input: y, bogus: 1, call: [{tool: nope2}]}
"""


@pytest.mark.parametrize("inline", [True, False])
def test_every_case_of_the_wrong_shape_and_what_compiling_the_others_finds_at_once(tmp_path: Path, inline: bool
                                                                                   ) -> None:
    """Inline cases of the wrong shape came out one of all (the schema's best match for `cases`, a list or a path)
    and hid every other problem of the file (a bad regex, an unknown tool); in a cases file, all of them, still
    hiding what compiling finds. Now a case of the wrong shape is left out of compiling and the others compiled: every
    problem, in file order (a case's own unknown tool, `nope2`, is not reported beside its shape error)."""
    path = tmp_path / "r.yaml"
    head, cases = BAD_CASES.split("cases:\n")
    at = path if inline else tmp_path / "cases.yaml"
    if inline:
        path.write_text(BAD_CASES)
        first, key = 5, "cases"
    else:
        path.write_text(head + "cases: cases.yaml\n")
        at.write_text(cases.replace("  - ", "- "))
        first, key = 1, ""
    text = at.read_text().splitlines()

    def place(n: int, token: str) -> str:
        return f"{at}:{first + n}:{text[first + n - 1].index(token) + 1}"

    with pytest.raises(RuleFileError) as info:
        load_rules([path])
    assert str(info.value).splitlines() == [
        f"{path}:3:27: expect[0].when.regex: invalid regular expression '(' (RE2 syntax): missing ): (",
        f"{place(0, 'nope')}: {key}[0].call[0].tool: unknown tool 'nope': not in the catalog (known: t)",
        f"{place(1, '5')}: {key}[1].input: expected string, got integer 5",
        f"{place(2, 'bogus')}: {key}[2].bogus: unknown key 'bogus' (allowed: any_of, call, description, forbid, id, "
        "input, none, order, respond)",
    ], str(info.value)
