"""The `toolwatch` command line. Logging is configured here and nowhere else."""

from __future__ import annotations

import sys

from monitor.cli._startup import hold_sighup

hold_sighup(sys.argv)  # before any other import (most of a second): a SIGHUP meanwhile must not end `serve`

import logging  # noqa: E402
from typing import Any  # noqa: E402

import click  # noqa: E402

from monitor.cli._streams import escape_unencodable  # noqa: E402
from monitor.cli.alerts_cmd import alerts  # noqa: E402
from monitor.cli.demo_cmd import demo  # noqa: E402
from monitor.cli.eval_cmd import eval_  # noqa: E402
from monitor.cli.probe_cmd import probe  # noqa: E402
from monitor.cli.replay_cmd import replay  # noqa: E402
from monitor.cli.rules_cmd import rules  # noqa: E402
from monitor.cli.serve_cmd import serve  # noqa: E402
from monitor.evaluate import Terminated  # noqa: E402

INTERRUPTED = 130  # 128 + SIGINT
TERMINATED = 143  # 128 + SIGTERM


class Toolwatch(click.Group):
    """The command group: `-v` after a command (`toolwatch serve -v`) is refused saying where it goes. What stdout
    and stderr cannot encode is escaped, not an error (`_streams`)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        escape_unencodable()
        return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except Terminated:  # SIGTERM where eval and probe handle it, outside their runs: 143, as a shell reports it
            click.echo("\nTerminated!", err=True)
            raise SystemExit(TERMINATED) from None
        except (KeyboardInterrupt, click.Abort):  # Ctrl-C: 130, as shells report it (click exits 1, a failed gate's)
            click.echo("\nAborted!", err=True)
            raise SystemExit(INTERRUPTED) from None
        except click.NoSuchOption as exc:
            flag = exc.option_name
            if flag not in ("--verbose", "-v", "-vv") or exc.ctx is None:
                raise
            command = exc.ctx.command_path.removeprefix(f"{ctx.command_path} ")
            raise click.UsageError(
                f"No such option '{flag}'. {flag} goes before the command: {ctx.command_path} {flag} {command} ...",
                ctx=exc.ctx,
            ) from None


@click.group(cls=Toolwatch, context_settings={"help_option_names": ["-h", "--help"]})
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
