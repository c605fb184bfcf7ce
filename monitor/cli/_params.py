"""Option types shared by the commands."""

from __future__ import annotations

import click

PORT = click.IntRange(0, 65535)  # a TCP port; 0 takes any free one


class InputError(click.ClickException):
    """A bad input file (a rule file with its location): `Error: ...` and exit 2, as for a bad option."""

    exit_code = 2


class Duration(click.ParamType[float]):
    """A duration such as 2s, 500ms or 5m (0 too with `allow_zero`); a bad one is refused naming its option."""

    name = "duration"

    def __init__(self, *, allow_zero: bool = False) -> None:
        self.allow_zero = allow_zero

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        from monitor.metrics import parse_duration

        try:
            return parse_duration(str(value), allow_zero=self.allow_zero)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class RetryAfter(click.ParamType[int]):
    """A retry delay: a duration of whole seconds, 1 s to 5 m (see `monitor.serve._settings.retry_after`)."""

    name = "duration"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        from monitor.serve._settings import retry_after

        try:
            return retry_after(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
