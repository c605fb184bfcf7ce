"""FSCS-ART: exact selection, and on the triage example it finds the first failure sooner than random."""

from __future__ import annotations

import json
import random
import re
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

from monitor.cli.probe_cmd import probe
from monitor.demo import TOOL_OF_TAG
from monitor.evaluate import DEFAULT_TIMEOUT_S, Harness, load_callable, load_judge
from monitor.judge import Judge
from monitor.probe import (
    FscsSelector,
    Step,
    cluster_tables,
    failure_clusters,
    first_failures,
    first_problem,
    mean_first_failure,
    run_probe,
)
from monitor.probe._clusters import _NUMBER, MAX_GROUPS, MAX_LEADERS, MAX_SHAPED_CHARS, shape
from monitor.probe._loop import draw
from monitor.probe.fscs import MAX_COMPARED_CHARS
from monitor.verdict import Outcome, ViolationKind
from tests.monitor.offline.conftest import TRIAGE_RULES, support_turns

# Loaded the way `--agent` / `--generator` load them (examples/ is not a package the type checker follows).
triage = load_callable("examples.triage.agent:triage")
generate = load_callable("examples.triage.generator:generate")

SEEDS = 50
MAX_RUNS = 300

texts = st.text(alphabet="abc [", max_size=10)


@settings(max_examples=200, deadline=None)
@given(tested=st.lists(texts, min_size=1, max_size=60), candidates=st.lists(texts, min_size=1, max_size=10),
       sample=st.sampled_from([1, 3, 48]))
def test_selection_is_the_max_min_candidate(tested: list[str], candidates: list[str], sample: int) -> None:
    sel = FscsSelector(seed=1, sample=sample)
    for t in tested:
        sel.add(t)
    mins = [min(Levenshtein.distance(c, t) for t in tested) for c in candidates]
    choice = sel.select(candidates)
    assert (choice.index, choice.distance) == (mins.index(max(mins)), max(mins))


def test_long_inputs_are_compared_on_their_first_characters() -> None:
    # 100,000-character inputs: a whole-text distance takes about a second a pair (six runs took 70 s); the
    # selection compares the first MAX_COMPARED_CHARS characters, and is the max-min over those exactly
    n = MAX_COMPARED_CHARS
    rng = random.Random(0)
    tested = ["".join(rng.choice("abcd") for _ in range(100_000)) for _ in range(4)]
    candidates = ["".join(rng.choice("abcd") for _ in range(100_000)) for _ in range(10)]
    candidates[3] = tested[1][:n] + "z" * 99_000  # equal to a tested input on the compared part
    sel = FscsSelector(seed=0)
    for t in tested:
        sel.add(t)
    started = time.perf_counter()
    choice = sel.select(candidates)
    elapsed = time.perf_counter() - started
    mins = [min(Levenshtein.distance(c[:n], t[:n]) for t in tested) for c in candidates]
    assert (choice.index, choice.distance) == (mins.index(max(mins)), max(mins))
    assert mins[3] == 0
    assert elapsed < 0.5, elapsed
    assert all(len(t) == n for t in sel.tested)  # what is kept of each tested input is bounded too


def test_first_selection_and_empty_pool() -> None:
    sel = FscsSelector()
    assert sel.select(["x", "y"]).index == 0 and sel.select(["x"]).distance is None
    with pytest.raises(ValueError):
        sel.select([])


def test_art_reaches_the_first_failure_in_fewer_runs_than_random() -> None:
    judge = load_judge([TRIAGE_RULES])
    with Harness(agent_name="incident-triage") as h:
        ff = first_failures(generator=generate, agent=triage, judge=judge, harness=h, seeds=range(SEEDS), pool=10,
                            max_iterations=MAX_RUNS)
    art, rnd = mean_first_failure(ff["art"], MAX_RUNS), mean_first_failure(ff["random"], MAX_RUNS)
    print(f"\nmean runs to the first failure over {SEEDS} seeds (pool 10): art {art:.2f}, random {rnd:.2f}")
    assert all(v is not None for v in ff["art"] + ff["random"])
    assert art < rnd


def test_probe_loop_judges_every_run_and_strategies_differ() -> None:
    judge = load_judge([TRIAGE_RULES])
    with Harness(agent_name="incident-triage") as h:
        art = run_probe(generator=generate, agent=triage, judge=judge, harness=h, iterations=40, seed=3)
        rnd = run_probe(generator=generate, agent=triage, judge=judge, harness=h, iterations=40, seed=3,
                        strategy="random")
    assert len(art.steps) == len(rnd.steps) == 40
    assert all(s.verdict is not None and s.verdict.judged for s in art.steps + rnd.steps)
    # random runs the first candidate of each draw: replaying the generator gives the same inputs
    rng = random.Random(3)
    expected = []
    for _ in range(40):
        pool = [generate(rng) for _ in range(10)]
        expected.append(pool[0])
    assert [s.input_text for s in rnd.steps] == expected
    assert [s.input_text for s in art.steps] != expected
    assert all(s.distance is not None for s in art.steps[1:])


def test_cli_probe_prints_accuracy_and_comparison(tmp_path: object) -> None:
    res = CliRunner().invoke(probe, [
        "--generator", "examples.triage.generator:generate", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "60", "--compare-seeds", "5", "--no-progress",
        "--seed", "7"])
    assert res.exit_code == 0, res.output
    assert re.search(r"^Tool call accuracy: \d+/\d+ \(\d+\.\d%\)$", res.output, re.M)
    assert re.search(r"art: mean runs to first failure over 5 seeds = \d+\.\d\d", res.output)
    assert re.search(r"random: mean runs to first failure over 5 seeds = \d+\.\d\d", res.output)
    for title in ("Failure rate by leading token", "Failure rate by input length", "Failure kinds",
                  "Where failures cluster: what went wrong first, then similar inputs"):
        assert title in res.output


def broken_generator(rng: random.Random) -> str:
    raise RuntimeError("no more ideas")


def test_cli_probe_generator_error_is_reported() -> None:
    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.test_probe:broken_generator", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "3", "--no-progress"])
    assert res.exit_code == 2, res.output
    assert ("error: the generator tests.monitor.offline.test_probe:broken_generator raised RuntimeError: no more ideas"
            in res.output)


class _Exiting:
    """A generator that gives `left` inputs, then raises `exc` (SystemExit by sys.exit, or another BaseException)."""

    def __init__(self) -> None:
        self.left = 0
        self.exc: BaseException = SystemExit(3)

    def __call__(self, rng: random.Random) -> str:
        if self.left <= 0:
            raise self.exc
        self.left -= 1
        return str(generate(rng))


exiting_generator = _Exiting()


@pytest.mark.parametrize(("exc", "shown"), [(SystemExit(3), "SystemExit: 3"),
                                             (GeneratorExit("closed"), "GeneratorExit: closed")])
def test_cli_probe_generator_that_exits_ends_the_probe_with_the_report_so_far(
        tmp_path: Path, exc: BaseException, shown: str) -> None:
    """A generator calling sys.exit (or raising another BaseException but KeyboardInterrupt) ends the probe as an
    error naming the generator and what it raised, after the report of the runs done so far: 2 runs of pool 10 took
    20 inputs; the 25th raised."""
    exiting_generator.left, exiting_generator.exc = 25, exc
    js = tmp_path / "probe.json"
    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.test_probe:exiting_generator", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "5", "--no-progress", "--json", str(js)])
    assert res.exit_code == 2, res.output
    error = f"error: the generator tests.monitor.offline.test_probe:exiting_generator raised {shown}"
    assert res.stderr.splitlines()[-1] == f"{error}; the probe stopped after 2 runs", res.stderr
    assert re.search(r"^Tool call accuracy: \d+/\d+ \(\d+\.\d%\)$", res.stdout, re.M), res.stdout
    data = json.loads(js.read_text())
    assert data["counts"]["turns"] == 2
    assert data["title"] == "toolwatch probe: art, 2 of 5 runs, pool 10, seed 0", data["title"]
    assert any(error.removeprefix("error: ") in n for n in data["notes"]), data["notes"]


def test_cli_probe_generator_error_in_the_comparison_says_where(tmp_path: Path) -> None:
    """A generator that fails in the --compare-seeds runs (after the probe's 3 runs and the other strategy's 3, of
    pool 2: 12 inputs) is named with the seed and strategy it failed in, not as having stopped the probe's runs."""
    exiting_generator.left, exiting_generator.exc = 14, SystemExit(4)
    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.test_probe:exiting_generator", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "3", "--pool", "2", "--compare-seeds", "3", "--seed", "5",
        "--no-progress"])
    assert res.exit_code == 2, res.output
    last = res.stderr.splitlines()[-1]
    assert last.startswith("error: the generator tests.monitor.offline.test_probe:exiting_generator raised "
                           "SystemExit: 4 in the --compare-seeds runs (seed 5, "), last
    assert "the probe stopped after" not in res.stderr, res.stderr
    assert re.search(r"^Tool call accuracy: \d+/\d+ \(\d+\.\d%\)$", res.stdout, re.M), res.stdout


def same_line(rng: random.Random) -> str:
    return "[AUTH] ERROR authd: token refresh failed"


def untagged_line(rng: random.Random) -> str:
    return f"no tag here {rng.random()}"


@pytest.mark.parametrize(("generator", "note"), [
    ("same_line",
     "no failure in 12 runs; the generator gave 1 distinct input: 11 runs repeated an input tested before"),
    ("untagged_line", "no failure in 12 runs; no rule matched the input of 12 of the 12 runs (unjudged)"),
])
def test_cli_probe_says_what_its_runs_covered(tmp_path: Path, generator: str, note: str) -> None:
    """`no failure in N runs` says when the runs repeated inputs or were not judged (no rule matched them)."""
    js = tmp_path / "probe.json"
    res = CliRunner().invoke(probe, [
        "--generator", f"tests.monitor.offline.test_probe:{generator}", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "12", "--no-progress", "--json", str(js)])
    assert res.exit_code == 0, res.output
    assert note in res.stderr, res.stderr
    assert any(note in n for n in json.loads(js.read_text())["notes"])


def test_cli_probe_comparison_says_when_seeds_found_no_failure() -> None:
    """A seed without a failure in --iterations runs counts as iterations + 1 in the mean (a lower bound then): the
    note says how many seeds so counted."""
    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.test_probe:same_line", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "4", "--compare-seeds", "3", "--no-progress"])
    assert res.exit_code == 0, res.output
    for strategy in ("art", "random"):
        assert (f"{strategy}: mean runs to first failure over 3 seeds = 5.00 (3 seeds without a failure in 4 runs, "
                "counted as 5)") in res.stderr, res.stderr


def test_a_generator_ctrl_c_is_the_users() -> None:
    exiting_generator.left, exiting_generator.exc = 0, KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        draw(exiting_generator, random.Random(0), 3)


TAG_OF_TOOL = {tool: tag for tag, tool in TOOL_OF_TAG.items()}


def test_failures_cluster_by_what_went_wrong_first_on_the_shipped_example() -> None:
    judge = load_judge([TRIAGE_RULES])
    with Harness(agent_name="incident-triage") as h:
        res = run_probe(generator=generate, agent=triage, judge=judge, harness=h, iterations=300, seed=0)
    failing = [s for s in res.steps if s.failed]
    clusters = failure_clusters(res.steps)
    assert sorted(id(m) for c in clusters for m in c.members) == sorted(map(id, failing))  # each in one group
    sizes = [c.size for c in clusters]
    print(f"\n{len(failing)} failing runs in {len(clusters)} groups: {sizes}")
    assert sizes == sorted(sizes, reverse=True) and sizes[0] >= 4 and sum(n > 1 for n in sizes) >= 8
    kinds = {c.problem.what for c in clusters if c.size > 1}
    assert {"wrong tool", "arguments malformed", "made-up tool"} <= kinds
    for c in clusters:
        assert c.representative in {m.input_text for m in c.members}
        for m in c.members:
            v = m.verdict
            assert v is not None and first_problem(m) == c.problem
            named = [x for x in v.calls if x.name == c.problem.actual]
            if c.problem.what == "wrong tool":  # the expected tool is missed, the actual one called instead
                assert any(x.outcome is Outcome.WRONG_TOOL for x in named)
                assert c.problem.expected in {u.tool for u in v.missed}
            elif c.problem.what == "arguments malformed":
                assert named[0].outcome is Outcome.CORRECT and c.problem.expected == c.problem.actual
                assert ViolationKind.MALFORMED in {x.kind for x in named[0].violations}
            elif c.problem.what == "made-up tool":
                assert named and all(x.outcome is Outcome.HALLUCINATED for x in named)
        if c.size == 1:
            continue
        phrases = c.shared.split(" … ")
        assert all(phrases), c
        for m in c.members:  # every phrase of the shared part is in every member input (numbers masked)
            assert all(p in shape(m.input_text) for p in phrases), (c.shared, m.input_text)
        lead = c.members[0].input_text.split()[0]
        if c.problem.what == "wrong tool":  # the line's own tag, and the tag of the tool it was drawn to
            assert c.shared.startswith(lead) and f"[{TAG_OF_TOOL[c.problem.actual]}]" in c.shared
        if c.problem.what == "arguments malformed":  # a quote in the line breaks the agent's JSON
            assert c.shared.startswith(lead) and 'msg="' in c.shared
        if c.problem.what == "made-up tool":
            assert "SEV1" in c.shared


def test_the_report_lists_groups_larger_than_one() -> None:
    judge = load_judge([TRIAGE_RULES])
    with Harness(agent_name="incident-triage") as h:
        res = run_probe(generator=generate, agent=triage, judge=judge, harness=h, iterations=300, seed=0)
    groups = cluster_tables(res.steps)[-1]
    sizes = [int(row[1]) for row in groups.rows]
    assert len(sizes) == 12 and sizes[0] > 1 and sum(n > 1 for n in sizes) >= 8, groups
    assert groups.columns == ["group", "failing runs", "what went wrong first", "shared part", "representative input"]
    row = next(r for r in groups.rows if r[2].endswith("wrong tool"))
    assert re.fullmatch(r"pull_\w+_telemetry -> pull_\w+_telemetry: wrong tool", row[2]) and "see [" in row[3]


def test_rate_and_kind_tables_are_bounded_when_every_input_and_error_differs() -> None:
    """A generator that starts each line with a timestamp, and an agent whose error names the input, gave one row
    per run in `Failure rate by leading token` and `Failure kinds`; now at most MAX_GROUPS rows, the title saying how
    many runs the rows left out hold, and errors of one exception type are one kind."""
    steps = [Step(i, f"2026-11-22T07:{i // 60:02d}:{i % 60:02d} [AUTH] login", None, i % 3 == 0, None,
                  f"RuntimeError: backend down for line {i}" if i % 3 == 0 else None) for i in range(1, 301)]
    by_lead, by_length, kinds = cluster_tables(steps)[:3]
    assert len(by_lead.rows) == MAX_GROUPS, by_lead.rows
    shown_runs = sum(int(r[1]) for r in by_lead.rows)
    shown_fails = sum(int(r[2]) for r in by_lead.rows)
    assert by_lead.title == (f"Failure rate by leading token (first {MAX_GROUPS} of 300 by failure rate; "
                             f"{300 - shown_runs} runs, {100 - shown_fails} failing, in the others)")
    assert by_length.title == "Failure rate by input length"
    assert kinds.rows == [["run error: RuntimeError", "100", steps[2].input_text]], kinds.rows
    made_up = [Step(i, "[AUTH] x", None, True, None, f"Error{i}: made-up tool") for i in range(40)]
    kinds = cluster_tables(made_up)[2]
    assert len(kinds.rows) == MAX_GROUPS and kinds.title == f"Failure kinds (largest {MAX_GROUPS} of 40)", kinds


@pytest.mark.parametrize(("trace", "problem"), [
    (3, "get_order_status -> get_order_status: argument mismatch (order_id)"),
    (4, "get_order_status -> get_shipping_eta: wrong tool"),
    (5, "get_order_status -> get_order_status: extra call (a repeat)"),
    (6, "get_order_status -> lookup_order: made-up tool"),
    (7, "get_order_status -> (none): missed call"),
    (8, "get_order_status -> get_order_status: arguments malformed"),
    (10, "(none) -> get_order_history: call where none is expected"),
])
def test_what_went_wrong_first(support_judge: Judge, trace: int, problem: str) -> None:
    t = support_turns()[trace - 1]
    v = support_judge.judge(t)
    assert v.failed
    assert str(first_problem(Step(1, t.input_text, None, True, v))) == problem


def test_a_run_without_a_turn_is_a_run_error() -> None:
    step = Step(1, "x", None, True, None, "TimeoutError: timed out after 0.5 s")
    assert str(first_problem(step)) == "run error: TimeoutError"
    (c,) = failure_clusters([step, Step(2, "y", None, False, None)])
    assert c.size == 1 and c.shared == "" and c.representative == "x"


# The pattern numbers were masked with before, to check the linear one masks exactly the same.
_QUADRATIC_NUMBER = re.compile(r"(?<![\w-])[0-9a-fA-F]*\d[0-9a-fA-F]*(?![\w-])")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="0179aAfFgz_-. =/\n", max_size=40))
def test_numbers_are_masked_as_before(text: str) -> None:
    assert _NUMBER.sub("#", text) == _QUADRATIC_NUMBER.sub("#", text)


@pytest.mark.parametrize("text", ["1" * 20_000 + "x", "a1" * 10_000 + "_", "0" * 20_000 + "-"])
def test_masking_numbers_takes_linear_time(text: str) -> None:
    """A long run of digits or hex followed by a word character or `-` took quadratic time (16k characters: 2.5 s)."""
    started = time.perf_counter()
    assert _NUMBER.sub("#", text) == text
    assert time.perf_counter() - started < 0.5


def test_inputs_are_shaped_on_their_first_characters() -> None:
    assert shape("1" * 50_000) == "#" and shape("x" * 50_000) == "x" * MAX_SHAPED_CHARS


def test_a_failing_input_is_compared_with_the_leaders_of_the_groups_joined_or_formed_last() -> None:
    """Grouping compares each failing input with at most MAX_LEADERS group leaders, those joined or formed last:
    a group joined in between stays; one left alone while MAX_LEADERS others formed takes no more members."""

    def failing(n: int, text: str) -> Step:
        return Step(n, text, None, True, None, "RuntimeError: model backend down")

    others = [f"{chr(0x4E00 + i) * 8} {chr(0x5E00 + i) * 8}" for i in range(MAX_LEADERS)]  # no two alike at all
    kept, dropped = "qqqqqqqq rrrrrrrr", "zzzzzzzz wwwwwwww"
    steps = [failing(1, dropped), failing(2, kept)]
    for i, text in enumerate(others):
        steps.append(failing(3 + i, text))
        if i == MAX_LEADERS // 2:
            steps.append(failing(0, kept))  # joins `kept`: its leader is compared again
    steps += [failing(900, kept), failing(901, dropped)]
    clusters = failure_clusters(steps)
    assert len(clusters) == MAX_LEADERS + 3, [c.size for c in clusters]  # the others apart, `dropped` twice
    assert [c.size for c in clusters if c.representative == kept] == [3]
    assert [c.size for c in clusters if c.representative == dropped] == [1, 1]


def test_probe_timeout_has_evals_default_in_help() -> None:
    from monitor.cli.eval_cmd import eval_

    def default(cmd: click.Command) -> object:
        return next(p.default for p in cmd.params if p.name == "timeout_s")

    assert default(probe) == default(eval_) == DEFAULT_TIMEOUT_S == 60.0
    text = CliRunner().invoke(probe, ["--help"]).output
    option = text[text.index("--timeout"):text.index("--worst")]
    assert "[default: 60.0" in option


def test_cli_probe_judges_runs_that_time_out(support_rules: Path, tmp_path: Path) -> None:
    from tests.monitor.offline.agents import HANG_RELEASE

    junit, js = tmp_path / "probe.xml", tmp_path / "probe.json"
    HANG_RELEASE.clear()
    try:
        res = CliRunner().invoke(probe, [
            "--generator", "tests.monitor.offline.agents:order_inputs", "--agent",
            "tests.monitor.offline.agents:mostly_hang", "--rules", str(support_rules), "--iterations", "3",
            "--timeout", "0.3", "--no-progress", "--junit", str(junit), "--json", str(js), "-q"])
    finally:
        HANG_RELEASE.set()
    assert res.exit_code == 2, res.output  # every run timed out: no run of the agent completed (test_probe_exit.py)
    assert "Tool call accuracy: 0/3 (0.0%)" in res.output  # each run called the wrong tool, then hung
    counts = json.loads(js.read_text())["counts"]
    assert counts["judged_turns"] == 3 and counts["wrong_tool"] == 3 and counts["missed"] == 3
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert [c.get("name") for c in cases] == ["run 1", "run 2", "run 3"]
    for c in cases:
        error = c.find("error")
        assert error is not None and (error.get("message") or "").startswith("timed out after 0.3 s; ")
        assert "Agent stack at the timeout" in (error.text or "") and "in mostly_hang" in (error.text or "")


def test_cli_probe_reports_calls_made_outside_every_run(support_rules: Path, tmp_path: Path) -> None:
    """Calls an agent makes in plain threads (no OpenTelemetry context) belong to no run: probe judges them alone,
    as eval, scenarios, serve and replay do, and says so; a run that answers with a dict is named in a note."""
    js = tmp_path / "probe.json"
    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.agents:order_inputs", "--agent",
        "tests.monitor.offline.agents:threaded_agent", "--rules", str(support_rules), "--iterations", "3",
        "--no-progress", "--json", str(js), "-q"])
    assert res.exit_code == 0, res.output
    report = json.loads(js.read_text())
    counts = report["counts"]
    assert (counts["turnless_turns"], counts["all_calls"], counts["hallucinated"]) == (6, 6, 3), counts
    assert any("6 tool call(s) ran outside every run" in n for n in report["notes"]), report["notes"]

    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.agents:order_inputs",
        "--agent", "tests.monitor.offline.agents:dict_agent",
        "--rules", str(support_rules), "--iterations", "2", "--no-progress", "--json", str(js), "-q"])
    assert res.exit_code == 0, res.output
    notes = json.loads(js.read_text())["notes"]
    assert any("2 run(s) returned a dict, not the answer text" in n for n in notes), notes


def test_failure_kinds_name_the_agent_error_of_a_judged_run(support_judge: Judge) -> None:
    """A run that made its calls, then raised or timed out, has a verdict: its kinds were only what the verdict saw
    (`response check failed`, for the answer it never gave), the error itself left out, while the groups table said
    `agent error: RuntimeError`."""
    from tests.monitor.offline.conftest import call, turn

    v = support_judge.judge(turn("where is order 1", call("get_order_status", {"order_id": "1"}), trace=1))
    steps = [Step(1, "where is order 1", None, True, v, "RuntimeError: model backend down"),
             Step(2, "where is order 2", None, True, v, "timed out after 0.5 s")]
    kinds = cluster_tables(steps)[2]
    assert {r[0]: r[1] for r in kinds.rows} == {"run error: RuntimeError": "1", "run error: timed out after 0.5 s": "1"}


def test_a_negative_seed_is_refused(tmp_path: Path) -> None:
    """Python's random.Random(-n) is random.Random(n): `--seed -3` ran seed 3's probe, and `--seed -2 --compare-seeds
    5` averaged seeds -2..2, two pairs of them the same runs, over "5 seeds". A negative seed is refused."""
    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.test_probe:same_line", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "2", "--seed", "-3", "--no-progress"])
    assert res.exit_code == 2, res.output
    assert "--seed" in res.output and "-3" in res.output, res.output
    judge = load_judge([TRIAGE_RULES])
    with Harness(agent_name="incident-triage") as h:
        with pytest.raises(ValueError, match="seed"):
            run_probe(generator=generate, agent=triage, judge=judge, harness=h, iterations=1, seed=-1)
        with pytest.raises(ValueError, match="seed"):
            first_failures(generator=generate, agent=triage, judge=judge, harness=h, seeds=range(-2, 3),
                           max_iterations=1)


def test_a_generator_failing_before_the_first_run_leaves_no_accuracy_point(tmp_path: Path) -> None:
    """A generator that fails on its first call: the series had an accuracy point at iteration 0 (`absent at 0`) and
    the notes `no failure in 0 runs`; now no series and no such note, the error saying the probe stopped."""
    js = tmp_path / "probe.json"
    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.test_probe:broken_generator", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "3", "--no-progress", "--json", str(js)])
    assert res.exit_code == 2, res.output
    data = json.loads(js.read_text())
    assert data["series"] == {}, data["series"]
    assert not any("no failure in 0 runs" in n for n in data["notes"]), data["notes"]
    assert any("the probe stopped after 0 runs" in n for n in data["notes"]), data["notes"]
    assert "Accuracy as iterations grow" not in res.stdout and "no failure in 0 runs" not in res.output


def test_groups_of_one_size_are_in_the_order_of_their_first_failing_run() -> None:
    """Groups of equal size came in the order of their problem's first failing run, a problem's groups all before
    the next problem's: here run 3's group before run 2's. Now ties are in the order of their first failing run (the
    table shows the largest MAX_GROUPS, so this decides which groups of one run are listed)."""
    steps = [Step(1, "aaaa aaaa", None, True, None, "RuntimeError: down"),
             Step(2, "bbbb bbbb", None, True, None, "ValueError: bad"),
             Step(3, "zzzz qqqq", None, True, None, "RuntimeError: down")]
    clusters = failure_clusters(steps)
    assert [c.members[0].iteration for c in clusters] == [1, 2, 3], [str(c.problem) for c in clusters]


def test_cli_probe_reports_a_call_made_after_its_runs_timeout(support_rules: Path, tmp_path: Path) -> None:
    """The call a hung run makes after its timeout counts for no run, and the report says so."""
    from tests.monitor.offline.agents import HANG_RELEASE, reset_late

    js = tmp_path / "probe.json"
    reset_late(["where is order 2", "where is order 3"])
    try:
        res = CliRunner().invoke(probe, [
            "--generator", "tests.monitor.offline.agents:late_inputs", "--agent",
            "tests.monitor.offline.agents:late_caller", "--rules", str(support_rules), "--iterations", "3",
            "--pool", "1", "--strategy", "random", "--timeout", "0.5", "--no-progress", "--json", str(js), "-q"])
    finally:
        HANG_RELEASE.set()
    assert res.exit_code == 0, res.output
    report = json.loads(js.read_text())
    assert report["counts"]["all_calls"] == 2, report["counts"]
    assert any(n.startswith("1 tool call(s) ended after their run's timeout") for n in report["notes"]), \
        report["notes"]


class _Hanging:
    """A generator that gives `left` inputs, then hangs until `release` is set (at most 5 s)."""

    def __init__(self) -> None:
        self.left = 0
        self.release = threading.Event()

    def __call__(self, rng: random.Random) -> str:
        if self.left <= 0:
            self.release.wait(5)
        self.left -= 1
        return "where is order 1"


hanging_generator = _Hanging()


def test_cli_probe_generator_that_hangs_ends_the_probe_at_the_timeout_with_the_report_so_far(
        support_rules: Path, tmp_path: Path) -> None:
    """A generator call is bounded by --timeout, as a run is: one that hangs ends the probe as an error naming the
    generator, with its stack at the timeout and the report of the runs done, instead of hanging the probe."""
    hanging_generator.left = 4
    hanging_generator.release.clear()
    js, junit = tmp_path / "probe.json", tmp_path / "probe.xml"
    started = time.monotonic()
    try:
        res = CliRunner().invoke(probe, [
            "--generator", "tests.monitor.offline.test_probe:hanging_generator", "--agent",
            "tests.monitor.offline.agents:support_agent", "--rules", str(support_rules), "--iterations", "5",
            "--pool", "2", "--timeout", "0.3", "--no-progress", "--json", str(js), "--junit", str(junit)])
    finally:
        took = time.monotonic() - started
        hanging_generator.release.set()
    assert res.exit_code == 2, res.output
    error = ("error: the generator tests.monitor.offline.test_probe:hanging_generator did not return within 0.3 s "
             "(--timeout)")
    assert res.stderr.splitlines()[-1] == f"{error}; the probe stopped after 2 runs", res.stderr
    assert took < 3, took
    assert json.loads(js.read_text())["counts"]["turns"] == 2
    assert "in __call__" in junit.read_text(), junit.read_text()  # the generator's stack at the timeout


def test_a_pool_past_the_bound_is_refused_before_the_generator_runs() -> None:
    """Each step keeps its whole pool of inputs and compares each with the inputs tested: `--pool 100000000` drew
    candidates until memory ran out. The pool is bounded; past it is a usage error, before any draw."""
    from monitor.probe import MAX_POOL

    exiting_generator.left, exiting_generator.exc = 0, SystemExit(3)  # any draw would end the probe otherwise
    res = CliRunner().invoke(probe, [
        "--generator", "tests.monitor.offline.test_probe:exiting_generator", "--agent", "examples.triage.agent:triage",
        "--rules", str(TRIAGE_RULES), "--iterations", "2", "--pool", str(MAX_POOL + 1), "--no-progress"])
    assert res.exit_code == 2, res.output
    assert "--pool" in res.output and f"{MAX_POOL + 1} is not in the range" in res.output, res.output
    judge = load_judge([TRIAGE_RULES])
    with Harness(agent_name="incident-triage") as h, pytest.raises(ValueError, match="pool"):
        run_probe(generator=generate, agent=triage, judge=judge, harness=h, iterations=1, pool=MAX_POOL + 1)
