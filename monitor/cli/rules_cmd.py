"""`toolwatch rules`: check rule files, explain which rule a given input matches, print the schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from monitor._text import visible
from monitor.cli._params import RULES_HELP, RulesCommand
from monitor.records import ToolCall, Turn
from monitor.rules import Documents, Expectation, RuleFileError, RuleSet, distinct_files, load_rules, rule_file_schema
from monitor.rules._lint import (
    forbidden_arguments,
    shadowed_rules,
    spaced_prefixes,
    unfireable_alerts,
    unreachable_cases,
)

EXIT_INVALID = 2

def _echo(text: str) -> None:
    """One line (or several) of output: rule files' text (descriptions, patterns, file names) and the given input and
    calls with their control and bidirectional formatting characters escaped, as rule-file errors show them."""
    click.echo(visible(text))


_files = click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))


@click.group()
def rules() -> None:
    """Validate and explain oracle rule files (YAML)."""


def _summary(rs: RuleSet, name: str) -> str:
    agents = ", ".join(sorted(rs.agents)) or "any"
    parts = [
        f"{len(rs.tools)} tool(s)",
        f"{len(rs.expectations)} expect rule(s)",
        f"{len(rs.forbid)} forbid rule(s)",
        f"{len(rs.cases)} case(s)",
        f"{len(rs.alerts)} alert(s)",
    ]
    schema = sum(1 for t in rs.tools if t.schema_json is not None)
    extra = ", tools from definitions" if rs.from_definitions else ""
    return f"{name}: ok (agent {agents}; {', '.join(parts)}; {schema} tool schema(s){extra})"


@rules.command("check", cls=RulesCommand)
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--rules", "more", multiple=True, metavar="FILE", type=click.Path(dir_okay=False, path_type=Path),
              help=f"Rule files to check besides FILES, as the other commands take them. {RULES_HELP}")
@click.option("--quiet", "-q", is_flag=True, help="Print errors only.")
def check(files: tuple[Path, ...], more: tuple[Path, ...], quiet: bool) -> None:
    """Validate rule FILES and summarize them; exit 2 with file:line:column: key: message on errors.

    Each file is checked alone (its rules may name the tools the others declare), then all files together (as
    `toolwatch serve --rules` merges them). Every error is reported, one a line (each rule in error with its first
    problem; at most 50, then how many more).
    """
    files = tuple(distinct_files((*files, *more)))  # overlapping globs: each file once
    if not files:
        raise click.UsageError("give rule FILES to check (or --rules FILE...)")
    failed = False
    warned: set[str] = set()
    docs = Documents()  # each file read once
    for f in files:
        try:
            rs = load_rules([f], documents=docs, catalogs=files)  # its rules may name the tools of the others
        except RuleFileError as exc:
            click.echo(str(exc), err=True)
            failed = True
            continue
        if not quiet:
            _echo(_summary(rs, str(f)))
            # with other files, the tools it names may be theirs: the warnings that read the catalog come from them all
            tooled = (*forbidden_arguments(rs), *unfireable_alerts(rs)) if len(files) == 1 else ()
            for line in (*shadowed_rules(rs), *spaced_prefixes(rs), *unreachable_cases(rs), *tooled):
                _echo(line)
                warned.add(line)
    if not failed and len(files) > 1:
        failed = not _check_together(files, quiet, warned)
    if failed:
        sys.exit(EXIT_INVALID)


def _check_together(files: tuple[Path, ...], quiet: bool, warned: set[str]) -> bool:
    """Load the files together, as serve does; print the errors, or the summary and the new warnings."""
    try:
        merged = load_rules(list(files))
    except RuleFileError as exc:
        for line in exc.lines():
            click.echo(line if line.startswith("... and ") else f"{line} (when loaded together)", err=True)
        return False
    if not quiet:
        _echo(_summary(merged, "merged"))
        # across files; and those that read the catalog, which is theirs together
        for line in (*shadowed_rules(merged), *spaced_prefixes(merged), *unreachable_cases(merged),
                     *forbidden_arguments(merged), *unfireable_alerts(merged)):
            if line not in warned:
                _echo(line)
    return True


def _parse_call(spec: str) -> ToolCall:
    name, sep, args = spec.partition("=")
    if not name.strip():
        raise click.BadParameter(f"expected NAME or NAME=JSON, got {spec!r}", param_hint="'--call'")
    return ToolCall(name.strip(), arguments=args if sep else "{}")


@rules.command("explain")
@_files
@click.option("--input", "input_text", required=True, help="The turn input text to route.")
@click.option("--agent", default="", help="Agent name of the turn (gen_ai.agent.name).")
@click.option("--case-id", default=None, help="Labelled case id of the turn (toolwatch.case.id).")
@click.option(
    "--call",
    "calls",
    multiple=True,
    metavar="NAME[=JSON]",
    help="A tool call the turn made (repeatable, in order); prints the verdict for these calls.",
)
@click.option(
    "--output",
    "output_text",
    default=None,
    help="The turn's final output text (for respond checks); prints the verdict, also of a turn without --call.",
)
def explain(
    files: tuple[Path, ...],
    input_text: str,
    agent: str,
    case_id: str | None,
    calls: tuple[str, ...],
    output_text: str | None,
) -> None:
    """Show which rule of FILES matches an input and what it expects (and, with --call, the verdict)."""
    from monitor.judge import Judge
    from monitor.rules._describe import expectation_lines

    try:
        rs = load_rules(list(files))
    except RuleFileError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_INVALID)
    judge = Judge(rs)
    turn = Turn(
        input_text,
        tuple(_parse_call(c) for c in calls),
        agent=agent,
        case_id=case_id,
        output_text=output_text,
    )
    exp = judge.expectation(turn)
    if exp is None:
        click.echo("no rule matches: the turn is unjudged (catalog, schema and forbid checks still apply)")
        if agent and judge.agents and agent not in judge.agents:
            click.echo(
                f"note: no rule file is scoped to agent {agent!r} (they name: {', '.join(sorted(judge.agents))}); "
                "only the rules of files without `agent:` apply to its turns"
            )
    else:
        _echo("\n".join(expectation_lines(exp, _case_when(rs, exp, turn))))
    if calls or output_text is not None:  # --output alone: the verdict of a turn that made no call
        v = judge.judge(turn)
        click.echo("verdict:")
        for c in v.calls:
            slot = f" slot {c.slot}" if c.slot is not None else ""
            schema = "" if c.schema_valid is None else (" schema ok" if c.schema_valid else " schema INVALID")
            _echo(f"  call {c.index} {c.name}: {c.outcome.value}{slot}{schema}")
        _echo(f"  {v.reason}")
        if output_text is None and exp is not None and exp.respond:
            click.echo("  response checks not run: give the answer with --output")


def _case_when(rs: RuleSet, exp: Expectation, turn: Turn) -> str | None:
    """How the labelled case `exp` applies to `turn` (by the turn's case id, else by its input); None for a rule."""
    if turn.case_id is not None and dict(rs.cases_by_id).get(turn.case_id) is exp:
        return f"labelled case: the case id is {turn.case_id!r}"
    if any(c is exp for _, _, c in rs.cases):
        return f"labelled case: the input equals {turn.input_text!r}"
    return None


@rules.command("schema")
def schema() -> None:
    """Print the rule-file JSON Schema."""
    click.echo(json.dumps(rule_file_schema(), indent=2))
