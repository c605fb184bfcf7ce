"""Progress bars on stderr for long offline runs (rich).

When stderr is not a terminal (a CI log, `2>&1 | tee run.log`) rich does not redraw the bar and prints only its final
line, so a long run (an eval of an LLM agent: an hour) said nothing until its end, and CI systems stop a job that is
silent for 10 minutes. There a plain line says how far each task is, at most every `TOOLWATCH_PROGRESS_INTERVAL`
(a duration, 30s by default): `eval: 120/500 (24%), 0:04:10 elapsed, about 0:13:12 left`. The commands disable
both with --no-progress and with -q/--quiet.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from rich.console import Console
from rich.filesize import decimal
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

logger = logging.getLogger(__name__)

PROGRESS_INTERVAL_ENV = "TOOLWATCH_PROGRESS_INTERVAL"
DEFAULT_PROGRESS_INTERVAL_S = 30.0


def progress_interval(env: Mapping[str, str] | None = None) -> float:
    """Seconds between two progress lines when stderr is not a terminal; a bad value is warned of (the default)."""
    from monitor.metrics import parse_duration

    raw = (os.environ if env is None else env).get(PROGRESS_INTERVAL_ENV, "")
    if not raw:
        return DEFAULT_PROGRESS_INTERVAL_S
    try:
        return parse_duration(raw)
    except ValueError as exc:
        logger.warning("ignoring %s=%r (%s); using %gs", PROGRESS_INTERVAL_ENV, raw, exc, DEFAULT_PROGRESS_INTERVAL_S)
        return DEFAULT_PROGRESS_INTERVAL_S


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=int(seconds)))


def progress_line(task: Task, *, bytes_mode: bool = False) -> str:
    """`eval: 3/8 (38%), 2 failing, 0:00:01 elapsed, about 0:00:02 left` (bytes read for replay)."""
    amount = decimal if bytes_mode else (lambda n: f"{n:.0f}")
    head = f"{task.description}: {amount(int(task.completed))}"
    if task.total is not None:
        head += f"/{amount(int(task.total))}"
        if task.total > 0:
            head += f" ({100 * task.completed / task.total:.0f}%)"
    parts = [head]
    status = task.fields.get("status")
    if status:
        parts.append(str(status))
    parts.append(f"{_clock(task.elapsed or 0.0)} elapsed")
    if task.time_remaining is not None:
        parts.append(f"about {_clock(task.time_remaining)} left")
    return ", ".join(parts)


class _Progress(Progress):
    """A Progress that, where the bar is not drawn (not a terminal), prints `progress_line` every `interval_s`."""

    def __init__(self, *columns: str | ProgressColumn, interval_s: float, bytes_mode: bool, **kwargs: Any) -> None:
        super().__init__(*columns, **kwargs)
        drawn = self.console.is_terminal and not self.console.is_dumb_terminal
        self._interval_s = None if drawn or self.disable else interval_s
        self._bytes_mode = bytes_mode
        self._logged_at: dict[TaskID, float] = {}  # task -> its elapsed time at its last line

    def update(
        self,
        task_id: TaskID,
        *,
        total: float | None = None,
        completed: float | None = None,
        advance: float | None = None,
        description: str | None = None,
        visible: bool | None = None,
        refresh: bool = False,
        **fields: Any,
    ) -> None:
        super().update(task_id, total=total, completed=completed, advance=advance, description=description,
                       visible=visible, refresh=refresh, **fields)
        self._log(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._log(task_id)

    def _log(self, task_id: TaskID) -> None:
        if self._interval_s is None:
            return
        with self._lock:
            task = self._tasks[task_id]
            elapsed = task.elapsed or 0.0
            if task.finished or elapsed - self._logged_at.get(task_id, 0.0) < self._interval_s:
                return  # the finished task's line is the bar's own final line
            self._logged_at[task_id] = elapsed
            line = progress_line(task, bytes_mode=self._bytes_mode)
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)


def progress_bar(*, bytes_mode: bool = False, disable: bool = False) -> Progress:
    """A Progress on stderr: items done of total (or bytes read), elapsed and remaining time."""
    count = DownloadColumn() if bytes_mode else MofNCompleteColumn()
    return _Progress(
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
        interval_s=progress_interval() if not disable else DEFAULT_PROGRESS_INTERVAL_S,
        bytes_mode=bytes_mode,
    )
