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

from monitor.rules import RuleFileError, RuleSet, load_rules, load_yaml, read_json_lines, read_text


@dataclass(slots=True, frozen=True)
class Case:
    case_id: str | None  # the case's id in the dataset (None: it has none)
    key: str  # its identity: the id, else one unique in the dataset (read_cases); its turn's toolwatch.case.id,
    # what reports and pass^k call it
    input_text: str


def _read_items(path: Path) -> tuple[list[Any], Path | None]:
    """The case items, and the file that holds them when the dataset is a rule file naming a cases file."""
    text = read_text(path)
    if path.suffix in (".jsonl", ".ndjson"):
        return read_json_lines(text, str(path))[0], None
    data, _ = load_yaml(text, str(path))
    if isinstance(data, dict):
        cases = data.get("cases", [])
        if isinstance(cases, str):
            inner = path.parent / cases
            return _read_items(inner)[0], inner
        return list(cases) if isinstance(cases, list) else [], None
    return (list(data) if isinstance(data, list) else []), None


def read_cases(path: str | Path) -> list[Case]:
    """The runnable cases of a dataset, in file order; every case needs an `input`. Each case's key is its id,
    else `#<n>` (its position; `#<n>.<k>` when a case of the dataset has that id), so no two cases of a dataset
    share a key in a report or in pass^k."""
    p = Path(path)
    items, _ = _read_items(p)
    read: list[tuple[str | None, str]] = []
    ids: set[str] = set()
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise RuleFileError(str(p), 0, 0, f"case {n}", "a case is a mapping with at least `input`")
        text = item.get("input")
        cid = item.get("id")
        if not isinstance(text, str):
            raise RuleFileError(str(p), 0, 0, f"case {n}", "`input` (the text to run the agent on) is missing")
        if cid is not None and not isinstance(cid, str):
            cid = str(cid)
        if cid is not None and cid in ids:
            raise RuleFileError(str(p), 0, 0, f"case {n}", f"duplicate case id {cid!r}")
        if cid is not None:
            ids.add(cid)
        read.append((cid, text))
    if not read:
        raise RuleFileError(str(p), 0, 0, "cases", "the dataset holds no case")
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


def load_dataset_rules(dataset: str | Path, rules: Sequence[str | Path], *, agent: str | None = None) -> RuleSet:
    """The rule files plus the dataset's cases, compiled together (cases override rules for their turns).

    Each case of the dataset is also found by its `Case.key` (see read_cases), so a case without an id is
    judged with its own expectation, not with that of the first case of the same input."""
    p = Path(dataset).resolve()
    head = load_yaml(read_text(p), str(p))[0] if p.suffix not in (".jsonl", ".ndjson") else None
    if isinstance(head, dict):
        return _by_key(load_rules([*rules, p]), read_cases(p))
    with tempfile.TemporaryDirectory(prefix="toolwatch-eval-") as tmp:
        wrapper = Path(tmp) / "dataset.yaml"
        doc: dict[str, Any] = {"version": 1, "cases": str(p)}
        if agent:
            doc["agent"] = agent
        wrapper.write_text(yaml.safe_dump(doc), encoding="utf-8")
        ruleset = load_rules([*rules, wrapper])
    return _by_key(ruleset, read_cases(p))


def _by_key(ruleset: RuleSet, cases: list[Case]) -> RuleSet:
    """`ruleset` with the dataset's id-less cases findable by their keys. The dataset is the last file loaded, so
    its cases are the last of `ruleset.cases`, in file order."""
    compiled = ruleset.cases[len(ruleset.cases) - len(cases) :] if len(cases) <= len(ruleset.cases) else ()
    if [(cid, text) for cid, text, _ in compiled] != [(c.case_id, c.input_text) for c in cases]:
        return ruleset  # not expected (both read the same file): id-less cases are then joined by input
    keyed = tuple((c.key, exp) for c, (_, _, exp) in zip(cases, compiled, strict=True) if c.case_id is None)
    return dataclasses.replace(ruleset, cases_by_id=ruleset.cases_by_id + keyed) if keyed else ruleset
