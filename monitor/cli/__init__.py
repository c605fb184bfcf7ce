"""The `toolwatch` command line. Logging is configured here and nowhere else."""

from __future__ import annotations

import logging

import click

from monitor.cli.alerts_cmd import alerts
from monitor.cli.demo_cmd import demo
from monitor.cli.eval_cmd import eval_
from monitor.cli.probe_cmd import probe
from monitor.cli.replay_cmd import replay
from monitor.cli.rules_cmd import rules
from monitor.cli.serve_cmd import serve


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(package_name="toolwatch")
def main(verbose: int) -> None:
    """toolwatch: watch whether LLM agents call the right tools, with the right arguments."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


main.add_command(demo)
main.add_command(alerts)
main.add_command(rules)
main.add_command(serve)
main.add_command(replay)
main.add_command(eval_)
main.add_command(probe)
