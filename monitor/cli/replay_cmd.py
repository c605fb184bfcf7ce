"""`toolwatch replay`: judge captured spans offline, exactly as live serving would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from monitor.assembly import DEFAULT_MAX_PENDING_BYTES, AssemblerStats
from monitor.cli._params import RULES_HELP, SIZE_UNITS, ByteSize, Duration, RulesCommand
from monitor.evaluate import load_judge
from monitor.otlp import REASON_BAD_ID
from monitor.replay import (
    FORMATS,
    Replayer,
    ReplayStats,
    SourceError,
    detect_format,
    expand_sources,
    is_stream,
    replay_files,
    total_bytes,
)
from monitor.report import (
    InputProblem,
    ReportBuilder,
    Table,
    emit_then_say,
    pop_report_options,
    report_options,
    visible,
)
from monitor.report.progress import progress_bar
from monitor.rules import RuleFileError
from monitor.sizes import format_size
from monitor.verdict import TurnVerdict

MAX_LISTED_ERRORS = 10
COLLECTOR_FORMATS = {"json": "jsonl", "proto": "pb-be32"}  # the Collector file exporter's `format:` -> ours
_LOOKS = {"jsonl": "OTLP JSON lines (jsonl)", "pb": "OTLP protobuf (pb)"}


class FormatChoice(click.Choice[str]):
    """--format: an unknown one is refused naming the valid ones, and ours for the Collector's `json`/`proto`."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if isinstance(value, str) and value in self.choices:
            return value
        meant = COLLECTOR_FORMATS.get(str(value).strip().lower())
        note = f" (the Collector file exporter's format: {value} is --format {meant})" if meant else ""
        self.fail(f"{str(value)!r} is not a format: {_valid_formats()}{note}", param, ctx)


def _valid_formats() -> str:
    return f"one of {', '.join(FORMATS)}"


@click.command(cls=RulesCommand)
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option("--rules", "rules", multiple=True, required=True, metavar="FILE",
              help=f"Oracle rule file (repeatable; merged in order). {RULES_HELP}")
@click.option("--format", "fmt", type=FormatChoice(FORMATS), default="auto", show_default=True,
              help="Input format: jsonl (OTLP JSON lines), pb (OTLP protobuf, framing detected), pb-be32 (each "
                   "message after a 4-byte big-endian size: the Collector file exporter's format: proto), "
                   "pb-varint (after a varint size), pb-single (one bare message); auto: by suffix and content.")
@click.option("--grace", default="2s", show_default=True, type=Duration(allow_zero=True), metavar="DURATION",
              help="Wait this long (span time) after a turn span arrives for late calls, as `serve --grace`.")
@click.option("--turnless-timeout", default="30s", show_default=True, type=Duration(allow_zero=True),
              metavar="DURATION",
              help="Judge calls whose turn never arrives alone after this long, as `serve --turnless-timeout`.")
@click.option("--max-pending", default=100_000, show_default=True, type=click.IntRange(min=1),
              help="Pending traces held by turn assembly, as `serve --max-pending` (replay a serve run that set it).")
@click.option("--max-pending-bytes", default=format_size(DEFAULT_MAX_PENDING_BYTES), show_default=True, type=ByteSize(),
              help=f"Estimated bytes the pending records may hold, as `serve --max-pending-bytes` ({SIZE_UNITS}).")
@click.option("--strict", is_flag=True, help="Exit 2 when any line or message cannot be decoded.")
@click.option("--worst", type=click.IntRange(0), default=10, show_default=True, help="Failing turns to list.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@report_options
def replay(sources: tuple[str, ...], rules: tuple[str, ...], fmt: str, grace: float, turnless_timeout: float,
           max_pending: int, max_pending_bytes: int, strict: bool, worst: int, no_progress: bool,
           **kwargs: Any) -> None:
    """Replay captured spans through the live judge path and report.

    SOURCE is an OTLP JSON lines file (one ExportTraceServiceRequest per line, as the OpenTelemetry
    Collector file exporter's format: json writes), an OTLP protobuf file (ExportTraceServiceRequest
    messages each after a 4-byte big-endian size as the Collector's format: proto writes, or after a varint
    size, or one bare message), or a directory of them (searched recursively by suffix: .json .jsonl .ndjson /
    .pb .bin .binpb .otlp .protobuf, optionally .gz or .zst, and the Collector's rotated files, oldest first), or -
    for standard input (a FIFO, as <(zcat spans.gz) gives, is read the same way). zstd (the Collector's
    compression: zstd, of the whole file or of each message) and gzip are detected by their magic bytes.

    The spans go through the same decoder, turn assembler and judge as `toolwatch serve`, so the verdicts
    and figures are those live serving gives for the same spans.
    """
    options = pop_report_options(kwargs)
    try:
        judge = load_judge(rules)
    except RuleFileError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from exc
    try:
        paths = expand_sources(sources)
    except SourceError as exc:
        raise click.BadParameter(str(exc), param_hint="'SOURCE...'") from exc
    builder = ReportBuilder(worst=worst, keep_cases=options.junit_path is not None)

    def sink(verdict: TurnVerdict) -> None:
        builder.add(verdict)
        builder.track(builder.tally.turns)

    replayer = Replayer(judge, sink, grace_s=grace, turnless_timeout_s=turnless_timeout, max_pending=max_pending,
                        max_pending_bytes=max_pending_bytes)
    with progress_bar(bytes_mode=True, disable=no_progress or options.quiet) as progress:
        task = progress.add_task("replay", total=total_bytes(paths), status="")

        def advance(n: int) -> None:
            progress.update(task, advance=n, status=f"{replayer.stats.turns} turns")

        try:
            stats = replay_files(replayer, paths, fmt=fmt, on_progress=advance)
        except SourceError as exc:
            click.echo(visible(f"error: {exc}"), err=True)
            raise SystemExit(2) from exc
        progress.update(task, status=f"{stats.turns} turns")
    if builder.tally.turns:  # the last point; no turn, no series (a lone 'absent at 0' said nothing)
        builder.track(builder.tally.turns, force=True)
    notes = [f"{stats.files} file(s), {stats.requests} export requests, {stats.spans} spans, "
             f"{stats.turns} turns ({stats.turnless} turnless)"]
    if stats.rejected_spans:
        notes.append(f"spans rejected by the decoder: {_reasons(stats.rejected_spans)}")
    if stats.unusable_spans:
        notes.append(f"spans rejected by the normalizer: {_reasons(stats.unusable_spans)}")
    if stats.read_errors:  # every form says it (JUnit has it as an input error too), beside gates that may pass
        notes.append(f"{len(stats.read_errors)} file(s) not read to their end (exit 2): the figures and gates are of "
                     f"what was read before; first: {stats.read_errors[0]}")
    evicted, for_bytes = replayer.assembler.stats.evicted, replayer.assembler.stats.evicted_for_bytes
    if evicted:
        notes.append(f"{evicted} pending turns judged early ({evicted - for_bytes} at the bound of pending traces, "
                     f"{for_bytes} at the bound of pending bytes)")
    dropped = _dropped(replayer.assembler.stats)
    if dropped:
        notes.append(f"dropped by turn assembly, as serve drops them: {dropped} (the order the sources are read in "
                     "decides late ones)")
    tables = []
    bad = stats.bad_records
    if bad.total:
        rows = [[b.path, b.where, b.message[:200]] for b in bad[:MAX_LISTED_ERRORS]]
        more = bad.total - len(rows)
        tables.append(Table(f"Undecodable records ({bad.total}; skipped)", ["file", "where", "error"],
                            rows + ([["…", f"{more} more", ""]] if more > 0 else [])))
    report = builder.build("replay", f"toolwatch replay: {len(paths)} file(s)", tables=tables, notes=notes)
    skipped = [_skipped(stats)] if stats.turns and (bad.total or stats.rejected_spans) else []  # else an error below
    # the report, then what of the input could not be read or used (`_diagnose`: 2 or 0): exit 2 after it, whatever
    # the gates
    raise SystemExit(emit_then_say(report, options, skipped, _problems(stats),
                                   lambda: _diagnose(stats, strict=strict, fmt=fmt, paths=paths) != 0))


def _listed(problems: list[str], total: int) -> tuple[str, ...]:
    """The first MAX_LISTED_ERRORS problems, and how many more there are, as the report's table lists them."""
    shown = problems[:MAX_LISTED_ERRORS]
    more = total - len(shown)
    return (*shown, *([f"… {more} more"] if more > 0 else []))


def _problems(stats: ReplayStats) -> list[InputProblem]:
    """What of the input could not be used, one InputProblem per kind (for the JUnit report)."""
    out = []
    bad = stats.bad_records
    if bad.total:
        out.append(InputProblem("undecodable records",
                                f"{bad.total} undecodable record(s) skipped; first: {str(bad[0])[:300]}",
                                _listed([f"{b.path}: {b.where}: {b.message[:200]}" for b in bad[:MAX_LISTED_ERRORS]],
                                        bad.total)))
    rejected = sum(stats.rejected_spans.values())
    if rejected:
        out.append(InputProblem("spans rejected by the decoder",
                                f"{rejected} of {stats.spans + rejected} span(s) rejected by the decoder "
                                f"({_reasons(stats.rejected_spans)})",
                                tuple(f"{k}: {v}" for k, v in sorted(stats.rejected_spans.items()))))
    unusable = sum(stats.unusable_spans.values())
    if unusable:
        out.append(InputProblem("spans rejected by the normalizer",
                                f"{unusable} span(s) rejected by the normalizer ({_reasons(stats.unusable_spans)}): "
                                "their calls are in no figure",
                                tuple(f"{k}: {v}" for k, v in sorted(stats.unusable_spans.items()))))
    errors = stats.read_errors
    if errors:
        out.append(InputProblem("files not read to their end",
                                f"{len(errors)} file(s) not read to their end; first: {errors[0]}",
                                _listed(errors, len(errors))))
    return out


def _diagnose(stats: ReplayStats, *, strict: bool, fmt: str = "auto", paths: list[Path] | None = None) -> int:
    """Says on stderr what could not be read or used, and what there was nothing to judge in; the exit code it calls
    for (2: an input error), else 0 (the report's own code stands)."""
    bad = stats.bad_records
    for error in stats.read_errors:
        click.echo(visible(f"error: {error}"), err=True)
    no_turns = not stats.turns and bool(bad.total or stats.rejected_spans)
    # a --format given that does not fit is the likeliest cause of both: said instead of the generic hint
    forced = _format_hint(fmt, paths or []) if (stats.read_errors or no_turns) and fmt != "auto" else None
    if no_turns:
        click.echo(visible(f"error: no turns replayed: {_skipped(stats)}"), err=True)
    if forced or no_turns:
        click.echo(visible(f"hint: {forced or _hint(stats)}"), err=True)
    if no_turns:
        return 2
    if not stats.turns and not stats.read_errors and not bad.total and not stats.rejected_spans:
        click.echo(f"warning: no turns to judge: {stats.spans} span(s) read, none of them an agent turn or a tool call "
                   "(GenAI invoke_agent / execute_tool spans); is the agent instrumented, and is this its capture?",
                   err=True)
    if strict and bad.total:
        click.echo(visible(f"error: {bad.total} undecodable record(s) (--strict); first: {bad[0]}"), err=True)
        return 2
    return 2 if stats.read_errors else 0


def _format_hint(fmt: str, paths: list[Path]) -> str | None:
    """What to say when the files did not read as the --format given: the first whose content looks like the other
    kind (JSON lines vs protobuf), or that the framing may be another; None when neither applies."""
    for p in paths:
        if is_stream(p):  # read once: opened again, a FIFO would wait for a writer that is gone
            continue
        try:
            kind = detect_format(p)
        except SourceError:  # said already: it is why the hint is given
            continue
        if (kind == "jsonl") != (fmt == "jsonl"):
            return (f"--format {fmt} was given, but {p} looks like {_LOOKS[kind]}: leave --format out to detect the "
                    f"format, or give the right one ({_valid_formats()})")
    if fmt in ("pb-be32", "pb-varint", "pb-single"):
        return (f"--format {fmt} was given: the framing may be another; leave --format out (or give pb) to detect "
                f"it, or give the right one ({_valid_formats()})")
    return None


def _dropped(st: AssemblerStats) -> str:
    """What turn assembly dropped (serve's drop metrics), in one phrase; empty when nothing was."""
    parts = [(st.late_calls, "late call(s) (read after their turn was judged)"),
             (st.late_turns, "late turn(s) (read after their calls were judged alone)"),
             (st.duplicates, "duplicate span(s)"),
             (st.oversized_calls, "call(s) past a trace's bound"),
             (st.oversized_spans, "span(s) past a trace's bound")]
    return ", ".join(f"{n} {what}" for n, what in parts if n)


def _reasons(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))


def _skipped(stats: ReplayStats) -> str:
    """The counts of what could not be used, in one line."""
    parts = []
    bad = stats.bad_records
    if bad.total:
        parts.append(f"{bad.total} undecodable record(s) skipped (first: {str(bad[0])[:300]})")
    rejected = sum(stats.rejected_spans.values())
    if rejected:
        parts.append(f"{rejected} of {stats.spans + rejected} span(s) rejected by the decoder "
                     f"({_reasons(stats.rejected_spans)})")
    return "; ".join(parts)


def _hint(stats: ReplayStats) -> str:
    if stats.rejected_spans.get(REASON_BAD_ID):
        return ("trace and span ids must be 16 and 8 bytes: hex strings in OTLP JSON (as the Collector file exporter "
                "writes), not base64 (the generic protobuf JSON mapping)")
    if stats.bad_records.total:
        return (f"is this an OTLP trace capture? --format chooses how to read it ({', '.join(FORMATS[1:])}); "
                "the first bad record says what was wrong")
    return "the spans were rejected by the decoder for the reasons above (see the OTLP specification)"
