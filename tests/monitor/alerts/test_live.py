"""In-process alerting: the shipped alerts over rolling windows of real judge verdicts, and the notifier."""

from __future__ import annotations

import dataclasses
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from rich.console import Console

from monitor.alerts import alerts_table
from monitor.alerts.live import LiveAlerts, for_metrics
from monitor.alerts.notify import AlertMessage, AlertNotifier
from monitor.judge import Judge
from monitor.metrics import ToolwatchMetrics
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict
from tests.deploy.binaries import ROOT
from tests.deploy.receiver import Receiver
from tests.deploy.stack import Alertmanager

AGENT = "incident-triage"
RULES = ROOT / "rules" / "incident-triage.yaml"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def judge() -> Judge:
    return Judge(load_rules([RULES]))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def turns(judge: Judge, n: int, *, correct: bool, agent: str = AGENT) -> list[TurnVerdict]:
    """n auth turns; a correct one calls pull_auth_telemetry, a wrong one pull_billing_telemetry instead."""
    tool = "pull_auth_telemetry" if correct else "pull_billing_telemetry"
    call = ToolCall(name=tool, arguments='{"log_excerpt": "login failures"}')
    turn = Turn(input_text="[AUTH] login failures", calls=(call,), agent=agent, output_text="Result: checked")
    return [judge.judge(turn) for _ in range(n)]


def run(live: LiveAlerts, clock: Clock, judge: Judge, minutes: float, per_10s: int, *, correct: bool) -> None:
    """Simulated traffic: `per_10s` turns every 10 seconds for `minutes`, evaluating every 10 seconds."""
    for _ in range(int(minutes * 6)):
        clock.now += 10
        live.accept(turns(judge, per_10s, correct=correct))
        live.evaluate()


def firing(live: LiveAlerts) -> set[tuple[str, str, str]]:
    return {k for k, v in live.table().items() if v == 1}


def test_drop_fires_after_for_and_resolves(judge: Judge, receiver: Receiver) -> None:
    clock = Clock()
    published: list[dict[tuple[str, str, str], float]] = []
    registry = CollectorRegistry()
    live = LiveAlerts.from_ruleset(
        load_rules([RULES]),
        clock=clock,
        publish=published.append,
        registry=registry,
        notify_url=receiver.url + "/api/v2/alerts",
        resend_s=3600,
    )
    try:
        run(live, clock, judge, 6, 2, correct=True)  # steady: 12 judged calls a minute, all correct
        assert firing(live) == set() and live.active() == []
        run(live, clock, judge, 0.5, 2, correct=False)  # 30 s of wrong calls: pending (for: 1m), not firing
        assert ("ToolCallAccuracyLow", AGENT, "warning") not in firing(live)
        run(live, clock, judge, 5, 2, correct=False)
        now_firing = firing(live)
        assert ("ToolCallAccuracyLow", AGENT, "warning") in now_firing
        assert ("MissedCallsHigh", AGENT, "warning") in now_firing  # each wrong call also misses the auth pull
        assert ("SpuriousCallsHigh", AGENT, "warning") not in now_firing  # substitutions are wrong_tool
        assert ("HallucinatedToolCalls", AGENT, "critical") not in now_firing
        low = next(a for a in live.active() if a.labels["alertname"] == "ToolCallAccuracyLow")
        assert low.value == 0.0 and low.labels["figure"] == "tool_call_accuracy"
        assert published[-1][("ToolCallAccuracyLow", AGENT, "warning")] == 1.0
        exposition = generate_latest(registry).decode()
        assert (
            'toolwatch_alert_active{agent="incident-triage",alertname="ToolCallAccuracyLow",severity="warning"} 1.0'
            in (exposition)
        )
        assert receiver.wait_for(lambda posts: any(_names(p) & {"ToolCallAccuracyLow"} for p in posts), 5)
        assert {path for path, _ in receiver.posts} == {"/api/v2/alerts"}
        sent = [a for _, body in receiver.posts for a in body]
        alert = next(a for a in sent if a["labels"]["alertname"] == "ToolCallAccuracyLow")
        assert alert["labels"]["agent"] == AGENT and alert["labels"]["severity"] == "warning"
        assert re.fullmatch(r"\d+(\.\d+)?%", alert["annotations"]["value"]) and alert["startsAt"].endswith("Z")
        run(live, clock, judge, 6, 2, correct=True)  # recovery
        assert ("ToolCallAccuracyLow", AGENT, "warning") not in firing(live)
        assert live.table()[("ToolCallAccuracyLow", AGENT, "warning")] == 0.0
        assert receiver.wait_for(lambda posts: any(_resolved(p, "ToolCallAccuracyLow") for p in posts), 5)
    finally:
        live.close()


def _names(post: tuple[str, object]) -> set[str]:
    body = post[1]
    return {a["labels"]["alertname"] for a in body} if isinstance(body, list) else set()


def _resolved(post: tuple[str, object], name: str) -> bool:
    body = post[1]
    if not isinstance(body, list):
        return False
    now = time.time()
    return any(a["labels"]["alertname"] == name and _epoch(a["endsAt"]) <= now + 1 for a in body)


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_too_few_samples_stay_silent(judge: Judge) -> None:
    clock = Clock()
    live = LiveAlerts.from_ruleset(load_rules([RULES]), clock=clock)
    run(live, clock, judge, 0.5, 1, correct=True)
    # one wrong turn a minute: 5 judged calls in 5m (< 20), 10 expected in 10m (< 20)
    for _ in range(12):
        clock.now += 60
        live.accept(turns(judge, 1, correct=False))
        live.evaluate()
    assert firing(live) == set()


def test_unknown_agents_fold_into_other_and_scoped_alerts_ignore_them(judge: Judge) -> None:
    clock = Clock()
    live = LiveAlerts.from_ruleset(load_rules([RULES]), clock=clock)
    run(live, clock, judge, 0.5, 1, correct=True)
    for _ in range(40):
        clock.now += 10
        live.accept(turns(judge, 3, correct=False, agent="some-other-agent"))
        live.evaluate()
    assert live.windows.agents() == ["__other__", AGENT]
    assert firing(live) == set()  # every shipped alert is scoped to incident-triage


def test_burn_rate_page_in_process(judge: Judge) -> None:
    clock = Clock()
    live = LiveAlerts.from_ruleset(load_rules([RULES]), clock=clock)
    for _ in range(60):  # one hour of correct calls, one evaluation a minute
        clock.now += 60
        live.accept(turns(judge, 3, correct=True))
        live.evaluate()
    for _ in range(50):  # then only wrong ones: after ~44 min the 1h error ratio passes 72%
        clock.now += 60
        live.accept(turns(judge, 3, correct=False))
        live.evaluate()
    assert ("ToolCallAccuracySLO", AGENT, "critical") in firing(live)
    page = next(a for a in live.active() if a.labels["alertname"] == "ToolCallAccuracySLO")
    assert page.labels["long_window"] == "1h" and page.value > 0.72


def test_notifier_webhook_format(receiver: Receiver) -> None:
    notifier = AlertNotifier(receiver.url + "/hook")
    try:
        msg = AlertMessage({"alertname": "A", "agent": AGENT}, {"summary": "s"}, starts_at=time.time())
        assert notifier.send([msg], time.time())
        assert receiver.wait_for(lambda posts: len(posts) == 1, 5)
        path, body = receiver.posts[0]
        assert path == "/hook" and body["version"] == "4" and body["status"] == "firing"
        assert body["alerts"][0]["labels"] == {"alertname": "A", "agent": AGENT}
    finally:
        notifier.close()
    assert notifier.stats.sent == 1 and notifier.stats.failed == 0


def test_notifier_webhook_body_has_the_fields_alertmanager_posts(receiver: Receiver, tmp_path: Path) -> None:
    """A plain webhook gets the body a real Alertmanager posts to its webhook receivers, field for field."""
    labels = {"alertname": "ToolCallAccuracyLow", "agent": AGENT, "severity": "warning"}
    annotations = {"summary": "Fewer than 90% of the calls are correct.", "value": "50%"}
    msg = AlertMessage(labels, annotations, starts_at=time.time(), generator_url="http://toolwatch.example/alerts")
    am = Alertmanager(tmp_path, receiver.url + "/alertmanager")
    notifier = AlertNotifier(receiver.url + "/direct")
    try:
        to_am = AlertNotifier(am.url + "/api/v2/alerts")
        to_am.send([msg], time.time())
        to_am.close()
        assert receiver.wait_for(lambda posts: any(p.startswith("/alertmanager") for p, _ in posts), 20)
        notifier.send([msg], time.time())
        assert receiver.wait_for(lambda posts: any(p == "/direct" for p, _ in posts), 5)
    finally:
        notifier.close()
        am.stop()
    from_am = next(body for path, body in receiver.posts if path.startswith("/alertmanager"))
    direct = next(body for path, body in receiver.posts if path == "/direct")
    assert sorted(direct) == sorted(from_am)
    assert sorted(direct["alerts"][0]) == sorted(from_am["alerts"][0])
    for field in ("version", "status", "commonLabels", "commonAnnotations", "truncatedAlerts"):
        assert direct[field] == from_am[field], field
    for field in ("status", "labels", "annotations", "fingerprint", "generatorURL", "endsAt"):
        assert direct["alerts"][0][field] == from_am["alerts"][0][field], field


def test_notifier_never_blocks_on_a_dead_or_slow_receiver(tmp_path: Path) -> None:
    slow = Receiver(delay_s=1.0)
    msg = AlertMessage({"alertname": "A"}, {}, starts_at=time.time())
    notifier = AlertNotifier(slow.url + "/api/v2/alerts", max_queue=1, timeout_s=0.3)
    try:
        started = time.monotonic()
        results = [notifier.send([msg], time.time()) for _ in range(5)]
        assert time.monotonic() - started < 0.2  # queueing is immediate
        assert results[0] and not all(results)
        assert notifier.stats.dropped >= 3
    finally:
        notifier.close(timeout_s=2)
        slow.close()
    assert notifier.stats.failed >= 1 and "timed out" in notifier.stats.last_error
    dead = AlertNotifier("http://127.0.0.1:9/api/v2/alerts", timeout_s=0.5)
    dead.send([msg], time.time())
    dead.close(timeout_s=2)
    assert dead.stats.failed == 1 and dead.stats.sent == 0
    with pytest.raises(ValueError, match="http"):
        AlertNotifier("ftp://example.invalid")


def test_notifier_survives_a_receiver_that_does_not_speak_http() -> None:
    """A URL pointing at some other service (its reply is no HTTP status line) fails that POST, not the notifier."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []

    def answer_garbage() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed
                return
            with conn:
                accepted.append(1)
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    threading.Thread(target=answer_garbage, daemon=True).start()
    notifier = AlertNotifier(f"http://127.0.0.1:{listener.getsockname()[1]}/hook", timeout_s=2)
    msg = AlertMessage({"alertname": "A"}, {}, starts_at=time.time())
    try:
        for _ in range(2):
            assert notifier.send([msg], time.time())
        deadline = time.monotonic() + 5
        while notifier.stats.failed < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        notifier.close(timeout_s=2)
        listener.close()
    assert notifier.stats.failed == 2 and len(accepted) == 2, (notifier, accepted)
    assert "BadStatusLine" in notifier.stats.last_error


def test_every_configured_agent_has_windows_of_its_own_as_on_metrics(judge: Judge) -> None:
    """The service's label values are bounded by its configuration (the rules' agents and --agent): the in-process
    windows keep each, as /metrics does. They folded every agent past the 64th into `__other__`, whose alerts then
    read other figures than Prometheus's; a rules reload that changes the windows keeps that."""
    clock = Clock()
    ruleset = load_rules([RULES])
    agents = [AGENT, *(f"agent-{i:02d}" for i in range(80))]
    metrics = ToolwatchMetrics(tools=ruleset.catalog, agents=agents)
    live = for_metrics(ruleset, metrics, clock=clock)
    for agent in [*agents, "stranger", "another stranger"]:
        metrics.observe(turns(judge, 1, correct=False, agent=agent))  # the metrics pass them on to `live`
    text = generate_latest(metrics.registry()).decode()
    on_metrics = set(re.findall(r'toolwatch_turns_total\{agent="([^"]+)"', text))
    assert live.windows.agents() == sorted(on_metrics) == sorted([*agents, "__other__"])
    # Started without alerts (one default window), then reloaded with them: new windows, still without a bound.
    live = for_metrics(dataclasses.replace(ruleset, alerts=()), metrics, clock=clock)
    windows = live.windows
    live.update(ruleset)
    assert live.windows is not windows
    for agent in agents:
        live.accept(turns(judge, 1, correct=True, agent=agent))
    assert live.windows.agents() == sorted(agents)


def test_for_metrics_publishes_into_the_service_metrics_and_reload_resolves(judge: Judge) -> None:
    clock = Clock()
    ruleset = load_rules([RULES])
    metrics = ToolwatchMetrics(tools=ruleset.catalog, agents=ruleset.agents, clock=clock)
    live = for_metrics(ruleset, metrics)  # on the metrics' clock
    for correct, minutes in ((True, 3), (False, 3)):
        for _ in range(minutes * 6):
            clock.now += 10
            metrics.observe(turns(judge, 2, correct=correct))  # the metrics pass them on to `live`
            metrics.tick()  # the worker's tick: the 5m and 1h alert windows take their snapshots with the gauges'
            live.evaluate()
    text = generate_latest(metrics.registry()).decode()
    line = 'toolwatch_alert_active{agent="incident-triage",alertname="ToolCallAccuracyLow",severity="warning"}'
    assert line + " 1.0" in text
    assert 'toolwatch_tool_calls_total{agent="incident-triage",outcome="wrong_tool",tool="pull_billing_telemetry"}' in (
        text
    )
    console = Console(record=True, width=120)
    console.print(alerts_table(live))
    shown = console.export_text()
    assert "firing" in shown and "ToolCallAccuracyLow" in shown and "SpuriousCallsHigh" in shown
    windows = live.windows
    live.update(dataclasses.replace(ruleset, alerts=ruleset.alerts[:1]))  # keep only ToolCallAccuracyLow
    assert live.windows is windows  # same window lengths: history kept
    live.evaluate()
    assert live.table()[("MissedCallsHigh", AGENT, "warning")] == 0.0  # removed by the reload: resolved
    assert live.table()[("ToolCallAccuracyLow", AGENT, "warning")] == 1.0
    live.update(dataclasses.replace(ruleset, alerts=()))
    live.evaluate()
    assert line + " 0.0" in generate_latest(metrics.registry()).decode()


def test_client_chosen_tool_names_do_not_grow_the_alert_windows(tmp_path: Path) -> None:
    """With `from_definitions`, tool names come from the clients: the windows keep only what alerts read."""
    rules = tmp_path / "open.yaml"
    rules.write_text(
        "agent: open\n"
        "catalog: {from_definitions: true, tools: [{name: search}]}\n"
        "expect:\n  - when: {prefix: q}\n    call: [{tool: search}]\n"
        "alerts:\n"
        "  - {name: OpenAccuracyLow, figure: tool_call_accuracy, agent: open, below: 0.5, min_samples: 1}\n"
        "  - {name: SearchAccuracyLow, figure: tool_call_accuracy, agent: open, tool: search, below: 0.5,"
        " min_samples: 1}\n"
    )
    ruleset = load_rules([rules])
    judge = Judge(ruleset)
    clock = Clock()
    live = LiveAlerts.from_ruleset(ruleset, clock=clock)
    for i in range(1000):
        name = f"offered_{i}"
        turn = Turn(input_text="q x", agent="open", tool_definitions=({"type": "function", "name": name},),
                    calls=(ToolCall(name="search"), ToolCall(name=name)))
        verdict = judge.judge(turn)
        assert [c.in_catalog for c in verdict.calls] == [True, True]  # the offered tool is a catalog tool
        live.accept([verdict])
        if i % 100 == 0:
            clock.now += 20
            live.evaluate()
    totals = live.windows._totals["open"]
    assert set(totals.per_tool) == {"search"} and not totals.confusion
    assert totals.judged_calls == 2000 and totals.correct == 1000 and totals.per_tool["search"].correct == 1000
    clock.now += 60
    live.evaluate()
    assert firing(live) == set()  # 50% overall is not below 0.5; search itself is 100%


def _trickling_receiver(delay_s: float) -> tuple[socket.socket, list[socket.socket]]:
    """Accepts, reads the request, then answers one byte every `delay_s`: each read is quick, the answer endless."""
    listener = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conns.append(conn)

            def trickle(c: socket.socket = conn) -> None:
                try:
                    c.recv(65536)
                    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000:
                        c.sendall(bytes((byte,)))
                        time.sleep(delay_s)
                except OSError:
                    pass

            threading.Thread(target=trickle, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener, conns


def test_a_receiver_answering_a_byte_at_a_time_is_cut_at_the_timeout() -> None:
    # urllib's timeout bounds each read: one byte every 0.1 s held the sender thread for the whole answer (forever,
    # for a receiver that never ends), and every alert after it waited in the queue and was dropped.
    listener, conns = _trickling_receiver(0.1)
    notifier = AlertNotifier(f"http://127.0.0.1:{listener.getsockname()[1]}/hook", timeout_s=0.5)
    msg = AlertMessage({"alertname": "A"}, {}, starts_at=time.time())
    try:
        started = time.monotonic()
        assert notifier.send([msg], time.time()) and notifier.send([msg], time.time())
        while notifier.stats.failed < 2 and time.monotonic() - started < 20:
            time.sleep(0.02)
        took = time.monotonic() - started
        assert notifier.stats.failed == 2 and notifier.stats.sent == 0, notifier
        # Cut at their deadline, the two POSTs end 2 x 0.5 s after the first was sent (1.0 s, more on a loaded
        # machine); read to the end, each would take the whole 1,040-byte answer at 0.1 s a byte: 104 s. The bound
        # was 1.6 s, too close to the 1.0 s of the correct notifier for a loaded machine.
        assert took < 10, took
        assert "timed out" in notifier.stats.last_error
    finally:
        notifier.close(timeout_s=1)
        listener.close()
        for c in conns:
            c.close()


def test_close_waits_at_most_its_timeout_with_a_full_queue_and_a_silent_receiver() -> None:
    # The shutdown of `toolwatch serve` closes the notifier: with a full queue it waited `timeout_s` for room for its
    # stop mark, then `timeout_s` more for the thread.
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the backlog) and never answers
    # Its POST outlasts the close (3 s against 1 s), so the queue stays full all through the close.
    notifier = AlertNotifier(f"http://127.0.0.1:{listener.getsockname()[1]}/hook", timeout_s=3.0, max_queue=2)
    msg = AlertMessage({"alertname": "A"}, {}, starts_at=time.time())
    try:
        assert notifier.send([msg], time.time())
        deadline = time.monotonic() + 30
        while not notifier._queue.empty() and time.monotonic() < deadline:  # the thread takes it, and waits
            time.sleep(0.01)
        assert notifier.send([msg], time.time()) and notifier.send([msg], time.time())
        assert not notifier.send([msg], time.time())  # the queue is full
        started = time.monotonic()
        notifier.close(timeout_s=1.0)
        took = time.monotonic() - started
        # 1.0 s (its timeout; barely more on a loaded machine: it is waiting, not working) against 2.0 s before (1.0 s
        # for room in the queue, then 1.0 s for the thread), whatever the speed of the machine: halfway. It was 1.3 s,
        # and the queue was full at the close only when the thread had taken the first alert within the 0.1 s slept.
        assert 0.9 < took < 1.5, took
    finally:
        listener.close()


def test_a_reload_that_renames_the_agent_alerts_on_the_new_name(tmp_path: Path) -> None:
    """LiveAlerts.from_ruleset labels agents by the rules' agents: after `update` with rules of another agent, that
    agent's turns are its own, not `__other__` (they were, so its alerts never saw a turn)."""
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(RULES.read_text(encoding="utf-8").replace(AGENT, "triage-v2"), encoding="utf-8")
    clock = Clock()
    live = LiveAlerts.from_ruleset(load_rules([RULES]), clock=clock)
    new_rules = load_rules([renamed])
    live.update(new_rules)
    judge = Judge(new_rules)
    for _ in range(30):  # 5 minutes of wrong calls of the renamed agent
        clock.now += 10
        live.accept(turns(judge, 3, correct=False, agent="triage-v2"))
        live.evaluate()
    assert live.windows.agents() == ["triage-v2"]
    assert any(agent == "triage-v2" for _, agent, _ in firing(live)), live.table()
