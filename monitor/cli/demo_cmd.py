"""`toolwatch demo`: placeholder until the monitor service lands."""

from __future__ import annotations

import click


@click.command()
def demo() -> None:
    """Run the live demo (an instrumented agent judged by an in-process monitor)."""
    click.echo("toolwatch demo: not built yet")
