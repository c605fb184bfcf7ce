"""Labelled datasets: cases (`id`, `input`, expected calls as in a rule file's `cases`) run by `eval`.

A dataset file is a YAML list of cases, a JSON-lines file with one case per line, or a rule file (a
mapping) whose `cases` are inline or name such a file. The expectations are compiled by the judge's own
loader (`load_rules`, with the catalog from `--rules`), so a case means exactly what it means in a rule
file; this module only reads which inputs to run and under which case ids.

Every case is judged with its own expectation: a case without an id runs under a key of its own (`#<n>`,
its position; `#<n>.<k>` when another case has the id `#<n>`), which `load_dataset_rules` gives its expectation
and reports name it by, so two id-less cases with one input are still two cases (a rule file joins id-less cases
by input, which only finds the first).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from monitor._gc import in_batch_gc
from monitor.rules import Documents, Expectation, RuleFileError, RuleSet, load_rules
from monitor.rules._errors import place, raise_all
from monitor.rules._lint import forbidden_checks
from monitor.rules._read import JSON_LINES_SUFFIXES
from monitor.rules._yaml import Marks


@dataclass(slots=True, frozen=True)
class Case:
    case_id: str | None  # the case's id in the dataset (None: it has none)
    key: str  # its identity: the id, else one unique in the dataset (read_cases); its turn's toolwatch.case.id,
    # what reports and pass^k call it
    input_text: str


Where = tuple[str | int, ...]


def _read_items(path: Path, docs: Documents) -> tuple[list[Any], Marks, Where]:
    """The case items, where they sit (the file that holds them: the dataset, or the cases file a rule file names)
    and their path in it."""
    data, marks = docs.cases(path)  # a JSON-lines file: a list
    if isinstance(data, dict):
        cases = data.get("cases", [])
        if isinstance(cases, str):
            return _read_items(path.parent / cases, docs)
        return (list(cases) if isinstance(cases, list) else []), marks, ("cases",)
    return (list(data) if isinstance(data, list) else []), marks, ()


def _check_cases(items: list[Any], marks: Marks, base: Where) -> tuple[list[Case], list[RuleFileError]]:
    """The cases of `items` and every problem that keeps one from running, each at its line and column: a case that
    is no mapping, one without a string `input`, an id a case before it has."""
    read: list[tuple[str | None, str]] = []
    errors: list[RuleFileError] = []
    first: dict[str, int] = {}  # id -> line of its first case
    for i, item in enumerate(items):
        at = (*base, i)
        if not isinstance(item, dict):
            errors.append(marks.error(at, "expected object: a case is a mapping with at least `input`"))
            continue
        text, cid = item.get("input"), item.get("id")
        if not isinstance(text, str):
            where = (*at, "input") if "input" in item else at
            errors.append(marks.error(where, "`input` (the text to run the agent on) is missing or not a string"))
        cid = None if cid is None else str(cid)
        if cid is not None and cid in first:
            line, column = marks.at((*at, "id"), key=True)
            errors.append(RuleFileError(marks.file, line, column, "id",
                                        f"duplicate case id {cid!r} (first at line {first[cid]})"))
        elif cid is not None:
            first[cid] = marks.at(at)[0]
        if isinstance(text, str):
            read.append((cid, text))
    if not items:
        errors.append(marks.error(base, "the dataset holds no case"))
    return _keyed(read, set(first)), errors


def _keyed(read: list[tuple[str | None, str]], ids: set[str]) -> list[Case]:
    """Cases with their keys: the id, else `#<n>` (`#<n>.<k>` when a case of the dataset has that id)."""
    cases = []
    taken = set(ids)  # every id of the dataset, also those of later cases
    for n, (cid, text) in enumerate(read, 1):
        key = cid
        if key is None:
            key, k = f"#{n}", 0
            while key in taken:
                k += 1
                key = f"#{n}.{k}"
            taken.add(key)
        cases.append(Case(cid, key, text))
    return cases


def read_cases(path: str | Path) -> list[Case]:
    """The runnable cases of a dataset, in file order; every case needs an `input`. Each case's key is its id,
    else `#<n>` (its position; `#<n>.<k>` when a case of the dataset has that id), so no two cases of a dataset
    share a key in a report or in pass^k. Raises RuleFileError with every problem found, each at its place."""
    cases, errors = _check_cases(*_read_items(Path(path), Documents()))
    raise_all(errors)
    return cases


@dataclass(slots=True, frozen=True)
class Dataset:
    """A dataset as `load_dataset` loaded it: its rule set (`load_dataset_rules`'s), its cases (`read_cases`'s), and
    where the cases sit, to place the warnings of `forbidden_arguments`."""

    ruleset: RuleSet
    cases: list[Case]
    items: list[Any]  # the case items as read
    marks: Marks  # of the file that holds them
    base: Where  # their path in it

    def forbidden_arguments(self) -> list[str]:
        """One line per argument check of a dataset case on an argument its tool's schema allows no call to have (the
        check `toolwatch rules check` warns of: it fails every call that keeps to the schema), at the argument's place
        in the file that holds the cases (a JSON-lines file: at the case's line), as the dataset's errors are placed:
        `file:line:column: case 'KEY': ...`."""
        return _forbidden(self.ruleset, self.cases, self.items, self.marks, self.base)


def load_dataset_rules(dataset: str | Path, rules: Sequence[str | Path], *, agent: str | None = None) -> RuleSet:
    """The rule files plus the dataset's cases, compiled together (cases override rules for their turns).

    Each case of the dataset is also found by its `Case.key` (see read_cases), so a case without an id is
    judged with its own expectation, not with that of the first case of the same input. Raises RuleFileError with
    every problem of the files and of the dataset's cases (read_cases's) at once."""
    return load_dataset(dataset, rules, agent=agent).ruleset


@in_batch_gc
def load_dataset(dataset: str | Path, rules: Sequence[str | Path], *, agent: str | None = None) -> Dataset:
    """`load_dataset_rules` and `read_cases` in one load, which reads, parses and validates each file once (the
    dataset, a cases file it names, the rule files). Raises RuleFileError as `load_dataset_rules` does."""
    p = Path(dataset).resolve()
    docs = Documents()
    cases: list[Case] | None = None
    try:
        read = _read_items(p, docs)
        cases, problems = _check_cases(*read)
    except RuleFileError as exc:  # the dataset does not read: the rule loader, reading it too, says why
        problems = [exc]
    try:
        ruleset = _load(p, rules, agent, docs)
    except RuleFileError as exc:
        raise_all(_merged(problems if cases is not None else [], list(exc.errors)))
        raise
    raise_all(problems)
    assert cases is not None
    return Dataset(_by_key(ruleset, cases), cases, *read)


def _merged(problems: list[RuleFileError], loader: list[RuleFileError]) -> list[RuleFileError]:
    """The dataset's problems and the rule loader's, each once: the loader's duplicate case ids are the dataset's
    (which name the first case), and a case the loader found to be no mapping or of a wrong type is reported by it."""
    taken = {(e.file, e.line, e.column) for e in loader}
    mine = [e for e in problems if not (e.message.startswith("expected object") and (e.file, e.line, e.column) in taken)
            and not (e.key.endswith("input") and (e.file, e.line, e.column) in taken)]
    dup = {(e.file, e.line) for e in mine if e.message.startswith("duplicate case id")}
    theirs = [e for e in loader if not (e.message.startswith("duplicate case id") and (e.file, e.line) in dup)]
    return sorted([*mine, *theirs], key=lambda e: (e.file, e.line, e.column))


def _same_file(a: str | Path, b: Path) -> bool:
    try:
        return Path(a).samefile(b)
    except OSError:  # a rule file that does not read: the loader says so
        return False


def _load(p: Path, rules: Sequence[str | Path], agent: str | None, docs: Documents) -> RuleSet:
    head = docs.yaml(p)[0] if p.suffix not in JSON_LINES_SUFFIXES else None
    if isinstance(head, dict):
        # A rule file with `cases` is the dataset: given to --rules too (as the rules of every other command are), it
        # is loaded once, not refused against itself (every rule id, alert and case a duplicate).
        return load_rules([*(r for r in rules if not _same_file(r, p)), p], documents=docs)
    with tempfile.TemporaryDirectory(prefix="toolwatch-eval-") as tmp:
        wrapper = Path(tmp) / "dataset.yaml"
        doc: dict[str, Any] = {"version": 1, "cases": str(p)}
        if agent:
            doc["agent"] = agent
        wrapper.write_text(yaml.safe_dump(doc), encoding="utf-8")
        return load_rules([*rules, wrapper], documents=docs)


def _compiled(ruleset: RuleSet, cases: list[Case]) -> tuple[tuple[str | None, str | None, Expectation], ...] | None:
    """The compiled cases of the dataset, one per case of `cases` (in file order): the last of `ruleset.cases`, as the
    dataset is the last file loaded; None if they do not match (not expected: both read the same file)."""
    compiled = ruleset.cases[len(ruleset.cases) - len(cases) :] if len(cases) <= len(ruleset.cases) else ()
    if [(cid, text) for cid, text, _ in compiled] != [(c.case_id, c.input_text) for c in cases]:
        return None
    return compiled


def _by_key(ruleset: RuleSet, cases: list[Case]) -> RuleSet:
    """`ruleset` with the dataset's id-less cases findable by their keys."""
    compiled = _compiled(ruleset, cases)
    if compiled is None:
        return ruleset  # id-less cases are then joined by input
    keyed = tuple((c.key, exp) for c, (_, _, exp) in zip(cases, compiled, strict=True) if c.case_id is None)
    return dataclasses.replace(ruleset, cases_by_id=ruleset.cases_by_id + keyed) if keyed else ruleset


def _forbidden(ruleset: RuleSet, cases: list[Case], items: list[Any], marks: Marks, base: Where) -> list[str]:
    compiled = _compiled(ruleset, cases)
    if compiled is None:
        return []  # not expected: the dataset's cases are the ruleset's last
    of_case = {id(exp): (i, case) for i, (case, (_, _, exp)) in enumerate(zip(cases, compiled, strict=True))}
    out = []
    for found in forbidden_checks(ruleset, (exp for _, _, exp in compiled)):  # in file order
        i, case = of_case[id(found.expectation)]  # no case in error: the i-th case is the i-th item
        line, column = marks.at((*base, i, *found.path(items[i])), key=True)
        out.append(f"{place(marks.file, line, column)}: case {case.key!r}: {found.message}")
    return out
