"""The rules in force: loaded and validated, swapped atomically on reload, kept when a reload fails."""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from monitor.records import Turn
from monitor.rules import RuleFileError, RuleSet, load_rules
from monitor.rules._read import read_text
from monitor.verdict import TurnVerdict

logger = logging.getLogger(__name__)


class JudgeLike(Protocol):
    """What the service needs of `monitor.judge.Judge`."""

    @property
    def catalog(self) -> frozenset[str]: ...

    @property
    def agents(self) -> frozenset[str]: ...

    def judge(self, turn: Turn) -> TurnVerdict: ...

    def scoping(self) -> tuple[dict[str, frozenset[str]], dict[str, str]]: ...

    def checked_tools(
        self,
    ) -> tuple[dict[str | None, frozenset[str]] | None, dict[str | None, frozenset[str]]]: ...


JudgeFactory = Callable[[RuleSet], JudgeLike]


def default_judge_factory(ruleset: RuleSet) -> JudgeLike:
    judge_cls: Any = importlib.import_module("monitor.judge").Judge
    judge: JudgeLike = judge_cls(ruleset)
    return judge


# (path, mtime_ns, size, st_dev, st_ino, ctime_ns) of each rule file, and of each cases file they name
Stamp = tuple[tuple[str, int, int, int, int, int], ...]


@dataclass(slots=True, frozen=True)
class LoadedRules:
    ruleset: RuleSet
    judge: JudgeLike
    stamp: Stamp  # of each file when loaded


@dataclass(slots=True, frozen=True)
class Attempt:
    """One reload, prepared: the new rules (`loaded`), or the error that keeps the old ones."""

    loaded: LoadedRules | None
    stamp: Stamp
    error: BaseException | None
    cases: tuple[str, ...] = ()  # the cases files to watch from now on (with the rule files)


def _stamp(paths: Sequence[str]) -> Stamp:
    """What tells a rule file changed: its mtime and size, and the identity (device, inode) and ctime of the file
    the path leads to (a ConfigMap's `..data` link swapped to a file of the same size and a fixed mtime)."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((p, st.st_mtime_ns, st.st_size, st.st_dev, st.st_ino, st.st_ctime_ns))
        except OSError:
            out.append((p, -1, -1, -1, -1, -1))
    return tuple(out)


def named_cases_files(paths: Sequence[str]) -> tuple[str, ...]:
    """The cases files the rule files at `paths` name (`cases: PATH`, relative to its rule file), read as plainly as
    can be: for a reload that failed, whose rules name none. A file that cannot be read or parsed names none."""
    out: list[str] = []
    for p in paths:
        try:
            data = yaml.safe_load(read_text(Path(p)))
        except Exception:  # noqa: BLE001, S112 - best effort: the reload's own error says what is wrong
            continue
        cases = data.get("cases") if isinstance(data, dict) else None
        if isinstance(cases, str) and cases and "\0" not in cases:
            out.append(str(Path(p).parent / cases))
    return tuple(out)


MAX_RULE_WARNINGS = 20  # lines of `rules check` warnings logged per load; the rest are counted in one more line


def _warn_suspicious(ruleset: RuleSet) -> None:
    """Log what `toolwatch rules check` warns of (valid rules that can never match, argument checks every call
    fails, cases never judged, alerts that can never fire), bounded: serve takes the rules without that command."""
    from monitor.rules._lint import (
        forbidden_arguments,
        shadowed_rules,
        spaced_prefixes,
        unfireable_alerts,
        unreachable_cases,
    )

    lines = [*shadowed_rules(ruleset), *spaced_prefixes(ruleset), *unreachable_cases(ruleset),
             *forbidden_arguments(ruleset), *unfireable_alerts(ruleset)]
    for line in lines[:MAX_RULE_WARNINGS]:
        logger.warning("%s", line.replace(": warning: ", ": ", 1))  # the log line says WARNING already
    if len(lines) > MAX_RULE_WARNINGS:
        logger.warning("%d more rule warnings: `toolwatch rules check` lists them all", len(lines) - MAX_RULE_WARNINGS)


class Rules:
    """Holds the current judge; `reload()` validates new files first and keeps the old rules if they fail."""

    def __init__(self, paths: Sequence[str | Path], *, judge_factory: JudgeFactory = default_judge_factory) -> None:
        if not paths:
            raise ValueError("at least one rule file is needed (--rules FILE)")
        self.paths = [str(p) for p in paths]
        self._factory = judge_factory
        self.current = self._load(_stamp(self.paths))  # raises RuleFileError: the service does not start on bad rules
        self.last_error: str | None = None
        self._seen: Stamp | None = None  # changed(): the files as the last call saw them
        # The cases files watched with the rule files: those the rules in force name, and after a failed reload also
        # those the failing files name (a cases file missing or broken then: its fix is a change to watch for).
        self._cases: tuple[str, ...] = self.current.ruleset.cases_files

    def _load(self, stamp: Stamp) -> LoadedRules:
        """`stamp`: of the rule files as they were before they were read; the cases files they name are stamped
        once known (a change to one while it was read is taken at the next change)."""
        ruleset = load_rules(self.paths)
        loaded = LoadedRules(ruleset, self._factory(ruleset), stamp[: len(self.paths)] + _stamp(ruleset.cases_files))
        _warn_suspicious(ruleset)
        return loaded

    def _watched(self) -> Stamp:
        """The stamp of the rule files and of the cases files watched with them: a change to either is a change of
        the rules."""
        return _stamp([*self.paths, *self._cases])

    @property
    def judge(self) -> JudgeLike:
        return self.current.judge

    def changed(self) -> bool:
        """True once the files differ from those in force and have not changed since the last call: a file still
        being written (an editor or `cat >` truncates, then writes) is not loaded half-written, which would count a
        failed reload and log an error for a file that is fine a moment later. A change is taken one call late."""
        stamp = self._watched()
        if stamp == self.current.stamp:
            self._seen = None
            return False
        settled, self._seen = stamp == self._seen, stamp
        return settled

    def prepare(self) -> Attempt:
        """Load, validate and compile the files, changing nothing: the slow part of a reload, safe to run in
        another thread than the one judging with the rules in force. `commit()` puts its outcome in force."""
        stamp = self._watched()
        try:
            loaded = self._load(stamp)
            return Attempt(loaded, loaded.stamp, None, loaded.ruleset.cases_files)
        except Exception as exc:  # noqa: BLE001 - whatever fails, the old rules stay (and the file watcher lives)
            return self.failed(exc, stamp)

    def failed(self, exc: BaseException, stamp: Stamp | None = None) -> Attempt:
        """The attempt of a reload that failed with `exc` (`stamp`: the watched files' before it read them): the
        cases files the failing rule files name are watched too from now on."""
        if stamp is None:
            stamp = self._watched()
        new = tuple(c for c in named_cases_files(self.paths) if c not in self._cases)
        return Attempt(None, stamp + _stamp(new), exc, self._cases + new)

    def commit(self, attempt: Attempt) -> bool:
        """Put a prepared reload in force in one step: True when the new rules are in force, False when the old
        ones were kept (`last_error` says why)."""
        exc = attempt.error
        if attempt.loaded is None:
            expected = isinstance(exc, RuleFileError | OSError | ValueError)
            if isinstance(exc, RecursionError):
                self.last_error = "rule file nested too deeply"
            else:
                self.last_error = str(exc) if expected else f"{type(exc).__name__}: {exc}"
            # Remember the failed stamp so an unchanged broken file is not reported every second.
            self.current = LoadedRules(self.current.ruleset, self.current.judge, attempt.stamp)
            self._cases = attempt.cases
            trace = None if expected else exc  # a traceback only for what no rule file should cause
            logger.error("rules reload failed, keeping the previous rules: %s", self.last_error, exc_info=trace)
            return False
        self.current = attempt.loaded
        self._cases = attempt.cases
        self.last_error = None
        logger.info("rules reloaded from %s", ", ".join(self.paths))
        return True

    def reload(self) -> bool:
        """Load the files again, here and now; True when the new rules are in force, False when the old were kept."""
        return self.commit(self.prepare())
