"""The `toolwatch` commands in the code blocks of README.md and rules/README.md run as written.

Each runs in a shell (globs expand as they would for a user) from a folder laid out as the project root: its
`rules/` and `examples/`, and the `captures/` replay names, here a capture of the triage example in the Collector
file exporter's `format: json`. Every command must exit 0 and write the reports it names. `serve`'s synopsis
(`[...]` parts optional) runs on ports of the system's choosing (TOOLWATCH_PORT=0, TOOLWATCH_METRICS_PORT=0) and
takes the spans of the simple example agent exported as its README line says, then stops on SIGTERM.
"""

from __future__ import annotations

import importlib
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.monitor.offline.conftest import capture_spans, write_span_files

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "rules" / "README.md"]
BIN = Path(sys.executable).parent
# Report files the commands name, which must exist after them.
WRITES = re.compile(r"--(?:html|junit|json|markdown) (\S+)")


def shell_commands(doc: Path) -> list[str]:
    """The `toolwatch` command lines of the doc's shell blocks (```, ```sh), continuation lines joined."""
    blocks: list[str] = []
    language: str | None = None  # of the block the line is in; None: outside any
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            language = line[3:].strip() if language is None else None
            if language in ("", "sh"):
                blocks.append("")
        elif language in ("", "sh"):
            blocks[-1] += line + "\n"
    out: list[str] = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("toolwatch "):
                out.append(" ".join(line.split()))
    return out


COMMANDS = [c for doc in DOCS for c in shell_commands(doc)]


def test_the_docs_show_the_commands_this_test_runs() -> None:
    names = [c.split()[1] for c in COMMANDS]
    assert {"rules", "serve", "replay", "eval", "probe"} <= set(names), COMMANDS


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as the project root, with `captures/` as the Collector's file exporter writes it."""
    # imported by name, as the commands name them (mypy knows examples/triage as `triage` too)
    triage = importlib.import_module("examples.triage.agent").triage
    generate = importlib.import_module("examples.triage.generator").generate
    root = tmp_path_factory.mktemp("project")
    for name in ("rules", "examples"):
        (root / name).symlink_to(ROOT / name, target_is_directory=True)
    rng = random.Random(0)
    batches = capture_spans(triage, [generate(rng) for _ in range(20)], agent="incident-triage")
    files = write_span_files(batches, root / "scratch")
    (root / "captures").mkdir()
    files["jsonl"].rename(root / "captures" / "spans.jsonl")
    return root


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLWATCH_", "OTEL_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.startswith("toolwatch serve")],
                         ids=lambda c: "-".join(c.split()[1:3]))
def test_a_documented_command_runs_as_written(project: Path, command: str) -> None:
    done = subprocess.run(["bash", "-c", command], cwd=project, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr
    for written in WRITES.findall(command):
        assert (project / written).is_file(), f"{command}: no {written}"


def test_the_documented_serve_command_receives_an_agent_exporting_as_shown(project: Path) -> None:
    (serve_line,) = [c for c in COMMANDS if c.startswith("toolwatch serve")]
    command = re.sub(r"\s*\[[^]]*\]", "", serve_line)  # the synopsis' optional parts left out
    (endpoint_line,) = [line for doc in DOCS for line in doc.read_text(encoding="utf-8").splitlines()
                        if line.startswith("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=")]
    documented_endpoint = endpoint_line.split()[0].split("=", 1)[1]
    assert documented_endpoint == "http://127.0.0.1:4318/v1/traces"
    err = project / "serve.err"
    with err.open("w") as sink:
        proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=project, stdout=sink, stderr=subprocess.STDOUT,
                                env=_env(TOOLWATCH_PORT="0", TOOLWATCH_METRICS_PORT="0", TOOLWATCH_GRACE="0"))
    try:
        deadline = time.monotonic() + 60
        while "OTLP/HTTP on" not in err.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        banner = err.read_text()
        assert "OTLP/HTTP on" in banner, banner
        endpoint = banner.split("OTLP/HTTP on ")[1].split(",")[0].strip()
        metrics_url = banner.split("metrics on ")[1].split()[0].rstrip(",")
        # the documented endpoint with this run's port
        agent_endpoint = documented_endpoint.replace("127.0.0.1:4318", endpoint.split("//")[1].split("/")[0])
        subprocess.run([sys.executable, "examples/simple_agent.py", "--exporter", "otlp"], cwd=project, check=True,
                       env=_env(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=agent_endpoint), capture_output=True, timeout=60)
        expected = 'toolwatch_turns_total{agent="__other__",judged="false"} 4.0'
        page = ""
        while expected not in page and time.monotonic() < deadline:
            with urllib.request.urlopen(metrics_url, timeout=10) as resp:
                page = resp.read().decode()
            time.sleep(0.05)
        assert expected in page, page
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0, err.read_text()
