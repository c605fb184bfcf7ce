"""`-v` is an option of `toolwatch` itself, before the command (`toolwatch -v eval ...`, as README writes it); after
the command a new user gets "No such option '-v'" and nothing more. The error must say where it goes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")


@pytest.mark.parametrize("flag", ["-v", "-vv", "--verbose"])
@pytest.mark.parametrize(("command", "rest"), [(["serve"], ["--rules", "rules/incident-triage.yaml"]),
                                             (["rules", "check"], ["rules/travel.yaml"])])
def test_verbose_after_the_command_says_where_it_goes(command: list[str], rest: list[str], flag: str) -> None:
    res = subprocess.run([TOOLWATCH, *command, flag, *rest], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 2, res
    shown = "-v" if flag == "-vv" else flag  # click reads -vv as -v twice, and stops at the first
    words = " ".join(command)
    assert f"No such option '{shown}'" in res.stderr, res.stderr
    assert f"{shown} goes before the command: toolwatch {shown} {words} ..." in res.stderr, res.stderr


def test_verbose_before_the_command_works() -> None:
    res = subprocess.run([TOOLWATCH, "-v", "rules", "check", "rules/travel.yaml"], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert res.returncode == 0, res


def test_another_unknown_option_keeps_clicks_suggestion() -> None:
    res = subprocess.run([TOOLWATCH, "serve", "--rule", "rules/travel.yaml"], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert res.returncode == 2 and "Did you mean" in res.stderr and "goes before" not in res.stderr, res.stderr
