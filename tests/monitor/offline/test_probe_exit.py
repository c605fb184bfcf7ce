"""probe's exit code and errors when a report form cannot be written. Through the real command line in a process of
its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.monitor.offline.conftest import REPO, TRIAGE_RULES


def _probe(where: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", "from monitor.cli import main; main()", "probe", *args,
                           "--no-progress"], cwd=where, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_generator_error_is_said_when_a_form_cannot_be_written(tmp_path: Path) -> None:
    """A generator that raised ends the probe with an error naming it (exit 2), said after the report; a report form
    that could not be written then (/dev/full: a disk that fills) raised its error before it, so with -q only
    `cannot write` was printed and the generator's failure went unsaid. Both are said now, the generator's first."""
    res = _probe(tmp_path, "--generator", "tests.monitor.offline.test_probe:broken_generator", "--agent",
                 "examples.triage.agent:triage", "--rules", str(TRIAGE_RULES), "--iterations", "3", "-q", "--json",
                 "/dev/full")
    assert res.returncode == 2, (res.returncode, res.stderr)
    error = "error: the generator tests.monitor.offline.test_probe:broken_generator raised RuntimeError: no more ideas"
    assert error in res.stderr and "cannot write /dev/full: No space left on device" in res.stderr, res.stderr
    assert res.stderr.index(error) < res.stderr.index("cannot write /dev/full"), res.stderr
    assert "Traceback" not in res.stderr
