"""`toolwatch eval`: run an agent on a labelled dataset (K trials per case) or on multi-step scenarios."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from monitor.cli._interrupt import runs_over, stop_on_signal
from monitor.cli._params import RULES_HELP, Duration, RulesCommand
from monitor.evaluate import (
    CASE_CALL,
    DEFAULT_TIMEOUT_S,
    STEP_CALL,
    EvalResult,
    Harness,
    Interrupted,
    LoadError,
    RunResult,
    agent_name_problem,
    default_agent_name,
    load_callable,
    load_dataset,
    route_global_tracing,
    run_eval,
)
from monitor.judge import Judge
from monitor.report import (
    CaseResult,
    InputProblem,
    Interruption,
    ReportBuilder,
    Table,
    emit_then_say,
    format_ratio,
    natural_key,
    pop_report_options,
    report_options,
    visible,
)
from monitor.report.progress import progress_bar
from monitor.rules import RuleFileError
from monitor.scenario import (
    MODES,
    ScenarioError,
    ScenarioFile,
    ScenarioRun,
    agent_name_conflict,
    forbidden_step_arguments,
    load_and_build,
    own_reply_steps,
    run_scenarios,
)
from monitor.verdict import TurnVerdict

logger = logging.getLogger(__name__)
TRACEBACKS_SHOWN = 3  # agent tracebacks printed with -v (every one is in the JUnit <error> body)
# What a dataset's or a scenario's runs give the report: its tables, notes, figures, the warnings -q still prints, the
# signal that stopped the runs (None: none did), and the error when no run completed (`none_completed`).
_Ran = tuple[list[Table], list[str], dict[str, float | None], list[str], Interruption | None, str | None]


def _fail_load(exc: Exception, rules: tuple[str, ...] = ()) -> None:
    hint = ""
    if not rules and "catalog" in str(exc):
        hint = "\nhint: give the rule file with the tool catalog: --rules FILE"
    click.echo(f"error: {visible(str(exc))}{hint}", err=True)
    raise SystemExit(2) from exc


def _add_result(builder: ReportBuilder, label: str, group: str, verdict: TurnVerdict | None, run: RunResult,
                passed: bool, reason: str, detail: str) -> None:
    """One trial or scenario step: a JUnit error when no turn was judged, else the verdict with its status; the
    agent's traceback (or its stack at the timeout) in the body."""
    if verdict is None:
        body = f"{detail}\n{run.traceback}" if run.traceback else detail
        builder.add_case(CaseResult(label, group, "error", reason, body, run.duration_s))
    else:
        status = "passed" if passed else ("error" if run.error else "failed")
        builder.add(verdict, case_id=label, group=group, time_s=run.duration_s, status=status, message=reason,
                    detail=run.traceback)


def warn_agent_name(judge: Judge, name: str, remedy: str = "give --agent-name") -> str | None:
    """A warning on stderr (also with -q, before the run) when no rule file applies to the turns of agent `name`;
    the problem (None: there is none), which the report records too (`agent_name_input`)."""
    problem = agent_name_problem(judge, name, remedy)
    if problem:
        click.echo(f"warning: {problem}", err=True)
    return problem


def agent_name_input(problem: str | None, notes: list[str], problems: list[InputProblem]) -> str | None:
    """Record a `warn_agent_name` problem in the report: a note (the JSON, Markdown, HTML and terminal forms) and an
    input problem (a JUnit error, so a CI test view is not green over turns no rule judged). The note added, if any."""
    if not problem:
        return None
    note = f"warning: {problem}"
    notes.append(note)
    problems.append(InputProblem("agent name", problem))
    return note


def warn_inputs(warnings: Sequence[str]) -> list[str]:
    """Warnings about the dataset or scenario file (an argument check no call that keeps to the tool's schema can
    pass): printed on stderr before the run (also with -q); the report's notes about them, `warning: ...` each (not
    JUnit errors: the cases they are about fail anyway, and a rule file with such a check only warns too)."""
    notes = [f"warning: {w}" for w in warnings]
    for note in notes:
        click.echo(note, err=True)
    return notes


def show_tracebacks(failures: Sequence[tuple[str, str, str]], command: str) -> str | None:
    """(label, error, traceback) of the runs that raised or timed out: with -v (logging at INFO) the first
    TRACEBACKS_SHOWN tracebacks are printed. The report's note about them (None when there is none), which is also
    a warning -q does not hide (an agent that fails every run otherwise shows only an absent accuracy)."""
    if not failures:
        return None
    note = f"{len(failures)} run(s) raised or timed out"
    if not logger.isEnabledFor(logging.INFO):
        return f"{note}; `toolwatch -v {command} ...` prints the agent's traceback (the JUnit report has every one)"
    for label, error, tb in failures[:TRACEBACKS_SHOWN]:
        logger.info("%s: %s\n%s", visible(label), visible(error), visible(tb.rstrip()))  # no ESC reaches the terminal
    if len(failures) > TRACEBACKS_SHOWN:
        logger.info("%d more run(s) with a traceback: see the JUnit report", len(failures) - TRACEBACKS_SHOWN)
    return note


def none_completed(errors: Sequence[str | None], unit: str) -> str | None:
    """The error when no run of the agent completed: every one of the runs whose `errors` these are (eval's trials,
    scenario steps, probe's runs: `unit`) raised or timed out, so the agent could not be evaluated (exit 2, as for an
    agent that does not import); None when one did, or none ran. The calls the runs made are judged all the same,
    and a gate may pass on them."""
    if not errors or any(e is None for e in errors):
        return None
    return f"every {unit} raised or timed out ({len(errors)} of {len(errors)}): no {unit} of the agent completed"


def exit_note(error: str | None) -> list[str]:
    """The report's note of `none_completed`'s error ([]: there is none), so that its forms say why the exit was 2.
    On stderr `say_none_completed` says it instead (`emit_then_say`'s `said`: not in a summary there as well)."""
    return [f"{error} (exit 2)"] if error else []


def say_none_completed(error: str | None) -> bool:
    """`none_completed`'s error, if any, said on stderr after the report; whether there was one (exit 2). How to see
    the agent's tracebacks is `show_tracebacks`' note, which the terminal has already (-q: its warning)."""
    if error:
        click.echo(f"error: {error}", err=True)
    return error is not None


def add_strays(builder: ReportBuilder, strays: Sequence[TurnVerdict], group: str, where: str) -> str | None:
    """Calls made outside every run's turn, judged alone (turnless, as serve judges them): into the report; the
    report's note about them (None when there is none)."""
    for v in strays:
        builder.add(v, group=group)
    calls = sum(len(v.calls) for v in strays)
    if not calls:
        return None
    return (f"{calls} tool call(s) ran outside every {where}'s turn, so count for none (a thread started without the "
            "OpenTelemetry context?): judged alone, as serve judges them (catalog and schema checks only); run "
            "tools in the agent's thread, in asyncio tasks, or with contextvars.copy_context().run to have them count")


def late_note(harness: Harness, where: str) -> str | None:
    """The report's note about what runs past their timeout did after it (None: nothing): the calls they made then,
    which count for no `where` (a run is judged on the calls ended by its timeout; a sync agent's thread cannot be
    stopped), and the runs still going on, whose later calls are not seen."""
    late, running = harness.late_calls, harness.still_running()
    parts = []
    if late:
        parts.append(f"{late} tool call(s) ended after their {where}'s timeout, so count for none (each timed-out "
                     f"{where} is judged on the calls ended by its timeout)")
    if running:
        parts.append(f"{running} timed-out {where}(s) still running at the end (a sync agent's thread cannot be "
                     "stopped): calls they make now are not seen")
    if not parts:
        return None
    return "; ".join(parts) + ("; make the agent return within --timeout, or raise --timeout")


def answer_note(answer_types: Iterable[str | None]) -> str | None:
    """The report's note about runs whose agent returned something other than the answer text (`RunResult.answer_type`
    of each run; None: none did)."""
    types = Counter(t for t in answer_types if t)
    if not types:
        return None
    what = " or ".join(f"{'an' if t[:1].lower() in 'aeio' else 'a'} {t}" for t in sorted(types))
    return (f"{sum(types.values())} run(s) returned {what}, not the answer text: recorded as no answer, so their "
            "response checks fail (return the answer as a str)")


def _eval_tables(result: EvalResult, partial: bool = False) -> list[Table]:
    """The cases, worst first, and with trials pass^k for each k; of an interrupted eval (`partial`), each pass^k with
    the number of cases it is over (those with k trials done)."""
    ranked = []
    for name, trials in result.by_case().items():
        passed = sum(t.passed for t in trials)
        first_bad = next((t for t in trials if not t.passed), None)
        row = [name, f"{passed}/{len(trials)}", first_bad.reason if first_bad else ""]
        ranked.append((passed / len(trials), name, row))
    rows = [row for _, _, row in sorted(ranked, key=lambda r: (r[0], natural_key(r[1])))]
    tables = [Table("Cases (worst first)", ["case", "passed trials", "first failure"], rows)]
    if result.k > 1:
        done = [len(trials) for trials in result.by_case().values()]
        hat = [[str(k), format_ratio(result.pass_hat(k))] + ([str(sum(n >= k for n in done))] if partial else [])
               for k in range(1, result.k + 1)]
        tables.append(Table("pass^k (chance that k trials of a case all pass)",
                            ["k", "pass^k"] + (["cases"] if partial else []), hat))
    return tables


def _pass_hat_cases(result: EvalResult, planned: int, stopped: Interruption) -> str:
    """Which cases pass^k of an interrupted eval is over: those whose k trials were all done (`planned` cases)."""
    done = [len(trials) for trials in result.by_case().values()]
    whole = sum(n >= result.k for n in done)
    return (f"over the {whole} of {planned} case(s) whose {result.k} trials were all done before {stopped.by} "
            f"({len(done) - whole} cut short, {planned - len(done)} not started: left out)")


def _run_dataset(dataset: str, agent: Any, rules: tuple[str, ...], agent_name: str | None, trials: int,
                 concurrency: int, timeout_s: float | None, builder: ReportBuilder, no_progress: bool,
                 problems: list[InputProblem]) -> _Ran:
    try:
        loaded = load_dataset(dataset, rules, agent=agent_name)  # every problem of the files, at once
        judge, cases = Judge(loaded.ruleset), loaded.cases
    except RuleFileError as exc:
        _fail_load(exc, rules)
        raise
    name = default_agent_name(judge.agents, agent_name)
    # Each turn is a case, judged by its case's expectation against the whole catalog when the cases are unscoped (no
    # --agent-name): then the rule files' agents do not matter. Scoped to --agent-name, the catalog is that agent's.
    dataset_cases = judge.ruleset.cases[len(judge.ruleset.cases) - len(cases):] if cases else ()
    problem = None
    if not dataset_cases or any(exp.agent is not None for _, _, exp in dataset_cases):
        problem = warn_agent_name(judge, name)
    input_notes = warn_inputs(loaded.forbidden_arguments())
    with (Harness(agent_name=name) as harness, route_global_tracing(harness.provider, harness.processor),
          progress_bar(disable=no_progress) as progress):
        task = progress.add_task("eval", total=len(cases) * trials, status="")
        stopped = None
        try:
            result = run_eval(cases, agent, judge, harness, trials=trials, concurrency=concurrency,
                              timeout_s=timeout_s, on_run=lambda _: progress.update(task, advance=1))
            runs_over(len(result.trials))  # a signal from now on waits for the report, whole
        except Interrupted as exc:  # Ctrl-C or SIGTERM: the report of the runs done
            result = exc.partial
            stopped = Interruption.of(len(result.trials), len(cases) * trials, signal=exc.signal)
    failures = []
    for n, t in enumerate(result.trials, 1):
        label = t.case.key if trials == 1 else f"{t.case.key} trial {t.trial}"
        _add_result(builder, label, name, t.verdict, t.run, t.passed, t.reason, f"input: {t.case.input_text[:400]}")
        builder.track(n)
        if t.run.traceback:
            failures.append((label, t.run.error or "", t.run.traceback))
    extra = {"pass_rate": result.pass_rate}
    planned, rate = f"{len(cases)} case(s) x {trials} trial(s)", format_ratio(extra["pass_rate"])
    notes = [f"{planned}; pass rate {rate}" if stopped is None else  # the runs done, not those planned
             f"{stopped.done} done before {stopped.by} ({planned} planned); pass rate {rate}"]
    agent_name_input(problem, notes, problems)
    notes += input_notes
    notes += [n for n in (add_strays(builder, result.strays, name, "run"), late_note(harness, "run"),
                          answer_note(t.run.answer_type for t in result.trials)) if n]
    note = show_tracebacks(failures, "eval")
    warnings = [note] if note else []
    notes += warnings
    error = None if stopped is not None else none_completed([t.run.error for t in result.trials], "run")
    notes += exit_note(error)
    if trials > 1:  # pass^1 is the pass rate: no row of its own
        extra["pass_hat_k"] = result.pass_hat(trials)
        over = "" if stopped is None else f", {_pass_hat_cases(result, len(cases), stopped)}"
        notes.append(f"pass^{trials} = {format_ratio(extra['pass_hat_k'])}{over}")
    return _eval_tables(result, stopped is not None), notes, extra, warnings, stopped, error


def _check_options(dataset: str | None, scenario: str | None) -> None:
    """Usage errors for options that do not apply to the chosen input. (A --baseline whose pass^k is of another k
    is not one: its other figures are compared, and the report says pass^k is not.)"""
    if (dataset is None) == (scenario is None):
        raise click.UsageError("give exactly one of --dataset FILE or --scenario FILE")

    ctx = click.get_current_context()

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)

    if scenario is not None:
        extra = [f"--{n}" for n in ("trials", "concurrency") if given(n)]
        if extra:
            verb = "applies" if len(extra) == 1 else "apply"
            raise click.UsageError(f"{' and '.join(extra)} {verb} to --dataset (runs per case, cases at once), "
                                   "not to --scenario: a scenario runs each step once, in order")
        return
    if given("mode"):
        raise click.UsageError("--mode applies to --scenario (free-run or step-wise conversations), not to --dataset")


def _scenario_tables(run: ScenarioRun) -> list[Table]:
    rows = [[s.scenario, str(s.step.index), s.step.user[:80], "pass" if s.passed else "FAIL",
             "" if s.passed else s.reason] for s in run.steps]
    return [Table(f"Scenario steps ({run.mode} mode)", ["scenario", "step", "user", "result", "reason"], rows)]


def _stopped_note(sf: ScenarioFile, run: ScenarioRun, stopped: Interruption) -> str:
    """The first note of scenarios a signal stopped: the steps done, and how many of the scenarios run to their end
    passed every step (one cut short passed none: its steps not run could fail)."""
    done = Counter(s.scenario for s in run.steps)
    failed = {s.scenario for s in run.steps if not s.passed}
    whole = [sc.name for sc in sf.scenarios if done[sc.name] == len(sc.steps)]
    cut = sum(0 < done[sc.name] < len(sc.steps) for sc in sf.scenarios)
    ok = sum(name not in failed for name in whole)
    return (f"{stopped.done} done before {stopped.by}: {ok}/{len(whole)} scenario(s) run to their end passed every "
            f"step ({run.mode} mode); {cut} cut short, {len(sf.scenarios) - len(whole) - cut} not started")


def _run_scenario(path: str, agent: Any, rules: tuple[str, ...], agent_name: str | None, mode: str,
                  timeout_s: float | None, builder: ReportBuilder, no_progress: bool, problems: list[InputProblem]
                  ) -> _Ran:
    try:
        sf, judge = load_and_build(path, [Path(r) for r in rules])
        conflict = agent_name_conflict(sf, agent_name)
        if conflict is not None:
            raise conflict
    except (ScenarioError, RuleFileError) as exc:
        # Errors of a step name the scenario file and carry their own hint; the dataset's --rules hint does not fit.
        hint = "".join(f"\nhint: {h}" for h in exc.hint.splitlines()) if isinstance(exc, ScenarioError) else ""
        click.echo(f"error: {visible(str(exc))}{hint}", err=True)
        raise SystemExit(2) from exc
    name = default_agent_name(judge.agents, agent_name or sf.agent)
    problem = warn_agent_name(judge, name)
    input_notes = warn_inputs(forbidden_step_arguments(sf, judge))
    total = sum(len(s.steps) for s in sf.scenarios)
    failures: list[tuple[str, str, str]] = []
    with (Harness(agent_name=name) as harness, route_global_tracing(harness.provider, harness.processor),
          progress_bar(disable=no_progress) as progress):
        task = progress.add_task(f"scenarios ({mode})", total=total, status="")
        stopped = None
        try:
            run = run_scenarios(sf, agent, judge, harness, mode=mode, timeout_s=timeout_s,
                                on_step=lambda _: progress.update(task, advance=1))
            runs_over(len(run.steps), "steps")  # a signal from now on waits for the report, whole
        except Interrupted as exc:  # Ctrl-C or SIGTERM: the report of the steps done
            run = exc.partial
            stopped = Interruption.of(len(run.steps), total, "steps", signal=exc.signal)
        # into the report once the steps are done: a Ctrl-C or SIGTERM cannot leave a step half in it
        for n, sr in enumerate(run.steps, 1):
            label = f"{sr.scenario} step {sr.step.index}"
            _add_result(builder, label, sr.scenario, sr.verdict, sr.run, sr.passed, sr.reason, sr.step.user)
            builder.track(n)
            if sr.run.traceback:
                failures.append((label, sr.run.error or "", sr.run.traceback))
    ok, count = run.scenarios_passed()
    notes = [f"{ok}/{count} scenario(s) passed every step ({mode} mode)" if stopped is None else
             _stopped_note(sf, run, stopped)]
    agent_name_input(problem, notes, problems)
    notes += input_notes
    notes += [n for n in (add_strays(builder, run.strays, name, "step"), late_note(harness, "step"),
                          answer_note(s.run.answer_type for s in run.steps)) if n]
    note = show_tracebacks(failures, "eval")
    warnings = [note] if note else []
    if mode == "step":
        warnings += [f"step mode: {where} has no `reference`: the agent's own reply is fed to the next step"
                     for where in own_reply_steps(sf)]
    notes += warnings
    error = None if stopped is not None else none_completed([s.run.error for s in run.steps], "step")
    notes += exit_note(error)
    return _scenario_tables(run), notes, {"scenario_pass_rate": run.pass_rate}, warnings, stopped, error


@click.command(name="eval", cls=RulesCommand)
@click.option("--dataset", metavar="FILE", help="Labelled cases: YAML list, JSON lines, or a rule file with `cases`.")
@click.option("--scenario", metavar="FILE", help="Multi-step scenario file (YAML) instead of a dataset.")
@click.option("--agent", "agent_spec", required=True, metavar="MODULE:FUNCTION",
              help="The agent: fn(input: str) -> answer str (scenarios: fn(input, history=[...])).")
@click.option("--rules", multiple=True, metavar="FILE",
              help=f"Rule files with the tool catalog (repeatable). {RULES_HELP}")
@click.option("--agent-name", default=None, help="gen_ai.agent.name of the turns (default: the rules' only agent).")
@click.option("--trials", type=click.IntRange(1), default=1, show_default=True,
              help="Runs per case (pass^k); --dataset only.")
@click.option("--concurrency", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Cases run at once (threads); --dataset only.")
@click.option("--timeout", "timeout_s", type=Duration(), default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Time per case run (seconds, or 500ms, 2m); a run past it fails (an error), judged on the calls "
                   "it made by then.")
@click.option("--mode", type=click.Choice(MODES), default="free", show_default=True,
              help="--scenario only: free-run (the agent's replies carry forward) or step (teacher-forced "
                   "references; a step without one feeds the agent's reply, with a warning).")
@click.option("--worst", type=click.IntRange(0), default=10, show_default=True, help="Failing turns to list.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@report_options
def eval_(dataset: str | None, scenario: str | None, agent_spec: str, rules: tuple[str, ...], agent_name: str | None,
          trials: int, concurrency: int, timeout_s: float, mode: str, worst: int, no_progress: bool,
          **kwargs: Any) -> None:
    """Run an agent on labelled cases (or scenarios) under the instrumentation, judge every turn, report.

    Each case runs inside one `agent_turn` carrying its case id; the case's expected calls override
    the rules for that turn. With --trials K the report adds the pass rate and pass^k.
    Exits 2, after the report, when no run of the agent completed (every one raised or timed out).
    """
    options = pop_report_options(kwargs)
    _check_options(dataset, scenario)
    try:
        agent = load_callable(agent_spec, CASE_CALL if dataset is not None else STEP_CALL)
    except LoadError as exc:
        raise click.BadParameter(str(exc), param_hint="'--agent'") from exc
    builder = ReportBuilder(worst=worst)
    no_progress = no_progress or options.quiet
    problems: list[InputProblem] = []
    with stop_on_signal():
        if dataset is not None:
            tables, notes, extra, warnings, stopped, error = _run_dataset(dataset, agent, rules, agent_name, trials,
                                                                          concurrency, timeout_s, builder,
                                                                          no_progress, problems)
            title = f"toolwatch eval: {Path(dataset).name}, {trials} trial(s) per case"
        else:
            assert scenario is not None
            tables, notes, extra, warnings, stopped, error = _run_scenario(scenario, agent, rules, agent_name, mode,
                                                                           timeout_s, builder, no_progress,
                                                                           problems)
            title = f"toolwatch eval: scenarios {Path(scenario).name} ({mode} mode)"
        report = builder.build("eval", title, tables=tables, notes=notes)
        report.figures.update(extra)
        report.interrupted = stopped
        if "pass_hat_k" in extra:
            report.k = trials
        # the report, then the error when no run completed: exit 2 after it, whatever the gates
        raise SystemExit(emit_then_say(report, options, warnings, problems, lambda: say_none_completed(error),
                                       said=exit_note(error)))

