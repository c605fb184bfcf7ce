"""The metrics collector: rolling windows over a clock, bounded labels, and agreement with the judge's Tally."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.demo import LogLineGenerator, SimulatedTriageModel
from monitor.judge import Judge, Tally
from monitor.metrics import LabelPolicy, ToolwatchMetrics, format_duration, parse_duration
from monitor.metrics._initial import MAX_INITIAL_SERIES, initial_series
from monitor.metrics._verdicts import COUNTERS
from monitor.normalize import ATTRIBUTE_KEYS
from monitor.records import ToolCall, Turn
from monitor.rules import load_rules
from monitor.serve import Pipeline, Rules, Settings
from monitor.verdict import TurnVerdict
from tests.monitor.service.conftest import RULES, Samples, ServeFactory, scrape, value

JUDGE = Judge(load_rules([RULES]))


def verdicts(n: int, seed: int = 3) -> list[TurnVerdict]:
    model = SimulatedTriageModel(seed)
    out = []
    for line in LogLineGenerator(seed).lines(n):
        resp = model.respond(line)
        calls = tuple(ToolCall(c["function"]["name"], arguments=c["function"]["arguments"]) for c in resp.tool_calls)
        answer = model.answer(line, [], resp)
        out.append(JUDGE.judge(Turn(line.text, calls, agent="incident-triage", output_text=answer)))
    return out


def counted(m: ToolwatchMetrics, name: str) -> dict[tuple[str, ...], int]:
    """The series of a counter that counted something (the others wait at 0 for their first event)."""
    return {k: v for k, v in m.counters.tables[name].items() if v}


def test_window_ratios_equal_tally_ratios() -> None:
    vs = verdicts(600)
    m = ToolwatchMetrics(tools=JUDGE.catalog, agents=JUDGE.agents, clock=lambda: 0.0)
    m.observe(vs)
    tally = Tally()
    for v in vs:
        tally.add(v)
    view = m.window_counts(now=1.0)["5m"]
    vec = view.agents["incident-triage"]
    assert not any(any(v) for a, v in view.agents.items() if a != "incident-triage")  # the others are at 0
    r = tally.ratios()
    assert vec[0] / vec[1] == pytest.approx(r["tool_call_accuracy"])
    assert vec[2] / vec[1] == pytest.approx(r["spurious_rate"])
    assert vec[3] / vec[4] == pytest.approx(r["missed_rate"])
    assert vec[6] / vec[5] == pytest.approx(r["selection_accuracy"])
    assert vec[7] / vec[5] == pytest.approx(r["end_to_end_accuracy"])
    checked = 0
    for (agent, tool), (correct, judged, spurious, missed, expected) in view.tools.items():
        if agent == "incident-triage" and tool in tally.per_tool:
            ratios = tally.per_tool[tool].ratios()
            assert (correct / judged if judged else None) == pytest.approx(ratios["tool_call_accuracy"])
            assert (spurious / judged if judged else None) == pytest.approx(ratios["spurious_rate"])
            assert (missed / expected if expected else None) == pytest.approx(ratios["missed_rate"])
            checked += 1
    assert checked == 5  # the five catalog tools


def test_windows_roll_over() -> None:
    now = [1000.0]
    m = ToolwatchMetrics(tools=JUDGE.catalog, agents=JUDGE.agents, windows=(60.0, 600.0), clock=lambda: now[0])

    def advance(seconds: int) -> None:  # the service ticks every second
        for _ in range(seconds):
            now[0] += 1
            m.tick()

    m.observe(verdicts(100, seed=1))
    advance(30)
    m.observe(verdicts(50, seed=2))
    advance(45)  # the first batch is now 75 s old: out of the 1m window, inside the 10m one
    counts = m.window_counts()
    assert sum(v[5] for v in counts["1m"].agents.values()) == 50
    assert sum(v[5] for v in counts["10m"].agents.values()) == 150
    advance(600)
    counts = m.window_counts()
    assert sum(v[5] for v in counts["10m"].agents.values()) == 0


def test_unknown_agents_and_tools_are_other() -> None:
    m = ToolwatchMetrics(tools=JUDGE.catalog, agents=JUDGE.agents)
    v = JUDGE.judge(Turn("[AUTH] x", (ToolCall("nonsense_tool", arguments="{}"),), agent="someone-else"))
    m.observe([v])
    assert counted(m, "toolwatch_tool_calls_total") == {("__other__", "__other__", "hallucinated"): 1}


@pytest.mark.parametrize(("text", "seconds"), [("5m", 300), ("1h", 3600), ("90s", 90), ("2", 2), ("1.5h", 5400)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_duration_labels_and_errors() -> None:
    assert [format_duration(s) for s in (300, 3600, 90, 86400)] == ["5m", "1h", "90s", "1d"]


@pytest.mark.parametrize("seconds", [1_000_000, 1_000_001, 1_000_000.5, 1.25, 1.5, 12.345, 2.675, 199.884,
                                     parse_duration("199884ms"), 3650 * 86400 - 1])
def test_a_duration_label_reads_back_as_its_duration(seconds: float) -> None:
    """`%g` wrote 1000000s and 1000001s as `1e+06s` both: two windows of one `window` label, so duplicate series on
    /metrics (which Prometheus refuses as a whole scrape), and a label that is no duration. A label in ms reads back
    only when the float does: 199.884s and 199884ms are two windows (199.88400000000001), two labels."""
    label = format_duration(seconds)
    assert parse_duration(label) == seconds and "e" not in label, label


def test_windows_are_at_least_a_second_and_one_per_label() -> None:
    from monitor.serve._settings import parse_windows

    assert len({format_duration(w) for w in parse_windows("199884ms,199.884s,1000000s,1000001s")}) == 4
    assert parse_windows("1s,5m,300s") == (1.0, 300.0)  # the same window twice is one
    with pytest.raises(ValueError, match="window '500ms' is shorter than 1s"):
        parse_windows("500ms,5m")



    with pytest.raises(ValueError, match="invalid duration 'soon': .* ms, s, m, h or d"):
        parse_duration("soon")
    assert parse_duration("500ms") == 0.5
    with pytest.raises(ValueError, match="use a positive number"):
        parse_duration("0")
    assert parse_duration("0", allow_zero=True) == parse_duration("0s", allow_zero=True) == 0
    with pytest.raises(ValueError, match="use 0 or a positive number"):
        parse_duration("-1s", allow_zero=True)
    # Past ten years is too long for anything here (float() of 400 nines is inf, which broke the gRPC options).
    assert parse_duration("3650d") == 3650 * 86400
    for text in ("3651d", "9" * 400 + "d", "9" * 400):
        with pytest.raises(ValueError, match=f"duration '{text}' is too long: at most 3650d"):
            parse_duration(text)
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration("\u0661\u0662s")  # digits other than ASCII


def test_forbidden_calls_counter_counts_calls(tmp_path: Path) -> None:
    # toolwatch_forbidden_calls_total is "calls of forbidden tools": a forbidden tool called twice in one
    # turn is two calls (as the judge's Tally counts them), not one.
    path = tmp_path / "forbid.yaml"
    path.write_text(
        "catalog: {tools: [{name: read}, {name: delete}]}\n"
        "forbid: [{tool: delete}]\n"
        "expect:\n"
        "  - when: {prefix: q}\n"
        "    call: [{tool: read, min: 0}, {tool: delete, min: 0, max: 5}]\n",
        encoding="utf-8",
    )
    judge = Judge(load_rules([path]))
    v = judge.judge(Turn("q", (ToolCall("delete"), ToolCall("read"), ToolCall("delete")), agent="a"))
    assert v.forbidden == ("delete",)
    m = ToolwatchMetrics(tools=judge.catalog, agents=["a"])
    m.observe([v])
    tally = Tally()
    tally.add(v)
    assert tally.forbidden_calls == 2
    assert counted(m, "toolwatch_forbidden_calls_total") == {("a", "delete"): 2}


def test_tool_label_cache_is_bounded_in_bytes() -> None:
    # Hallucinated names are free-form and may be long; the label cache must not keep thousands of them.
    m = ToolwatchMetrics(tools=JUDGE.catalog, agents=JUDGE.agents)
    for i in range(300):
        name = f"{i}-" + "x" * (64 << 10)
        m.observe([JUDGE.judge(Turn("[AUTH] x", (ToolCall(name, arguments="{}"),), agent="incident-triage"))])
    assert sum(len(k) for k in m.counters._tool_cache) <= 1 << 20
    assert counted(m, "toolwatch_tool_calls_total") == {("incident-triage", "__other__", "hallucinated"): 300}


def _exposed(m: ToolwatchMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(generate_latest(m.registry()).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


RULE_IDS = [e.id for e in load_rules([RULES]).expectations]
PER_TOOL = [
    f"toolwatch_{name}_total"
    for name in (
        "judged_calls",
        "expected_calls",
        "missed_calls",
        "schema_checked_calls",
        "schema_invalid_calls",
        "schema_valid_calls",
        "argument_checked_calls",
        "argument_mismatches",
        "argument_ok_calls",
        "forbidden_calls",
    )
]


def test_every_known_label_set_starts_at_zero() -> None:
    # Prometheus' increase() only sees growth between samples: a series must exist at 0 before its first event.
    m = ToolwatchMetrics(tools=JUDGE.catalog, agents=JUDGE.agents, rules=RULE_IDS)
    s = _exposed(m)
    agents = ["incident-triage", "__other__"]
    tools = [*sorted(JUDGE.catalog), "__other__"]

    def at_zero(name: str, **labels: str) -> bool:
        return s.get((name, tuple(sorted(labels.items())))) == 0

    for a in agents:
        for t in tools:
            for o in ("correct", "wrong_tool", "spurious", "unjudged"):
                assert at_zero("toolwatch_tool_calls_total", agent=a, tool=t, outcome=o)
            # A hallucinated name is not in the catalog: its label is __other__, never a catalog tool.
            assert at_zero("toolwatch_tool_calls_total", agent=a, tool=t, outcome="hallucinated") is (t == "__other__")
            for name in PER_TOOL:
                assert at_zero(name, agent=a, tool=t), name
            for kind in ("malformed", "type", "required", "additional", "enum", "other"):
                assert at_zero("toolwatch_schema_violations_total", agent=a, tool=t, kind=kind)
        for check in ("selection", "args", "schema", "sequence", "response", "end_to_end", "over_calling"):
            for result in ("pass", "fail"):
                assert at_zero("toolwatch_turn_checks_total", agent=a, check=check, result=result)
        assert at_zero("toolwatch_turns_total", agent=a, judged="true")
        assert at_zero("toolwatch_order_violations_total", agent=a)
        assert at_zero("toolwatch_turnless_turns_total", agent=a)
        assert at_zero("toolwatch_agent_turns_total", agent=a)
        assert at_zero("toolwatch_sequence_score_total", agent=a)
        for rule in RULE_IDS:
            assert at_zero("toolwatch_rule_failures_total", agent=a, rule=rule)
        # Five catalog tools: the whole confusion matrix (6 x 8 cells per agent) is small enough to create.
        assert at_zero("toolwatch_confusion_total", agent=a, expected="pull_risk_telemetry", actual="(unknown)")
        assert at_zero("toolwatch_confusion_total", agent=a, expected="(none)", actual="pull_auth_telemetry")
    # Exactly the documented bound: A x (23 + 8 T + 9 S + 3 K + R) (S = K = T: no schema or argument tools given)
    # plus (C + 1) x (C + 3) matrix cells per agent.
    assert len([k for k in s if k[0] in COUNTERS]) == 2 * (23 + 20 * 6 + 5) + 2 * 6 * 8
    # Nothing counted yet: no ratio (zero denominators are absent, never 0).
    assert not [k for k in s if k[0].endswith("_ratio")]


def _judge_of(tmp_path: Path, tools: list[str]) -> Judge:
    path = tmp_path / f"{'-'.join(tools)}.yaml"
    catalog = ", ".join(f"{{name: {t}}}" for t in tools)
    path.write_text(
        f"catalog: {{tools: [{catalog}]}}\nexpect:\n  - when: {{prefix: q}}\n    call: [{{tool: {tools[0]}}}]\n",
        encoding="utf-8",
    )
    return Judge(load_rules([path]))


def test_a_reload_creates_the_new_series_and_removes_unused_zero_ones(tmp_path: Path) -> None:
    old, new = _judge_of(tmp_path, ["read", "write"]), _judge_of(tmp_path, ["write", "delete"])
    m = ToolwatchMetrics(tools=old.catalog, agents=["a"])
    m.observe([old.judge(Turn("q", (ToolCall("read"),), agent="a"))])
    calls = m.counters.tables["toolwatch_tool_calls_total"]
    assert calls[("a", "read", "correct")] == 1 and calls[("a", "read", "spurious")] == 0
    m.set_labels(tools=new.catalog, agents=["a"])
    calls = m.counters.tables["toolwatch_tool_calls_total"]
    assert calls[("a", "read", "correct")] == 1  # counted: kept, whatever the labels now
    assert ("a", "read", "spurious") not in calls  # created at 0, still 0, no longer a label value: removed
    assert calls[("a", "delete", "spurious")] == 0 and calls[("a", "write", "correct")] == 0
    assert ("a", "delete", "hallucinated") not in calls  # a catalog tool is never hallucinated: not created
    # Counting goes on into the right series after the slots were renumbered.
    m.observe([new.judge(Turn("q", (ToolCall("write"), ToolCall("delete")), agent="a"))])
    counted_now = counted(m, "toolwatch_tool_calls_total")
    assert counted_now == {("a", "read", "correct"): 1, ("a", "write", "correct"): 1, ("a", "delete", "spurious"): 1}
    # Reloading the same rules again changes nothing.
    before = {k: dict(t) for k, t in m.counters.tables.items()}
    m.set_labels(tools=new.catalog, agents=["a"])
    assert m.counters.tables == before


def test_initial_series_are_bounded() -> None:
    def series(n_tools: int, n_agents: int, budget: int = MAX_INITIAL_SERIES) -> list[tuple[str, tuple[str, ...]]]:
        labels = LabelPolicy(tools=[f"t{i}" for i in range(n_tools)], agents=[f"a{i}" for i in range(n_agents)])
        return initial_series(labels, [f"r{i}" for i in range(3)], budget=budget)[0]

    # The matrix is created while (C + 1) x (C + 3) <= 400 cells per agent: 18 tools, not 19.
    assert sum(name == "toolwatch_confusion_total" for name, _ in series(18, 1)) == 2 * 19 * 21
    assert sum(name == "toolwatch_confusion_total" for name, _ in series(19, 1)) == 0
    assert len(series(19, 1)) == 2 * (23 + 20 * 20 + 3)
    # Over the budget, whole families are left out (the per-agent ones and calls by outcome come first).
    capped = series(200, 10, budget=20_000)
    assert len(capped) <= 20_000
    names = {name for name, _ in capped}
    assert {"toolwatch_tool_calls_total", "toolwatch_turns_total", "toolwatch_rule_failures_total"} <= names
    assert "toolwatch_missed_calls_total" not in names and "toolwatch_schema_violations_total" not in names


def test_the_budget_warning_comes_once_per_label_set_and_names_the_catalog(caplog: pytest.LogCaptureFixture) -> None:
    tools, rules = [f"t{i}" for i in range(200)], ["r0", "r1"]
    with caplog.at_level("WARNING"):
        m = ToolwatchMetrics(tools=tools, agents=[f"a{i}" for i in range(10)], rules=rules)
        for _ in range(3):  # reloads that keep the label sets
            m.set_labels(tools=tools, agents=[f"a{i}" for i in range(10)], rules=rules)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert (
        warning.startswith("10 agents and 200 catalog tools (and __other__ for each): ")
        and "not created at 0" in warning
    )
    caplog.clear()
    with caplog.at_level("WARNING"):
        m.set_labels(tools=tools, agents=[f"a{i}" for i in range(11)], rules=rules)  # a new label set: said again
        m.set_labels(tools=tools, agents=[f"a{i}" for i in range(10)], rules=rules)  # already said
    assert [r.getMessage()[:40] for r in caplog.records] == ["11 agents and 200 catalog tools (and __o"]
    caplog.clear()
    with caplog.at_level("WARNING"):  # a budget of 0: nothing created at 0, by choice; nothing to warn about
        off = ToolwatchMetrics(tools=tools, agents=["a"], rules=rules, max_initial_series=0)
        off.set_labels(tools=tools, agents=["a", "b"], rules=rules)
    assert caplog.records == []
    assert off.counters.tables["toolwatch_tool_calls_total"] == {}


def test_series_no_turn_can_count_are_not_created() -> None:
    labels = LabelPolicy(tools=["a", "b", "c"], agents=["x", "y", "z"])
    series, _ = initial_series(
        labels,
        ["x1", "y1", "u1"],
        agent_tools={"x": ["a", "b"], "y": ["a", "b", "c"]},
        rule_agents={"x1": "x", "y1": "y"},
    )
    made = set(series)

    def hallucinated(agent: str) -> set[str]:
        return {
            k[1]
            for name, k in made
            if name == "toolwatch_tool_calls_total" and k[0] == agent and k[2] == "hallucinated"
        }

    # x's files give it a and b: c is hallucinated when x calls it, under its own name; y and the agents the rules
    # do not scope (z, __other__) know every catalog tool.
    assert hallucinated("x") == {"c", "__other__"}
    assert hallucinated("y") == hallucinated("z") == hallucinated("__other__") == {"__other__"}

    def failing(agent: str) -> set[str]:
        return {k[1] for name, k in made if name == "toolwatch_rule_failures_total" and k[0] == agent}

    # A scoped rule fails its agent's turns, and turns without an agent name (__other__), no others.
    assert failing("x") == {"x1", "u1"} and failing("y") == {"y1", "u1"} and failing("z") == {"u1"}
    assert failing("__other__") == {"x1", "y1", "u1"}


def test_ignored_attributes_are_exported_with_bounded_labels() -> None:
    m = ToolwatchMetrics(tools=JUDGE.catalog, agents=JUDGE.agents)
    counts = {"gen_ai.tool.call.id": 2, "gen_ai.input.messages": 1, "vendor.made_up": 3, "x" * 1000: 4}
    m.ignored_attributes = lambda: counts
    s = _exposed(m)

    def ignored(key: str) -> float | None:
        return s.get(("toolwatch_span_attributes_ignored_total", (("attribute", key),)))

    assert ignored("gen_ai.tool.call.id") == 2 and ignored("gen_ai.input.messages") == 1
    assert ignored("__other__") == 7  # keys outside the conventions' are one label value
    assert ignored("gen_ai.tool.name") == 0  # every convention key is there from the start
    assert len([k for k in s if k[0] == "toolwatch_span_attributes_ignored_total"]) == len(ATTRIBUTE_KEYS) + 1


SCOPED_FILES = {
    "x.yaml": "agent: x\ncatalog: {tools: [{name: a}, {name: b}]}\n"
    "expect:\n  - id: x1\n    when: {prefix: q}\n    call: [{tool: a}]\n",
    "y.yaml": "agent: y\ncatalog: {tools: [{name: c}]}\n"
    "expect:\n  - id: y1\n    when: {prefix: q}\n    call: [{tool: c}]\n",
    "all.yaml": "catalog: {tools: [{name: d}]}\nexpect:\n  - id: u1\n    when: {prefix: r}\n    call: [{tool: d}]\n",
}


def _served_at_zero(
    tmp_path: Path, files: dict[str, str]
) -> tuple[Pipeline, ToolwatchMetrics, set[tuple[str, tuple[str, ...]]]]:
    """A pipeline serving the rule `files` (written to `tmp_path`) with `--agent z`, its metrics, and the series they
    created at 0 (family, label values)."""
    paths = []
    for name, text in files.items():
        paths.append(str(tmp_path / name))
        (tmp_path / name).write_text(text, encoding="utf-8")
    settings = Settings(rules=tuple(paths), agents=("z",), watch_rules=False)
    metrics = ToolwatchMetrics()
    pipeline = Pipeline(settings, Rules(settings.rules), metrics)
    return pipeline, metrics, {(name, key) for name in metrics.counters.tables for key in metrics.counters.tables[name]}


def test_every_series_a_turn_counts_was_created_at_0(tmp_path: Path) -> None:
    """The series left out at 0 are those no turn can count: turns of every agent (scoped by the rules, configured,
    unknown, none) calling every combination of up to two tools count only series that existed at 0."""
    pipeline, metrics, at_zero = _served_at_zero(tmp_path, SCOPED_FILES)
    families = tuple(metrics.counters.tables)
    turns = [
        Turn(text, tuple(ToolCall(t) for t in calls), agent=agent)
        for agent in ("x", "y", "z", "w", "")
        for text in ("q", "r", "s")
        for calls in [(), *(c for k in (1, 2) for c in itertools.product("abcde", repeat=k))]
    ]
    pipeline.judge(turns, time.time_ns())
    counted = {(name, key) for name in families for key, v in metrics.counters.tables[name].items() if v}
    assert counted <= at_zero, sorted(counted - at_zero)
    # Each left-out kind is really left out, and what the scopes make possible is there.
    assert ("toolwatch_tool_calls_total", ("x", "c", "hallucinated")) in counted  # c is outside x's files
    assert ("toolwatch_tool_calls_total", ("x", "a", "hallucinated")) not in at_zero
    assert ("toolwatch_tool_calls_total", ("__other__", "a", "hallucinated")) not in at_zero
    assert ("toolwatch_rule_failures_total", ("__other__", "x1")) in counted  # a turn without an agent name
    assert ("toolwatch_rule_failures_total", ("z", "x1")) not in at_zero
    assert ("toolwatch_rule_failures_total", ("y", "x1")) not in at_zero


SCHEMA_SERIES = (
    "toolwatch_schema_checked_calls_total",
    "toolwatch_schema_valid_calls_total",
    "toolwatch_schema_invalid_calls_total",
)
ARGUMENT_SERIES = (
    "toolwatch_argument_checked_calls_total",
    "toolwatch_argument_ok_calls_total",
    "toolwatch_argument_mismatches_total",
)
CHECKED_FILE = (
    "catalog: {tools: [{name: s, schema: {type: object, required: [q]}}, {name: k}, {name: n}]}\n"
    "expect:\n  - id: r1\n    when: {prefix: q}\n    call: [{tool: s}, {tool: k, args: {q: {regex: '\\S'}}}]\n"
)


def _tools_of(samples: Samples, name: str, agent: str) -> set[str]:
    return {dict(k)["tool"] for (n_, k) in samples if n_ == name and dict(k)["agent"] == agent}


def test_served_metrics_leave_out_the_schema_and_argument_series_no_call_can_count(
    tmp_path: Path, serve: ServeFactory
) -> None:
    """Schema series exist only for tools with a schema, argument series only for tools some rule checks the
    arguments of; neither for __other__ (a made-up name has neither), unless offered definitions bring schemas."""
    rules = tmp_path / "checked.yaml"
    rules.write_text(CHECKED_FILE, encoding="utf-8")
    _, server = serve(rules=(str(rules),), agents=("z",))
    s = scrape(server)
    for agent in ("z", "__other__"):
        for name in SCHEMA_SERIES:
            assert _tools_of(s, name, agent) == {"s"}, (name, agent)
            assert value(s, name, agent=agent, tool="s") == 0
        for kind in ("malformed", "type", "required", "additional", "enum", "other"):
            assert value(s, "toolwatch_schema_violations_total", agent=agent, tool="s", kind=kind) == 0
        assert _tools_of(s, "toolwatch_schema_violations_total", agent) == {"s"}
        for name in ARGUMENT_SERIES:
            assert _tools_of(s, name, agent) == {"k"}, (name, agent)
            assert value(s, name, agent=agent, tool="k") == 0
        # What every call can count stays, for every tool and __other__.
        assert _tools_of(s, "toolwatch_judged_calls_total", agent) == {"s", "k", "n", "__other__"}
    # The documented count: A x (23 + 8 T + 9 S + 3 K + R) plus the (C + 1) x (C + 3) matrix per agent.
    verdict_series = [k for k in s if k[0] in COUNTERS]
    assert len(verdict_series) == 2 * (23 + 8 * 4 + 9 * 1 + 3 * 1 + 1) + 2 * 4 * 6

    # With from_definitions, offered tools join a turn's catalog with their schemas, under their own names or
    # __other__: every tool's schema series can count; argument checks still only the checked tools'.
    open_rules = tmp_path / "open.yaml"
    open_rules.write_text(CHECKED_FILE.replace("catalog: {", "catalog: {from_definitions: true, "), encoding="utf-8")
    _, server = serve(rules=(str(open_rules),))
    s = scrape(server)
    for name in SCHEMA_SERIES:
        assert _tools_of(s, name, "__other__") == {"s", "k", "n", "__other__"}, name
    for name in ARGUMENT_SERIES:
        assert _tools_of(s, name, "__other__") == {"k"}, name


CHECKED_SCOPED_FILES = {
    "x.yaml": "agent: x\ncatalog: {tools: [{name: a, schema: {type: object, required: [q]}}, {name: b}]}\n"
    "expect:\n  - id: x1\n    when: {prefix: q}\n    call: [{tool: a, args: {q: {regex: v}}}, {tool: c, min: 0,"
    " args: {q: {regex: v}}}]\n"
    "cases:\n  - {id: cx, input: hello, call: [{tool: b, args: {q: {regex: v}}}]}\n",
    "y.yaml": "agent: y\ncatalog: {tools: [{name: c, schema: {type: object}}]}\n"
    "expect:\n  - id: y1\n    when: {prefix: q}\n    call: [{tool: c, args: {q: {regex: v}}}]\n",
    # An alternative's checks count too (g, also forbidden); an unscoped case checks b, a tool of x's file.
    "all.yaml": "catalog: {tools: [{name: d}, {name: g}]}\nforbid: [{tool: g}]\nexpect:\n  - id: u1\n"
    "    when: {prefix: r}\n    any_of:\n      - call: [{tool: d, args: {q: {regex: v}}}, {tool: e, min: 0}]\n"
    "      - call: [{tool: g, args: {q: {regex: v}}}]\n"
    "cases:\n  - {id: cu, input: hi, call: [{tool: b, args: {q: {regex: v}}}]}\n",
}


@pytest.mark.parametrize("offered", [False, True])
def test_every_schema_and_argument_series_a_turn_counts_was_created_at_0(tmp_path: Path, offered: bool) -> None:
    """Turns of every agent calling every pair of tools with arguments valid, invalid and not JSON (and, with
    from_definitions, offering every tool with a schema) count only series created at 0; and the schema and
    argument series left out are those of tools without a schema or argument checks for that agent."""
    files = dict(CHECKED_SCOPED_FILES)
    for name, text in files.items():
        if offered:
            files[name] = text.replace("catalog: {", "catalog: {from_definitions: true, ")
        elif name == "all.yaml":
            files[name] = text.replace(", {tool: e, min: 0}", "")  # e is in no catalog: a rule can name it only offered
    pipeline, metrics, at_zero = _served_at_zero(tmp_path, files)
    families = tuple(metrics.counters.tables)
    definitions = tuple({"name": t, "parameters": {"type": "object", "required": ["q"]}} for t in "abcdefg")
    turns = [
        Turn(text, tuple(ToolCall(t, arguments=args) for t in calls), agent=agent, case_id=case,
             tool_definitions=definitions if offered else None)
        for agent in ("x", "y", "z", "w", "")
        for text, case in (("q", None), ("r", None), ("hello", None), ("hi", None), ("r", "cx"))
        for args in ('{"q": "v"}', '{"q": "w"}', "{}", "not json")
        for calls in [*(c for k in (1, 2) for c in itertools.product("abcdefg", repeat=k))]
    ]  # fmt: skip
    pipeline.judge(turns, time.time_ns())
    counted = {(name, key) for name in families for key, v in metrics.counters.tables[name].items() if v}
    # (A rule's slot of an offered tool outside the catalog, e, is the confusion row __other__, not created at 0.)
    missing = {s for s in counted - at_zero if not (offered and s[0] == "toolwatch_confusion_total")}
    assert not missing, sorted(missing)

    def tools(name: str, agent: str, among: set[tuple[str, tuple[str, ...]]]) -> set[str]:
        return {k[1] for n_, k in among if n_ == name and k[0] == agent}

    for name in (*SCHEMA_SERIES, *ARGUMENT_SERIES):
        for agent in ("x", "y", "z", "__other__"):
            # Nothing is created at 0 that no turn here counted: exactly the series these turns can count.
            assert tools(name, agent, at_zero) == tools(name, agent, counted), (name, agent)
    if not offered:
        assert tools("toolwatch_schema_checked_calls_total", "x", at_zero) == {"a"}  # c has a schema, outside x's
        assert tools("toolwatch_schema_checked_calls_total", "__other__", at_zero) == {"a", "c"}
        # c: outside x's scope; g only checked by u1's second alternative; b by cu too for z (whole catalog)
        assert tools("toolwatch_argument_checked_calls_total", "x", at_zero) == {"a", "b", "d", "g"}
        assert tools("toolwatch_argument_checked_calls_total", "y", at_zero) == {"c", "d", "g"}
        assert tools("toolwatch_argument_checked_calls_total", "z", at_zero) == {"b", "d", "g"}
        assert tools("toolwatch_argument_checked_calls_total", "__other__", at_zero) == {"a", "b", "c", "d", "g"}
    else:  # offered tools bring schemas to every name, and join every agent's catalog
        assert tools("toolwatch_schema_checked_calls_total", "z", at_zero) == {"a", "b", "c", "d", "g", "__other__"}
        assert tools("toolwatch_argument_checked_calls_total", "x", at_zero) == {"a", "b", "c", "d", "g"}
        assert tools("toolwatch_argument_checked_calls_total", "z", at_zero) == {"b", "d", "g"}
        assert tools("toolwatch_schema_violations_total", "x", at_zero) == {"a", "b", "c", "d", "g", "__other__"}


def test_failures_of_labelled_cases_start_at_0_for_the_agents_their_cases_apply_to(tmp_path: Path) -> None:
    """Labelled cases fail under one rule label, "case": created at 0 for the agents a case applies to (its own and
    __other__ for a scoped case; every agent for an unscoped one), so the first failing case is an increase."""
    x = tmp_path / "x.yaml"
    x.write_text(
        "agent: x\ncatalog: {tools: [{name: a}]}\ncases:\n  - {id: c1, input: hello, call: [{tool: a}]}\n",
        encoding="utf-8",
    )
    y = tmp_path / "y.yaml"
    y.write_text("agent: y\ncatalog: {tools: [{name: b}]}\n", encoding="utf-8")
    settings = Settings(rules=(str(x), str(y)), agents=("z",), watch_rules=False)
    metrics = ToolwatchMetrics()
    pipeline = Pipeline(settings, Rules(settings.rules), metrics)

    def failures() -> dict[tuple[str, ...], int]:
        return {k: v for k, v in metrics.counters.tables["toolwatch_rule_failures_total"].items() if k[1] == "case"}

    assert failures() == {("x", "case"): 0, ("__other__", "case"): 0}
    pipeline.judge([Turn("hello", (), agent="x"), Turn("hello", (), agent="")], time.time_ns())
    assert failures() == {("x", "case"): 1, ("__other__", "case"): 1}
    # An unscoped case (a cases file of an unscoped rule file) applies to every agent; a reload creates its series.
    y.write_text("catalog: {tools: [{name: b}]}\ncases:\n  - {id: c2, input: hi, call: [{tool: b}]}\n", "utf-8")
    assert pipeline.rules.commit(pipeline.rules.prepare())
    pipeline.apply_labels()
    assert failures() == {("x", "case"): 1, ("z", "case"): 0, ("__other__", "case"): 1}
