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


class ByteSize(click.ParamType[int]):
    """A size in bytes such as 512MiB, 16MB or 1048576 (see `monitor.sizes`), at least `minimum`."""

    name = "size"

    def __init__(self, minimum: int = 1) -> None:
        self.minimum = minimum

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from monitor.sizes import parse_size

        try:
            return parse_size(str(value), self.minimum)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SIZE_UNITS = "bytes, or with a unit: 64MiB, 1GB"


RULE_FILE_SUFFIXES = (".yaml", ".yml")
RULES_HELP = (
    "Several may follow one --rules, as a shell glob (rules/*.yaml) gives them: each next argument ending in .yaml "
    "or .yml is a rule file (up to one that does not, or `--`); repeat --rules for a file named otherwise."
)


def spread_rules(args: list[str]) -> list[str]:
    """`--rules a.yaml b.yml x` -> `--rules a.yaml --rules b.yml x`: the arguments after a --rules value that end in
    .yaml or .yml (and do not start with `-`) are rule files too. A capture, a dataset module or a directory does
    not end so, which keeps replay's SOURCE... apart; `--` ends the rule files (and the options)."""
    out: list[str] = []
    taking = False
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            out += [arg, *rest]
            break
        if taking and not arg.startswith("-") and arg.lower().endswith(RULE_FILE_SUFFIXES):
            out += ["--rules", arg]
            continue
        out.append(arg)
        taking = arg.startswith("--rules=")
        if arg == "--rules":
            value = next(rest, None)
            if value is None:
                break
            out.append(value)
            taking = True
    return out


class RulesCommand(click.Command):
    """A command whose `--rules` takes several files at once (see spread_rules)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread_rules(args))
