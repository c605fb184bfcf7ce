"""Progress bars on stderr for long offline runs (rich).

When stderr is not a terminal the bar is not redrawn, only its final line is printed. The commands disable
it with --no-progress and with -q/--quiet.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def progress_bar(*, bytes_mode: bool = False, disable: bool = False) -> Progress:
    """A Progress on stderr: items done of total (or bytes read), elapsed and remaining time."""
    count = DownloadColumn() if bytes_mode else MofNCompleteColumn()
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        count,
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=disable,
        transient=False,
    )
