"""A turn the judge fails on (a judge bug) is dropped and its spans counted, and leaves the verdict metrics alone: the
span-end-to-verdict lag histogram counts the verdicts made, one observation each, as its help text says."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from monitor.judge import Judge
from monitor.records import Turn
from monitor.rules import RuleSet
from monitor.serve import ServerThread, Settings
from monitor.verdict import TurnVerdict
from tests.monitor.service.conftest import RULES, scrape, value, wait_for
from tests.monitor.service.spans import Call, TurnSpec, record_turns

A = "incident-triage"
ARGS = {"log_excerpt": "token rejected"}


class BuggyJudge(Judge):
    """The real judge, with a bug on one input: the only way to reach the service's judge-error path."""

    def judge(self, turn: Turn) -> TurnVerdict:
        if turn.input_text.startswith("[BOOM]"):
            raise RuntimeError("a judge bug")
        return super().judge(turn)


def buggy(ruleset: RuleSet) -> BuggyJudge:
    return BuggyJudge(ruleset)


def test_a_turn_the_judge_fails_on_is_not_a_verdict_in_the_lag_histogram() -> None:
    settings = Settings(rules=(str(RULES),), port=0, metrics_port=0, grace_s=0.2, watch_rules=False)
    st = ServerThread(settings, judge_factory=buggy)
    server = st.start()
    try:
        exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
        turns = [
            TurnSpec("[AUTH] token rejected", [Call("pull_auth_telemetry", ARGS)]),
            TurnSpec("[BOOM] anything", [Call("pull_auth_telemetry", ARGS)]),
            TurnSpec("[BILL] card declined", [Call("pull_billing_telemetry", ARGS)]),
        ]
        assert exporter.export(record_turns(turns)) is SpanExportResult.SUCCESS
        exporter.shutdown()  # type: ignore[no-untyped-call]
        # Both spans of the turn (the turn span and its call) are not judged: "Spans not judged (refused or dropped)".
        wait_for(lambda: value(scrape(server), "toolwatch_spans_dropped_total", reason="judge_error") == 2)
        wait_for(lambda: server.pipeline.turns_judged == 2)
        s = scrape(server)
        verdicts = sum(v for (name, _), v in s.items() if name == "toolwatch_turns_total")
        assert verdicts == 2
        assert value(s, "toolwatch_verdict_lag_seconds_count") == verdicts
        assert value(s, "toolwatch_verdict_lag_seconds_bucket", le="+Inf") == verdicts
        assert value(s, "toolwatch_judge_duration_seconds_count") == verdicts
    finally:
        st.stop()
