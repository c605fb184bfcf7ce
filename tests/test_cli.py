import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.cli.serve_cmd import serve

RULES = Path(__file__).resolve().parents[1] / "rules"


def test_help_lists_commands() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    assert "demo" in result.output


def test_serve_takes_several_rule_files_from_the_environment_as_its_help_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--rules` help: several files in TOOLWATCH_RULES are separated by ':' (a space or a comma is one path)."""
    files = f"{RULES / 'travel.yaml'}{os.pathsep}{RULES / 'customer-support.yaml'}"
    monkeypatch.setenv("TOOLWATCH_RULES", files)
    ctx = serve.make_context("serve", [])
    assert ctx.params["rules"] == (str(RULES / "travel.yaml"), str(RULES / "customer-support.yaml"))
    help_text = " ".join(CliRunner().invoke(main, ["serve", "--help"], terminal_width=200).output.split())
    assert f"(in TOOLWATCH_RULES, separated by '{os.pathsep}')" in help_text


def test_max_drop_help_says_its_default_plainly() -> None:
    """Click printed the string default as `[default: (0); ...]`."""
    for command in ("replay", "eval", "probe"):
        output = " ".join(CliRunner().invoke(main, [command, "--help"], terminal_width=200).output.split())
        assert "Default 0: any regression fails." in output and "(0)" not in output
