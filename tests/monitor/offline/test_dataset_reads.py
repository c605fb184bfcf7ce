"""eval --dataset reads each file of the load once: the dataset (and a cases file it names) is read, parsed and its
cases validated once, the rule files read once, whether `load_dataset_rules` alone or the whole `toolwatch eval`
command loads it. Reading a dataset of thousands of cases three to five times took most of a load (8,000 cases: 8 s).

The counters wrap the real readers (each name that a module of the monitor holds for them); what they return is
the real function's."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from monitor.cli.eval_cmd import eval_
from monitor.evaluate import load_dataset, load_dataset_rules, read_cases
from monitor.rules import RuleFileError, load_rules, load_yaml, read_json_lines, read_text
from monitor.rules._validate import case_errors

CASES: list[dict[str, Any]] = [
    {"id": "o1", "input": "where is order 1", "call": [{"tool": "get_order_status", "args": {"order_id": "1"}}]},
    {"input": "hello", "none": True},
    {"input": "where is order 2", "call": [{"tool": "get_order_status"}]},
]


@dataclass
class Counted:
    reads: Counter[str] = field(default_factory=Counter)  # file -> read_text calls
    parses: Counter[str] = field(default_factory=Counter)  # file -> load_yaml / read_json_lines calls
    validations: Counter[str] = field(default_factory=Counter)  # file -> case_errors calls (its cases validated)


def _wrap_everywhere(monkeypatch: pytest.MonkeyPatch, real: Callable[..., Any], wrapper: Callable[..., Any]) -> None:
    for module in [m for name, m in sys.modules.items() if name.split(".")[0] == "monitor" and m is not None]:
        for attr, value in list(vars(module).items()):
            if value is real:
                monkeypatch.setattr(module, attr, wrapper)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counted:
    c = Counted()
    def read(path: Path) -> str:
        c.reads[str(path)] += 1
        return read_text(path)

    def parse_yaml(text: str, file: str) -> tuple[Any, Any]:
        c.parses[file] += 1
        return load_yaml(text, file)

    def parse_json_lines(text: str, file: str) -> tuple[list[Any], Any]:
        c.parses[file] += 1
        return read_json_lines(text, file)

    def validate(cases: Any, marks: Any, base: Any) -> Any:
        c.validations[marks.file] += 1
        return case_errors(cases, marks, base)

    _wrap_everywhere(monkeypatch, read_text, read)
    _wrap_everywhere(monkeypatch, load_yaml, parse_yaml)
    _wrap_everywhere(monkeypatch, read_json_lines, parse_json_lines)
    _wrap_everywhere(monkeypatch, case_errors, validate)
    return c


def _yaml_list(cases: list[dict[str, Any]]) -> str:
    return "".join(f"- {json.dumps(c)}\n" for c in cases)


def _write(tmp_path: Path, form: str, cases: list[dict[str, Any]]) -> tuple[Path, Path]:
    """(the dataset, the file that holds its cases) in `form`."""
    if form == "yaml list":
        p = tmp_path / "cases.yaml"
        p.write_text(_yaml_list(cases), encoding="utf-8")
        return p, p
    if form == "json lines":
        p = tmp_path / "cases.jsonl"
        p.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
        return p, p
    suite = tmp_path / "suite.yaml"
    if form == "inline cases":
        suite.write_text("version: 1\nagent: support\ncases:\n" + _yaml_list(cases).replace("- ", "  - "),
                         encoding="utf-8")
        return suite, suite
    held, _ = _write(tmp_path, "yaml list" if form == "names a YAML file" else "json lines", cases)
    suite.write_text(f"version: 1\nagent: support\ncases: {held.name}\n", encoding="utf-8")
    return suite, held


FORMS = ["yaml list", "json lines", "inline cases", "names a YAML file", "names a JSON-lines file"]


def _assert_once(c: Counted, *files: Path) -> None:
    assert c.reads and all(n == 1 for n in c.reads.values()), c.reads  # every file, the rule files too
    for f in files:
        assert c.reads[str(f)] == 1 and c.parses[str(f)] == 1, (f, c.reads, c.parses)
    assert all(n == 1 for n in c.parses.values()), c.parses
    assert all(n == 1 for n in c.validations.values()), c.validations


@pytest.mark.parametrize("form", FORMS)
def test_load_dataset_rules_reads_parses_and_validates_each_file_once(tmp_path: Path, support_rules: Path,
                                                                       counted: Counted, form: str) -> None:
    dataset, held = _write(tmp_path, form, CASES)
    load_dataset_rules(dataset, [support_rules])
    _assert_once(counted, dataset, held, support_rules)
    assert counted.validations[str(held)] == 1


def test_a_rule_file_dataset_given_to_rules_too_is_read_once(tmp_path: Path, support_rules: Path,
                                                             counted: Counted) -> None:
    dataset, _ = _write(tmp_path, "inline cases", CASES)
    load_dataset_rules(dataset, [support_rules, dataset])
    _assert_once(counted, dataset, support_rules)


@pytest.mark.parametrize("form", ["yaml list", "json lines", "names a YAML file"])
def test_a_dataset_in_error_is_read_once_and_reports_every_problem(tmp_path: Path, support_rules: Path,
                                                                   counted: Counted, form: str) -> None:
    bad = [*CASES, {"id": "o1", "input": 5}, {"input": "where is order 3", "call": [{"tool": "nope"}]}]
    dataset, held = _write(tmp_path, form, bad)
    with pytest.raises(RuleFileError) as exc:
        load_dataset_rules(dataset, [support_rules])
    _assert_once(counted, dataset, held, support_rules)
    dup, five, nope = (1, 1, 1) if form == "json lines" else (4, 25, 51)  # a JSON line's errors are at its start
    assert exc.value.lines() == [  # the dataset's own checks and the rule loader's, merged in file order
        f"{held}:4:{dup}: id: duplicate case id 'o1' (first at line 1)",
        f"{held}:4:{five}: [3].input: expected string, got integer 5",
        f"{held}:5:{nope}: [4].call[0].tool: unknown tool 'nope': not in the catalog (known: get_order_history, "
        "get_order_status, get_shipping_eta)",
    ]


@pytest.mark.parametrize("form", FORMS)
def test_the_eval_command_reads_the_dataset_once(tmp_path: Path, support_rules: Path, counted: Counted,
                                                 form: str) -> None:
    dataset, held = _write(tmp_path, form, CASES)
    res = CliRunner().invoke(eval_, ["--dataset", str(dataset), "--rules", str(support_rules), "--agent",
                                     "tests.monitor.offline.agents:support_agent", "--no-progress"])
    assert res.exit_code in (0, 1), res.output
    assert "3 case(s) x 1 trial(s)" in res.output
    _assert_once(counted, dataset, held, support_rules)


@pytest.mark.parametrize("form", FORMS)
def test_the_cases_and_expectations_are_those_the_rule_loader_compiles(tmp_path: Path, support_rules: Path,
                                                                      form: str) -> None:
    """What one read gives is what the rule loader gives for the cases file on its own, with each id-less case also
    found by its key."""
    dataset, held = _write(tmp_path, form, CASES)
    ruleset = load_dataset_rules(dataset, [support_rules])
    if dataset == held and form != "inline cases":  # a list of cases: compiled as a rule file naming it compiles it
        ref_file = tmp_path / "ref" / "ref.yaml"
        ref_file.parent.mkdir()
        ref_file.write_text(f"version: 1\ncases: {held}\n", encoding="utf-8")
        ref = load_rules([support_rules, ref_file])
    else:
        ref = load_rules([support_rules, dataset])
    assert ruleset.cases == ref.cases and ruleset.expectations == ref.expectations and ruleset.tools == ref.tools
    keys = [c.key for c in read_cases(dataset)]
    assert keys == ["o1", "#2", "#3"]
    compiled = dict(ruleset.cases_by_id)
    assert [compiled[k] for k in keys] == [exp for _, _, exp in ref.cases]
    loaded = load_dataset(dataset, [support_rules])  # what the eval command loads: the same, in one read
    same = dataclasses.replace(loaded.ruleset, files=ruleset.files)  # a list's wrapper is a temporary file of each load
    assert same == ruleset and loaded.cases == read_cases(dataset)
