"""The alert windows over a controlled clock: each figure over exactly the verdicts of the window."""

from __future__ import annotations

from monitor.alerts.windows import TallyWindows, read_figure
from monitor.judge import Judge
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.verdict import TurnVerdict
from tests.deploy.binaries import ROOT

AGENT = "incident-triage"
AUTH, BILL = "pull_auth_telemetry", "pull_billing_telemetry"
JUDGE = Judge(load_rules([ROOT / "rules" / "incident-triage.yaml"]))


def auth_turn(tool: str) -> TurnVerdict:
    """An [AUTH] turn calling `tool`: correct with AUTH; with BILL a wrong-tool call and a missed AUTH call."""
    call = ToolCall(name=tool, arguments='{"log_excerpt": "login failures"}')
    return JUDGE.judge(Turn("[AUTH] login failures", (call,), agent=AGENT, output_text="Result: checked"))


def test_a_tool_the_alerts_name_again_counts_only_its_calls_since() -> None:
    # A reload drops the only alert on AUTH, a later one brings it back: the window's AUTH figures must come from
    # the verdicts inside the window, not from the current counts minus a snapshot taken before the tool was dropped
    # (that gave negative counts: a missed rate of -1/3, an accuracy of -4/-4 = 1.0 with no AUTH call).
    now = [1000.0]
    w = TallyWindows([60.0], tools=(AUTH,), clock=lambda: now[0])

    def at(t: float) -> None:
        while now[0] < t:
            now[0] += 1.0
            w.tick()

    w.accept([auth_turn(AUTH)] * 4)  # at 1000: 4 correct AUTH calls
    at(1010.0)
    w.tools = ()  # a reload: no alert names AUTH any more
    w.accept([auth_turn(AUTH)])
    at(1011.0)
    w.tools = (AUTH,)  # the alert is back
    at(1012.0)
    w.accept([auth_turn(BILL)])  # at 1012: a wrong-tool call, the AUTH call missed
    at(1065.0)  # the window holds the verdicts of 1010 and 1012 only; AUTH was named again at 1011
    tally = w.tally(AGENT, 60.0)
    assert tally is not None
    assert read_figure(tally, "tool_call_accuracy", None) == (0.5, 2.0)  # 1 correct of 2 judged calls
    assert read_figure(tally, "missed_rate", AUTH) == (1.0, 1.0)  # since 1011: 1 missed of 1 expected
    assert read_figure(tally, "tool_call_accuracy", AUTH) == (None, 0.0)  # since 1011: no AUTH call


def test_a_batch_after_a_pause_leaves_the_verdicts_of_before_it_out_of_the_window_unfollowed() -> None:
    # Windows followed by no gauge take the snapshot due before a batch counts: after a pause longer than the window
    # (SIGSTOP; the monotonic clock went on) whose first event is a batch, not a tick, the snapshot is of the counts
    # of before the pause, dated when they last changed, and the window holds the new batch only. Taken after the
    # batch, it was dated then and the verdicts counted just before the pause stayed in the window with it.
    now = [1000.0]
    w = TallyWindows([60.0], tools=(AUTH,), clock=lambda: now[0])
    assert not w.follow
    for _ in range(10):  # a turn a second, a tick after it
        now[0] += 1.0
        w.accept([auth_turn(AUTH)])
        w.tick()
    now[0] += 0.5  # after the last snapshot: three turns, then the process is stopped
    w.accept([auth_turn(AUTH)] * 3)
    now[0] += 7200.0  # two hours later it continues with a batch
    w.accept([auth_turn(AUTH)])
    tally = w.tally(AGENT, 60.0)
    assert tally is not None and tally.judged_turns == 1
