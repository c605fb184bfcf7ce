"""Locate the real Prometheus tools the tests run (installed by scripts/ensure-services.sh)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def binary(*names: str) -> str:
    """The first of `names` on PATH; fails the test (not skips) when none is, since `make test` installs them."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(f"none of {', '.join(names)} on PATH: run `bash scripts/ensure-services.sh` (as `make test` does)")


def promtool(*args: str | Path, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary("promtool"), *map(str, args)],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
