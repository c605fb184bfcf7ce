"""SIGTERM and SIGINT reach `serve` however many other signals came before them.

asyncio learns of a signal from a byte the C-level handler writes to the loop's wake-up socket; with that socket full
(a storm of SIGHUPs while the loop was busy, say loading a big rule file's reload) the byte of a SIGTERM was dropped
and the service went on serving, reloading its rules at every SIGHUP, until it was killed: a lost shutdown, seen as a
rare hang of the SIGHUP-storm shutdown test. Here the socket is filled as such a storm fills it (bytes of SIGHUP),
in a real `Server.serve_forever` on the main thread of a process of its own, which then sends itself a real signal.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.monitor.service.conftest import RULES

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sys

    from monitor.serve import Server, Settings

    def started(server):
        # The wake-up socket filled with SIGHUP's signal number, as a storm of them fills it while the loop is busy.
        fd = signal.set_wakeup_fd(-1)
        signal.set_wakeup_fd(fd, warn_on_full_buffer=False)
        filled = 0
        try:
            while True:
                filled += os.write(fd, bytes([signal.SIGHUP]) * 4096)
        except BlockingIOError:
            pass
        print("filled", filled, flush=True)
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))

    settings = Settings(rules=(sys.argv[1],), port=0, metrics_port=0, watch_rules=False, grace_s=0.2)
    judged = asyncio.run(Server(settings).serve_forever(started))
    print("stopped", judged, flush=True)
    """
)


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_stop_signal_is_not_lost_when_the_loops_wakeup_socket_is_full(tmp_path: Path, signame: str) -> None:
    script = tmp_path / "serve_and_stop.py"
    script.write_text(SCRIPT)
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen(
        [sys.executable, str(script), str(RULES), signame],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{signame} was lost: still serving 30 s after it\n{out}\n{err[-5000:]}")
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("filled ") and int(lines[0].split()[1]) > 0
    assert lines[-1] == "stopped 0", out
