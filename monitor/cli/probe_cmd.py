"""`toolwatch probe`: adaptive random testing (FSCS-ART) of an agent over a user's input generator."""

from __future__ import annotations

import logging
from typing import Any

import click

from monitor.cli._interrupt import runs_again, runs_over, stop_on_signal
from monitor.cli._params import RULES_HELP, Duration, RulesCommand
from monitor.cli.eval_cmd import (
    add_strays,
    agent_name_input,
    answer_note,
    exit_note,
    late_note,
    none_completed,
    say_none_completed,
    show_tracebacks,
    warn_agent_name,
)
from monitor.evaluate import (
    DEFAULT_TIMEOUT_S,
    GENERATOR_CALL,
    PROBE_AGENT_CALL,
    Call,
    Harness,
    Interrupted,
    LoadError,
    default_agent_name,
    load_callable,
    load_judge,
    route_global_tracing,
    stop_signal,
)
from monitor.probe import (
    MAX_POOL,
    STRATEGIES,
    GeneratorError,
    ProbeResult,
    Step,
    cluster_tables,
    first_failures,
    mean_first_failure,
    run_probe,
)
from monitor.report import (
    CaseResult,
    InputProblem,
    Interruption,
    ReportBuilder,
    Table,
    emit_then_say,
    pop_report_options,
    report_options,
    visible,
)
from monitor.report.output import ReportOptions
from monitor.report.progress import progress_bar
from monitor.rules import RuleFileError

logger = logging.getLogger(__name__)


def _load(spec: str, what: str, call: Call) -> Any:
    try:
        return load_callable(spec, call)
    except LoadError as exc:
        raise click.BadParameter(str(exc), param_hint=f"'{what}'") from exc


@click.command(cls=RulesCommand)
@click.option("--generator", "generator_spec", required=True, metavar="MODULE:FUNCTION",
              help="Input generator: called as fn(random.Random) -> str, once per candidate.")
@click.option("--agent", "agent_spec", required=True, metavar="MODULE:FUNCTION",
              help="The agent: fn(input: str) -> answer str (or None); its @tool calls are recorded.")
@click.option("--rules", multiple=True, required=True, metavar="FILE",
              help=f"Oracle rule file (repeatable). {RULES_HELP}")
@click.option("--agent-name", default=None, help="gen_ai.agent.name of the turns (default: the rules' only agent).")
@click.option("--iterations", type=click.IntRange(1), default=200, show_default=True, help="Runs of the agent.")
@click.option("--pool", type=click.IntRange(1, MAX_POOL), default=10, show_default=True,
              help=f"Candidates drawn per step (K of FSCS-ART), at most {MAX_POOL:,}.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the generator and the selection (>= 0: Python's random takes -N as N).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="art", show_default=True,
              help="art: the candidate farthest (Levenshtein, on the first 1,000 characters) from every tested "
                   "input; random: the first one.")
@click.option("--compare-seeds", type=click.IntRange(0), default=0, show_default=True, metavar="N",
              help="Also run both strategies to their first failure on seeds --seed .. --seed+N-1 (up to "
                   "--iterations runs each) and print the mean runs needed; a seed without a failure counts as "
                   "--iterations + 1.")
@click.option("--timeout", "timeout_s", type=Duration(), default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Time per run (seconds, or 500ms, 2m; as eval's per case); a run past it fails, judged on the "
                   "calls it made by then. A generator call past it ends the probe (an error).")
@click.option("--worst", type=click.IntRange(0), default=10, show_default=True, help="Failing turns to list.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@report_options
def probe(generator_spec: str, agent_spec: str, rules: tuple[str, ...], agent_name: str | None, iterations: int,
          pool: int, seed: int, strategy: str, compare_seeds: int, timeout_s: float, worst: int,
          no_progress: bool, **kwargs: Any) -> None:
    """Probe an agent with adaptive random testing and report accuracy as iterations grow.

    Each step draws --pool candidates from the generator and runs the agent on the one whose minimum
    Levenshtein distance to the inputs already tested is largest (FSCS-ART; the first candidate on the
    first step, the earliest on a tie); --strategy random runs the first candidate of the same draws.
    Each run is one `agent_turn`, judged by the rules like live traffic.
    Exits 2, after the report, when no run of the agent completed (every one raised or timed out).
    """
    options = pop_report_options(kwargs)
    generator = _load(generator_spec, "--generator", GENERATOR_CALL)
    agent = _load(agent_spec, "--agent", PROBE_AGENT_CALL)
    try:
        judge = load_judge(rules)
    except RuleFileError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from exc
    name = default_agent_name(judge.agents, agent_name)
    agent_problem = warn_agent_name(judge, name)
    builder = ReportBuilder(worst=worst)
    with stop_on_signal():
        _report(builder, generator_spec, generator, agent, judge, name, agent_problem, iterations, pool, seed,
                strategy, compare_seeds, timeout_s, no_progress, options)


def _report(builder: ReportBuilder, generator_spec: str, generator: Any, agent: Any, judge: Any, name: str,
            agent_problem: str | None, iterations: int, pool: int, seed: int, strategy: str, compare_seeds: int,
            timeout_s: float | None, no_progress: bool, options: ReportOptions) -> None:
    """Run the probe and report it (SystemExit with the command's exit code)."""
    result, tables, notes, warnings, failed, stopped = _run(builder, generator, agent, judge, name, iterations, pool,
                                                            seed, strategy, compare_seeds, timeout_s,
                                                            no_progress or options.quiet)
    if result.steps:  # none: the generator failed at once, as the error says
        notes.insert(0, _coverage(result))
    problems: list[InputProblem] = []
    warned = agent_name_input(agent_problem, notes, problems)  # printed before the runs already
    # every run raised or timed out: the agent could not be probed (exit 2, after the report, as eval's); not said of
    # a stopped probe, whose runs not done could have completed
    runs_error = None if stopped is not None else none_completed([s.error for s in result.steps], "run")
    notes += exit_note(runs_error)
    # a generator that raised (sys.exit too) or returned no string ends the probe: the report of the runs done, then
    # the error naming it (exit 2, as for any input error); in the --compare-seeds runs, the probe's runs were done
    error = None
    if failed is not None:
        other = failed.partial
        error = (f"the generator {generator_spec} {failed.what}; the probe stopped after {len(result.steps)} runs"
                 if other is None or other is result else
                 f"the generator {generator_spec} {failed.what} in the --compare-seeds runs (seed {other.seed}, "
                 f"{other.strategy}); the report has the probe's {len(result.steps)} runs, without the comparison")
        notes.append(error)
    tables += cluster_tables(result.steps)
    done = len(result.steps)
    runs = f"{done} runs" if done == iterations else f"{done} of {iterations} runs"
    title = f"toolwatch probe: {strategy}, {runs}, pool {pool}, seed {seed}"
    report = builder.build("probe", title, tables=tables, notes=notes)
    report.interrupted = stopped
    said = exit_note(runs_error) + ([error] if error else [])  # on stderr after the report, as errors
    if not options.quiet and not options.stdout_forms():  # a form on stdout: the summary, with the notes, on stderr
        for note in notes:
            if note != warned and note not in said:
                click.echo(note, err=True)
    if failed is not None and error is not None:
        problems.append(InputProblem("generator", error, tuple((failed.traceback or "").rstrip().splitlines())))

    def say() -> bool:  # after the report, also when a form of it could not be written
        none_ran = say_none_completed(runs_error)
        if failed is None:
            return none_ran
        if failed.traceback and logger.isEnabledFor(logging.INFO):
            logger.info("the generator's traceback:\n%s", visible(failed.traceback.rstrip()))
        click.echo(f"error: {visible(error or '')}", err=True)
        return True

    raise SystemExit(emit_then_say(report, options, warnings, problems, say, said))


def _coverage(result: ProbeResult) -> str:
    """The first failure, and what the runs covered when some repeated an input or matched no rule."""
    n = len(result.steps)
    first = result.first_failure
    parts = [f"first failure at run {first}" if first else f"no failure in {n} runs"]
    distinct = len({s.input_text for s in result.steps})
    if distinct < n:
        parts.append(f"the generator gave {distinct} distinct input{'s' * (distinct != 1)}: {n - distinct} runs "
                     "repeated an input tested before")
    unmatched = sum(s.verdict is not None and not s.verdict.judged for s in result.steps)
    if unmatched:
        parts.append(f"no rule matched the input of {unmatched} of the {n} runs (unjudged)")
    return "; ".join(parts)


def _run(builder: ReportBuilder, generator: Any, agent: Any, judge: Any, name: str, iterations: int, pool: int,
         seed: int, strategy: str, compare_seeds: int, timeout_s: float | None, no_progress: bool
         ) -> tuple[ProbeResult, list[Table], list[str], list[str], GeneratorError | None, Interruption | None]:
    """The probe's result, tables, notes and warnings, the generator's error that ended it early (None: none;
    the result then holds the runs done before it), and the Ctrl-C or SIGTERM that did (None: none; the same)."""
    tables: list[Table] = []
    notes: list[str] = []
    failed: GeneratorError | None = None
    stopped: Interruption | None = None
    tracebacks: list[tuple[str, str, str]] = []
    with (Harness(agent_name=name) as harness, route_global_tracing(harness.provider, harness.processor),
          progress_bar(disable=no_progress) as progress):
        task = progress.add_task(f"probe ({strategy})", total=iterations, status="")
        failures = 0

        def on_step(step: Step) -> None:
            nonlocal failures
            failures += step.failed
            progress.update(task, advance=1, status=f"{failures} failing")

        def add(step: Step) -> None:
            label = f"run {step.iteration}"
            if step.verdict is not None:
                message = f"{step.error}; {step.verdict.reason}" if step.error else None
                builder.add(step.verdict, case_id=label, time_s=step.duration_s,
                            status="error" if step.error else None, message=message, detail=step.traceback)
            else:
                body = f"input: {step.input_text[:400]}" + (f"\n{step.traceback}" if step.traceback else "")
                builder.add_case(CaseResult(label, name, "error", step.error or "no turn was recorded", body,
                                            step.duration_s))
            if step.traceback:
                tracebacks.append((label, step.error or "", step.traceback))
            builder.track(step.iteration, f"{strategy} accuracy")

        try:
            result = run_probe(generator=generator, agent=agent, judge=judge, harness=harness, iterations=iterations,
                               pool=pool, seed=seed, strategy=strategy, timeout_s=timeout_s, on_step=on_step)
            runs_over(len(result.steps))  # a signal from now on waits for the report, whole
        except GeneratorError as exc:
            assert exc.partial is not None, "run_probe sets the runs done"
            result, failed = exc.partial, exc
            runs_over(len(result.steps))
        except Interrupted as exc:  # Ctrl-C or SIGTERM: the report of the runs done
            result = exc.partial
            stopped = Interruption.of(len(result.steps), iterations, signal=exc.signal)
        for step in result.steps:  # into the report once the runs are done: a signal cannot leave one half in it
            add(step)
        if result.steps:  # no point at iteration 0 when the generator failed at once
            builder.track(len(result.steps), f"{strategy} accuracy", force=True)
        notes += [n for n in (add_strays(builder, result.strays, name, "run"),
                              answer_note(s.answer_type for s in result.steps)) if n]
        if compare_seeds and failed is None and stopped is None:
            try:
                runs_again()  # a signal held since the probe's runs stops the comparison before it starts
                _compare(builder, generator, agent, judge, harness, progress, iterations, pool, seed, strategy,
                         compare_seeds, timeout_s, tables, notes)
                runs_over(len(result.steps), "runs and the --compare-seeds comparison")  # the exit line names both
            except GeneratorError as exc:
                failed = exc
                runs_over(len(result.steps))
            except KeyboardInterrupt as exc:  # the probe's runs are whole; the comparison is left out, its chart
                other = next(x for x in STRATEGIES if x != strategy)  # line too
                builder.series.pop(f"{other} accuracy", None)
                stopped = Interruption.of(len(result.steps), iterations, signal=stop_signal(exc),
                                          detail=", without the --compare-seeds comparison it was running")
        late = late_note(harness, "run")  # of the comparison's runs too: they run in the same harness
        if late:
            notes.append(late)
    note = show_tracebacks(tracebacks, "probe")
    warnings = [note] if note else []
    notes += warnings
    return result, tables, notes, warnings, failed, stopped


def _compare(builder: ReportBuilder, generator: Any, agent: Any, judge: Any, harness: Harness, progress: Any,
             iterations: int, pool: int, seed: int, strategy: str, compare_seeds: int, timeout_s: float | None,
             tables: list[Table], notes: list[str]) -> None:
    """--compare-seeds: the other strategy's accuracy series for the chart, and runs to the first failure of both
    over the seeds (into `tables` and `notes`)."""
    other = next(x for x in STRATEGIES if x != strategy)
    side = ReportBuilder(worst=0, keep_cases=False)
    otask = progress.add_task(f"probe ({other}, for the chart)", total=iterations, status="")

    def on_other(step: Step) -> None:
        if step.verdict is not None:
            side.add(step.verdict)
        side.track(step.iteration, f"{other} accuracy")
        progress.update(otask, advance=1)

    run_probe(generator=generator, agent=agent, judge=judge, harness=harness, iterations=iterations,
              pool=pool, seed=seed, strategy=other, timeout_s=timeout_s, on_step=on_other)
    side.track(iterations, f"{other} accuracy", force=True)
    builder.series.update(side.series)
    seeds = range(seed, seed + compare_seeds)
    ctask = progress.add_task("first failure, both strategies", total=2 * compare_seeds, status="")
    ff = first_failures(generator=generator, agent=agent, judge=judge, harness=harness, seeds=seeds,
                        pool=pool, max_iterations=iterations, timeout_s=timeout_s,
                        on_seed=lambda *_: progress.update(ctask, advance=1))
    rows = []
    for strat, values in ff.items():
        found = [v for v in values if v is not None]
        mean = mean_first_failure(values, iterations)
        rows.append([strat, f"{mean:.2f}", str(len(found)), str(len(values))])
        censored = len(values) - len(found)  # seeds without a failure: counted as iterations + 1, a lower bound
        notes.append(f"{strat}: mean runs to first failure over {len(values)} seeds = {mean:.2f}" + (
            f" ({censored} seed{'s' * (censored != 1)} without a failure in {iterations} runs, counted as "
            f"{iterations + 1})" if censored else ""))
    tables.append(Table(f"Runs to the first failure (pool {pool}, seeds {seeds.start}..{seeds.stop - 1})",
                        ["strategy", "mean runs", "seeds with a failure", "seeds"], rows))
