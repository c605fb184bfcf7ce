"""The report and gate options every offline command shares, and writing a report where they say.

Options are validated before the work starts (a typo in a gate must not cost a long run).
"""

from __future__ import annotations

import codecs
import errno
import os
import select
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO, TypeVar

import click

from monitor._atomic import stream_of, write_atomically
from monitor.report._text import printable, visible
from monitor.report.gates import Threshold, failures_of, gate_results, parse_gate, skipped_comparisons
from monitor.report.html import render_html
from monitor.report.junit import render_junit
from monitor.report.markdown import render_markdown
from monitor.report.model import Baseline, BaselineError, InputProblem, Interruption, Report, load_baseline
from monitor.report.terminal import render_terminal

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(slots=True)
class ReportOptions:
    json_path: str | None = None
    markdown_path: str | None = None
    junit_path: str | None = None
    html_path: str | None = None
    fail_under: list[Threshold] = field(default_factory=list)
    fail_over: list[Threshold] = field(default_factory=list)
    baseline: Baseline | None = None
    max_drop: float = 0.0
    quiet: bool = False

    def stdout_forms(self) -> list[str]:
        """The options that write to stdout ('-')."""
        paths = (("--json", self.json_path), ("--markdown", self.markdown_path), ("--junit", self.junit_path),
                 ("--html", self.html_path))
        return [name for name, path in paths if path == "-"]


def _thresholds(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[Threshold]:
    try:
        return [parse_gate(v, over=param.name == "fail_over") for v in values]
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def _baseline(ctx: click.Context, param: click.Parameter, value: str | None) -> Baseline | None:
    if value is None:
        return None
    try:
        return load_baseline(value)
    except BaselineError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def report_options(func: F) -> F:
    """Adds --json/--markdown/--junit/--html, --fail-under/--fail-over, --baseline/--max-drop, --quiet."""
    opts = [
        click.option("--json", "json_path", metavar="PATH", help="Write the report as JSON ('-' for stdout)."),
        click.option("--markdown", "markdown_path", metavar="PATH", help="Write Markdown ('-' = stdout)."),
        click.option("--junit", "junit_path", metavar="PATH", help="Write JUnit XML: one testcase per turn or case."),
        click.option("--html", "html_path", metavar="PATH", help="Write one self-contained HTML file."),
        click.option("--fail-under", multiple=True, callback=_thresholds, metavar="FIGURE=VALUE",
                     help="Exit 1 when FIGURE is below VALUE (e.g. accuracy=0.95, schema_adherence=99%); figures "
                          "where higher is better, and tool_usage_rate (no better direction). A figure the run "
                          "could not compute (absent: zero denominator) fails too, said so. Repeatable."),
        click.option("--fail-over", multiple=True, callback=_thresholds, metavar="FIGURE=VALUE",
                     help="Exit 1 when FIGURE is above VALUE (e.g. spurious_rate=0.05); the rates where lower is "
                          "better, and tool_usage_rate. A figure the run could not compute fails too, said so. "
                          "Repeatable."),
        click.option("--baseline", callback=_baseline, metavar="REPORT.json",
                     help="A report written earlier with --json; exit 1 when a figure got worse by more than "
                          "--max-drop."),
        click.option("--max-drop", type=click.FloatRange(0.0, 1.0), default=None,
                     help="Largest allowed regression against --baseline, as a ratio (0.02 = 2 points): a drop of a "
                          "figure where higher is better, a rise of a rate where lower is better (tool_usage_rate is "
                          "not compared). Needs --baseline. "
                          "Default 0: any regression fails."),
        click.option("-q", "--quiet", is_flag=True,
                     help="Print only the accuracy line and gate results (no tables, no progress bar)."),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def pop_report_options(kwargs: dict[str, Any]) -> ReportOptions:
    """Take the shared options out of a command's keyword arguments; a usage error for options that do not apply
    and when two forms go to stdout."""
    max_drop = kwargs.pop("max_drop")
    if max_drop is not None and kwargs["baseline"] is None:
        raise click.UsageError("--max-drop applies to --baseline (the largest regression allowed against it); "
                               "give --baseline REPORT.json, or use --fail-under/--fail-over for a fixed threshold")
    options = ReportOptions(
        json_path=_stdout_as_dash(kwargs.pop("json_path")),
        markdown_path=_stdout_as_dash(kwargs.pop("markdown_path")),
        junit_path=_stdout_as_dash(kwargs.pop("junit_path")),
        html_path=_stdout_as_dash(kwargs.pop("html_path")),
        fail_under=list(kwargs.pop("fail_under")),
        fail_over=list(kwargs.pop("fail_over")),
        baseline=kwargs.pop("baseline"),
        max_drop=0.0 if max_drop is None else max_drop,
        quiet=kwargs.pop("quiet"),
    )
    _check_stdout(options)
    _check_paths(options)
    return options


def _stdout_as_dash(path: str | None) -> str | None:
    """'-' for a path naming the file standard output has open (`/dev/stdout`, `/proc/self/fd/1`, the file it is
    redirected to: `stream_of`): the report alone goes there and the summary to stderr, as for '-' (written after the
    report, the summary made the stream no JSON or XML reader could read)."""
    if path is None or path == "-" or stream_of(path) is not sys.stdout:
        return path
    try:
        null = os.path.samefile(path, os.devnull)  # none reads null
    except OSError:
        return path
    return path if null else "-"


def _unwritable(path: str) -> str | None:
    """Why a report could not be written at `path` (None: as far as can be told before writing). The parent
    directories missing are made when it is written."""
    if path == "-":
        return None
    if path.endswith(("/", os.sep)):
        return "a directory, give a file name"
    try:  # a link to a link to it, or a path under one: no file can be had there (read as missing below)
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return os.strerror(errno.ELOOP)
    target = Path(path)
    if target.is_dir():
        return os.strerror(errno.EISDIR)
    ancestor = target.parent
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:  # a path under a file is missing too
        ancestor = ancestor.parent
    if ancestor.is_symlink() and not ancestor.exists():
        return f"{ancestor} is a link to nothing"
    if not ancestor.is_dir():
        return os.strerror(errno.ENOTDIR)
    writable = os.access(target, os.W_OK) if target.exists() else os.access(ancestor, os.W_OK | os.X_OK)
    return None if writable else os.strerror(errno.EACCES)


def _check_paths(options: ReportOptions) -> None:
    """Every report path, checked before the run: one that cannot be written was found only after it, and its
    error took the place of the summary and the gates' outcome."""
    paths = (("--json", options.json_path), ("--markdown", options.markdown_path),
             ("--junit", options.junit_path), ("--html", options.html_path))
    seen: dict[str, str] = {}
    for name, path in paths:
        if not path:
            continue
        why = _unwritable(path)
        if why is not None:
            raise ReportWriteError(f"cannot write {path}: {why} ({name})")
        key = path if path == "-" else os.path.realpath(path)
        if key in seen and path != "-":
            raise click.UsageError(f"{seen[key]} and {name} both write {path}: the second would overwrite the first; "
                                   "give each report its own path")
        seen[key] = name


def _check_stdout(options: ReportOptions) -> None:
    forms = options.stdout_forms()
    if len(forms) > 1:
        both = "both" if len(forms) == 2 else "all"
        raise click.UsageError(
            f"only one report can go to stdout ('-'), but {', '.join(forms[:-1])} and {forms[-1]} {both} ask for it "
            "(mixed, they would make one invalid stream); give all but one of them a file path",
            ctx=click.get_current_context(silent=True),
        )


class ReportWriteError(click.ClickException):
    """A report path that cannot be written: an option error (exit 2, as a bad --baseline); 1 is a failed gate's."""

    exit_code = 2


def _to_stdout(text: str, *, xml: bool) -> None:
    """`text` on standard output, whole, what its encoding cannot hold escaped: as character references in an XML or
    HTML form (`xml`), which says it is UTF-8, so that on a stdout of another encoding it is ASCII (Latin-1 bytes made
    the JUnit form no XML a reader could parse, and the HTML one's text garbled), else as Python escapes them. Into its
    file descriptor when it has one, each partial write followed by the rest: a blocked write that a signal interrupts
    (its handler returning: one held till the report is out, cli._interrupt) returns part written, and sys.stdout's
    buffered writer then dropped the rest (CPython 3.11). A descriptor in non-blocking mode is waited on when full, not
    given up (BlockingIOError: the report cut short)."""
    out = sys.stdout
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test runner's capture): its own write
        out.write(text)
        out.flush()
        return
    encoding = out.encoding or "utf-8"
    if xml and codecs.lookup(encoding).name != "utf-8":
        encoding = "ascii"  # UTF-8, as the form says, and the same in an ASCII or Latin-1 stream
    data = memoryview(text.encode(encoding, "xmlcharrefreplace" if xml else "backslashreplace"))
    out.flush()  # what was printed before, first
    while data:
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:  # a non-blocking descriptor (shared with a parent) and a full pipe: wait for room
            select.select([], [fd], [])


def _write(path: str, text: str, *, xml: bool = False) -> None:
    """One form at `path` ('-': stdout), whole or not at all (`write_atomically`). On a stdout whose encoding lacks
    some of its characters (ASCII, Latin-1), those are escaped: as character references in an XML or HTML form
    (`xml`; all but ASCII, on a stdout that is not UTF-8), which its readers read back as the characters, else as
    Python escapes them (`\\xef`)."""
    text = printable(text)  # a lone surrogate (valid in JSON input) is written as \\udXXX, not a crash
    if path == "-":
        _to_stdout(text, xml=xml)
        return
    write_atomically(path, text)


def with_gates(report: Report, options: ReportOptions) -> Report:
    """The report with the outcome of the gates `options` ask for: each gate passed or not, and the baseline
    comparisons skipped and why (no gate asked: `gates` None). Every form and the terminal take them from it."""
    baseline = options.baseline
    if not (options.fail_under or options.fail_over or baseline is not None):
        return report
    gates = gate_results(
        report.figures,
        fail_under=options.fail_under,
        fail_over=options.fail_over,
        baseline=None if baseline is None else baseline.figures,
        max_drop=options.max_drop,
        k=report.k,
        baseline_k=None if baseline is None else baseline.k,
    )
    skipped = [] if baseline is None else skipped_comparisons(report.figures, baseline.figures, k=report.k,
                                                               baseline_k=baseline.k)
    return replace(report, gates=gates, skipped_comparisons=skipped)


def _print_gates(report: Report, out: TextIO) -> int:
    """The gates' outcome under the summary (for a partial report: that they were not evaluated); how many failed."""
    if report.interrupted is not None:
        click.echo(printable(report.interrupted.message), file=out)
    failures = failures_of(report.gates or [])
    if failures:
        click.echo(f"FAILED {len(failures)} gate(s):", file=out)
        for f in failures:
            click.echo(f"  - {f.message}", file=out)
    elif report.gates is not None:
        click.echo("All gates passed.", file=out)
    return len(failures)


def _interrupted(stopped: Interruption, unwritten: Sequence[str]) -> int:
    """The end of a partial report's output: the exit code of a command the signal stopped (130 for Ctrl-C, 143 for
    SIGTERM), also when a form could not be written (said on stderr)."""
    for reason in unwritten:
        click.echo(f"error: {visible(reason)}", err=True)
    ended = "Aborted!" if stopped.signal == "SIGINT" else "Terminated!"
    click.echo(f"{ended} The report is of {stopped.done}.", err=True)
    return stopped.exit_code


def emit_report(
    report: Report, options: ReportOptions, warnings: Sequence[str] = (), problems: Sequence[InputProblem] = (),
    said: Collection[str] = (),
) -> int:
    """Write every requested form, print the summary and the gate results; the exit code (0 or 1; for a report of a run
    stopped by Ctrl-C or SIGTERM, whose gates are not evaluated, 130 or 143, a form not written or not), or, after all
    that is printed, ReportWriteError (exit 2) naming each form that could not be written. The gates are
    put on the report first (`with_gates`), so each form records them. `warnings`: what the report's tables and
    notes already say but -q must not hide (runs that raised, records skipped), printed on stderr as
    `warning: ...` with -q only. `problems`: the kinds of problem with the input, which the JUnit form has as
    errors (the others have them in the report's tables and notes). `said`: the report's notes the command says
    itself on stderr after it (its `error:` lines, `emit_then_say`): left out of the summary when that goes to stderr
    too (a form on stdout), where they would be said twice; every form, and a summary on stdout, keeps them."""
    _check_stdout(options)
    if report.interrupted is None:  # a partial run's figures are not gated (its exit says it was interrupted)
        report = with_gates(report, options)
    writers: list[tuple[str | None, Callable[[Report], str], bool]] = [  # the path, the form, whether it is XML
        (options.json_path, lambda r: r.to_json() + "\n", False),
        (options.markdown_path, render_markdown, False),
        (options.junit_path, lambda r: render_junit(r, problems=problems), True),
        (options.html_path, render_html, True),
    ]
    unwritten: list[str] = []
    for path, render, xml in writers:
        if path:
            try:
                _write(path, render(report), xml=xml)
            except OSError as exc:  # after the run (a disk that fills): the summary and the gates still print
                unwritten.append(f"cannot write {path}: {exc.strerror or exc}")
    to_stdout = bool(options.stdout_forms())
    out = sys.stderr if to_stdout else sys.stdout
    if options.quiet:
        click.echo(printable(report.accuracy_line), file=out)
        for warning in warnings:
            click.echo(f"warning: {visible(warning)}", err=True)
    elif to_stdout and said:
        render_terminal(replace(report, notes=[n for n in report.notes if n not in said]), out)
    else:
        render_terminal(report, out)
    for reason in report.skipped_comparisons:
        click.echo(f"Not compared with the baseline: {reason}", file=out)
    failed = _print_gates(report, out)
    if report.interrupted is not None:
        return _interrupted(report.interrupted, unwritten)
    if unwritten:
        raise ReportWriteError("; ".join(unwritten))
    return 1 if failed else 0


def emit_then_say(report: Report, options: ReportOptions, warnings: Sequence[str], problems: Sequence[InputProblem],
                  say: Callable[[], bool], said: Collection[str] = ()) -> int:
    """The report written and printed (`emit_report`), then `say` says the command's errors on stderr and tells
    whether there was one: the exit code, 2 after an error whatever the gates. A form that could not be written
    (ReportWriteError, exit 2) is raised once the errors are said too, so that it hides none of them. `said`: the
    report's notes that `say` says (`emit_report`: not in a summary on stderr as well)."""
    try:
        code = emit_report(report, options, warnings, problems, said)
    except ReportWriteError:
        say()
        raise
    return 2 if say() else code
