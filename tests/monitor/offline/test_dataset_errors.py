"""eval --dataset: every problem of a dataset comes out in one error, whatever form the dataset takes (a YAML list, a
JSON-lines file, a rule file with inline cases or naming a cases file): the shape errors of every case and what
compiling the cases of the right shape finds (an unknown tool), each at its file:line:column, in file order, at most
MAX_REPORTED lines then how many more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli.eval_cmd import eval_
from monitor.rules._errors import MAX_REPORTED

KNOWN = "not in the catalog (known: get_order_history, get_order_status, get_shipping_eta)"
ALLOWED = "(allowed: any_of, call, description, forbid, id, input, none, order, respond)"


def _eval(dataset: Path, support_rules: Path) -> tuple[int, list[str]]:
    res = CliRunner().invoke(eval_, ["--dataset", str(dataset), "--rules", str(support_rules), "--agent",
                                     "tests.monitor.offline.agents:support_agent", "--no-progress"])
    return res.exit_code, res.output.splitlines()


def test_a_wrong_type_in_one_case_does_not_hide_an_unknown_tool_in_another(tmp_path: Path, support_rules: Path
                                                                           ) -> None:
    """Case [1]'s `input: 5` was reported alone; the unknown tool of case [0] came out only once it was fixed. A case
    of the wrong shape is not compiled (its unknown tool `nope2` is not reported): its shape error is."""
    p = tmp_path / "cases.yaml"
    p.write_text("- id: a\n  input: where is order 1\n  call: [{tool: nope}]\n"
                 "- id: b\n  input: 5\n"
                 "- id: c\n  input: where is order 3\n  bogus: 1\n  call: [{tool: nope2}]\n"
                 "- id: d\n  input: where is order 4\n  call: [{tool: get_order_statuz}]\n", encoding="utf-8")
    code, lines = _eval(p, support_rules)
    assert code == 2
    assert lines == [
        f"error: {p}:3:17: [0].call[0].tool: unknown tool 'nope': {KNOWN}",
        f"{p}:5:10: [1].input: expected string, got integer 5",
        f"{p}:8:3: [2].bogus: unknown key 'bogus' {ALLOWED}",
        f"{p}:12:17: [3].call[0].tool: unknown tool 'get_order_statuz': {KNOWN}",
    ], lines


def test_every_problem_of_a_json_lines_dataset_at_once(tmp_path: Path, support_rules: Path) -> None:
    p = tmp_path / "cases.jsonl"
    p.write_text("\n".join(json.dumps(c) for c in (
        {"id": "a", "input": "where is order 1", "call": [{"tool": "nope"}]},
        {"id": "b", "input": 5},
        {"id": "a", "input": "where is order 2", "none": True},
    )) + "\n", encoding="utf-8")
    code, lines = _eval(p, support_rules)
    assert code == 2
    assert lines == [
        f"error: {p}:1:1: [0].call[0].tool: unknown tool 'nope': {KNOWN}",
        f"{p}:2:1: [1].input: expected string, got integer 5",
        f"{p}:3:1: id: duplicate case id 'a' (first at line 1)",
    ], lines


@pytest.mark.parametrize("inline", [True, False])
def test_every_problem_of_a_rule_file_dataset_at_once(tmp_path: Path, support_rules: Path, inline: bool) -> None:
    """A rule file with inline cases reported one wrong case of all (the schema's best match among them), and no
    unknown tool; one naming a cases file, the cases file's shape errors alone."""
    cases = ("  - {id: a, input: where is order 1, call: [{tool: nope}]}\n"
             "  - {id: b, input: 5}\n"
             "  - {id: c, input: hi, none: false}\n")
    p = tmp_path / "suite.yaml"
    if inline:
        p.write_text(f"version: 1\nagent: support\ncases:\n{cases}", encoding="utf-8")
        at, first, key = p, 4, "cases"
    else:
        at, first, key = tmp_path / "cases.yaml", 1, ""
        at.write_text(cases.replace("  - ", "- "), encoding="utf-8")
        p.write_text("version: 1\nagent: support\ncases: cases.yaml\n", encoding="utf-8")
    text = at.read_text().splitlines()

    def place(n: int, token: str) -> str:  # the n-th case's line, the column of `token` in it
        return f"{at}:{first + n}:{text[first + n - 1].index(token) + 1}"

    code, lines = _eval(p, support_rules)
    assert code == 2
    assert lines == [
        f"error: {place(0, 'nope')}: {key}[0].call[0].tool: unknown tool 'nope': {KNOWN}",
        f"{place(1, '5')}: {key}[1].input: expected string, got integer 5",
        f"{place(2, 'false')}: {key}[2].none: must be one of true, got false",
    ], lines


def test_the_problems_of_a_dataset_are_bounded_as_a_scenario_files_are(tmp_path: Path, support_rules: Path) -> None:
    """Shape errors and unknown tools of 60 cases: the first MAX_REPORTED in file order, then how many more."""
    p = tmp_path / "cases.yaml"
    p.write_text("".join(f"- input: {5 if i % 2 else f'where is order {i}'}\n  call: [{{tool: nope{i}}}]\n"
                         for i in range(60)), encoding="utf-8")
    code, lines = _eval(p, support_rules)
    assert code == 2
    assert len(lines) == MAX_REPORTED + 1 and lines[-1] == f"... and {60 - MAX_REPORTED} more", lines
    assert lines[0] == f"error: {p}:2:17: [0].call[0].tool: unknown tool 'nope0': {KNOWN}"
    assert lines[1] == f"{p}:3:10: [1].input: expected string, got integer 5"
    assert lines[MAX_REPORTED - 1] == f"{p}:99:10: [49].input: expected string, got integer 5"


def test_every_line_of_a_json_lines_dataset_that_does_not_parse_is_reported_at_once(tmp_path: Path,
                                                                                     support_rules: Path) -> None:
    """Each line of a JSON-lines file is a case of its own: the first that did not parse was reported alone, and the
    next came out only once it was fixed. Every such line is reported, in file order, at most MAX_REPORTED."""
    p = tmp_path / "cases.jsonl"
    good = json.dumps({"id": "a", "input": "where is order 1", "none": True})
    p.write_text(f'{good}\n{{"id": "b", broken\n{good}\n{{bad2\n', encoding="utf-8")
    code, lines = _eval(p, support_rules)
    assert code == 2
    assert lines == [f"error: {p}:2:13: JSON: Expecting property name enclosed in double quotes",
                     f"{p}:4:2: JSON: Expecting property name enclosed in double quotes"], lines

    p.write_text("{\n" * (MAX_REPORTED + 20), encoding="utf-8")  # bounded: no more lines read than are shown
    code, lines = _eval(p, support_rules)
    assert code == 2 and len(lines) == MAX_REPORTED, lines[-3:]
