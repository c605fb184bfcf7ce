"""Rule reloads (SIGHUP and file change), the verdict log, graceful shutdown."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from monitor.serve import VerdictLog
from tests.monitor.service.conftest import RULES, ServeFactory, ready_line, scrape, value, wait_for
from tests.monitor.service.http_util import get, post
from tests.monitor.service.spans import Call, TurnSpec, record_turns, to_request

OK = "Result: ok"
GOOD = TurnSpec("[AUTH] x", [Call("pull_auth_telemetry", {"log_excerpt": "x"})], output_text=OK)
BAD = TurnSpec("[BILL] y", [Call("pull_auth_telemetry", {"log_excerpt": "y"})], output_text=OK)


def _send(endpoint: str, turns: list[TurnSpec]) -> None:
    status, _, _ = post(endpoint, to_request(record_turns(turns)).SerializeToString(), "application/x-protobuf")
    assert status == 200


def test_reload_on_file_change_keeps_old_rules_when_invalid(serve: ServeFactory, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.read_text())
    _, server = serve(rules=(str(rules),), watch_rules=True, watch_interval_s=0.05)
    assert value(scrape(server), "toolwatch_rules_last_reload_successful") == 1  # the files' rules, from the start
    rules.write_text("version: 1\ncatalog: {tools: [{name: 5}]}\nexpect: nope\n")
    wait_for(lambda: value(scrape(server), "toolwatch_rules_reloads_total", result="failure") == 1)
    assert server.rules.last_error
    # 0 for as long as the old rules stay in force (the alert on it does not end by itself, as one on the counter did)
    assert value(scrape(server), "toolwatch_rules_last_reload_successful") == 0
    _send(server.endpoint, [GOOD])  # still judged by the old rules
    wait_for(lambda: server.pipeline.turns_judged == 1)
    assert value(scrape(server), "toolwatch_turns_total", agent="incident-triage", judged="true") == 1
    # A valid new file: a new tool in the catalog becomes a label value.
    text = RULES.read_text().replace(
        "    - name: pull_support_telemetry",
        "    - name: pull_network_telemetry\n      description: net\n    - name: pull_support_telemetry",
    )
    rules.write_text(text)
    wait_for(lambda: value(scrape(server), "toolwatch_rules_reloads_total", result="success") == 1)
    # Its series exist at 0 before its first call (Prometheus' increase() sees that first call).
    s = scrape(server)
    assert value(s, "toolwatch_rules_last_reload_successful") == 1
    for outcome in ("correct", "wrong_tool", "spurious", "unjudged"):
        net = {"agent": "incident-triage", "tool": "pull_network_telemetry", "outcome": outcome}
        assert value(s, "toolwatch_tool_calls_total", **net) == 0
    assert value(s, "toolwatch_missed_calls_total", agent="incident-triage", tool="pull_network_telemetry") == 0
    _send(server.endpoint, [TurnSpec("[AUTH] z", [Call("pull_network_telemetry", {"log_excerpt": "z"})])])
    wait_for(lambda: server.pipeline.turns_judged == 2)
    s = scrape(server)
    assert (
        value(
            s,
            "toolwatch_tool_calls_total",
            agent="incident-triage",
            tool="pull_network_telemetry",
            outcome="wrong_tool",
        )
        == 1
    )


def test_verdict_log_and_rotation(serve: ServeFactory, tmp_path: Path) -> None:
    log = tmp_path / "verdicts.jsonl"
    thread, server = serve(verdict_log=str(log))
    _send(server.endpoint, [GOOD, BAD, GOOD])
    wait_for(lambda: server.pipeline.turns_judged == 3)
    thread.call(server.pipeline.verdict_log.flush)  # type: ignore[union-attr]  # on the loop that owns the log
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert len(lines) == 1  # only the failing turn
    rec = lines[0]
    assert rec["input"] == "[BILL] y" and rec["failed"] is True and rec["rule"] == "billing"
    assert "pull_auth_telemetry" in rec["reason"] and rec["missed"] == ["pull_billing_telemetry"]
    assert rec["calls"] == [{"name": "pull_auth_telemetry", "outcome": "wrong_tool", "schema_valid": True}]


def test_verdict_log_rotates_by_size(tmp_path: Path) -> None:
    from monitor.judge import Judge
    from monitor.records import ToolCall, Turn
    from monitor.rules import load_rules

    judge = Judge(load_rules([RULES]))
    verdict = judge.judge(Turn("[BILL] y" + "x" * 300, (ToolCall("pull_auth_telemetry", arguments="{}"),)))
    path = tmp_path / "v.jsonl"
    log = VerdictLog(path, max_bytes=4096, backups=2)
    for _ in range(60):
        log.write([verdict])
    log.close()
    sizes = [p.stat().st_size for p in (path, tmp_path / "v.jsonl.1", tmp_path / "v.jsonl.2")]
    assert all(0 < s <= 4096 for s in sizes)
    assert not (tmp_path / "v.jsonl.3").exists()
    assert log.written == 60


def test_stop_judges_pending_turns(serve: ServeFactory) -> None:
    st, server = serve(grace_s=600, turnless_timeout_s=600)
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    exporter.export(record_turns([GOOD, BAD]) + record_turns([TurnSpec("[AUTH] q", [Call("pull_auth_telemetry")])])[:1])
    exporter.shutdown()  # type: ignore[no-untyped-call]
    wait_for(lambda: server.pipeline.queued == 0 and server.pipeline.assembler.pending_traces == 3)
    assert server.pipeline.turns_judged == 0
    assert st.stop() == 3  # two turns, one turnless call
    s = server.metrics.counters.tables["toolwatch_turns_total"]
    assert s[("incident-triage", "true")] == 2 and s[("__other__", "false")] == 1


def test_serve_command_sighup_reload_and_sigterm_shutdown(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.read_text())
    log = tmp_path / "v.jsonl"
    env = {**os.environ, "TOOLWATCH_GRACE": "60s"}
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "toolwatch"),
            "serve",
            "--rules",
            str(rules),
            "--port",
            "0",
            "--metrics-port",
            "0",
            "--no-watch",
            "--verdict-log",
            str(log),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = ready_line(proc.stderr)
        endpoint = line.split("OTLP/HTTP on ")[1].split(",")[0].strip()
        metrics = line.split("metrics on ")[1].split(" ")[0].strip()
        assert get(metrics.replace("/metrics", "/readyz")) == 200
        _send(endpoint, [BAD])
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: 'toolwatch_rules_reloads_total{result="success"} 1.0' in _text(metrics))
        proc.send_signal(signal.SIGTERM)  # the turn waits for a 60 s grace: shutdown must judge it
        assert proc.wait(timeout=30) == 0
        assert json.loads(log.read_text())["input"] == "[BILL] y"
        err = proc.stderr.read()
        assert "stopped; 1 pending turns judged at shutdown" in err  # without -v
        assert f"rules reloaded from {rules}" in err  # an operator's SIGHUP is answered in the log, without -v
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _text(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def test_rule_file_alerts_fire_in_process(serve: ServeFactory, tmp_path: Path) -> None:
    text = RULES.read_text().split("\nalerts:")[0] + (
        "\nalerts:\n  - name: HallucinatedToolCalls\n    figure: hallucinated_rate\n    agent: incident-triage\n"
        "    above: 0.01\n    for: 0s\n    min_samples: 1\n    severity: critical\n"
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text(text)
    _, server = serve(rules=(str(rules),), alert_interval_s=0.1)
    _send(server.endpoint, [TurnSpec("[AUTH] x", [Call("pull_auth_logs", {"log_excerpt": "x"})], output_text=OK)])
    labels = {"alertname": "HallucinatedToolCalls", "agent": "incident-triage", "severity": "critical"}
    wait_for(lambda: value(scrape(server), "toolwatch_alert_active", **labels) == 1, timeout=20)


def test_verdict_log_keeps_turns_with_lone_surrogates(serve: ServeFactory, tmp_path: Path) -> None:
    # OTLP JSON may carry "\ud800" escapes: a lone surrogate in a tool name or an input cannot be encoded as
    # UTF-8. The failing turn is still logged (escaped), and so are the turns after it; the hooks see them all.
    from monitor.otlp import request_to_json

    log = tmp_path / "verdicts.jsonl"
    thread, server = serve(verdict_log=str(log))
    seen: list[object] = []
    server.pipeline.hooks.append(seen.extend)
    weird = TurnSpec("[BILL] SURROGATE1", [Call("pull_SURROGATE2_telemetry", {"log_excerpt": "y"})], output_text=OK)
    body = request_to_json(to_request(record_turns([weird, BAD])))
    body = body.replace("SURROGATE1", "\\ud800").replace("SURROGATE2", "\\udfff")
    status, _, _ = post(server.endpoint, body.encode(), "application/json")
    assert status == 200
    wait_for(lambda: len(seen) == 2)
    thread.call(server.pipeline.verdict_log.flush)  # type: ignore[union-attr]
    lines = [json.loads(ln) for ln in log.read_text(encoding="utf-8").splitlines()]
    by_input = {rec["input"]: rec for rec in lines}
    assert set(by_input) == {"[BILL] \ud800", "[BILL] y"}
    assert by_input["[BILL] \ud800"]["calls"][0]["name"] == "pull_\udfff_telemetry"


_LAUGHS = "a0: &a0 [" + ", ".join(["lol"] * 10) + "]\n" + "".join(
    f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9))


@pytest.mark.parametrize(
    "text, error",
    [("a: " + "{b: " * 3000 + "1" + "}" * 3000 + "\n", "nested deeper than 64 levels"),
     # 10**9 values through aliases in 700 bytes: the reload ran forever on the server's loop, past 1 GB
     (_LAUGHS, "aliases add more than 1,000,000 values")],
    ids=["deep", "alias-bomb"],
)
def test_a_rule_file_nested_too_deeply_keeps_the_old_rules_and_the_watcher(
    serve: ServeFactory, tmp_path: Path, text: str, error: str
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.read_text())
    _, server = serve(rules=(str(rules),), watch_rules=True, watch_interval_s=0.05)
    rules.write_text(text)
    wait_for(lambda: value(scrape(server), "toolwatch_rules_reloads_total", result="failure") == 1)
    assert error in (server.rules.last_error or "")
    _send(server.endpoint, [GOOD])  # still judged by the old rules
    wait_for(lambda: server.pipeline.turns_judged == 1)
    rules.write_text(RULES.read_text())  # the watcher is still alive: a fixed file is taken
    wait_for(lambda: value(scrape(server), "toolwatch_rules_reloads_total", result="success") == 1)


def test_a_failing_reload_loses_no_pending_turn_at_stop(tmp_path: Path) -> None:
    # Whatever goes wrong in a reload (here the judge cannot be built from the new rules) keeps the old rules,
    # the watcher and a graceful stop that judges every pending turn.
    from monitor.judge import Judge
    from monitor.rules import RuleSet
    from monitor.serve import ServerThread, Settings

    built: list[int] = []

    def factory(ruleset: RuleSet) -> Judge:
        built.append(1)
        if len(built) > 1:
            raise RuntimeError("judge bug")
        return Judge(ruleset)

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.read_text())
    settings = Settings(
        rules=(str(rules),), port=0, metrics_port=0, grace_s=600, turnless_timeout_s=600, watch_interval_s=0.05
    )
    st = ServerThread(settings, judge_factory=factory)
    server = st.start()
    try:
        rules.write_text(RULES.read_text() + "\n# changed\n")
        wait_for(lambda: value(scrape(server), "toolwatch_rules_reloads_total", result="failure") == 1)
        _send(server.endpoint, [GOOD])
        wait_for(lambda: server.pipeline.queued == 0 and server.pipeline.assembler.pending_turns == 1)
    finally:
        assert st.stop() == 1


def test_a_full_disk_under_the_verdict_log_loses_no_verdict(tmp_path: Path) -> None:
    # Writing the verdict log fails (the device is full): the verdicts still reach the metrics and the hooks,
    # and a graceful stop still judges the pending turns.
    from monitor.serve import ServerThread, Settings

    settings = Settings(
        rules=(str(RULES),),
        port=0,
        metrics_port=0,
        grace_s=0.05,
        turnless_timeout_s=600,
        watch_rules=False,
        poll_interval_s=0.02,
        verdict_log="/dev/full",
        verdict_log_all=True,
    )
    st = ServerThread(settings)
    server = st.start()
    seen: list[object] = []
    server.pipeline.hooks.append(seen.extend)
    for _ in range(4):
        _send(server.endpoint, [GOOD, BAD] * 20)
    wait_for(lambda: len(seen) == 160)
    assert value(scrape(server), "toolwatch_turns_total", agent="incident-triage", judged="true") == 160
    assert server.pipeline.verdict_log is not None and server.pipeline.verdict_log.failed > 0
    # every line lost is counted on /metrics (a flush lost a whole buffer of lines, counted as one)
    wait_for(lambda: value(scrape(server), "toolwatch_verdict_log_lines_lost_total") == 160)
    server.settings.grace_s = 600
    server.pipeline.assembler.grace_ns = 600 * 1_000_000_000
    _send(server.endpoint, [GOOD])
    wait_for(lambda: server.pipeline.queued == 0 and server.pipeline.assembler.pending_turns == 1)
    assert st.stop() == 1
    assert len(seen) == 161


def test_a_failed_start_leaves_no_port_bound_and_no_verdict_log(serve: ServeFactory, tmp_path: Path) -> None:
    from monitor.serve import ServerThread, Settings

    _, first = serve()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    log = tmp_path / "logs" / "verdicts.jsonl"
    settings = Settings(
        rules=(str(RULES),), port=free, metrics_port=first.metrics_port, grpc_port=0, verdict_log=str(log)
    )
    with pytest.raises(OSError, match=f"127.0.0.1:{first.metrics_port} for /metrics: .*--metrics-port"):
        ServerThread(settings).start()
    assert not log.parent.exists()
    with socket.socket() as again:  # the receiver port it had bound is free again
        again.bind(("127.0.0.1", free))
    settings.metrics_port = 0  # and the same settings start once the port is free
    with ServerThread(settings) as server:
        assert server.port == free and log.exists()


def test_a_rule_file_being_written_is_loaded_once_it_stays_unchanged(tmp_path: Path) -> None:
    """The file watcher asks `Rules.changed()` once per interval. A file caught half-written (an editor or `cat >`
    truncates it, then writes) is not loaded: that would count a failed reload and log an error for a file that is
    fine a moment later. A change is loaded once a check finds the file as the check before found it."""
    from monitor.serve._rules import Rules

    path = tmp_path / "rules.yaml"
    good = RULES.read_text()
    path.write_text(good)
    rules = Rules([path])
    assert not rules.changed()
    path.write_text(good[: len(good) // 2])  # caught half-written: not yet
    assert not rules.changed()
    path.write_text(good.replace("description:", "description: new", 1))  # the writer finished: not yet
    assert not rules.changed()
    assert rules.changed()  # unchanged since the last check: load it
    assert rules.reload() and rules.last_error is None
    assert not rules.changed() and not rules.changed()
    path.write_text("version: 1\nexpect: nope\n")  # a file that stays broken is reloaded (and fails) once
    assert not rules.changed() and rules.changed()
    assert not rules.reload() and rules.last_error
    assert not rules.changed() and not rules.changed()


_SIGNAL_AT_READY = """
import asyncio, os, signal, sys
from monitor.serve import Server, Settings

server = Server(Settings(rules=(sys.argv[1],), port=0, metrics_port=0, watch_rules=False))

def ready(s: Server) -> None:  # what a supervisor does on the ready line: signal at once
    os.kill(os.getpid(), signal.SIGHUP)
    os.kill(os.getpid(), signal.SIGTERM)

print("judged at stop:", asyncio.run(server.serve_forever(ready)))
"""


def test_signals_sent_as_soon_as_the_server_says_it_is_ready_are_handled(tmp_path: Path) -> None:
    # The ready line (`on_started`) came before the handlers were installed: a SIGHUP sent on seeing it ended the
    # process (SIGHUP's default action) instead of reloading the rules.
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.read_text())
    proc = subprocess.run(
        [sys.executable, "-c", _SIGNAL_AT_READY, str(rules)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() == "judged at stop: 0"


def test_a_configmap_swap_to_a_file_of_the_same_size_and_time_is_seen(tmp_path: Path) -> None:
    """A Kubernetes ConfigMap updates its files by swapping a `..data` link to a new folder; where builds fix every
    file's mtime (Nix, reproducible images) and an edit keeps the size, the watcher compared (mtime, size) alone and
    never saw the change (SIGHUP did). The file's identity (device, inode) and ctime are compared too."""
    import os

    from monitor.serve._rules import Rules

    good = RULES.read_text()
    changed = good.replace("pull_auth_telemetry", "pull_auth_telemetrx")
    assert len(changed) == len(good) and changed != good
    for name, text in (("d1", good), ("d2", changed)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "r.yaml").write_text(text)
        os.utime(tmp_path / name / "r.yaml", ns=(10**18, 10**18))
    (tmp_path / "..data").symlink_to("d1")
    (tmp_path / "r.yaml").symlink_to("..data/r.yaml")
    rules = Rules([tmp_path / "r.yaml"])
    assert not rules.changed()
    (tmp_path / "..tmp").symlink_to("d2")
    os.replace(tmp_path / "..tmp", tmp_path / "..data")  # the atomic swap kubelet makes
    assert not rules.changed() and rules.changed()


def test_a_change_to_the_cases_file_a_rule_file_names_is_reloaded(tmp_path: Path) -> None:
    """`cases: cases.jsonl` in a rule file: the cases are rules in force too, so the file watcher watches that file
    as it watches the rule files (editing it changed nothing until the rule file was touched or SIGHUP sent)."""
    from monitor.records import ToolCall, Turn
    from monitor.serve._rules import Rules

    path = tmp_path / "rules.yaml"
    path.write_text(RULES.read_text() + "cases: labelled/cases.jsonl\n")
    cases = tmp_path / "labelled" / "cases.jsonl"
    cases.parent.mkdir()
    cases.write_text('{"id": "c1", "input": "odd line", "call": [{"tool": "pull_auth_telemetry"}]}\n')
    rules = Rules([path])

    def outcome() -> str:
        call = ToolCall(name="pull_billing_telemetry", arguments="{}", trace_id="t" * 32, span_id="c" * 16,
                        parent_span_id="a" * 16, start_ns=1, end_ns=2)
        turn = Turn(input_text="odd line", calls=(call,), trace_id="t" * 32, span_id="a" * 16, start_ns=0, end_ns=3,
                    agent="incident-triage")
        return rules.judge.judge(turn).calls[0].outcome.value

    assert outcome() == "wrong_tool"
    assert not rules.changed()
    cases.write_text('{"id": "c1", "input": "odd line", "call": [{"tool": "pull_billing_telemetry"}]}\n')
    assert not rules.changed() and rules.changed()  # settled: load it
    assert rules.reload() and rules.last_error is None
    assert outcome() == "correct"
    assert not rules.changed() and not rules.changed()
    cases.unlink()  # gone: a change too (the reload fails and keeps the rules in force)
    assert not rules.changed() and rules.changed()
    assert not rules.reload() and "cases" in (rules.last_error or "")
    assert outcome() == "correct"


def test_a_cases_file_a_failing_reload_named_is_watched_until_it_is_fixed(tmp_path: Path) -> None:
    """A rule file edited to name a cases file not written yet (or broken): the reload fails and keeps the rules in
    force; writing (or fixing) the cases file then is a change, reloaded, as the README and the reload alert say. The
    watcher watched only the cases files of the rules in force: nothing but SIGHUP or touching the rule file
    recovered."""
    from monitor.serve._rules import Rules

    path = tmp_path / "rules.yaml"
    path.write_text(RULES.read_text())
    rules = Rules([path])
    path.write_text(RULES.read_text() + "cases: cases.jsonl\n")
    assert not rules.changed() and rules.changed()
    assert not rules.reload() and "cases" in (rules.last_error or "")
    assert not rules.changed() and not rules.changed()
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "c1", "input": "odd", "call": [{"tool": "nope"}]}\n')  # broken: an unknown tool
    assert not rules.changed() and rules.changed()
    assert not rules.reload() and "nope" in (rules.last_error or "")
    assert not rules.changed() and not rules.changed()
    cases.write_text('{"id": "c1", "input": "odd", "call": [{"tool": "pull_auth_telemetry"}]}\n')
    assert not rules.changed() and rules.changed()
    assert rules.reload() and rules.last_error is None
    assert not rules.changed() and not rules.changed()
