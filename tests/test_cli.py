import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.cli.serve_cmd import serve
from monitor.rules import RuleFileError

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


@pytest.mark.parametrize("command", [["serve", "--port", "0", "--metrics-port", "0", "--rules"],
                                     ["alerts", "render"],
                                     ["demo", "--port", "0", "--metrics-port", "0", "--turns", "1", "--rules"]])
def test_a_bad_rule_file_is_a_located_error_and_exit_2_in_every_command(tmp_path: Path, command: list[str]) -> None:
    """`rules check`, replay, eval and probe exit 2 on a bad rule file; serve and alerts render exited 1, and demo
    crashed with a traceback (exit 1)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("catalog:\n  tools: [{name: a}]\nexpect:\n  - cal: []\n", encoding="utf-8")
    result = CliRunner().invoke(main, [*command, str(bad)])
    assert result.exit_code == 2, result.output
    assert f"{bad}:4:5: expect[0].cal: unknown key 'cal'" in result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, RuleFileError)
