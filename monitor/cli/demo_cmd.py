"""`toolwatch demo`: the monitor in-process, judging a simulated incident-triage agent live."""

from __future__ import annotations

import logging
import math

import click

from monitor.cli._params import PORT, InputError


def _finite(rate: float) -> float:
    """nan passes FloatRange (nan < 0 is false) and ran as --rate 0; inf did too (one turn in 0 s)."""
    if not math.isfinite(rate):
        raise click.BadParameter(f"{rate} is not a finite number of turns per second.")
    return rate


@click.command()
@click.option("--turns", default=2000, show_default=True, type=click.IntRange(min=1), help="Turns to run, then stop.")
@click.option("--forever", is_flag=True, help="Keep running until Ctrl-C (or SIGTERM).")
@click.option(
    "--rate",
    default=100.0,
    show_default=True,
    type=click.FloatRange(min=0),
    callback=lambda ctx, param, value: _finite(value),
    help="Turns per second (0: as fast as the spans can be exported).",
)
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0),
              help="Seed of the log lines and the model's mistakes.")
@click.option("--rules", type=click.Path(exists=True, dir_okay=False), help="Rule file (default: incident-triage).")
@click.option("--port", default=4318, show_default=True, type=PORT, help="OTLP/HTTP port of the in-process monitor.")
@click.option("--metrics-port", default=9464, show_default=True, type=PORT, help="Port of /metrics.")
def demo(turns: int, forever: bool, rate: float, seed: int, rules: str | None, port: int, metrics_port: int) -> None:
    """Run the live demo: a simulated incident-triage agent, instrumented with OpenTelemetry, exports its
    spans over OTLP/HTTP to a monitor in this process, which judges every turn against
    rules/incident-triage.yaml and serves the figures on /metrics.
    """
    from rich.console import Console

    from monitor.cli.eval_cmd import warn_agent_name
    from monitor.demo import print_summary, run_demo
    from monitor.demo._agent import AGENT_NAME
    from monitor.evaluate import load_judge
    from monitor.rules import RuleFileError
    from monitor.serve import Settings

    try:  # the ports as given (run_demo swaps a busy one for a free one): one for both is a usage error
        Settings(port=port, metrics_port=metrics_port).validate()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if rules is not None:  # the demo's agent is the incident-triage agent, whatever the rules
        remedy = f"the demo's agent is always {AGENT_NAME!r}: give a rule file with `agent: {AGENT_NAME}`, or none"
        try:
            warn_agent_name(load_judge([rules]), AGENT_NAME, remedy)
        except RuleFileError as exc:
            raise InputError(f"invalid rules: {exc}") from None
    console = Console()
    # Said above, as the demo can act on it: not again by the monitor in this process, with serve's options (for
    # this run only: the logger is the process's).
    agents_log = logging.getLogger("monitor.serve._agents")
    level = agents_log.level
    if rules is not None:
        agents_log.setLevel(logging.ERROR)
    try:
        result = run_demo(
            turns=turns,
            forever=forever,
            rate=rate,
            seed=seed,
            rules=rules,
            port=port,
            metrics_port=metrics_port,
            console=console,
        )
    except RuleFileError as exc:  # raised by the monitor's start, before any turn runs
        raise InputError(f"invalid rules: {exc}") from None
    finally:
        agents_log.setLevel(level)
    if result.output_closed:  # `| head`: no summary for no reader; exit 1 quietly, as click does on a broken pipe
        quiet_stdout()
        raise SystemExit(1)
    print_summary(result, console)


def quiet_stdout() -> None:
    """Point stdout at the null device: what is still buffered for the gone reader is dropped at exit, not reported
    as an ignored BrokenPipeError."""
    import os
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # no descriptor: nothing will be flushed to a pipe
        pass
    finally:
        os.close(devnull)
