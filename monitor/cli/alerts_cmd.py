"""`toolwatch alerts`: render the rule file's alerts as Prometheus recording and alerting rules."""

from __future__ import annotations

from pathlib import Path

import click

from monitor.cli._params import InputError


@click.group()
def alerts() -> None:
    """Alerts from the rule file: Prometheus rules for them."""


@alerts.command("render")
@click.argument("rules", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file instead of stdout."
)
@click.option(
    "--check",
    "check",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Do not write: exit 1 when this file differs from a fresh render (for CI).",
)
def render_cmd(rules: tuple[Path, ...], output: Path | None, check: Path | None) -> None:
    """Print a Prometheus rule file for the alerts of RULES (one or more rule files, merged).

    \b
    Example:
      toolwatch alerts render rules/incident-triage.yaml > deploy/prometheus/toolwatch-rules.yml
      promtool check rules deploy/prometheus/toolwatch-rules.yml
    """
    from monitor.alerts import AlertSpecError, render
    from monitor.rules import RuleFileError, load_rules
    from monitor.rules._lint import unfireable_alerts

    try:
        ruleset = load_rules(list(rules))
        text = render(ruleset, sources=[p.as_posix() for p in rules])
    except RuleFileError as exc:
        raise InputError(str(exc)) from None
    except AlertSpecError as exc:
        raise InputError(f"{', '.join(map(str, rules))}: {exc}") from None
    for line in unfireable_alerts(ruleset):
        click.echo(line, err=True)
    if check is not None:
        if check.read_text(encoding="utf-8") != text:
            raise click.ClickException(f"{check} is out of date: render it again with `toolwatch alerts render`")
        click.echo(f"{check} is up to date")
        return
    if output is not None:
        try:  # as the reports of replay, eval and probe: the folder is made
            if not output.parent.exists():
                output.parent.mkdir(parents=True)
            output.write_text(text, encoding="utf-8")
        except OSError as exc:  # an option error (exit 2), as for the reports; 1 is an out-of-date --check file
            raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
