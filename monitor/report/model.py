"""The report every offline command produces, and its JSON form (also read back as a baseline).

A report is plain data: the METRICS.md figures and raw counts from a Tally, the confusion matrix and the
per-tool precision / recall / F1 derived from it, the worst failing turns, one result per turn or case
(for JUnit), series (accuracy as iterations grow) and free tables a command adds (trials, clusters), and the
outcome of the gates the command was given (`emit_report` puts it there, so every form records the same gates), and
whether Ctrl-C or SIGTERM stopped the run (`interrupted`: the report is then of the runs done by then, its gates not
evaluated).

Its JSON has every field as a member; a baseline reads only `figures`, `k` and `interrupted` (a partial report is
refused), so members added since (`gates`, `skipped_comparisons`) leave older reports readable as baselines, and newer
ones too.
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from signal import Signals
from typing import Any

from monitor.report._members import MembersError, ValueTooLarge, cut_short, read_members
from monitor.report._text import natural_key
from monitor.report.figures import FIGURE_KEYS, format_ratio
from monitor.report.gates import GateResult

SCHEMA_VERSION = 1
PER_TOOL_COLUMNS = ["tool", "precision", "recall", "F1", "expected", "called"]
SERIES_TITLE = "Accuracy as iterations grow"
SERIES_TABLE_POINTS = 8


@dataclass(slots=True)
class ToolStats:
    tool: str
    correct: int  # the (A, A) cell
    row_total: int  # expected A
    column_total: int  # called A
    precision: float | None
    recall: float | None
    f1: float | None


@dataclass(slots=True)
class Sample:
    """One failing turn, as the report lists it."""

    ident: str
    agent: str
    input_text: str
    reason: str
    calls: list[str]
    missed: list[str]
    severity: int


@dataclass(slots=True)
class CaseResult:
    """One turn, case or scenario step: one JUnit testcase."""

    name: str
    group: str
    status: str  # "passed", "failed", "skipped", "error"
    message: str = ""
    detail: str = ""
    time_s: float = 0.0


@dataclass(slots=True, frozen=True)
class InputProblem:
    """One kind of problem with a command's input (records skipped, files not read to their end): a JUnit <error>.

    Not part of the Report (nor of its JSON): its tables and notes say the same for the other forms. `message` has
    the count and the first problem; `lines` the problems listed, as many as the report's table lists."""

    name: str
    message: str
    lines: tuple[str, ...] = ()


@dataclass(slots=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]


@dataclass(slots=True, frozen=True)
class Interruption:
    """A run of many stopped by Ctrl-C or SIGTERM (`signal`, its name): its report is of the `completed` of the
    `planned` runs (or steps: `unit`) that ended before it; gates are not evaluated on it. `message` says so, as every
    form shows it."""

    completed: int
    planned: int
    unit: str = "runs"
    message: str = ""
    signal: str = "SIGINT"

    @classmethod
    def of(cls, completed: int, planned: int, unit: str = "runs", detail: str = "",
           signal: str = "SIGINT") -> Interruption:
        said = f"{completed} of {planned} {unit}"
        by = _BY.get(signal, signal)
        message = f"Interrupted ({by}): partial report of {said}{detail}; gates not evaluated"
        return cls(completed, planned, unit, message, signal)

    @property
    def done(self) -> str:
        """`2 of 4 runs`."""
        return f"{self.completed} of {self.planned} {self.unit}"

    @property
    def by(self) -> str:
        """What stopped the run, as the forms say it: `Ctrl-C` (SIGINT) or the signal's name."""
        return _BY.get(self.signal, self.signal)

    @property
    def exit_code(self) -> int:
        """The command's exit code after the partial report: 128 + the signal's number, as a shell reports a process
        the signal ended (130 for Ctrl-C, 143 for SIGTERM)."""
        return 128 + Signals[self.signal].value


_BY = {"SIGINT": "Ctrl-C"}


@dataclass(slots=True)
class Report:
    command: str
    title: str
    accuracy_line: str
    figures: dict[str, float | None]
    counts: dict[str, int]
    confusion: list[tuple[str, str, int]]  # (expected, actual, count), non-zero cells
    per_tool: list[ToolStats]
    worst: list[Sample]
    cases: list[CaseResult]
    cases_dropped: int = 0
    series: dict[str, list[tuple[int, float | None]]] = field(default_factory=dict)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    k: int | None = None  # the k of the pass_hat_k figure (eval's --trials); None when there is no pass^k
    # Every gate asked, passed or not, in gate order; None when no gate was asked (no --fail-under, --fail-over or
    # --baseline). An empty list: only a --baseline, none of whose figures was compared.
    gates: list[GateResult] | None = None
    skipped_comparisons: list[str] = field(default_factory=list)  # the baseline figures not compared, and why
    # Stopped by Ctrl-C or SIGTERM: the report is of the runs done by then, its gates not evaluated (`gates` None).
    # None: a whole run.
    interrupted: Interruption | None = None
    schema_version: int = SCHEMA_VERSION

    def confusion_labels(self) -> tuple[list[str], list[str]]:
        """Row labels (expected) and column labels (actual): tools sorted, then `(none)` / `(unknown)`."""
        specials = ("(none)", "(unknown)")
        rows = {e for e, _, _ in self.confusion}
        cols = {a for _, a, _ in self.confusion}
        tools = sorted((rows | cols) - set(specials), key=natural_key)
        row_labels = tools + [s for s in specials[:1] if s in rows]
        col_labels = tools + [s for s in specials if s in cols]
        return row_labels, col_labels

    def per_tool_rows(self) -> list[list[str]]:
        """The per-tool table as text, in the order of PER_TOOL_COLUMNS."""
        return [
            [t.tool, format_ratio(t.precision), format_ratio(t.recall), format_ratio(t.f1), str(t.row_total),
             str(t.column_total)]
            for t in self.per_tool
        ]

    def series_table(self, points: int = SERIES_TABLE_POINTS) -> Table | None:
        """The series at up to `points` evenly spaced iterations (first and last included), one column each.

        A series not sampled at an iteration shows its latest value before it (blank before its first point).
        """
        series = {name: sorted(pts, key=lambda p: p[0]) for name, pts in self.series.items() if pts}
        if not series:
            return None
        xs = sorted({x for pts in series.values() for x, _ in pts})
        if len(xs) > points > 1:
            xs = [xs[i] for i in sorted({round(i * (len(xs) - 1) / (points - 1)) for i in range(points)})]
        rows = []
        for x in xs:
            row = [str(x)]
            for pts in series.values():
                i = bisect.bisect_right([p[0] for p in pts], x) - 1
                row.append(format_ratio(pts[i][1]) if i >= 0 else "")
            rows.append(row)
        return Table(SERIES_TITLE, ["iteration", *series], rows)

    def confusion_cell(self, expected: str, actual: str) -> int:
        for e, a, n in self.confusion:
            if e == expected and a == actual:
                return n
        return 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["confusion"] = [list(c) for c in self.confusion]
        data["series"] = {k: [list(p) for p in v] for k, v in self.series.items()}
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)


class BaselineError(ValueError):
    """A baseline report that cannot be read."""


@dataclass(slots=True, frozen=True)
class Baseline:
    """What a baseline gate reads of a report written earlier with `--json`."""

    figures: dict[str, float | None]
    k: int | None = None  # the k of its pass_hat_k; None when it has none or does not record it (older reports)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


MAX_BASELINE_BYTES = 64 << 20
"""Largest baseline file read whole, and largest value of one read past it. Only a few members are used (WANTED), but
eval and probe keep up to 100,000 per-case results in the report (260 MB with 400-character non-ASCII inputs, which
JSON writes 6 bytes a character): a larger file is read in chunks, member by member and an array's items one at a
time, keeping only those members. `--baseline` of a device (/dev/zero) or of a multi-GB file read it whole: a
MemoryError traceback or an OOM kill."""

CUT_SHORT = ("the file ends before its JSON does: cut short (a write that stopped: a full disk, a killed writer?); "
             "give a whole report `--json` wrote")
WANTED = ("figures", "k", "interrupted")  # the members of a report a baseline reads


def _read_report(p: Path) -> Any:
    """The JSON of a report file, whole up to MAX_BASELINE_BYTES, else only the members WANTED (read in chunks)."""
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_BASELINE_BYTES + 1)  # a device or pipe has no size to check first
            if len(raw) <= MAX_BASELINE_BYTES:
                return json.loads(raw.decode("utf-8"))
            return read_members(raw, fh, MAX_BASELINE_BYTES, WANTED)
    except ValueTooLarge as exc:
        raise BaselineError(f"{p}: a value over the {exc.limit} byte limit of a baseline report, or no JSON; give "
                            "the file `--json` wrote") from None
    except MembersError as exc:
        cut = f"; {CUT_SHORT}" if exc.cut else ""
        raise BaselineError(f"{p}: baseline is not JSON: {exc.msg} (at character {exc.offset:,}){cut}") from None
    except RecursionError:
        raise BaselineError(f"{p}: baseline is not a toolwatch report: nested too deeply") from None
    except OSError as exc:
        raise BaselineError(f"{p}: cannot read baseline: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        if not exc.doc.strip():
            raise BaselineError(f"{p}: baseline is empty; give the report `--json` wrote") from None
        cut = f"; {CUT_SHORT}" if cut_short(exc) else ""
        raise BaselineError(f"{p}:{exc.lineno}:{exc.colno}: baseline is not JSON: {exc.msg}{cut}") from None
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{p}: baseline is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except ValueError as exc:  # an integer of more digits than int() converts
        raise BaselineError(f"{p}: baseline is not JSON: {exc}") from exc


def _partial(p: Path, stopped: Any) -> BaselineError:
    """The error for a baseline report of a run a signal stopped (its `interrupted` member, as written or not)."""
    said = ""
    if isinstance(stopped, dict):
        done, planned, unit = stopped.get("completed"), stopped.get("planned"), stopped.get("unit")
        signal = stopped.get("signal", "SIGINT")  # reports before SIGTERM was handled were of Ctrl-C
        if all(isinstance(n, int) and not isinstance(n, bool) for n in (done, planned)) and unit in ("runs", "steps"):
            said = f"{done} of {planned} {unit}"
        if signal in ("SIGINT", "SIGTERM"):
            said += f"{', ' if said else ''}stopped by {'Ctrl-C' if signal == 'SIGINT' else signal}"
    return BaselineError(f"{p}: a partial report{f' ({said})' if said else ''}: its figures are of the runs done "
                         "before the stop; give --baseline the report of a run that ended (run it again to its end)")


def load_baseline(path: str | Path) -> Baseline:
    """The figures (and the k of pass^k) of a report written earlier with `--json`; a partial report (of a run a
    signal stopped) is refused: its figures are of part of the runs."""
    p = Path(path)
    data = _read_report(p)
    if isinstance(data, dict) and data.get("interrupted") is not None:
        raise _partial(p, data["interrupted"])
    figures = data.get("figures") if isinstance(data, dict) else None
    if not isinstance(figures, dict):
        raise BaselineError(f"{p}: not a toolwatch report (no 'figures' object); write one with --json")
    out: dict[str, float | None] = {}
    for key, value in figures.items():
        # NaN and infinities (which Python's JSON reader takes) are not figures: NaN would pass every comparison
        if value is None:
            out[str(key)] = None
        elif isinstance(value, int | float) and not isinstance(value, bool) and _finite(value):
            if key in FIGURE_KEYS and not 0.0 <= value <= 1.0:  # a figure is a ratio: 95 (a percentage) passed
                # or failed every run; another key is not compared, whatever it holds
                raise BaselineError(f"{p}: figure {key!r} is {float(value)!r}, outside [0, 1]: figures are ratios "
                                    "(0.95, not 95); give the file `--json` wrote")
            out[str(key)] = float(value)
        else:
            raise BaselineError(f"{p}: figure {key!r} is {value!r}, expected a number or null")
    k = data.get("k")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise BaselineError(f"{p}: 'k' is {k!r}, expected a positive integer or null")
    return Baseline(out, k)


def load_baseline_figures(path: str | Path) -> dict[str, float | None]:
    """The figures of a report written earlier with `--json`."""
    return load_baseline(path).figures
